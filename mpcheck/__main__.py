"""``python -m mpcheck``."""

import sys

from mpcheck.cli.app import main

sys.exit(main())
