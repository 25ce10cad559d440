"""``stacktok``: the distribution's import name, so ``python -m stacktok`` is the ``stacktok`` command.

The code lives in ``stacktok_export`` (the tokenizer), ``conformance`` (the suite) and
``stacktok_cli`` (the command line); this package re-exports the version and :func:`main`.

Out of scope: any API of its own (import ``stacktok_export`` for the tokenizer).
"""

from stacktok_cli import main
from stacktok_export import __version__

__all__ = ["__version__", "main"]
