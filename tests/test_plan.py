"""The one input plan (``conformance.plan``) and the rules with one home (issue 38).

- every tool -- ``stacktok gate``, ``python -m conformance``, ``stacktok fuzz``, ``stacktok
  audit`` -- plans its inputs the same way, so each file of a run is opened once: DIR's files,
  the sibling ``.gguf`` / ``.tiktoken``, the artifact, the user's probes and the shipped fixtures
  (opens through ``os.open``, ``io.open`` and ``builtins.open`` are counted per path, as
  ``tests/test_validate.py::test_each_file_is_read_once`` counts them; a backend adapter loading
  DIR through its library reads as a user's code does and is not counted);
- the audit validates the directory it audits, as the gate does;
- one ``--artifact`` (one help, one default), one comma-list parser, one merge-entry parser.

Out of scope: what each tool checks (their own test modules).
"""

from __future__ import annotations

import argparse
import builtins
import io
import os
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import stacktok_cli
from conformance.__main__ import build_parser as conformance_parser
from conformance.__main__ import main as conformance_main
from conformance.core.arguments import ARTIFACT_HELP, artifact_path
from conformance.core.fixtures import FIXTURES
from stacktok_export import default_artifact_path

from .helpers import NAME, SHIPPED, build_checkpoint, json_edit, replace

BACKENDS = Path(__file__).resolve().parent.parent / "conformance" / "backends"
#: the adapter modules (``conformance/backends/*.py`` but the registry, whose ``shared_reference``
#: is the plan's one load of the artifact)
ADAPTERS = {str(p) for p in BACKENDS.glob("*.py") if p.name != "__init__.py"}


# ---------------------------------------------------------------- each file once per run
def _inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A checkpoint ``NAME-hf`` with its ``.gguf`` / ``.tiktoken`` beside it, an artifact of its
    own (a fresh path: the shared reference is not cached yet) and a user probe file."""
    hf = build_checkpoint(tmp_path / "ckpt" / f"{NAME}-hf", exports="beside", model_config=True)
    artifact = tmp_path / "artifact" / SHIPPED.name
    artifact.parent.mkdir()
    artifact.write_bytes(SHIPPED.read_bytes())
    probes = tmp_path / "probes.jsonl"
    probes.write_text('{"id": "p", "text": "hello world"}\n', encoding="utf-8")
    return hf, artifact, probes


def _count_opens(monkeypatch: pytest.MonkeyPatch, watched: set[Path]) -> Counter[str]:
    """Count each open of a ``watched`` file (resolved), except a backend adapter's own."""
    counts: Counter[str] = Counter()

    def note(file: Any) -> None:
        if not isinstance(file, (str, os.PathLike)):
            return
        path = Path(os.fspath(file)).resolve()
        if path not in watched:
            return
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename in ADAPTERS:
                return  # a backend adapter loading DIR through its library
            frame = frame.f_back
        counts[str(path)] += 1

    def counting(real: Callable[..., Any]) -> Callable[..., Any]:
        def opener(file: Any, *args: Any, **kwargs: Any) -> Any:
            note(file)
            return real(file, *args, **kwargs)

        return opener

    monkeypatch.setattr(os, "open", counting(os.open))  # the bounded reader (util.untrusted)
    monkeypatch.setattr(io, "open", counting(io.open))  # pathlib
    monkeypatch.setattr(builtins, "open", counting(builtins.open))  # numpy's memmap under gguf-py
    return counts


def _run(tool: str, hf: Path, artifact: Path, probes: Path, out: Path) -> int:
    common = ["--artifact", str(artifact), "--quiet"]
    if tool == "gate":
        argv = ["gate", str(hf), *common, "--backends", "reference,tokenizers", "--only-user-data"]
        return stacktok_cli.main([*argv, "--probes", str(probes), "--json", str(out)])
    if tool == "conformance":
        argv = [str(hf), *common, "--backends", "reference,tokenizers", "--only-user-data"]
        return conformance_main([*argv, "--probes", str(probes), "--json", str(out)])
    if tool == "fuzz":
        return stacktok_cli.main(["fuzz", str(hf), *common, "--backends", "tokenizers", "--examples", "20"])
    return stacktok_cli.main(["audit", str(hf), *common, "--backends", "none", "--json", str(out)])


@pytest.mark.parametrize("tool", ["gate", "conformance", "fuzz", "audit"])
def test_each_file_is_read_once_per_run(
    tool: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hf, artifact, probes = _inputs(tmp_path)
    files = [*hf.iterdir(), hf.parent / f"{NAME}.gguf", hf.parent / f"{NAME}.tiktoken", artifact, probes]
    files += [p for p in FIXTURES.iterdir() if p.suffix in (".jsonl", ".json")]
    counts = _count_opens(monkeypatch, {p.resolve() for p in files})
    code = _run(tool, hf, artifact, probes, tmp_path / "report.json")
    monkeypatch.undo()
    out = capsys.readouterr()
    assert code == 0, out.out[-2000:] + out.err[-2000:]
    read = {Path(p).name: n for p, n in counts.items()}
    # the gate also hashes the artifact's bytes for its JSON report ("files"): the reference loads
    # it by path, so that is a second open until the floor's loader hands on the bytes it read
    again = {SHIPPED.name: 2} if tool == "gate" else {}
    assert read == {**dict.fromkeys(read, 1), **again}, f"opens per file (want 1 each): {read}"
    # every file of the checkpoint and the artifact were read (the counting saw them)
    assert {p.name for p in hf.iterdir()} | {f"{NAME}.tiktoken", SHIPPED.name} <= set(read)


# ---------------------------------------------------------------- the audit validates its directory
def test_the_audit_validates_the_directory_it_audits(tmp_path: Path, capsys) -> None:
    """A malformed file of the directory is exit 2 naming it, before any finding (as in the gate)."""
    d = build_checkpoint(tmp_path / "ckpt", edits=[replace("tokenizer_config.json", "{not json")])
    assert stacktok_cli.main(["audit", str(d), "--backends", "none", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "tokenizer_config.json" in err and "not valid JSON" in err and "Traceback" not in err


def test_the_audit_reads_tokenizer_json_as_validated(tmp_path: Path, capsys) -> None:
    """A merge the validation refuses (a part not in the vocab) is exit 2 with validation's words."""

    def bad_merge(doc: dict) -> None:
        doc["model"]["merges"][0] = "zqzq t"

    d = build_checkpoint(tmp_path / "ckpt", edits=[json_edit("tokenizer.json", bad_merge)])
    assert stacktok_cli.main(["audit", str(d), "--backends", "none", "--quiet"]) == 2
    assert "model.merges[0]" in capsys.readouterr().err


# ---------------------------------------------------------------- one --artifact
def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser of ``stacktok`` (one per command) and ``python -m conformance``."""
    root = stacktok_cli.build_parser()
    [sub] = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    return {**dict(sub.choices), "python -m conformance": conformance_parser()}


def test_every_artifact_flag_is_the_one_helper() -> None:
    found = {
        name: action
        for name, parser in _parsers().items()
        for action in parser._actions  # noqa: SLF001
        if "--artifact" in action.option_strings
    }
    want = {"gate", "fuzz", "audit", "python -m conformance"}  # the suite's tools
    want |= {"encode", "decode", "export", "pack", "retokenize"}  # the floor's commands
    assert want <= set(found), sorted(found)
    for name, action in found.items():
        assert (action.help, action.default, action.type) == (ARTIFACT_HELP, None, Path), name


def test_one_default_artifact() -> None:
    assert artifact_path(None) == default_artifact_path()
    assert artifact_path("x.json") == Path("x.json")


# ---------------------------------------------------------------- one comma-list parser
@pytest.mark.parametrize(
    "argv, value",
    [
        (["gate", "d", "--backends", " tokenizers, reference,,tokenizers"], ["tokenizers", "reference"]),
        (["fuzz", "d", "--backends", "tokenizers,tokenizers"], ["tokenizers"]),
        (["fuzz", "d", "--generators", "digits , digits"], ["digits"]),
        (["audit", "--backends", "none"], []),
        (["audit", "--backends", "tiktoken,tiktoken, llama.cpp"], ["tiktoken", "llama.cpp"]),
    ],
)
def test_comma_lists_strip_and_drop_repeats(argv: list[str], value: list[str]) -> None:
    args = stacktok_cli.build_parser().parse_args(argv)
    assert (args.generators if "--generators" in argv else args.backends) == value


@pytest.mark.parametrize(
    "argv, said",
    [
        (["gate", "d", "--skip", "nope"], "unknown backend(s) ['nope']; choose from reference, "),
        (["fuzz", "d", "--backends", ","], "name at least one backend; choose from reference, "),
        (["fuzz", "d", "--generators", "nope"], "unknown generator(s) ['nope']; choose from "),
        (["audit", "--backends", "trl"], "unknown backend(s) ['trl']; choose from tiktoken, "),
    ],
)
def test_comma_lists_refuse_with_the_choices(argv: list[str], said: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        stacktok_cli.build_parser().parse_args(argv)
    assert exc.value.code == 2 and said in capsys.readouterr().err


# ---------------------------------------------------------------- one merge-entry parser
@pytest.mark.parametrize(
    "entry, pair",
    [
        ("Ġ t", ("Ġ", "t")),
        (["Ġ", "t"], ("Ġ", "t")),
        ("Ġt", None),
        ("a b c", None),
        (["a"], None),
        ([1, 2], None),
    ],
)
def test_merge_entries_read_alike_in_floor_validation_and_audit(entry: Any, pair: Any) -> None:
    """The importers, the suite's validation and the audit read a merge entry the same way."""
    from conformance.audit.tokenizer_json import _hf_merge
    from conformance.core.errors import InputError, UsageError
    from conformance.validate.tokenizer_json import _merge_parts
    from stacktok_export.importers.common import ImportRefused, merge_ids, merge_pair

    assert merge_pair(entry) == pair
    ids = {"Ġ": 0, "t": 1}
    if pair is None:
        for read, error in (
            (lambda: _hf_merge(entry), UsageError),
            (lambda: _merge_parts(Path("t.json"), 0, entry, type(entry)), InputError),
            (lambda: merge_ids("t.json", [entry], ids), ImportRefused),
        ):
            with pytest.raises(error):
                read()
        return
    assert _hf_merge(entry) == _merge_parts(Path("t.json"), 0, entry, type(entry)) == pair
    assert merge_ids("t.json", [entry], ids) == [(0, 1)]
