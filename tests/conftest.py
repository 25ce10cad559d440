"""Shared fixtures: the shipped artifact, a small trained tokenizer, probe texts."""

from __future__ import annotations

import glob
import sysconfig
import warnings
from pathlib import Path

import pytest

from stacktok_export import StackTokenizer, default_artifact_path, load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = default_artifact_path()  # the checkout's tokenizer/stack100m-32768.json, as `stacktok export` uses
SHIPPED_HF = ROOT / "tokenizer" / "stack100m-32768-hf"

PROBE = (
    "Tokenization is frozen for the life of the model.\n"
    "café 🚀 — mixed ünïcode\tTAB\r\nCRLF\n"
    "def f(x):\n    return x ** 2  # 1234567 and 2026\n"
    "hello <|assistant|> world\n"
)


def need(module: str, how: str):
    """The one require helper: import a library a test needs; a missing one FAILS, never skips.

    ``how`` is an extra of pyproject.toml (``hf``, ``gguf``, ``llama``) or, for backends with
    no extra that installs on this machine kind, the nox session that installs them. Tests of
    optional backends are selected by marker (``heavy``, ``served``), so the sessions that
    run them have the library and the others never collect them.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        hint = f"pip install -e '.[{how}]'" if how.isidentifier() else how
        pytest.fail(f"{module} is required by this test ({exc}); {hint}", pytrace=False)


def stdlib_text(max_bytes: int) -> str:
    """Deterministic real text: CPython stdlib sources, sorted by path."""
    root = sysconfig.get_paths()["stdlib"]
    parts: list[str] = []
    total = 0
    for path in sorted(glob.glob(f"{root}/*.py")):
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(text)
        total += len(text)
        if total >= max_bytes:
            break
    return "".join(parts)[:max_bytes]


@pytest.fixture(scope="session")
def shipped_tok() -> StackTokenizer:
    if SHIPPED.parent != ROOT / "tokenizer":  # default_artifact_path() fell back to the packaged copy
        pytest.fail(f"{ROOT / 'tokenizer' / SHIPPED.name} is missing: the frozen artifact must be committed")
    return load_tokenizer(SHIPPED)


@pytest.fixture(scope="session")
def small_tok() -> StackTokenizer:
    """A 2,048-id tokenizer trained on 1 MB of stdlib text (fast to build)."""
    tok = StackTokenizer(name="small-2048")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok.train_from_iterable([stdlib_text(1_000_000)], vocab_size=2048, workers=1)
    return tok
