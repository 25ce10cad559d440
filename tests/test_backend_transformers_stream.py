"""transformers' stream windows skip ``decode``'s ``to_py_obj`` only where that changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.backends._base import text_stream
from conformance.backends.transformers_backend import TransformersBackend, stock_window_decode
from conformance.checks.loading import load_named
from conformance.core.fixtures import load_probes
from conformance.core.layout import Exports

from .conftest import need

pytestmark = pytest.mark.transformers

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT / "tokenizer"
EXPORTS = Exports.discover(TOKENIZER / "stack100m-32768-hf", artifact=TOKENIZER / "stack100m-32768.json")


@pytest.mark.parametrize("name", ["transformers", "transformers-reload"])
def test_stream_equals_the_public_decode_on_every_probe(name: str) -> None:
    need("transformers", "hf")
    backend = load_named(name, EXPORTS).backend
    assert isinstance(backend, TransformersBackend)
    assert backend._window_decode is not None  # the stock classes take the short path
    reference = load_named("reference", EXPORTS).backend
    public = backend.decode_text  # tok.decode(...), the public call
    for probe in load_probes(ROOT / "fixtures" / "probes.jsonl")[::7]:
        ids = reference.encode(probe.text, allow_special=True)[:400]  # special ids too
        assert backend.stream(ids) == text_stream(public, tuple(ids)), probe.id


def test_a_class_that_overrides_decode_is_streamed_through_it() -> None:
    need("transformers", "hf")
    backend = load_named("transformers", EXPORTS).backend
    base = type(backend.tok)

    def shout(self, ids, **kw):
        return base.decode(self, ids, **kw).upper()

    shouted = type("Shouting", (base,), {"decode": shout})
    tok = backend.tok
    tok.__class__ = shouted
    try:
        assert stock_window_decode(tok) is None
        loud = TransformersBackend(tok, name="transformers", version="x")
        ids = load_named("reference", EXPORTS).backend.encode("hello world", allow_special=False)
        assert "".join(loud.stream(ids)) == "HELLO WORLD"
    finally:
        tok.__class__ = base
