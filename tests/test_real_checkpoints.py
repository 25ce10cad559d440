"""The gate on a real checkpoint as its publisher ships it: Llama-3.1-8B-Instruct-shaped.

The directory (:mod:`tests.helpers.real_checkpoint`) is llama.cpp's llama-bpe vocabulary from the
llama-cpp-python sdist, imported and exported with ``stacktok``, then configured as Meta ships
Llama-3.1-8B-Instruct (Meta's template from the sdist, list-valued eos ids,
``clean_up_tokenization_spaces: true``, no ``{% generation %}``, a tokenizer that adds BOS to every
encode); also as transformers 5 re-saves it (``TokenizersBackend``). It passes with every plain
backend; each trap planted into it fails with the row that names it: a template that writes BOS
twice (``config.no_double_bos``), ``<|eot_id|>`` missing from ``generation_config.json``
(``config.eos_stops_turns``), a template that drops ``<|eot_id|>`` after assistant turns
(``chat.turn_end``). What depends on the installed transformers is judged by behaviour: under 4.57
``clean_up_tokenization_spaces`` really rewrites decodes and ``TokenizersBackend`` really does not
load, so those rows fail there and warn under 5.x.

Out of scope: other publishers' checkpoints and the per-engine chat rows (issue 39, items 2-3);
llama-server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.core.checkpoint_template import template_variables
from conformance.core.environment import installed
from conformance.core.template import SAMPLE_CHATS, render_template, sample_messages, try_template

from .conftest import need
from .helpers import llama_vocab
from .helpers import real_checkpoint as rc
from .helpers.gate import failing, run_gate
from .helpers.paths import SHIPPED_HF

pytestmark = [pytest.mark.llama_vocab, pytest.mark.transformers]  # under transformers 4.57.x and 5.x

PLAIN = "reference,tiktoken,tokenizers,transformers,transformers-reload,llama.cpp"
#: probes reaching the settings judged by behaviour: "x != y" is what clean-up rewrites
TEXTS = "x != y , z . I 'm here\nhello world, hello\n<|eot_id|> typed by a user\nnaïve café 中文 🚀\n"
TRANSFORMERS_4 = (installed("transformers") or "5").split(".")[0] == "4"
#: rows that fail on the clean checkpoint only because the installed transformers is 4.x: decode
#: really rewrites "x != y" there (the probe set has it), and TokenizersBackend really does not load
BELOW_5 = {"config.clean_up_spaces[files]"} if TRANSFORMERS_4 else set()


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> rc.Exports:
    for module, extra in (
        ("transformers", "hf"),
        ("tiktoken", "tiktoken"),
        ("gguf", "gguf"),
        ("llama_cpp", "llama"),
    ):
        need(module, extra)
    return rc.export_llama_bpe(tmp_path_factory.mktemp("llama31"), llama_vocab.sdist_or_fail())


@pytest.fixture
def text(tmp_path) -> Path:
    path = tmp_path / "probes.txt"
    path.write_text(TEXTS, encoding="utf-8")
    return path


def gate(ckpt: rc.RealCheckpoint, *extra: str, backends: str, report: Path):
    return run_gate(
        ckpt.directory, "--artifact", str(ckpt.artifact), *extra, backends=backends, report=report
    )


def rows(report: dict) -> dict[str, dict]:
    return {f"{c['check']}[{c['backend']}]": c for c in report["checks"]}


# ------------------------------------------------------------------ as published: a pass
def test_llama31_as_meta_ships_it_passes_with_every_plain_backend(exports, tmp_path) -> None:
    ckpt = rc.llama31(tmp_path / "ckpt", exports)
    run = gate(ckpt, backends=PLAIN, report=tmp_path / "report.json")  # the shipped probes and chats
    assert set(failing(run.report)) == BELOW_5, failing(run.report)
    assert run.code == (1 if BELOW_5 else 0), run.stdout[-3000:]
    got = rows(run.report)
    for backend in PLAIN.split(","):
        assert got[f"conformance.encode[{backend}]"]["status"] == "pass", backend
    # list-valued eos ids are normal; the end of turn is among them; the template ends turns with it
    assert got["config.eos_id[files]"]["status"] == "pass"
    assert "[128001, 128008, 128009]" in got["config.eos_id[files]"]["message"]
    assert got["config.eos_stops_turns[files]"]["status"] == "pass"
    assert got["chat.turn_end[files]"]["message"] == "an assistant turn ends with 128009 <|eot_id|>"
    # no {% generation %}: a warning pointing to a training template, never a failure
    markers = got["chat.generation_markers[files]"]
    assert markers["status"] == "warn" and "_training.jinja" in markers["fix"]
    assert "serving is unaffected" in markers["message"]
    # the tokenizer adds BOS to every encode as the source does, and the template writes it: only
    # the two-step path feeds two, a warning that says who is affected
    bos = got["config.no_double_bos[files]"]
    assert bos["status"] == "warn", bos
    assert (
        "tokenizer(apply_chat_template(chat, tokenize=False)) starts [128000, 128000, ...]" in bos["message"]
    )
    assert "feed one: [128000, 128006, " in bos["message"] and "add_special_tokens=False" in bos["fix"]
    clean = got["config.clean_up_spaces[files]"]
    assert "below transformers 5.0" in clean["message"] or TRANSFORMERS_4, clean
    assert "decode rewrites probe" in clean["message"] and "clean_up_tokenization_spaces" in clean["fix"]


def test_llama31_as_transformers_5_saves_it(exports, text, tmp_path) -> None:
    """``tokenizer_class: TokenizersBackend``: users below 5.0 cannot load it -- a warning where 5.x is
    installed (it loads), a failure where 4.57 is (it really does not)."""
    ckpt = rc.llama31(tmp_path / "ckpt", exports, edits=[rc.saved_by_transformers_5])
    run = gate(ckpt, "--only-user-data", "--text", str(text), backends=PLAIN, report=tmp_path / "r.json")
    loads = rows(run.report)["config.loads_in_4x[files]"]
    assert "transformers 4.57 cannot load tokenizer_class 'TokenizersBackend'" in loads["message"]
    assert "users below 5.0" in loads["message"]
    if TRANSFORMERS_4:
        assert loads["status"] == "fail" and run.code == 1
    else:
        assert loads["status"] == "warn"
        assert run.code == 0 and not failing(run.report), failing(run.report)
        assert rows(run.report)["conformance.encode[transformers-reload]"]["status"] == "pass"


def test_only_the_template_adding_bos_passes(exports, text, tmp_path) -> None:
    ckpt = rc.llama31(tmp_path / "ckpt", exports, edits=[rc.only_template_adds_bos])
    readers = "reference,tokenizers,transformers-reload"  # the backends that read tokenizer.json
    run = gate(ckpt, "--only-user-data", "--text", str(text), backends=readers, report=tmp_path / "r.json")
    assert set(failing(run.report)) == BELOW_5, failing(run.report)
    bos = rows(run.report)["config.no_double_bos[files]"]
    assert bos["status"] == "pass" and "one <|begin_of_text|> on every path" in bos["message"], bos


# ------------------------------------------------------------------ the traps: each fails, named
TRAPS = {
    "template-writes-bos-twice": (
        dict(template_edit=rc.template_doubles_bos),
        "config.no_double_bos[files]",
        ("writes <|begin_of_text|> 2 times", "[128000, 128000, 128006"),
        "write bos_token once",
    ),
    "eot-missing-from-eos": (
        dict(edits=[rc.eos_without_eot]),
        "config.eos_stops_turns[files]",
        ("generation_config.json eos_token_id is [128001, 128008], without 128009 <|eot_id|>",),
        "add 128009 to generation_config.json eos_token_id: [128001, 128008, 128009]",
    ),
    "template-drops-eot": (
        dict(template_edit=rc.template_drops_eot),
        "chat.turn_end[files]",
        ("ends an assistant turn with no special token",),
        "close them with <|eot_id|> as user turns are",
    ),
}


@pytest.mark.parametrize("trap", list(TRAPS))
def test_each_trap_fails_with_the_row_that_names_it(exports, text, trap, tmp_path) -> None:
    build, named, says, fix = TRAPS[trap]
    ckpt = rc.llama31(tmp_path / "ckpt", exports, **build)
    run = gate(
        ckpt, "--only-user-data", "--text", str(text), backends="reference", report=tmp_path / "r.json"
    )
    bad = failing(run.report)
    assert run.code == 1 and set(bad) - BELOW_5 == {named}, sorted(bad)
    assert all(s in bad[named]["message"] for s in says), bad[named]["message"]
    assert bad[named]["fix"].startswith(fix) or fix in bad[named]["fix"], bad[named]["fix"]
    assert "drop" not in bad[named]["fix"]  # never tell an Instruct model to drop its end of turn


# ------------------------------------------------------------------ each engine renders DIR's template
ENGINE_TRAPS = {
    # the GGUF's template renders every conversation differently: llama.cpp's chat row names it
    "gguf-template-differs": (
        dict(gguf_template_edit=rc.gguf_knowledge_date),
        {"conformance.chat[llama.cpp]", "gguf.chat_template[files]"},
        "conformance.chat[llama.cpp]",
        "conv-user-gen",
    ),
    # only tool calls differ, in one engine: the row names the tool-call shape
    "gguf-tool-call-differs": (
        dict(gguf_template_edit=rc.gguf_tool_call_arguments),
        {"conformance.chat[llama.cpp]", "gguf.chat_template[files]"},
        "conformance.chat[llama.cpp]",
        "conv-content-null",
    ),
    # transformers renders chat_template.jinja; tokenizer_config.json's differs (and so does the
    # GGUF's copy of the inline one, which llama.cpp renders)
    "jinja-differs-from-inline": (
        dict(edits=[rc.jinja_differs_from_inline]),
        {"chat.template_files_agree[files]", "gguf.chat_template[files]", "conformance.chat[llama.cpp]"},
        "chat.template_files_agree[files]",
        "render",
    ),
}


@pytest.mark.parametrize("trap", list(ENGINE_TRAPS))
def test_each_engine_trap_fails_with_the_row_that_names_it(exports, text, trap, tmp_path) -> None:
    build, expected, named, says = ENGINE_TRAPS[trap]
    ckpt = rc.llama31(tmp_path / "ckpt", exports, **build)
    engines = "reference,transformers-reload,llama.cpp"  # the shipped probes and conversations
    run = gate(ckpt, backends=engines, report=tmp_path / "r.json")
    bad = failing(run.report)
    assert run.code == 1 and set(bad) - BELOW_5 <= expected and named in bad, sorted(bad)
    assert says in bad[named]["message"], bad[named]["message"]


def test_the_engines_render_every_conversation_of_the_checkpoint(exports, text, tmp_path) -> None:
    """transformers and llama-cpp-python render Meta's template on every conversation shape as the
    reference does (ids compared); the shape Meta's template refuses is named, not failed."""
    ckpt = rc.llama31(tmp_path / "ckpt", exports)
    engines = "reference,transformers-reload,llama.cpp"
    run = gate(ckpt, backends=engines, report=tmp_path / "r.json")
    got = rows(run.report)
    for engine in ("transformers-reload", "llama.cpp"):
        chat = got[f"conformance.chat[{engine}]"]
        assert chat["status"] == "pass" and chat["message"].startswith("16 pass"), chat
        assert "conv-parallel-tool-calls" in chat["message"]  # Meta's template: one tool call at a time
        injection = got[f"conformance.chat_injection[{engine}]"]
        assert injection["status"] == "warn" and "2/2 chat(s)" in injection["message"], injection
    assert got["conformance.chat[reference]"]["status"] == "skip"


def test_a_training_template_gets_its_assistant_masks_compared(exports, tmp_path) -> None:
    """With ``{% generation %}`` in the template, transformers' ``return_assistant_tokens_mask``
    must equal the reference's mask (the same span-to-token rule), conversation by conversation;
    ``chat.generation_markers`` passes."""
    ckpt = rc.llama31(tmp_path / "ckpt", exports, template_edit=rc.template_marks_generation)
    run = gate(ckpt, backends="reference,transformers-reload", report=tmp_path / "r.json")
    got = rows(run.report)
    assert set(failing(run.report)) == BELOW_5, sorted(failing(run.report))
    assert got["chat.generation_markers[files]"]["status"] == "pass", got["chat.generation_markers[files]"]
    chat = got["conformance.chat[transformers-reload]"]
    assert chat["status"] == "pass" and chat["message"].startswith("16 pass"), chat


# ------------------------------------------------------------------ rendered as transformers renders
def test_meta_template_renders_exactly_as_transformers_does(exports, tmp_path) -> None:
    """bos_token/eos_token reach the template (its first token is BOS), tools=None, transformers' tojson."""
    transformers = need("transformers", "hf")
    ckpt = rc.llama31(tmp_path / "ckpt", exports)
    tok = transformers.AutoTokenizer.from_pretrained(ckpt.directory)
    variables = template_variables({"bos_token": tok.bos_token, "eos_token": tok.eos_token})
    for messages, gen in ((sample_messages(0), False), (sample_messages(2), True)):
        want = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
        assert (
            render_template(ckpt.template, messages, add_generation_prompt=gen, variables=variables) == want
        )
        assert want.startswith("<|begin_of_text|><|start_header_id|>system")


def test_tojson_and_strftime_now_are_transformers_own() -> None:
    source = "{{ messages | tojson }} {{ {'b': 1, 'a': '<é>'} | tojson }} {{ strftime_now('%d %b %Y') }}"
    text = render_template(source, [{"role": "user", "content": "x < y & 'é'"}], add_generation_prompt=False)
    assert text == '[{"role": "user", "content": "x < y & \'é\'"}] {"b": 1, "a": "<é>"} 01 Jan 2026'


def test_our_chatml_with_the_special_tokens_renders_the_trained_format() -> None:
    """The shipped template through the renderer *with* its tokenizer's special tokens gives the
    same text as the reference renderer (so the same ids and masks) on every sample chat."""
    import json

    from stacktok_export.chat.chat import render_text

    cfg = json.loads((SHIPPED_HF / "tokenizer_config.json").read_text(encoding="utf-8"))
    variables = template_variables(cfg)
    assert dict(variables)["bos_token"] == "<|bos|>"
    trial = try_template(cfg["chat_template"], variables=variables)
    assert len(trial.renders) == len(SAMPLE_CHATS)
    for i, got in enumerate(trial.renders):
        assert got.text == render_text(sample_messages(i), add_generation_prompt=SAMPLE_CHATS[i][1]), i


# ------------------------------------------------------------------ llama.cpp's own server
@pytest.mark.llama_server
def test_llama_server_serves_the_checkpoint_as_published(exports, tmp_path) -> None:
    """llama-server (built from the sdist) renders Meta's template with its own Jinja engine and
    tokenizes it: every conversation gives the reference's ids or differs exactly by the server's
    documented input rewriting (today's date_string, tool-call arguments parsed, text parts
    joined: declared ``llama-server-chat-input``), and its tokenizer shares llama.cpp's declared
    Unicode-table divergence; the server is stopped with nothing left."""
    from conformance.served.llama_build import HOW, find_llama_server

    if find_llama_server() is None:
        pytest.fail(f"no llama-server binary: {HOW}")
    ckpt = rc.llama31(tmp_path / "ckpt", exports)
    run = gate(ckpt, backends="reference,llama-server", report=tmp_path / "r.json")
    assert run.code == 0 and not failing(run.report), sorted(failing(run.report))
    got = rows(run.report)
    chat = got["conformance.chat[llama-server]"]
    assert chat["status"] == "pass" and "declared (llama-server-chat-input)" in chat["message"], chat
    assert got["conformance.encode[llama-server]"]["status"] == "pass"
    assert got["conformance.chat_injection[llama-server]"]["status"] == "warn"
    assert run.report["versions"]["llama-server"].startswith("b"), run.report["versions"]


@pytest.mark.llama_server
def test_llama_server_fails_on_a_gguf_template_that_renders_tool_calls_differently(exports, tmp_path) -> None:
    from conformance.served.llama_build import HOW, find_llama_server

    if find_llama_server() is None:
        pytest.fail(f"no llama-server binary: {HOW}")
    ckpt = rc.llama31(tmp_path / "ckpt", exports, gguf_template_edit=rc.gguf_tool_call_arguments)
    run = gate(ckpt, backends="reference,llama-server", report=tmp_path / "r.json")
    bad = failing(run.report)
    assert run.code == 1 and "conformance.chat[llama-server]" in bad, sorted(bad)
    assert "tool" in bad["conformance.chat[llama-server]"]["message"], bad["conformance.chat[llama-server]"]
