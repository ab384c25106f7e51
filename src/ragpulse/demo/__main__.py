"""``python -m ragpulse.demo``: run the demo without the ``ragpulse`` command."""

from __future__ import annotations

from ragpulse.cli.demo import main

raise SystemExit(main())
