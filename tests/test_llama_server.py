"""llama.cpp's own ``llama-server`` as an engine: started on a tiny model around a real vocabulary.

The model GGUF is :func:`conformance.served.tiny_gguf.write_model_gguf` around llama.cpp's
``ggml-vocab-llama-bpe.gguf`` (Llama-3's 128,256-entry vocabulary, from the llama-cpp-python
sdist, tests/helpers/llama_vocab.py) with Meta's Llama-3.1 chat template
(``models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja``). Real processes, no mocks:

- ``/tokenize`` of the vocabulary's ``.inp`` texts equals the ``.out`` ground truth (what
  Hugging Face's tokenizer gave);
- ``/apply-template`` of a two-turn chat equals what jinja2 renders with transformers' settings,
  once given the same ``date_string`` -- the difference without it (the server passes today's
  date; transformers leaves the template's default) is asserted, not hidden;
- a template that raises on a conversation shape is an error naming its message for that shape,
  and the server keeps answering;
- the server stops with no process left.

The binary is ``$STACKTOK_LLAMA_SERVER`` or the cache :mod:`conformance.served.llama_build`
fills; without one these tests FAIL saying how to build it (``STACKTOK_LLAMA_SERVER_OPTIONAL=1``
skips them instead). Marked ``llama_server``. Out of scope: generation (the weights are noise).
"""

from __future__ import annotations

import datetime
import json
import os
import tarfile
from pathlib import Path

import pytest

from conformance.served.llama_build import HOW, find_llama_server
from conformance.served.llama_server import LlamaRequestError, LlamaServerError, llama_server
from conformance.served.processes import proc_table
from conformance.served.tiny_gguf import write_model_gguf

from .helpers import llama_vocab

pytestmark = pytest.mark.llama_server

LLAMA31 = "meta-llama-Llama-3.1-8B-Instruct"
CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi there, café ☕?"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Say <|eot_id|> twice\n\n  please "},
]
#: Gemma-2's role check, the shape of many shipped templates: raises unless roles alternate.
ALTERNATING = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] }}<|eot_id|>{% endfor %}"
)


def binary_or_fail() -> Path:
    found = find_llama_server()
    if found is None:
        if os.environ.get("STACKTOK_LLAMA_SERVER_OPTIONAL") == "1":
            pytest.skip("no llama-server binary and STACKTOK_LLAMA_SERVER_OPTIONAL=1")
        env = os.environ.get("STACKTOK_LLAMA_SERVER")
        where = f"STACKTOK_LLAMA_SERVER={env} is not an executable file" if env else "no cached llama-server"
        pytest.fail(f"{where}: {HOW}", pytrace=False)
    return found


def render_like_transformers(template: str, messages: list[dict], **context) -> str:
    """jinja2 with transformers' ``apply_chat_template`` settings (sandbox, trim/lstrip blocks,
    loopcontrols, ``{% generation %}`` blocks rendered as their body, ``tojson`` without ASCII
    escapes, ``raise_exception``, ``strftime_now``, ``tools``/``documents`` None when not given).
    Checked equal to transformers 5.25's ``render_jinja_template`` on the sdist's 70 templates."""
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):  # transformers' AssistantTracker, without the mask bookkeeping
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", Generation]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    context = {"tools": None, "documents": None, **context}  # transformers passes both, None when absent
    return env.from_string(template).render(messages=messages, **context)


@pytest.fixture(scope="module")
def binary() -> Path:
    return binary_or_fail()


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    return llama_vocab.models_or_fail(tmp_path_factory)


@pytest.fixture(scope="module")
def llama31(models) -> str:
    sdist = llama_vocab.sdist()
    assert sdist is not None  # models_or_fail found it
    wanted = f"/{llama_vocab.MODELS}/templates/{LLAMA31}.jinja"
    with tarfile.open(sdist) as tar:
        member = next((m for m in tar if m.isfile() and f"/{m.name}".endswith(wanted)), None)
        assert member is not None, f"{sdist.name} has no {wanted}"
        return tar.extractfile(member).read().decode("utf-8")


@pytest.fixture(scope="module")
def model_gguf(models, llama31, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("llama-server") / "llama3-tiny.gguf"
    return write_model_gguf(models / "ggml-vocab-llama-bpe.gguf", out, chat_template=llama31)


@pytest.fixture(scope="module")
def server(binary, model_gguf):
    with llama_server(binary, model_gguf) as srv:
        yield srv
    assert srv.stray == [], f"llama-server left processes {srv.stray}"


def test_model_gguf_is_deterministic_and_keeps_the_tokenizer(models, model_gguf, llama31, tmp_path) -> None:
    import gguf

    again = write_model_gguf(
        models / "ggml-vocab-llama-bpe.gguf", tmp_path / "again.gguf", chat_template=llama31
    )
    assert again.read_bytes() == model_gguf.read_bytes()
    src = gguf.GGUFReader(models / "ggml-vocab-llama-bpe.gguf")  # ~10 s for 400k strings
    written = model_gguf.read_bytes()

    def raw(key: str) -> bytes:  # the key's bytes in the source file: name, type, value
        fld = src.fields[key]
        return bytes(src.data[fld.offset : fld.offset + sum(p.nbytes for p in fld.parts)])

    keys = [k for k in src.fields if k.startswith("tokenizer.")]
    assert len(keys) == 7 and all(raw(k) in written for k in keys)
    assert llama31.encode() in written
    assert len(written) < 24 * 2**20  # 128,256 x 64 f16 embedding rows and the merges


def test_props_report_the_vocabulary_and_template(server, llama31) -> None:
    props = server.props()
    # the source less its one trailing newline (the lexer drops it, as jinja2's keep_trailing_newline=False)
    assert props["chat_template"] == llama31.removesuffix("\n")
    assert (props["bos_token"], props["bos_id"]) == ("<|begin_of_text|>", 128000)
    assert (props["eos_token"], props["eos_id"]) == ("<|end_of_text|>", 128001)
    assert server.version


def test_tokenize_equals_the_hugging_face_ground_truth(server, models) -> None:
    cases = llama_vocab.cases(models, "llama-bpe")
    assert len(cases) > 30
    bad = []
    for text, want in cases:
        got = server.tokenize(text, add_special=False, parse_special=False)
        if got != want:
            bad.append((text, got, want))
    assert not bad, f"{len(bad)} of {len(cases)} texts differ; first: {bad[0]}"


def test_special_tokens_follow_the_request_flags(server) -> None:
    text = "a<|eot_id|>b"
    plain = server.tokenize(text, add_special=False, parse_special=False)
    parsed = server.tokenize(text, add_special=False, parse_special=True)
    assert 128009 not in plain and 128009 in parsed
    assert server.tokenize(text, add_special=True, parse_special=True) == [128000, *parsed]
    assert server.detokenize(parsed) == text
    assert (
        server.detokenize(server.tokenize("café ☕ 日本", add_special=False, parse_special=False))
        == "café ☕ 日本"
    )


@pytest.mark.parametrize("gen", [True, False], ids=["generation-prompt", "no-generation-prompt"])
def test_apply_template_equals_jinja2(server, llama31, gen) -> None:
    date = {"date_string": "26 Jul 2024"}
    got = server.apply_template(CHAT, add_generation_prompt=gen, **date)
    want = render_like_transformers(
        llama31,
        CHAT,
        add_generation_prompt=gen,
        bos_token="<|begin_of_text|>",
        eos_token="<|end_of_text|>",
        **date,
    )
    # the server strips the BOS string the template writes: the vocabulary adds BOS when tokenizing
    assert want.startswith("<|begin_of_text|>") and not got.startswith("<|begin_of_text|>")
    assert got == want.removeprefix("<|begin_of_text|>")
    ids = server.tokenize(got, add_special=True, parse_special=True)
    assert ids == server.tokenize(want, add_special=False, parse_special=True)


def test_apply_template_passes_todays_date_where_transformers_does_not(server, llama31) -> None:
    """A real difference: llama.cpp passes ``date_string`` (today); transformers passes none, so the
    template's default ("26 Jul 2024") is rendered."""
    got = server.apply_template(CHAT[1:2], add_generation_prompt=True)
    want = render_like_transformers(
        llama31, CHAT[1:2], add_generation_prompt=True, bos_token="<|begin_of_text|>"
    )
    assert "Today Date: 26 Jul 2024" in want
    today = datetime.datetime.now().strftime("%d %b %Y")
    yesterday = (datetime.datetime.now() - datetime.timedelta(days=1)).strftime("%d %b %Y")  # midnight
    assert f"Today Date: {today}" in got or f"Today Date: {yesterday}" in got, got[:200]


def test_a_raising_template_is_an_error_for_that_shape(binary, model_gguf, tmp_path) -> None:
    template = tmp_path / "alternating.jinja"
    template.write_text(ALTERNATING, encoding="utf-8")
    turns = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    with llama_server(binary, model_gguf, extra_args=("--chat-template-file", str(template))) as srv:
        assert srv.apply_template(turns, add_generation_prompt=False).endswith("b<|eot_id|>")
        with pytest.raises(LlamaRequestError) as err:
            srv.apply_template([turns[0], turns[0]], add_generation_prompt=True)
        assert err.value.code in (400, 500)
        assert "Conversation roles must alternate" in err.value.message
        assert "Conversation roles must alternate" in str(err.value)
        assert srv.tokenize("still up", add_special=False, parse_special=False)  # the server stays up
    assert srv.stray == []


def test_the_server_stops_and_leaves_no_process(binary, model_gguf) -> None:
    with llama_server(binary, model_gguf) as srv:
        pid = srv.pid
        assert pid in proc_table()
    assert srv.stray == [] and not srv.killed
    assert pid not in proc_table() or proc_table()[pid][0] == "Z"
    assert not any(srv.pid in (pgid, sid) for _, (_, _, pgid, sid, _) in proc_table().items())
    assert srv.stop_seconds is not None and srv.stop_seconds < 15


def test_a_model_that_does_not_load_is_a_start_error_with_the_log(binary, models, tmp_path) -> None:
    """The vocabulary-only GGUF itself has no weights: the server exits; the error carries its log."""
    with pytest.raises(LlamaServerError) as err:
        with llama_server(binary, models / "ggml-vocab-llama-bpe.gguf", start_timeout=60, log_dir=tmp_path):
            pass
    print(err.value)
    assert "exited with code" in str(err.value) and "llama-server" in str(err.value)
    assert err.value.server is not None and err.value.server.stray == []
    assert err.value.server.log_path.is_file()  # a failed start keeps its log


def test_a_machine_without_the_binary_reports_llama_server_missing(monkeypatch, tmp_path) -> None:
    """No binary: the gate's llama-server row is MISSING with how to build it, the verdict
    INCOMPLETE (exit 4) -- never passed."""
    import stacktok_cli

    from .helpers.paths import SHIPPED_HF

    monkeypatch.setenv("STACKTOK_LLAMA_SERVER", str(tmp_path / "no-such-binary"))
    text = tmp_path / "t.txt"
    text.write_text("hello world\n", encoding="utf-8")
    report = tmp_path / "r.json"
    argv = ["gate", str(SHIPPED_HF), "--backends", "reference,llama-server", "--only-user-data"]
    code = stacktok_cli.main([*argv, "--text", str(text), "--quiet", "--json", str(report)])
    doc = json.loads(report.read_text())
    row = next(c for c in doc["checks"] if c["backend"] == "llama-server")
    assert code == 4 and doc["verdict"].startswith("INCOMPLETE"), doc["verdict"]
    assert "llama-server (not installed)" in doc["verdict"]
    assert row["check"] == "conformance" and row["status"] == "missing", row
    assert "conformance.served.llama_build" in row["message"]


@pytest.mark.parametrize("vocab", ["llama-spm", "bert-bge", "gpt-2", "command-r"])
def test_the_fast_key_reader_writes_the_model_gguf_readers_would(models, vocab, tmp_path) -> None:
    """The tokenizer keys read by stacktok's own walker give the very bytes the keys read by
    gguf-py's GGUFReader give (strings as raw bytes): a SentencePiece, a WordPiece and two BPE
    vocabularies."""
    from conformance.served import tiny_gguf

    src = models / f"ggml-vocab-{vocab}.gguf"
    fast = tiny_gguf.write_model_gguf(src, tmp_path / "fast.gguf")
    keys = tiny_gguf._raw_tokenizer_keys(src)
    assert keys.keys() == tiny_gguf.read_tokenizer_keys(src).keys()
    original = tiny_gguf.read_tokenizer_keys
    try:
        tiny_gguf.read_tokenizer_keys = lambda _path: keys
        slow = tiny_gguf.write_model_gguf(src, tmp_path / "slow.gguf")
    finally:
        tiny_gguf.read_tokenizer_keys = original
    assert fast.read_bytes() == slow.read_bytes()
