"""`stacktok gate`: a catalogue of planted faults, each modelled on a cited field bug.

Every fault must make the gate exit 1 *and* be caught by the named check; the
clean checkpoint must pass with zero failures; a hand-edited file that
behaves identically must pass; the gate must never write into the directory.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from stacktok_cli import build_parser
from stacktok_export.export import gguf_fmt

from .conftest import ROOT, SHIPPED, SHIPPED_HF
from .strings import HARD_STRINGS

pytestmark = pytest.mark.transformers  # runs under transformers 4.57.x and 5.x

FAST = "reference,tiktoken,tokenizers,transformers-reload,llama.cpp"
CHATS = [
    {
        "id": "c-sys",
        "add_generation_prompt": False,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
        ],
    },
    {
        "id": "c-tool",
        "add_generation_prompt": True,
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "tool_call", "content": '{"city": "Oslo"}'},
            {"role": "tool_result", "content": '{"c": -3}'},
        ],
    },
]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gate-data")
    probes = d / "probes.jsonl"
    texts = HARD_STRINGS + ["x != y , z", " Việt", "don't DON'T"]
    probes.write_text(
        "".join(json.dumps({"id": f"t-{i}", "category": "t", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    chats = d / "chats.jsonl"
    chats.write_text("".join(json.dumps(c) + "\n" for c in CHATS))
    return {"probes": probes, "chats": chats, "out": d}


def make_checkpoint(dest: Path) -> Path:
    """A realistic checkpoint directory: tokenizer files, GGUF, .tiktoken, model configs."""
    shutil.copytree(SHIPPED_HF, dest)
    for suffix in (".gguf", ".tiktoken"):
        shutil.copy(ROOT / "tokenizer" / f"stack100m-32768{suffix}", dest / f"stack100m-32768{suffix}")
    (dest / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "vocab_size": 32768,
                "bos_token_id": 32759,
                "eos_token_id": 32760,
                "pad_token_id": 32761,
            },
            indent=2,
        )
    )
    (dest / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 32759, "eos_token_id": [32760, 32765], "pad_token_id": 32761}, indent=2)
    )
    return dest


def run_gate(directory: Path, data: dict[str, Path], *extra: str, backends: str = FAST) -> tuple[int, dict]:
    report = data["out"] / f"report-{hashlib.sha1(str(directory).encode()).hexdigest()[:8]}.json"
    args = build_parser().parse_args(
        [
            "gate",
            str(directory),
            "--only-user-data",
            "--quiet",
            "--probes",
            str(data["probes"]),
            "--chats",
            str(data["chats"]),
            "--backends",
            backends,
            "--json",
            str(report),
            *extra,
        ]
    )
    code = args.func(args)
    return code, json.loads(report.read_text())


def failing(report: dict) -> set[str]:
    return {f"{c['check']}[{c['backend']}]" for c in report["checks"] if c["status"] == "fail"}


def snapshot(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


# ------------------------------------------------------------------ mutators
def _edit_json(name: str, fn: Callable[[dict], None]) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        path = d / name
        data = json.loads(path.read_text())
        fn(data)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False))

    return mutate


def _demote_merge(tj: dict) -> None:
    merges = tj["model"]["merges"]
    merges.append(merges.pop(merges.index("Ġ t")))


def _swap_tiktoken_ranks(d: Path) -> None:
    path = d / "stack100m-32768.tiktoken"
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
            (d / "stack100m-32768.gguf").write_bytes(gguf_fmt.gguf_bytes(tok))
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
        cfg = json.loads((d / "tokenizer_config.json").read_text())
        cfg["chat_template"] = fn(cfg["chat_template"])
        (d / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
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
        _edit_json("tokenizer.json", _demote_merge),
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
        _edit_json("tokenizer_config.json", lambda c: c.update(tokenizer_class="TokenizersBackend")),
        "config.loads_in_4x[files]",
        "reference",
    ),
    (
        "add-bos-token",
        "vLLM PR#16976 (double BOS)",
        _edit_json("tokenizer_config.json", lambda c: c.update(add_bos_token=True)),
        "config.no_double_bos[files]",
        "reference",
    ),
    (
        "bos-post-processor",
        "vLLM PR#16976 (post-processor adds BOS behind the template)",
        _edit_json(
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
        _edit_json("tokenizer_config.json", lambda c: c.update(clean_up_tokenization_spaces=True)),
        "config.clean_up_spaces[files]",
        "reference",
    ),
    (
        "special-normalized",
        "added-token flags: normalized specials are matched after normalization",
        _edit_json("tokenizer.json", _set_added("normalized", True)),
        "config.special_flags[files]",
        "reference",
    ),
    (
        "special-lstrip",
        "added-token flags: lstrip swallows the space before <|end|>",
        _edit_json("tokenizer.json", _set_added("lstrip", True)),
        "conformance.trusted[tokenizers]",
        FAST,
    ),
    (
        "special-not-special",
        "special=false: <|end|> leaks into decoded text / is not skipped",
        _edit_json("tokenizer.json", _set_added("special", False)),
        "config.special_flags[files]",
        "reference",
    ),
    (
        "eos-not-end-of-turn",
        "vllm#4180 (generation does not stop at <|end|>)",
        _edit_json("generation_config.json", lambda g: g.update(eos_token_id=32760)),
        "config.eos_stops_turns[files]",
        "reference",
    ),
    (
        "pad-is-eos",
        "TRL#1623 (pad == eos masks eos out of the loss)",
        _edit_json("tokenizer_config.json", lambda c: c.update(pad_token="<|eos|>")),
        "config.pad_not_eos[files]",
        "reference",
    ),
    (
        "vocab-size-short",
        "embedding smaller than the vocabulary",
        _edit_json("config.json", lambda c: c.update(vocab_size=32000)),
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
        _edit_json("tokenizer_config.json", lambda c: c.update(model_max_length=2048)),
        "config.model_max_length[files]",
        "reference",
    ),
    (
        "prefix-space",
        "ByteLevel add_prefix_space=true shifts every first word",
        _edit_json(
            "tokenizer.json", lambda t: t["pre_tokenizer"]["pretokenizers"][1].update(add_prefix_space=True)
        ),
        "conformance.encode[tokenizers]",
        FAST,
    ),
    (
        "nfc-normalizer",
        "a normalizer rewrites combining marks before tokenizing",
        _edit_json("tokenizer.json", lambda t: t.update(normalizer={"type": "NFC"})),
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
def test_planted_fault_is_caught_by_its_check(tmp_path, data, name, cite, mutate, check, backends) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    mutate(ckpt)
    before = snapshot(ckpt)
    code, report = run_gate(ckpt, data, backends=backends)
    assert code == 1, f"{name} ({cite}) was not caught"
    assert check in failing(report), f"{name}: expected {check}, got {sorted(failing(report))}"
    assert snapshot(ckpt) == before  # the gate never writes into what it checks


def test_clean_checkpoint_passes_with_no_false_alarm(tmp_path, data) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    before = snapshot(ckpt)
    junit = data["out"] / "clean.xml"
    md = data["out"] / "clean.md"
    code, report = run_gate(ckpt, data, "--junit", str(junit), "--markdown", str(md))
    assert code == 0, sorted(failing(report))
    assert report["verdict"] == "PASS" and not failing(report)
    assert snapshot(ckpt) == before
    suite = ET.parse(junit).getroot().find("testsuite")
    assert int(suite.get("tests")) == len(report["checks"]) and suite.get("failures") == "0"
    assert "Tokenizer release gate: PASS" in md.read_text()


def test_identically_behaving_hand_edit_passes(tmp_path, data) -> None:
    """Re-serialized tokenizer.json (pair merges, other layout): provenance warns, behaviour passes."""
    ckpt = make_checkpoint(tmp_path / "ckpt")
    path = ckpt / "tokenizer.json"
    tj = json.loads(path.read_text())
    tj["model"]["merges"] = [m.split(" ") for m in tj["model"]["merges"]]
    path.write_text(json.dumps(tj, indent=None, sort_keys=True))
    code, report = run_gate(ckpt, data)
    assert code == 0, sorted(failing(report))
    warn = [c for c in report["checks"] if c["check"] == "provenance.files"][0]
    assert warn["status"] == "warn" and "tokenizer.json" in warn["message"]


def test_required_missing_backend_exits_2(tmp_path, data) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    (ckpt / "stack100m-32768.gguf").unlink()
    code, report = run_gate(ckpt, data, "--require", "llama.cpp", backends="reference,llama.cpp")
    assert code == 2
    rows = [c for c in report["checks"] if c["backend"] == "llama.cpp"]
    assert rows and all(c["status"] == "skip" for c in rows)  # no .gguf: not checked, never passed
    assert "not checked: llama.cpp (no .gguf file in the directory)" in report["verdict"]


def test_gate_refuses_to_write_into_the_directory(tmp_path, data, capsys) -> None:
    ckpt = make_checkpoint(tmp_path / "ckpt")
    args = build_parser().parse_args(["gate", str(ckpt), "--json", str(ckpt / "report.json")])
    assert args.func(args) == 2
    assert "never writes into" in capsys.readouterr().err


def test_not_a_tokenizer_directory_exits_2(tmp_path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    args = build_parser().parse_args(["gate", str(empty)])
    assert args.func(args) == 2
    assert "no tokenizer.json" in capsys.readouterr().err


def test_shipped_directory_passes_the_full_gate(data) -> None:
    """The README's main job, on the shipped probes and chats, every local backend."""
    report = data["out"] / "shipped.json"
    args = build_parser().parse_args(
        [
            "gate",
            str(SHIPPED_HF),
            "--quiet",
            "--json",
            str(report),
            "--artifact",
            str(SHIPPED),
            "--backends",
            FAST + ",transformers",
        ]
    )
    assert args.func(args) == 0, sorted(failing(json.loads(report.read_text())))


def test_reports_are_deterministic(tmp_path, data) -> None:
    """Same inputs -> byte-identical JSON and Markdown (no wall times, sorted keys)."""
    ckpt = make_checkpoint(tmp_path / "ckpt")
    outs = []
    for n in range(2):
        js, md = data["out"] / f"det{n}.json", data["out"] / f"det{n}.md"
        args = build_parser().parse_args(
            [
                "gate",
                str(ckpt),
                "--only-user-data",
                "--quiet",
                "--probes",
                str(data["probes"]),
                "--backends",
                "reference,tokenizers,tiktoken",
                "--json",
                str(js),
                "--markdown",
                str(md),
            ]
        )
        assert args.func(args) == 0
        outs.append((js.read_bytes(), md.read_bytes()))
    assert outs[0] == outs[1]
