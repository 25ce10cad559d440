"""`stacktok fuzz`: planted divergences are found and shrunk, the clean export passes,
runs are deterministic, declared divergences are respected.

Real backends over real files, no mocks. Each planted fault is a copy of the
shipped export with one field-bug-shaped edit:

- a merge deleted from tokenizer.json ("Ġ t"), and the same merge moved to the end;
- a GGUF whose ``tokenizer.ggml.pre`` names another split regex ("gpt-2");
- ``ignore_merges: true`` plus a vocabulary entry no merge can build (the
  Llama-3 shape: rten#453, llama.cpp PR#7193).

Each must be found within 60 s and every written counterexample must be at
most 8 characters and must really diverge when replayed on the library directly.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conformance import fuzz
from conformance.backends import load_backend
from conformance.backends.llama_backend import LlamaCppTokenizer
from conformance.core.declared import Declarations
from conformance.core.fixtures import FixtureSet, load_probes
from conformance.core.layout import Exports
from conformance.fuzz.generators import GENERATORS, GenContext
from stacktok_export import load_tokenizer
from stacktok_export.export import gguf_fmt
from stacktok_export.gguf import reader as gguf_reader

from .helpers import ROOT, SHIPPED, SHIPPED_HF, build_checkpoint, json_edit, replace, run_gate

MAX_MINIMAL = 8  # characters
EXAMPLES = "4000"  # enough for every planted fault below (speed: benchmarks/bench_fuzz.py)
UNREACHABLE = "'Ll"  # a contraction pre-token in a case the vocabulary lacks
UNREACHABLE_ID = 32768


# ---------------------------------------------------------------- helpers
def run_fuzz(directory: Path, out: Path, *extra: str) -> tuple[int, list[dict], str, float]:
    """Run the CLI in-process; return (exit code, written probes, stdout, seconds)."""
    start = time.perf_counter()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = fuzz.cli([str(directory), "--quiet", "--out", str(out), *extra])
    seconds = time.perf_counter() - start
    lines = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
    return code, [json.loads(line) for line in lines], buf.getvalue(), seconds


def hf_copy(root: Path, edit: Callable[[dict], None]) -> Path:
    """A copy of the shipped HF directory (named ``*-hf``) with tokenizer.json edited."""
    return build_checkpoint(root / SHIPPED_HF.name, edits=[json_edit("tokenizer.json", edit)])


def _merge_index(merges: list, merge: str) -> int:
    for i, m in enumerate(merges):
        if m == merge or (isinstance(m, list) and " ".join(m) == merge):
            return i
    raise AssertionError(f"merge {merge!r} is not in the shipped tokenizer.json")


def delete_merge(data: dict) -> None:
    merges = data["model"]["merges"]
    del merges[_merge_index(merges, "Ġ t")]


def move_merge_to_end(data: dict) -> None:
    merges = data["model"]["merges"]
    merges.append(merges.pop(_merge_index(merges, "Ġ t")))


def unreachable_token(data: dict) -> None:
    """``ignore_merges`` plus a vocabulary entry that no merge builds.

    Ids 0..32767 keep their meaning; the new entry takes id 32768. The specials
    are listed in the model vocabulary at their own ids too, because tokenizers
    renumbers ``added_tokens`` when the model vocabulary has a gap (measured:
    ``<|user|>`` became 32764), which would be a second, unrelated fault.
    """
    model = data["model"]
    model["ignore_merges"] = True
    for added in data["added_tokens"]:
        model["vocab"][added["content"]] = added["id"]
    assert UNREACHABLE not in model["vocab"]
    model["vocab"][UNREACHABLE] = UNREACHABLE_ID


def hf_replay(directory: Path) -> Callable[[str, bool], list[int]]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(directory / "tokenizer.json"))

    def encode(text: str, allow_special: bool) -> list[int]:
        tok.encode_special_tokens = not allow_special
        return tok.encode(text, add_special_tokens=False).ids

    return encode


def assert_found_and_shrunk(
    code: int, probes: list[dict], seconds: float, backend: str, replay: Callable[[str, bool], list[int]]
) -> None:
    assert code == 1, "the planted fault was not found"
    assert probes, "no counterexample written"
    ref = load_tokenizer(SHIPPED)
    for p in probes:
        assert p["category"] == "fuzz" and f"backend={backend} " in p["source"]
        assert len(p["text"]) <= MAX_MINIMAL, f"not shrunk: {p['text']!r}"
        want = ref.encode(p["text"], allowed_special="all" if p["allow_special"] else frozenset())
        assert replay(p["text"], p["allow_special"]) != want, f"{p['text']!r} does not diverge"


@pytest.fixture(scope="module")
def deleted_merge_dir(tmp_path_factory) -> Path:
    return hf_copy(tmp_path_factory.mktemp("deleted"), delete_merge)


# ------------------------------------------------------- planted divergences
def test_deleted_merge_is_found_and_shrunk(deleted_merge_dir: Path, tmp_path: Path) -> None:
    code, probes, stdout, seconds = run_fuzz(
        deleted_merge_dir, tmp_path / "cx.jsonl", "--backends", "tokenizers", "--examples", EXAMPLES
    )
    assert_found_and_shrunk(code, probes, seconds, "tokenizers", hf_replay(deleted_merge_dir))
    assert " t" in {p["text"] for p in probes}
    assert "first difference at id 0" in stdout and "verdict: FAIL" in stdout


@pytest.mark.transformers
def test_merge_moved_to_the_end_is_found_and_shrunk(tmp_path: Path) -> None:
    directory = hf_copy(tmp_path / "moved", move_merge_to_end)
    backends = "tokenizers,transformers-reload"
    code, probes, _, seconds = run_fuzz(
        directory, tmp_path / "cx.jsonl", "--backends", backends, "--examples", EXAMPLES
    )
    by_backend = {
        name: [p for p in probes if f"backend={name} " in p["source"]]
        for name in ("tokenizers", "transformers-reload")
    }
    assert_found_and_shrunk(code, by_backend["tokenizers"], seconds, "tokenizers", hf_replay(directory))
    reload = load_backend("transformers-reload", Exports.discover(directory, artifact=SHIPPED))
    assert_found_and_shrunk(
        code,
        by_backend["transformers-reload"],
        seconds,
        "transformers-reload",
        lambda text, special: reload.encode(text, allow_special=special),
    )
    assert any(p["text"].startswith(" t") for p in probes)


def test_gguf_with_another_pre_regex_is_found_and_shrunk(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "gpt2"
    root.mkdir()
    directory = build_checkpoint(root / SHIPPED_HF.name)
    monkeypatch.setattr(gguf_fmt, "TOKENIZER_PRE", "gpt-2")
    gguf_path = root / "stack100m-32768.gguf"
    gguf_path.write_bytes(gguf_fmt.gguf_bytes(load_tokenizer(SHIPPED)))
    assert gguf_reader.read_gguf_metadata(gguf_path)["tokenizer.ggml.pre"] == "gpt-2"
    llama = LlamaCppTokenizer(gguf_path)
    code, probes, _, seconds = run_fuzz(
        directory, tmp_path / "cx.jsonl", "--backends", "llama.cpp", "--examples", EXAMPLES
    )
    assert_found_and_shrunk(
        code, probes, seconds, "llama.cpp", lambda text, special: llama.encode(text, allow_special=special)
    )
    assert "0000" in {p["text"] for p in probes}  # GPT-2 keeps digit runs whole; Llama-3 cuts at 3


def test_ignore_merges_with_unreachable_token_is_found_and_shrunk(tmp_path: Path) -> None:
    directory = hf_copy(tmp_path / "ignore", unreachable_token)
    replay = hf_replay(directory)
    ref = load_tokenizer(SHIPPED)
    assert replay(UNREACHABLE, False) == [UNREACHABLE_ID] != ref.encode(UNREACHABLE)
    code, probes, _, seconds = run_fuzz(
        directory, tmp_path / "cx.jsonl", "--backends", "tokenizers", "--examples", EXAMPLES
    )
    assert_found_and_shrunk(code, probes, seconds, "tokenizers", replay)
    assert UNREACHABLE in {p["text"] for p in probes}

    # the cause is ignore_merges: with merges respected, the token is never produced
    def respect_merges(data: dict) -> None:
        unreachable_token(data)
        data["model"]["ignore_merges"] = False

    respected = hf_replay(hf_copy(tmp_path / "respected", respect_merges))
    planted = [p for p in probes if UNREACHABLE_ID in replay(p["text"], p["allow_special"])]
    assert planted
    for p in planted:
        want = ref.encode(p["text"], allowed_special="all" if p["allow_special"] else frozenset())
        assert respected(p["text"], p["allow_special"]) == want


# ------------------------------------------------------------ clean export
@pytest.mark.transformers
def test_shipped_export_has_no_undeclared_divergence(tmp_path: Path) -> None:
    out = tmp_path / "cx.jsonl"
    # every backend tests(latest) installs (vLLM and TRL run in nox -s heavy): a missing one is INCOMPLETE
    plain = "tiktoken,tokenizers,transformers,transformers-reload,llama.cpp,llama.cpp-detokenize"
    code, probes, stdout, _ = run_fuzz(
        SHIPPED_HF, out, "--examples", "2000", "--seed", "20260131", "--backends", plain
    )
    assert code == 0, stdout
    assert probes == [] and out.read_bytes() == b""
    assert "verdict: PASS" in stdout
    for name in ("tiktoken", "tokenizers", "transformers", "transformers-reload", "llama.cpp"):
        row = next(line for line in stdout.splitlines() if line.startswith(name + " "))
        assert " 2000 " in row and row.rstrip().endswith("ok"), row


def test_same_seed_writes_the_same_bytes(deleted_merge_dir: Path, tmp_path: Path) -> None:
    args = (
        "--backends",
        "tokenizers,transformers-reload",
        "--examples",
        "1500",
        "--seed",
        "3",
        "--keep",
        "2",
    )
    run_fuzz(deleted_merge_dir, tmp_path / "a.jsonl", *args)
    run_fuzz(deleted_merge_dir, tmp_path / "b.jsonl", *args)
    first = (tmp_path / "a.jsonl").read_bytes()
    assert first and first == (tmp_path / "b.jsonl").read_bytes()
    for line in first.decode("ascii").splitlines():  # ensure_ascii=True, sort_keys=True
        obj = json.loads(line)
        assert line == json.dumps(obj, ensure_ascii=True, sort_keys=True)
        assert obj["source"].startswith("stacktok fuzz seed=3 backend=")


def test_seconds_budget_finds_the_fault(deleted_merge_dir: Path, tmp_path: Path) -> None:
    code, probes, stdout, seconds = run_fuzz(
        deleted_merge_dir, tmp_path / "cx.jsonl", "--backends", "tokenizers", "--seconds", "3"
    )
    assert code == 1 and " t" in {p["text"] for p in probes}  # a time budget, not an example count
    assert "ex/s" in stdout


def test_counterexamples_replay_through_the_gate(deleted_merge_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "cx.jsonl"
    run_fuzz(deleted_merge_dir, out, "--backends", "tokenizers", "--examples", "1000")
    assert [p.category for p in load_probes(out)] and all(p.category == "fuzz" for p in load_probes(out))
    only = ("--only-user-data", "--probes", str(out))
    run = run_gate(deleted_merge_dir, *only, backends="tokenizers", report=tmp_path / "gate.json")
    assert run.code == 1
    rows = run.report["checks"]
    assert any(
        r["check"] == "conformance.encode" and r["backend"] == "tokenizers" and r["status"] == "fail"
        for r in rows
    )


# ------------------------------------------------------ declared divergences
@pytest.fixture(scope="module")
def shipped_exports() -> Exports:
    return Exports.discover(SHIPPED_HF, artifact=SHIPPED)


@pytest.fixture(scope="module")
def ctx() -> GenContext:
    return GenContext.build(load_tokenizer(SHIPPED), FixtureSet.load().probes)


def oracle_for(name: str, exports: Exports, ctx: GenContext) -> fuzz.Oracle:
    backend = load_backend(name, exports)
    ref = load_tokenizer(SHIPPED)
    decl = fuzz.UnicodeDeclarations.for_backend(Declarations(FixtureSet.load().divergences, ref), backend)
    return fuzz.Oracle(backend, ref, decl)


def test_code_points_are_declared_per_backend_and_version(shipped_exports, ctx) -> None:
    llama = oracle_for("llama.cpp", shipped_exports, ctx).decl
    tik = oracle_for("tiktoken", shipped_exports, ctx).decl
    # measured, not looked up: U+1C89 (Unicode 16.0) drifts for llama.cpp (15.1 tables) only
    assert llama.declared_by("\u1c89") == "llama.cpp-unicode-tables"
    assert llama.declared_by("\U000323b0") == "llama.cpp-unicode-tables"
    assert tik.declared_by("\u1c89") is None  # tiktoken's tables are 16.0: not excused
    assert tik.declared_by("\U000323b0") == "tiktoken-unicode-tables"
    assert llama.declared_by("a") is None and llama.declared_by("\u017f") is None


def test_long_s_contraction_is_declared_like_the_gate_declares_it(shipped_exports, ctx) -> None:
    """The gate's long_s_contraction declaration applies to generated text too (one rule)."""
    llama = oracle_for("llama.cpp", shipped_exports, ctx).decl
    tik = oracle_for("tiktoken", shipped_exports, ctx).decl
    assert llama.strip("it'\u017ft x") == "it't x"  # noqa: B005 -- UnicodeDeclarations.strip, not str.strip
    assert llama.first_declaration("it'\u017ft x") == "llama.cpp-long-s-contraction"
    assert tik.strip("it'\u017ft x") == "it'\u017ft x" and tik.first_declaration("it'\u017ft") is None  # noqa: B005


def test_new_code_point_divergence_is_declared(shipped_exports, ctx) -> None:
    oracle = oracle_for("llama.cpp", shipped_exports, ctx)
    ex = fuzz.Example(0, "codepoints", "x\u1c89's", (fuzz.UNTRUSTED,))
    obs = oracle.observe(ex.text, fuzz.UNTRUSTED)
    assert obs is not None  # llama.cpp splits "\u1c89's" differently (Unicode 15.1 tables)
    raw = fuzz._classify(oracle, ex, fuzz.UNTRUSTED, obs)
    assert raw.declared == "llama.cpp-unicode-tables"


def test_undeclared_divergence_cannot_hide_behind_a_declared_one(tmp_path: Path, monkeypatch, ctx) -> None:
    root = tmp_path / "gpt2"
    root.mkdir()
    directory = build_checkpoint(root / SHIPPED_HF.name)
    monkeypatch.setattr(gguf_fmt, "TOKENIZER_PRE", "gpt-2")
    (root / "stack100m-32768.gguf").write_bytes(gguf_fmt.gguf_bytes(load_tokenizer(SHIPPED)))
    oracle = oracle_for("llama.cpp", Exports.discover(directory, artifact=SHIPPED), ctx)
    ex = fuzz.Example(0, "digits", "\u1c89's 0000", (fuzz.UNTRUSTED,))
    obs = oracle.observe(ex.text, fuzz.UNTRUSTED)
    raw = fuzz._classify(oracle, ex, fuzz.UNTRUSTED, obs)
    assert raw.declared is None and raw.text == "'s 0000"


# ---------------------------------------------------------------- pieces
def test_shrinker_is_deterministic_and_minimal() -> None:
    def fails(text: str) -> bool:
        return "q" in text and "z" in text[text.index("q") :]

    text = "hello q wonderful world z!" * 3
    split = lambda t: t.split(" ")  # noqa: E731
    a = fuzz.shrink(text, fails, split=split)
    b = fuzz.shrink(text, fails, split=split)
    assert a.text == b.text == "qz" and a.calls == b.calls


def test_generators_are_deterministic_and_valid(ctx) -> None:
    for name, (gen, _) in GENERATORS.items():
        for i in range(200):
            one = gen(random.Random(f"7/{i}"), ctx)
            assert one == gen(random.Random(f"7/{i}"), ctx), name
            assert isinstance(one, str)
            one.encode("utf-8")  # no lone surrogates


def test_every_generator_is_used(ctx) -> None:
    names = list(GENERATORS)
    used = {fuzz.make_example(0, i, names, ctx).generator for i in range(2000)}
    assert used == set(names)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["/nonexistent/dir"], "is not a directory"),
        ([str(SHIPPED_HF), "--examples", "0"], "--examples must be positive"),
        ([str(SHIPPED_HF), "--seconds", "-1"], "--seconds must be positive"),
        ([str(SHIPPED_HF), "--out", str(SHIPPED_HF / "cx.jsonl")], "fuzz never writes into"),
        ([str(ROOT / "fixtures")], "has no tokenizer.json"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], message: str, capsys) -> None:
    assert fuzz.cli(argv) == 2
    assert message in capsys.readouterr().err


def test_unknown_backend_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        fuzz.cli([str(SHIPPED_HF), "--backends", "nope"])
    assert exc.value.code == 2


def test_export_a_backend_cannot_load_fails_with_the_reason(tmp_path: Path, monkeypatch) -> None:
    """A well-formed file that the library itself refuses (llama.cpp: an unknown tokenizer model);
    a malformed one is exit 2 before anything runs (next test)."""
    directory = tmp_path / "broken"
    directory.mkdir()
    monkeypatch.setattr(gguf_fmt, "TOKENIZER_MODEL", "no-such-model")
    (directory / "x.gguf").write_bytes(gguf_fmt.gguf_bytes(load_tokenizer(SHIPPED)))
    monkeypatch.undo()
    code, probes, stdout, _ = run_fuzz(
        directory, tmp_path / "cx.jsonl", "--backends", "llama.cpp", "--examples", "10"
    )
    assert code == 1 and probes == []
    assert "error: cannot load the export" in stdout and "fix the export" in stdout


def test_malformed_directory_is_exit_2_before_anything_runs(tmp_path: Path, capsys) -> None:
    d = build_checkpoint(tmp_path / "bad-hf", edits=[replace("tokenizer.json", "{not json")])
    assert fuzz.cli([str(d), "--quiet", "--examples", "10"]) == 2
    err = capsys.readouterr().err
    assert "tokenizer.json" in err and "not valid JSON" in err and "Traceback" not in err
