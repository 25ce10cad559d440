"""Where the shipped files are: the checkout's tokenizer folder, its artifact and HF export.

Out of scope: copying or editing them (:mod:`tests.helpers.checkpoint`); tests never write here.
"""

from __future__ import annotations

from pathlib import Path

from stacktok_export import default_artifact_path

ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED = default_artifact_path()  # the checkout's tokenizer/stack100m-32768.json, as `stacktok export` uses
SHIPPED_HF = ROOT / "tokenizer" / "stack100m-32768-hf"
NAME = SHIPPED_HF.name[: -len("-hf")]  # "stack100m-32768": the stem of the sibling .gguf / .tiktoken
GGUF = f"{NAME}.gguf"
TIKTOKEN = f"{NAME}.tiktoken"
