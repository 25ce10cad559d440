"""``python -m conformance.fuzz DIR ...``: the same command as ``stacktok fuzz``.

Out of scope: everything but the entry point (``conformance.fuzz.command``).
"""

import sys

from conformance.fuzz.command import cli

sys.exit(cli())
