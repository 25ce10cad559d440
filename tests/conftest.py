"""Shared fixtures: the shipped artifact, a small trained tokenizer; ``need`` and ``stdlib_text``.

The shipped paths and probe texts live in :mod:`tests.helpers` (re-exported here for the tests
that import them from ``conftest``). Out of scope: building checkpoints and running the gate
(:mod:`tests.helpers`).
"""

from __future__ import annotations

import glob
import sysconfig
import warnings
from pathlib import Path

import pytest

from stacktok_export import StackTokenizer, load_tokenizer

from .helpers.data import GateData, gate_data
from .helpers.paths import ROOT, SHIPPED, SHIPPED_HF
from .helpers.strings import HARD_STRINGS, PROBE

__all__ = [
    "PROBE",
    "ROOT",
    "SHIPPED",
    "SHIPPED_HF",
    "need",
    "stdlib_text",
]  # the names tests import from here


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


@pytest.fixture(autouse=True)
def every_gate_report_follows_the_schema(monkeypatch) -> None:
    """Each ``--json`` report any test's in-process gate run writes is validated against the shipped
    schema as it is written (:func:`tests.helpers.gate.check_report`): the gate's own ``to_json``
    is wrapped, so a test that reads its report with plain ``json.loads`` is covered too. Reports
    from child processes are checked where they are read (``run_gate(process=True)``, the
    action's step in tests/test_hooks.py)."""
    import json

    from conformance.gate import command

    from .helpers.gate import check_report

    written = command.to_json

    def checked(doc):
        text = written(doc)
        check_report(json.loads(text), where="the gate's --json report")
        return text

    monkeypatch.setattr(command, "to_json", checked)


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


@pytest.fixture(scope="module")
def gate_files(tmp_path_factory) -> GateData:
    """The gate tests' user data: the hard strings (+ the known fault sites) and the shared chats."""
    texts = HARD_STRINGS + ["x != y , z", " Việt", "don't DON'T"]
    return gate_data(tmp_path_factory.mktemp("gate-data"), texts=texts)
