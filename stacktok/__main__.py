"""``python -m stacktok`` == ``stacktok`` (the console script runs the same :func:`stacktok_cli.main`)."""

import sys

from stacktok_cli import main

sys.exit(main())
