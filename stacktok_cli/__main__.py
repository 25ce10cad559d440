"""``python -m stacktok_cli`` == ``stacktok``."""

import sys

from . import main

sys.exit(main())
