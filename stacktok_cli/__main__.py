"""``python -m stacktok_cli`` == ``stacktok``."""

import sys

from stacktok_cli import main

sys.exit(main())
