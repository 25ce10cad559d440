"""The hard strings, kept importable from their old home: they live in :mod:`tests.helpers.strings`.

Out of scope: everything else; import from :mod:`tests.helpers` in new tests.
"""

from __future__ import annotations

from .helpers.strings import HARD_STRINGS, PROBE, heldout_slice

__all__ = ["HARD_STRINGS", "PROBE", "heldout_slice"]
