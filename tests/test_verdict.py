"""The verdict path, pinned by hand: exit codes, statuses, the verdict line, behaviour judgement,
the backend selection rules, the error classes and which difference a declaration covers.

Every expected value is written out by hand (never computed by the code under test), so a
mutant that changes a verdict fails here: ``nox -s mutants`` runs this file under mutmut over
conformance/core/rows.py, declared.py, errors.py, conformance/gate/behaviour.py and the selection
rules of conformance/backends. Out of scope: rendering reports (tests/test_gate.py) and running
real backends (tests/test_conformance.py); the fake backends here are the reference, bent.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from conformance.backends import (
    BACKENDS,
    Entry,
    backend_list,
    cannot_run,
    check_selection,
    dist_version,
    load_backend,
    readers_of,
    reads_present,
    require,
    shared_reference,
    unavailable_backends,
)
from conformance.core.clean_spaces import clean_spaces
from conformance.core.declared import (
    CLEAN_SPACES,
    LONG_S,
    UNICODE_TABLES,
    Declarations,
    applies,
    is_newer_than_stdlib,
)
from conformance.core.errors import (
    FixtureError,
    InputError,
    LayoutError,
    RequiredUnavailable,
    UsageError,
    input_errors,
)
from conformance.core.fixtures import Divergence, Probe
from conformance.core.layout import Exports
from conformance.core.protocol import BackendMissing
from conformance.core.rows import (
    FILES,
    Row,
    excluded_by_name,
    exit_code,
    failed,
    incomplete,
    not_applicable,
    not_checked,
    required_not_run,
    row,
    skip,
    verdict_line,
)
from conformance.gate.behaviour import behaviour_proof
from stacktok_export import ArtifactError, StackTokenizer
from stacktok_export.util.limits import FlagError
from stacktok_export.util.untrusted import UntrustedFileError

from .helpers.paths import SHIPPED

ALL_STATUSES = ("pass", "fail", "warn", "skip", "missing", "error", "info")


def r(status: str, backend: str = "tokenizers", check: str = "conformance", message: str = "m") -> Row:
    return Row(check, backend, status, message)


# ------------------------------------------------------------------ rows
def test_row_rejects_an_unknown_status_and_keeps_its_defaults() -> None:
    with pytest.raises(ValueError, match=r"unknown status 'passed'"):
        Row("c", FILES, "passed", "m")
    for status in ALL_STATUSES:
        assert Row("c", FILES, status, "m").status == status
    assert Row("c", "b", "pass", "m").to_json() == {
        "check": "c", "backend": "b", "status": "pass", "message": "m",
        "fix": "", "declared": 0, "window": None,
    }  # fmt: skip


def test_row_and_skip_build_the_documented_rows() -> None:
    assert row("c", True, "bad", "do x") == Row("c", "files", "pass", "ok", "")
    assert row("c", False, "bad", "do x") == Row("c", "files", "fail", "bad", "do x")
    assert row("c", False, "bad", "do x", warn=True) == Row("c", "files", "warn", "bad", "do x")
    assert row("c", True, "bad", "do x", warn=True) == Row("c", "files", "pass", "ok", "")
    assert row("c", False, "bad", "do x", backend="tiktoken").backend == "tiktoken"
    assert skip("c", "no .gguf") == Row("c", "files", "skip", "not checked: no .gguf", "")
    assert skip("c", "why", backend="llama.cpp").backend == "llama.cpp"


@pytest.mark.parametrize(
    ("statuses", "is_failed", "is_incomplete", "code"),
    [
        ((), False, False, 0),
        (("pass", "warn", "skip", "info"), False, False, 0),
        (("pass", "missing"), False, True, 4),
        (("fail",), True, False, 1),
        (("error",), True, False, 1),
        (("missing", "fail"), True, True, 1),  # a failure outranks an incomplete run
        (("error", "missing", "pass"), True, True, 1),
    ],
)
def test_exit_code_from_rows(statuses, is_failed, is_incomplete, code) -> None:
    rows = [r(s) for s in statuses]
    assert failed(rows) is is_failed
    assert incomplete(rows) is is_incomplete
    assert exit_code(rows) == code
    assert failed(iter(rows)) is is_failed  # any Iterable, read once
    assert incomplete(iter(rows)) is is_incomplete


def test_a_required_backend_that_did_not_run_is_incomplete_unless_something_failed() -> None:
    assert exit_code([r("pass")], required_missing=["llama.cpp"]) == 4
    assert exit_code([], required_missing=["llama.cpp"]) == 4
    assert exit_code([r("fail")], required_missing=["llama.cpp"]) == 1
    assert exit_code([r("pass")], required_missing=[]) == 0


def test_required_not_run_names_required_backends_whose_conformance_row_did_not_run() -> None:
    rows = [
        r("missing", "tiktoken"),
        r("skip", "llama.cpp"),
        r("pass", "tokenizers"),
        r("fail", "transformers"),
        r("error", "vllm"),
        r("missing", "trl", check="conformance.encode"),  # not the backend's conformance row
    ]
    required = ["trl", "vllm", "transformers", "tokenizers", "llama.cpp", "tiktoken", "reference"]
    assert required_not_run(rows, required=required) == ["llama.cpp", "tiktoken"]
    assert required_not_run(rows, required=[]) == []
    assert required_not_run(rows, required=["tiktoken"], served=True) == ["tiktoken"]  # no served row


@pytest.mark.parametrize(
    ("status", "named"), [("missing", True), ("skip", True), ("pass", False), ("fail", False)]
)
def test_required_not_run_names_the_server_only_when_served_was_asked(status: str, named: bool) -> None:
    rows = [r("pass", "tokenizers"), r(status, "vllm-server", check="served")]
    assert required_not_run(rows, required=[], served=True) == (["vllm-server"] if named else [])
    assert required_not_run(rows, required=[], served=False) == []
    assert required_not_run(rows, required=[]) == []  # the served path is asked for explicitly
    other = [r(status, "vllm-server", check="served.chat")]
    assert required_not_run(other, required=[], served=True) == []


def test_excluded_by_name_turns_only_missing_rows_of_excluded_backends_into_skips() -> None:
    rows = [
        Row("conformance", "llama.cpp", "missing", "llama_cpp not installed", "pip install x"),
        Row("conformance", "tiktoken", "missing", "tiktoken not installed", "pip install y"),
        Row("conformance.encode", "llama.cpp", "error", "boom"),
        Row("conformance.decode", "llama.cpp", "pass", "ok"),
    ]
    out = excluded_by_name(rows, (n for n in ["llama.cpp", "vllm"]))
    assert out == [
        Row("conformance", "llama.cpp", "skip", "not checked: llama.cpp excluded by --skip/--backends"),
        rows[1],
        rows[2],
        rows[3],
    ]
    assert exit_code(out) == 1  # the error row stays an error
    assert exit_code(out[:2]) == 4  # tiktoken was not excluded: still missing
    assert exit_code(excluded_by_name(rows[:2], ["llama.cpp", "tiktoken"])) == 0
    assert excluded_by_name(rows, []) == rows


def test_not_checked_names_each_backend_that_never_ran_once_with_why() -> None:
    rows = [
        Row("hf.files", FILES, "missing", "x"),  # the directory's rows never name a backend
        Row("conformance", "tiktoken", "missing", "tiktoken not installed"),
        Row("conformance", "tiktoken", "error", "later row of the same backend"),
        Row("conformance", "transformers", "error", "cannot load"),
        Row("conformance", "llama.cpp", "skip", "not checked: no .gguf in the directory; add one"),
        Row("conformance.encode", "vllm", "skip", "not checked: not a conformance row"),
        Row("conformance", "tokenizers", "pass", "ok"),
        Row("conformance", "trl", "fail", "bad"),
        Row("conformance", "reference", "skip", "plain reason"),
    ]
    assert not_checked(rows) == ["tiktoken (not installed)", "transformers (cannot load the directory)"]
    assert not_applicable(rows) == ["llama.cpp (no .gguf in the directory)", "reference (plain reason)"]
    assert not_applicable([Row("conformance", "vllm", "skip", "not checked: gone")]) == ["vllm (gone)"]
    assert not_checked([Row("conformance", "vllm", "skip", "not checked: gone")]) == []
    assert not_checked([r("pass"), r("fail"), r("warn"), r("info")]) == []


def test_verdict_line_words() -> None:
    assert verdict_line([r("pass")], 0) == "PASS"
    assert verdict_line([r("fail")], 1) == "FAIL"
    rows = [r("missing", "tiktoken"), r("error", "llama.cpp")]
    incomplete_line = (
        "INCOMPLETE — not checked: tiktoken (not installed), llama.cpp (cannot load the directory)"
    )
    assert verdict_line(rows, 4) == incomplete_line
    assert verdict_line(rows[:1], 0) == "PASS — not checked: tiktoken (not installed)"
    idle = [Row("conformance", "llama.cpp", "skip", "not checked: no .gguf in the directory")]
    assert verdict_line(idle, 0) == "PASS — not applicable: llama.cpp (no .gguf in the directory)"
    both = rows[:1] + idle
    assert verdict_line(both, 4) == (
        "INCOMPLETE — not checked: tiktoken (not installed); "
        "not applicable: llama.cpp (no .gguf in the directory)"
    )
    with pytest.raises(KeyError):
        verdict_line([], 2)  # a usage error carries no verdict


# ------------------------------------------------------------------ behaviour over syntax
HF_READERS = ("tokenizers", "transformers-reload", "vllm", "trl")
WARN = Row("config.pre_tokenizer", FILES, "warn", "pre_tokenizer differs", "restore it")


def test_readers_of_each_export() -> None:
    assert readers_of("tokenizer.json") == HF_READERS
    assert readers_of(".gguf") == ("llama.cpp", "llama.cpp-detokenize", "llama-server")
    assert readers_of(".tiktoken") == ("tiktoken",)
    assert readers_of("artifact") == ("reference", "transformers")


def test_rows_not_judged_by_behaviour_pass_through() -> None:
    static = [
        Row("config.other", FILES, "warn", "w"),
        Row("config.pre_tokenizer", FILES, "pass", "ok"),
        Row("config.decoder", FILES, "fail", "f"),
    ]
    suite = [r("fail", "tokenizers", "conformance.encode"), r("fail", "tokenizers", "conformance.decode")]
    assert behaviour_proof(static, suite) == static


def test_a_syntax_warning_stays_a_warning_when_every_reader_passes() -> None:
    suite = [
        r("pass", "transformers-reload", "conformance.trusted"),
        r("pass", "tokenizers", "conformance.encode"),
        r("fail", "llama.cpp", "conformance.encode"),  # not a reader of tokenizer.json
        r("fail", "tokenizers", "conformance.decode"),  # not a check that proves the pre-tokenizer
        r("fail", "tokenizers", "encode"),  # not a conformance row
    ]
    out = behaviour_proof([WARN], suite)
    msg = "pre_tokenizer differs; identical behaviour on tokenizers, transformers-reload"
    assert out == [Row("config.pre_tokenizer", FILES, "warn", msg, "restore it")]
    assert exit_code(out) == 0


@pytest.mark.parametrize("bad", ["fail", "error"])
def test_a_syntax_warning_fails_when_a_reader_behaves_differently(bad: str) -> None:
    suite = [
        r("pass", "tokenizers", "conformance.encode"),
        r(bad, "trl", "conformance.trusted"),
        r(bad, "vllm", "conformance.encode"),
    ]
    out = behaviour_proof([WARN], suite)
    msg = "pre_tokenizer differs; behaviour differs: conformance.trusted[trl], conformance.encode[vllm]"
    assert out == [Row("config.pre_tokenizer", FILES, "fail", msg, "restore it")]
    assert exit_code(out) == 1


@pytest.mark.parametrize("status", ["skip", "missing", "warn", "info"])
def test_a_syntax_warning_fails_when_no_reader_ran(status: str) -> None:
    decoder = Row("config.decoder", "tokenizers", "warn", "decoder differs", "restore it")
    suite = [r(status, "tokenizers", "conformance.stream"), r("pass", "tokenizers", "conformance.encode")]
    out = behaviour_proof([decoder], suite)
    msg = (
        "decoder differs; no backend that reads it (tokenizers, transformers-reload, vllm, trl) ran to show "
        "it behaves the same"
    )
    fix = "install tokenizers/transformers (pip install 'stacktok[hf]') and rerun, or restore the section"
    assert out == [Row("config.decoder", "tokenizers", "fail", msg, fix)]
    proven = behaviour_proof([decoder], [r("pass", "vllm", "conformance.stream")])
    assert proven[0].status == "warn"


def test_each_judged_section_is_proven_by_its_own_checks() -> None:
    def verdict(check: str, proof: str) -> str:
        static = [Row(check, FILES, "warn", "w")]
        return behaviour_proof(static, [r("pass", "tokenizers", f"conformance.{proof}")])[0].status

    proven_wrong = ["warn", "warn", "fail"]
    assert [verdict("config.special_flags", c) for c in ("trusted", "injection", "encode")] == proven_wrong
    assert [verdict("config.post_processor", c) for c in ("encode", "default", "trusted")] == proven_wrong
    assert [verdict("config.decoder", c) for c in ("decode", "single_tokens", "encode")] == proven_wrong
    assert [verdict(c, "trusted") for c in ("config.normalizer", "config.bpe_model")] == ["warn", "warn"]


# ------------------------------------------------------------------ backend selection
def exports(tmp_path: Path, *, hf: bool = False, gguf: bool = False, tiktoken: bool = False) -> Exports:
    return Exports(
        artifact=tmp_path / "a.json",
        hf_dir=tmp_path if hf else None,
        gguf=tmp_path / "t.gguf" if gguf else None,
        tiktoken=tmp_path / "t.tiktoken" if tiktoken else None,
    )


def test_backend_list_parses_dedupes_and_rejects_unknown_names() -> None:
    assert backend_list(" tokenizers, reference,,tokenizers ,") == ["tokenizers", "reference"]
    assert backend_list("") == []
    with pytest.raises(argparse.ArgumentTypeError) as info:
        backend_list("reference,nope,llama")
    known = (
        "reference, tiktoken, tokenizers, transformers, transformers-reload, llama.cpp, "
        "llama.cpp-detokenize, llama-server, vllm, trl"
    )
    assert str(info.value) == f"unknown backend(s) ['nope', 'llama']; choose from {known}"


def test_reads_present_follows_the_file_each_backend_reads(tmp_path: Path) -> None:
    bare = exports(tmp_path)
    names = ("reference", "transformers", "tokenizers", "llama.cpp", "tiktoken")
    assert [reads_present(n, bare) for n in names] == [True, True, False, False, False]
    assert reads_present("tokenizers", exports(tmp_path, hf=True)) is True
    assert reads_present("llama.cpp-detokenize", exports(tmp_path, gguf=True)) is True
    assert reads_present("tiktoken", exports(tmp_path, tiktoken=True)) is True
    assert reads_present("tiktoken", exports(tmp_path, hf=True, gguf=True)) is False


def test_cannot_run_skips_an_absent_file_before_it_looks_for_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        BACKENDS,
        "trl",
        Entry(
            ".trl_backend",
            "tokenizer.json",
            needs=("os", "no_such_mod_a", "no_such_mod_b"),
            install="pip install z",
        ),
    )
    assert cannot_run("trl", exports(tmp_path)) == ("skip", "no tokenizer.json in the directory")
    assert cannot_run("trl", exports(tmp_path, hf=True)) == (
        "missing",
        "no_such_mod_a, no_such_mod_b not installed; pip install z",
    )
    assert cannot_run("reference", exports(tmp_path)) is None
    assert cannot_run("llama.cpp", exports(tmp_path)) == ("skip", "no .gguf in the directory")
    monkeypatch.setitem(BACKENDS, "trl", Entry(".trl_backend", "tokenizer.json", needs=("os",)))
    assert cannot_run("trl", exports(tmp_path, hf=True)) is None


def test_unavailable_backends_lists_optional_ones_and_stops_on_a_required_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        BACKENDS, "trl", Entry(".trl_backend", "tokenizer.json", needs=("no_such_mod_a",), install="do x")
    )
    ex = exports(tmp_path, hf=True)
    names = ["reference", "llama.cpp", "trl", "tiktoken"]
    assert unavailable_backends(names, ex, required=["reference"]) == (
        ("llama.cpp", "skip", "no .gguf in the directory"),
        ("trl", "missing", "no_such_mod_a not installed; do x"),
        ("tiktoken", "skip", "no .tiktoken in the directory"),
    )
    assert unavailable_backends(["reference"], ex, required=["reference"]) == ()
    with pytest.raises(RequiredUnavailable) as info:
        unavailable_backends(names, ex, required=["tiktoken", "trl"])
    assert str(info.value) == (
        "required backend trl cannot run: no_such_mod_a not installed; do x; "
        "install it, or drop it from --require"
    )


def test_check_selection_usage_errors_in_order() -> None:
    assert check_selection([], ["tiktoken"], skipped=["tiktoken"]) == (
        "--backends names no backend; give at least one of reference, tiktoken, tokenizers, transformers, "
        "transformers-reload, llama.cpp, llama.cpp-detokenize, llama-server, vllm, trl"
    )
    assert check_selection(["reference"], ["tiktoken", "trl", "vllm"], skipped=["vllm", "tiktoken"]) == (
        "--require and --skip both name tiktoken,vllm; drop it from one of them"
    )
    assert check_selection(["reference", "trl"], ["tiktoken", "trl", "vllm"]) == (
        "--require tiktoken,vllm names backend(s) that --backends excludes; "
        "add them to --backends or drop them from --require"
    )
    assert check_selection(["reference", "trl"], ["trl"], skipped=["vllm"]) is None
    assert check_selection(["reference"], []) is None


def test_load_backend_builds_the_named_adapter_or_reports_it_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = Exports(artifact=SHIPPED, hf_dir=None, tiktoken=None, gguf=None)
    reference = load_backend("reference", shipped)
    assert reference.name == "reference"
    assert list(reference.encode("hello world", allow_special=False)) == [5311, 6213]
    monkeypatch.setitem(BACKENDS, "trl", Entry(".no_such_adapter", "tokenizer.json"))
    with pytest.raises(BackendMissing, match=r"^the trl adapter cannot be imported \(No module named "):
        load_backend("trl", shipped)


def test_shared_reference_is_loaded_once_per_file_version(tmp_path: Path) -> None:
    import os
    import shutil

    copy = tmp_path / "artifact.json"
    shutil.copyfile(SHIPPED, copy)
    first = shared_reference(copy)
    assert first.vocab_size == 32768
    assert shared_reference(copy) is first
    os.utime(copy, ns=(1_000_000_000, 1_000_000_000))
    assert shared_reference(copy) is not first  # a new file version loads again


def test_backend_loading_edges(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^unknown backend 'nope'; choose from reference, tiktoken, "):
        load_backend("nope", exports(tmp_path))
    with pytest.raises(
        BackendMissing, match=r"^no_such_mod_a is not installed \(.*\); pip install 'stacktok\[hf\]'$"
    ):
        require("no_such_mod_a", "hf")
    assert require("json", "hf").__name__ == "json"
    assert dist_version("no-such-distribution-xyz") == "unknown"
    assert dist_version("pytest") == pytest.__version__
    with pytest.raises(ValueError, match="reads 'model.bin'"):
        Entry(".x", "model.bin")


# ------------------------------------------------------------------ errors
def test_input_error_is_one_line_naming_path_where_what_and_fix() -> None:
    err = InputError(Path("d/config.json"), "line 3", "bad\nvalue\r", "fix it")
    assert str(err) == "d/config.json: line 3: bad\\nvalue\\r; fix it"
    assert (err.path, err.where, err.what, err.fix) == ("d/config.json", "line 3", "bad\nvalue\r", "fix it")
    assert isinstance(err, ValueError)
    assert input_errors() == (
        *(UsageError, InputError, FixtureError, LayoutError, ArtifactError),
        *(UntrustedFileError, FlagError),  # a file refused before reading; --max-file-mb out of range
    )


# ------------------------------------------------------------------ declarations
class Fake:
    """The reference as a backend, bent: ``drift`` is split as ``stand`` (other Unicode tables),
    ``"'ſ"`` encodes as ``"'s"``, decode applies llama.cpp's clean_spaces, specials always allowed.
    Each fake has a version of its own (``Declarations`` caches drift per name@version)."""

    made = 0

    def __init__(self, ref: StackTokenizer, *, name: str = "llama.cpp", version: str = "", drift: str = "",
                 stand: str = "!", long_s: bool = False, clean: bool = False, trusting: bool = False,
                 raises: bool = False, raises_over: int = 0) -> None:  # fmt: skip
        Fake.made += 1
        self.ref, self.name, self.version = ref, name, version or f"0.3.{Fake.made}"
        self.drift, self.stand, self.long_s, self.clean = drift, stand, long_s, clean
        self.trusting, self.raises, self.raises_over = trusting, raises, raises_over

    def encode(self, text: str, *, allow_special: bool = False) -> list[int]:
        if self.raises or (self.raises_over and len(text) > self.raises_over):
            raise RuntimeError("backend crashed")
        if self.long_s:
            text = text.replace("'ſ", "'s")
        if self.drift and self.drift in text:
            stand = text.replace(self.drift, self.stand)
            ref = self.ref
            return [
                i for m in ref._split_re.finditer(stand) for i in ref._bpe(text[m.start() : m.end()].encode())
            ]
        return self.ref.encode(text, allowed_special="all" if allow_special or self.trusting else frozenset())

    def decode_bytes(self, ids: list[int]) -> bytes:
        if self.raises:
            raise RuntimeError("backend crashed")
        got = self.ref.decode_bytes(ids)
        return clean_spaces(got) if self.clean else got


def div(
    id: str, *, backend: str = "llama.cpp", check: str = "encode", versions: str = "*", **kw
) -> Divergence:
    return Divergence(id, backend, check, versions, "reason", "https://example.invalid/issue", **kw)


def probe(text: str, id: str = "p1", category: str = "plain") -> Probe:
    return Probe(id, category, text)


@pytest.fixture(scope="module")
def ref(shipped_tok: StackTokenizer) -> StackTokenizer:
    return shipped_tok


def test_applies_matches_backend_check_and_version() -> None:
    d = div("d", check="*", versions=">=0.3,<0.4")
    assert applies(d, backend="llama.cpp", version="0.3.36", check="decode") is True
    assert applies(d, backend="tiktoken", version="0.3.36", check="decode") is False
    assert applies(d, backend="llama.cpp", version="0.4.0", check="decode") is False
    e = div("e", check="encode")
    assert applies(e, backend="llama.cpp", version="9", check="encode") is True
    assert applies(e, backend="llama.cpp", version="9", check="decode") is False


def test_a_probe_declaration_covers_only_its_probes(ref: StackTokenizer) -> None:
    d = div("huge", probe="huge-*")
    decl = Declarations([div("other", backend="tiktoken", probe="*"), d], ref)
    fake = Fake(ref)
    assert decl.declared(fake, "encode", probe("x", id="huge-1")) is d
    assert decl.declared(fake, "encode", probe("x", id="small-1")) is None
    assert decl.declared(fake, "decode", probe("x", id="huge-1")) is None
    ranged = Declarations(
        [div("old", probe="*", versions="<0.3"), div("new", probe="*", versions=">=0.3,<0.4")], ref
    )
    assert ranged.declared(fake, "encode", probe("x")).id == "new"
    assert ranged.declared(Fake(ref, version="0.2.9"), "encode", probe("x")).id == "old"
    assert ranged.declared(Fake(ref, version="1.0"), "encode", probe("x")) is None


def test_unicode_tables_cover_a_difference_only_when_the_drifting_code_points_explain_it(
    ref: StackTokenizer,
) -> None:
    d = div("tables", cause=UNICODE_TABLES, versions="<0.4")
    decl = Declarations([div("long", cause=LONG_S), d], ref)
    fake = Fake(ref, drift="é")
    assert fake.encode("café au lait") != ref.encode("café au lait")  # the fake really differs
    assert decl.drifts(fake, "é") is True and decl.drifts(fake, "ü") is False
    assert decl.drifting(fake, "über café") == {"é"}
    assert decl.has_cause(fake) is d
    assert decl.declared(fake, "encode", probe("café au lait")) is d
    assert decl.declared(fake, "trusted", probe("café au lait")) is d
    assert decl.declared(fake, "decode", probe("café au lait")) is None  # not a split check
    assert decl.declared(fake, "encode", probe("")) is None
    assert decl.declared(Fake(ref, drift="é", version="0.4.1"), "encode", probe("café")) is None
    # no drifting code point in the text: the difference is not explained by the tables
    assert decl.declared(fake, "encode", probe("über alles")) is None
    assert decl.explained_by_tables(fake, "über alles", trusted=False) is False
    # drifting code points, but the text still differs without them: undeclared
    both = Fake(ref, drift="é", long_s=True)
    assert decl.explained_by_tables(both, "café it'ſ", trusted=False) is False
    assert decl.explained_by_tables(Fake(ref, drift="é", raises=False), "café", trusted=False) is True


def test_trusted_declarations_compare_with_specials_allowed(ref: StackTokenizer) -> None:
    d = div("tables", cause=UNICODE_TABLES)
    decl = Declarations([d], ref)
    fake = Fake(ref, drift="é", trusting=True)  # always reads <|bos|> as the special token
    text = "café <|bos|> x"
    assert decl.declared(fake, "trusted", probe(text)) is d
    assert decl.declared(fake, "encode", probe(text)) is None
    assert decl.explained_by_tables(fake, text, trusted=True) is True
    assert decl.explained_by_tables(fake, text, trusted=False) is False


def test_long_s_covers_only_texts_holding_apostrophe_long_s(ref: StackTokenizer) -> None:
    d = div("long", cause=LONG_S)
    decl = Declarations([div("tables", cause=UNICODE_TABLES, backend="tiktoken"), d], ref)
    fake = Fake(ref, long_s=True)
    assert decl.declared(fake, "encode", probe("it'ſ here")) is d
    assert decl.declared(fake, "trusted", probe("it'ſ <|bos|>")) is d
    trusting = Fake(ref, long_s=True, trusting=True)
    assert decl.declared(trusting, "encode", probe("it'ſ <|bos|>")) is None
    assert decl.declared(trusting, "trusted", probe("it'ſ <|bos|>")) is d
    assert decl.explained_by_long_s(trusting, "it'ſ <|bos|>", trusted=True) is True
    # the ſ is removed, nothing else: a backend that also splits "X" differently still agrees on "it'"
    assert (
        decl.explained_by_long_s(Fake(ref, long_s=True, drift="X", stand="5"), "it'ſ", trusted=False) is True
    )
    assert decl.declared(fake, "encode", probe("it's ſ here")) is None
    assert decl.explained_by_long_s(Fake(ref, long_s=True, drift="é"), "café it'ſ", trusted=False) is False
    assert decl.explained_by_long_s(Fake(ref, raises=True), "it'ſ", trusted=False) is False
    assert Declarations([], ref).declared(fake, "encode", probe("it'ſ")) is None


def test_clean_spaces_covers_decode_differences_that_are_exactly_the_transform(ref: StackTokenizer) -> None:
    d = div("clean", cause=CLEAN_SPACES, check="decode")
    decl = Declarations([div("tables", cause=UNICODE_TABLES), d], ref)
    fake = Fake(ref, clean=True)
    assert decl.declared(fake, "decode", probe("hi , there .")) is d
    assert decl.declared(fake, "decode", probe("hello")) is None  # nothing differs
    assert decl.declared(Fake(ref), "decode", probe("hi , there .")) is None
    assert decl.declared(Fake(ref, raises=True), "decode", probe("hi , there .")) is None
    assert decl.declared(fake, "single_tokens", probe("x")) is None  # declared for decode only
    assert decl.declared(fake, "encode", probe("hi , there .")) is None
    assert decl.explained_by_clean_spaces(Fake(ref, drift="é"), "decode", probe("hi , there .")) is False


def test_clean_spaces_covers_single_tokens_when_every_changed_id_is_the_transform(
    ref: StackTokenizer,
) -> None:
    d = div("clean", cause=CLEAN_SPACES, check="single_tokens")
    decl = Declarations([d], ref)
    assert decl.declared(Fake(ref, clean=True), "single_tokens", probe("")) is d
    assert decl.declared(Fake(ref), "single_tokens", probe("")) is None

    class Garbled(Fake):
        def decode_bytes(self, ids: list[int]) -> bytes:
            return b"?" if ids == [ref.vocab_size - 1] else clean_spaces(self.ref.decode_bytes(ids))

    assert decl.explained_by_clean_spaces(Garbled(ref), "single_tokens", probe("")) is False


def test_any_drift_scans_blocks_then_code_points(ref: StackTokenizer) -> None:
    decl = Declarations([], ref)
    many = "".join(chr(c) for c in range(0x100, 0x100 + 300))  # more than one block of 256
    last = chr(0x100 + 299)
    assert decl.any_drift(Fake(ref, drift=last), [many]) is True
    assert decl.any_drift(Fake(ref, drift="é"), [many]) is False
    assert decl.any_drift(Fake(ref, drift="é"), ["plain ascii", "über"]) is False
    assert decl.any_drift(Fake(ref, drift="é"), ["ascii", "café"]) is True
    assert decl.any_drift(Fake(ref, raises=True), ["café"]) is False  # raising is a difference, not tables
    assert decl.any_drift(Fake(ref, drift="é"), []) is False
    wide = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 600))  # CJK letters; the last is in the 3rd block
    assert decl.any_drift(Fake(ref, drift=chr(0x4E00 + 599)), [wide]) is True
    # a backend that crashes on a whole block still has each code point asked on its own
    assert decl.any_drift(Fake(ref, drift="é", raises_over=10), ["café", "über"]) is True


NEW = "\U0001fae8"  # SHAKING FACE: Unicode 15, newer than Python 3.11's unicodedata (14.0)


def test_is_newer_than_stdlib() -> None:
    assert is_newer_than_stdlib(NEW) is True
    assert is_newer_than_stdlib("a") is False
    assert is_newer_than_stdlib("\u0378") is False  # unassigned everywhere


def test_stale_declarations(ref: StackTokenizer) -> None:
    decls = [
        div("not-ran-first", backend="vllm", probe="*"),
        div("used-first", probe="*"),
        div("long-first", cause=LONG_S),
        div("tables", cause=UNICODE_TABLES),
        div("long", cause=LONG_S),
        div("clean", cause=CLEAN_SPACES, check="decode"),
        div("probe-any", check="*", probe="p-*"),
        div("probe-decode", check="decode", category="huge"),
        div("probe-ranged", probe="p-*", versions=">=0.3,<0.4"),
        div("used", probe="*"),
        div("old", probe="*", versions="<0.1"),
        div("not-ran", backend="vllm", probe="*"),
    ]
    decl = Declarations(decls, ref)
    ran = {"llama.cpp": Fake(ref)}
    probes = [probe(f"x {NEW} , y", id="p-1", category="huge")]
    used = {"used", "used-first"}
    assert decl.stale(ran, used, probes) == ["tables", "clean", "probe-any", "probe-decode", "probe-ranged"]
    drifting = {"llama.cpp": Fake(ref, drift=NEW, stand="a")}
    assert decl.stale(drifting, used, probes) == ["clean", "probe-any", "probe-decode", "probe-ranged"]
    quiet = [probe("plain", id="q-1", category="short")]
    assert decl.stale(ran, used, quiet) == []
    assert decl.stale({}, set(), probes) == []
