"""``python -m ragpulse.cli``: the ``ragpulse`` command line."""

import sys

from ragpulse.cli.main import main

sys.exit(main())
