"""The one place a command's exception becomes an exit code and one line on stderr.

:func:`run_main` runs a command's body: bad input (:func:`conformance.core.errors.input_errors`,
plus any ``usage_errors`` the caller adds) is ``PROG: error: ...`` and exit 2; any other
exception is ``PROG: internal error: ...`` and exit 3 -- never 0 or 1, which carry the
verdict -- with the full trace only when ``debug``; a ``--require``d backend that cannot run
(:class:`~conformance.core.errors.RequiredUnavailable`) is ``PROG: INCOMPLETE: ...`` and exit 4;
Ctrl-C is exit 130; a closed pipe (``... | head``) is exit 0.

    >>> run_main(lambda: 1 // 0, prog="demo")  # doctest: +SKIP
    demo: internal error: ZeroDivisionError: integer division or modulo by zero (rerun with --debug ...
    3

Out of scope: parsing arguments (``SystemExit`` from argparse passes through), the verdict
(``conformance.core.rows.exit_code``).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

from conformance.core.errors import RequiredUnavailable, input_errors
from conformance.core.rows import EXIT_INCOMPLETE, EXIT_INTERNAL, EXIT_USAGE

EXIT_INTERRUPTED = 130


def run_main(
    fn: Callable[[], int],
    *,
    prog: str,
    debug: bool = False,
    usage_errors: tuple[type[BaseException], ...] = (),
) -> int:
    """``fn()``'s exit code, or 2 / 3 / 130 with one line on stderr (see the module docstring)."""
    try:
        return fn()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `... | head`
        sys.stderr.close()
        return 0
    except RequiredUnavailable as exc:
        print(f"{prog}: INCOMPLETE: {exc}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except Exception as exc:  # noqa: BLE001 -- the one place that turns anything into one line
        if isinstance(exc, (*usage_errors, *input_errors())):
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if debug:
            traceback.print_exc()
        where = "" if debug else " (rerun with --debug for the full trace)"
        print(
            f"{prog}: internal error: {type(exc).__name__}: {str(exc)[:300]}{where}; "
            "this is a bug in stacktok, not a verdict on your files -- please report it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def verdict_or_usage(fn: Callable[[], int], *, prog: str) -> int:
    """``fn()``'s exit code; bad input (``input_errors``) is ``PROG: error: ...`` and exit 2, a
    ``--require``d backend that cannot run ``PROG: INCOMPLETE: ...`` and exit 4. Anything else
    propagates to the entry point's :func:`run_main` (exit 3). Every suite command's ``main``."""
    try:
        return fn()
    except RequiredUnavailable as exc:
        print(f"{prog}: INCOMPLETE: {exc}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except input_errors() as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
