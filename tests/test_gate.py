"""`stacktok gate`: a catalogue of planted faults, each modelled on a cited field bug.

Every fault must make the gate exit 1 *and* be caught by the named check; the
clean checkpoint must pass with zero failures; a hand-edited file that
behaves identically must pass; the gate must never write into the directory.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from stacktok_export.export import gguf_fmt

from .helpers import (
    GGUF,
    SHIPPED,
    SHIPPED_HF,
    TIKTOKEN,
    build_checkpoint,
    demote_merge,
    edit_json,
    failing,
    json_edit,
    remove,
    run_gate,
    snapshot,
)

pytestmark = pytest.mark.transformers  # runs under transformers 4.57.x and 5.x

FAST = "reference,tiktoken,tokenizers,transformers-reload,llama.cpp"


def make_checkpoint(dest: Path) -> Path:
    """A realistic checkpoint directory: tokenizer files, GGUF, .tiktoken, model configs."""
    return build_checkpoint(dest, exports="inside", model_config=True)


# ------------------------------------------------------------------ mutators
def _swap_tiktoken_ranks(d: Path) -> None:
    path = d / TIKTOKEN
    lines = path.read_bytes().splitlines()
    a, b = lines[300].split(), lines[301].split()
    lines[300], lines[301] = a[0] + b" " + b[1], b[0] + b" " + a[1]
    path.write_bytes(b"\n".join(lines) + b"\n")


def _gguf(**patches) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        from stacktok_export import load_tokenizer

        tok = load_tokenizer(SHIPPED)
        mp = pytest.MonkeyPatch()
        try:
            for name, value in patches.items():
                mp.setattr(gguf_fmt, name, value)
            (d / GGUF).write_bytes(gguf_fmt.gguf_bytes(tok))
        finally:
            mp.undo()

    return mutate


def _gguf_add_bos(d: Path) -> None:
    import gguf

    real = gguf.GGUFWriter.add_add_bos_token
    mp = pytest.MonkeyPatch()
    mp.setattr(gguf.GGUFWriter, "add_add_bos_token", lambda self, value: real(self, True))
    try:
        _gguf()(d)
    finally:
        mp.undo()


def _user_defined_specials(tok) -> list[int]:
    return [1] * len(tok.token_bytes()) + [4] * len(tok.special_to_id)


def _set_added(flag: str, value: bool) -> Callable[[dict], None]:
    def fn(tj: dict) -> None:
        for t in tj["added_tokens"]:
            if t["content"] == "<|end|>":
                t[flag] = value

    return fn


def _jinja(fn: Callable[[str], str]) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        cfg = edit_json(d / "tokenizer_config.json", lambda c: c.update(chat_template=fn(c["chat_template"])))
        (d / "chat_template.jinja").write_text(cfg["chat_template"])

    return mutate


def _no_generation(t: str) -> str:
    return t.replace("{%- generation -%}", "").replace("{%- endgeneration -%}", "")


def _jinja_differs(d: Path) -> None:
    path = d / "chat_template.jinja"
    path.write_text(path.read_text().replace("'<|eos|>'", "''"))


# (name, citation, mutate, a check that must fail, backends to run)
FAULTS = [
    (
        "merge-demoted",
        "tokenizers#1297 / llama.cpp#9692 (merge list damaged in conversion)",
        json_edit("tokenizer.json", demote_merge),
        "conformance.encode[tokenizers]",
        FAST,
    ),
    (
        "tiktoken-ranks-swapped",
        "tiktoken#114 (stale/wrong rank file)",
        _swap_tiktoken_ranks,
        "conformance.encode[tiktoken]",
        FAST,
    ),
    (
        "gguf-pre-llama-bpe",
        "llama.cpp pre-tokenizer side effects (ignore_merges + add-BOS)",
        _gguf(TOKENIZER_PRE="llama-bpe"),
        "gguf.pre[files]",
        FAST,
    ),
    (
        "gguf-pre-gpt2",
        "wrong tokenizer.ggml.pre gave ~40-50% mismatching strings",
        _gguf(TOKENIZER_PRE="gpt-2"),
        "conformance.encode[llama.cpp]",
        FAST,
    ),
    (
        "gguf-specials-user-defined",
        "USER_DEFINED tokens are parsed even with special=False",
        _gguf(token_types=_user_defined_specials),
        "conformance.injection[llama.cpp]",
        FAST,
    ),
    (
        "tokenizer-class-5x-only",
        "transformers#47553 (5.x save_pretrained output fails in 4.57)",
        json_edit("tokenizer_config.json", lambda c: c.update(tokenizer_class="TokenizersBackend")),
        "config.loads_in_4x[files]",
        "reference",
    ),
    (
        "add-bos-token",
        "vLLM PR#16976 (double BOS)",
        json_edit("tokenizer_config.json", lambda c: c.update(add_bos_token=True)),
        "config.no_double_bos[files]",
        "reference",
    ),
    (
        "bos-post-processor",
        "vLLM PR#16976 (post-processor adds BOS behind the template)",
        json_edit(
            "tokenizer.json",
            lambda t: t.update(
                post_processor={
                    "type": "TemplateProcessing",
                    "single": [
                        {"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}},
                    ],
                    "pair": [
                        {"Sequence": {"id": "A", "type_id": 0}},
                        {"Sequence": {"id": "B", "type_id": 1}},
                    ],
                    "special_tokens": {"<|bos|>": {"id": "<|bos|>", "ids": [32759], "tokens": ["<|bos|>"]}},
                }
            ),
        ),
        "config.no_double_bos[files]",
        "reference,transformers-reload",
    ),
    (
        "clean-up-spaces",
        "transformers PR#44914 ('x != y' -> 'x!= y')",
        json_edit("tokenizer_config.json", lambda c: c.update(clean_up_tokenization_spaces=True)),
        "config.clean_up_spaces[files]",
        "reference",
    ),
    (
        "special-normalized",
        "added-token flags: normalized specials are matched after normalization",
        json_edit("tokenizer.json", _set_added("normalized", True)),
        "config.special_flags[files]",
        "reference",
    ),
    (
        "special-lstrip",
        "added-token flags: lstrip swallows the space before <|end|>",
        json_edit("tokenizer.json", _set_added("lstrip", True)),
        "conformance.trusted[tokenizers]",
        FAST,
    ),
    (
        "special-not-special",
        "special=false: <|end|> leaks into decoded text / is not skipped",
        json_edit("tokenizer.json", _set_added("special", False)),
        "config.special_flags[files]",
        "reference",
    ),
    (
        "eos-not-end-of-turn",
        "vllm#4180 (generation does not stop at <|end|>)",
        json_edit("generation_config.json", lambda g: g.update(eos_token_id=32760)),
        "config.eos_stops_turns[files]",
        "reference",
    ),
    (
        "pad-is-eos",
        "TRL#1623 (pad == eos masks eos out of the loss)",
        json_edit("tokenizer_config.json", lambda c: c.update(pad_token="<|eos|>")),
        "config.pad_not_eos[files]",
        "reference",
    ),
    (
        "vocab-size-short",
        "embedding smaller than the vocabulary",
        json_edit("config.json", lambda c: c.update(vocab_size=32000)),
        "config.vocab_size[files]",
        "reference",
    ),
    (
        "no-generation-markers",
        "TRL PR#4201 (assistant-only loss trains on nothing)",
        _jinja(_no_generation),
        "conformance.chat[transformers-reload]",
        "reference,transformers-reload",
    ),
    (
        "template-files-differ",
        "transformers prefers chat_template.jinja over the inline template",
        _jinja_differs,
        "chat.template_files_agree[files]",
        "reference",
    ),
    (
        "context-truncated",
        "model_max_length below the served context",
        json_edit("tokenizer_config.json", lambda c: c.update(model_max_length=2048)),
        "config.model_max_length[files]",
        "reference",
    ),
    (
        "prefix-space",
        "ByteLevel add_prefix_space=true shifts every first word",
        json_edit(
            "tokenizer.json", lambda t: t["pre_tokenizer"]["pretokenizers"][1].update(add_prefix_space=True)
        ),
        "conformance.encode[tokenizers]",
        FAST,
    ),
    (
        "nfc-normalizer",
        "a normalizer rewrites combining marks before tokenizing",
        json_edit("tokenizer.json", lambda t: t.update(normalizer={"type": "NFC"})),
        "conformance.encode[tokenizers]",
        FAST,
    ),
    (
        "gguf-adds-bos",
        "llama.cpp add_bos on top of the template's <|bos|> (vLLM PR#16976 analogue)",
        _gguf_add_bos,
        "gguf.add_bos[files]",
        "reference",
    ),
]


@pytest.mark.parametrize("name,cite,mutate,check,backends", FAULTS, ids=[f[0] for f in FAULTS])
def test_planted_fault_is_caught_by_its_check(
    tmp_path, gate_files, name, cite, mutate, check, backends
) -> None:
    ckpt = build_checkpoint(tmp_path / "ckpt", exports="inside", model_config=True, edits=[mutate])
    before = snapshot(ckpt)
    run = run_gate(ckpt, data=gate_files, backends=backends, report=True)
    code, report = run.code, run.report
    assert code == 1, f"{name} ({cite}) was not caught"
    assert check in failing(report), f"{name}: expected {check}, got {sorted(failing(report))}"
    assert snapshot(ckpt) == before  # the gate never writes into what it checks


def test_clean_checkpoint_passes_with_no_false_alarm(tmp_path, gate_files) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    before = snapshot(ckpt)
    junit = gate_files.out / "clean.xml"
    md = gate_files.out / "clean.md"
    run = run_gate(
        ckpt, "--junit", str(junit), "--markdown", str(md), data=gate_files, backends=FAST, report=True
    )
    code, report = run.code, run.report
    assert code == 0, sorted(failing(report))
    assert report["verdict"] == "PASS" and not failing(report)
    assert snapshot(ckpt) == before
    suite = ET.parse(junit).getroot().find("testsuite")
    assert int(suite.get("tests")) == len(report["checks"]) and suite.get("failures") == "0"
    assert "Tokenizer release gate: PASS" in md.read_text()


def test_identically_behaving_hand_edit_passes(tmp_path, gate_files) -> None:
    """Re-serialized tokenizer.json (pair merges, other layout): provenance warns, behaviour passes."""
    ckpt = make_checkpoint(tmp_path / "ckpt")
    edit_json(
        ckpt / "tokenizer.json",
        lambda tj: tj["model"].update(merges=[m.split(" ") for m in tj["model"]["merges"]]),
        indent=None,
        ensure_ascii=True,
        sort_keys=True,
    )
    run = run_gate(ckpt, data=gate_files, backends=FAST, report=True)
    code, report = run.code, run.report
    assert code == 0, sorted(failing(report))
    warn = [c for c in report["checks"] if c["check"] == "provenance.files"][0]
    assert warn["status"] == "warn" and "tokenizer.json" in warn["message"]


def test_required_backend_that_cannot_run_is_incomplete_at_once(tmp_path, gate_files) -> None:
    """``--require`` is decided before any check runs (issue 20): a required backend without its
    file is INCOMPLETE (exit 4) within seconds, naming why, and nothing is reported as checked."""
    ckpt = build_checkpoint(tmp_path / "ckpt", exports="inside", model_config=True, edits=[remove(GGUF)])
    report = tmp_path / "report.json"
    start = time.perf_counter()
    run = run_gate(
        ckpt, "--require", "llama.cpp", "--json", str(report), data=gate_files, backends="reference,llama.cpp"
    )
    assert run.code == 4
    assert time.perf_counter() - start < 30  # stopped before any backend ran (the full run takes minutes)
    assert "INCOMPLETE: required backend llama.cpp cannot run: no .gguf in the directory" in run.stderr
    assert "verdict:" not in run.stdout and not report.exists()


def test_gate_refuses_to_write_into_the_directory(tmp_path) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    run = run_gate(ckpt, "--json", str(ckpt / "report.json"), quiet=False)
    assert run.code == 2
    assert "never writes into" in run.stderr


def test_not_a_tokenizer_directory_exits_2(tmp_path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    run = run_gate(empty, quiet=False, capture=capsys)
    assert run.code == 2
    assert "no tokenizer.json" in run.stderr


def test_shipped_directory_passes_the_full_gate(gate_files) -> None:
    """The README's main job, on the shipped probes and chats, every local backend."""
    run = run_gate(
        SHIPPED_HF,
        "--artifact",
        str(SHIPPED),
        backends=FAST + ",transformers",
        report=gate_files.report("shipped"),
    )
    assert run.code == 0, sorted(failing(run.report))


def test_reports_are_deterministic(tmp_path, gate_files, monkeypatch) -> None:
    """Same inputs -> byte-identical JSON and Markdown (sorted keys; no wall times except the
    report's ``run`` block, pinned by SOURCE_DATE_EPOCH)."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764633600")
    ckpt = make_checkpoint(tmp_path / "ckpt")
    outs = []
    for n in range(2):
        js, md = gate_files.out / f"det{n}.json", gate_files.out / f"det{n}.md"
        only = ("--only-user-data", "--probes", str(gate_files.probes))
        run = run_gate(
            ckpt, *only, "--markdown", str(md), backends="reference,tokenizers,tiktoken", report=js
        )
        assert run.code == 0
        outs.append((js.read_bytes(), md.read_bytes()))
    assert outs[0] == outs[1]


# ------------------------------------------------------------------ issue 20's examples
def _hide(monkeypatch, *modules: str) -> None:
    """Make ``modules`` look uninstalled (the gate looks them up, the adapters import them)."""
    import importlib.util
    import sys

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n in modules else real(n, *a))
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def test_missing_backends_make_the_shipped_directory_incomplete_unless_skipped(
    tmp_path, gate_files, monkeypatch
) -> None:
    """README set-up command 1 used to print PASS with vLLM and TRL not checked, exit 0."""
    _hide(monkeypatch, "vllm", "trl")
    backends = "reference,tokenizers,vllm,trl"
    run = run_gate(SHIPPED_HF, data=gate_files, backends=backends, report=True)
    assert run.code == 4, run.stdout[-2000:]
    assert run.report["verdict"].startswith(
        "INCOMPLETE — not checked: vllm (not installed), trl (not installed)"
    )
    skipped = run_gate(SHIPPED_HF, "--skip", "vllm,trl", data=gate_files, backends=backends, report=True)
    assert skipped.code == 0 and skipped.report["verdict"] == "PASS"
    assert skipped.report["excluded"][-2:] == ["vllm", "trl"]
    assert "excluded by name (--skip/--backends): " in skipped.stdout


def test_gguf_and_tiktoken_only_pass_with_the_hf_readers_not_applicable(tmp_path, gate_files) -> None:
    """Every file present is read by a backend that ran: PASS, naming what had nothing to read."""
    (tmp_path / "ckpt").mkdir()
    ckpt = build_checkpoint(tmp_path / "ckpt", source=None, exports="inside")
    run = run_gate(ckpt, data=gate_files, backends="reference,tiktoken,tokenizers,llama.cpp", report=True)
    assert run.code == 0, run.stdout[-2000:]
    assert run.report["verdict"] == "PASS — not applicable: tokenizers (no tokenizer.json in the directory)"
