"""``python -m ragpulse``: the ``ragpulse`` command line."""

import sys

from ragpulse.cli import main

sys.exit(main())
