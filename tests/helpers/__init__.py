"""What every test shares: the shipped paths, one checkpoint builder, one JSON editor, one gate
runner, one reading of "failing", and the shared probe and chat data.

Out of scope: fixtures (``tests/conftest.py`` turns these into pytest fixtures where a test needs
one); anything shipped (tests are not in the wheel).
"""

from __future__ import annotations

from .checkpoint import (
    GENERATION_CONFIG,
    MODEL_CONFIG,
    build_checkpoint,
    demote_merge,
    remove,
    replace,
    resave,
    snapshot,
    symlink,
    unreachable_merge,
)
from .data import CHATS, PROBES, TRUSTED, GateData, gate_data, probe_rows, write_jsonl
from .gate import GateRun, failing, gate_argv, run_gate
from .json_edit import edit_json, json_edit
from .paths import GGUF, NAME, ROOT, SHIPPED, SHIPPED_HF, TIKTOKEN
from .strings import HARD_STRINGS, PROBE, heldout_slice

__all__ = [
    "CHATS",
    "GENERATION_CONFIG",
    "GGUF",
    "HARD_STRINGS",
    "MODEL_CONFIG",
    "NAME",
    "PROBE",
    "PROBES",
    "ROOT",
    "SHIPPED",
    "SHIPPED_HF",
    "TIKTOKEN",
    "TRUSTED",
    "GateData",
    "GateRun",
    "build_checkpoint",
    "demote_merge",
    "edit_json",
    "failing",
    "gate_argv",
    "gate_data",
    "heldout_slice",
    "json_edit",
    "probe_rows",
    "remove",
    "replace",
    "resave",
    "run_gate",
    "snapshot",
    "symlink",
    "unreachable_merge",
    "write_jsonl",
]
