"""``python -m mpcheck``."""

import sys

from mpcheck.cli import main

sys.exit(main())
