"""Is there a llama.cpp pre-tokenizer type with our split and ``clean_spaces`` off? (issue 15)

For every BPE pre type that ``src/llama-vocab.cpp`` (llama.cpp vendored in llama-cpp-python
0.3.36) loads with ``clean_spaces = false``, write the vocab-only GGUF with that
``tokenizer.ggml.pre``, load it in llama.cpp, and count the shipped probes (under 20,000
characters) whose untrusted ids differ from the reference's. Prints one line per type, with
what ``llama_detokenize`` makes of ``"Hi , it 's ."`` (unchanged = clean_spaces off).

Measured 2026-12-01: every type differs on 338 (tiny_aya) to 3,254 (chameleon) of 5,209
probes, so none can replace ``smaug-bpe``; the clean-up is declared instead
(``fixtures/divergences.jsonl``: ``llama.cpp-detokenize-clean-spaces``).

Out of scope: pre types that keep ``clean_spaces`` on (they cannot help).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import stacktok_export.export.gguf_fmt as gguf_fmt
from conformance.backends.llama_backend import LlamaCppTokenizer
from conformance.core.fixtures import FIXTURES, load_probes
from stacktok_export import load_tokenizer

#: pre types llama-vocab.cpp loads with clean_spaces = false (BPE), in source order
CLEAN_SPACES_OFF = (
    "deepseek-llm deepseek-coder deepseek-v3 spark2_5 youtu command-r qwen2 qwen35 poro-chat viking "
    "tekken smollm chameleon gpt-4o granite-embed-multi-97m tiny_aya superbpe trillion granite-docling "
    "bailingmoe seed-coder hunyuan hunyuan-dense hy_v4 joyai-llm kimi-k2 ufakzeka grok-2 afmoe laguna "
    "minimax-m2 solar-open"
).split()


def main() -> None:
    ref = load_tokenizer()
    probes = [p for p in load_probes(FIXTURES / "probes.jsonl") if len(p.text) < 20_000]
    want = {p.id: ref.encode(p.text) for p in probes}
    sample = "Hi , it 's ."
    with tempfile.TemporaryDirectory() as tmp:
        for pre in CLEAN_SPACES_OFF:
            gguf_fmt.TOKENIZER_PRE = pre
            path = Path(tmp) / f"{pre}.gguf"
            path.write_bytes(gguf_fmt.gguf_bytes(ref))
            tok = LlamaCppTokenizer(path)
            bad = sum(tok.encode(p.text, allow_special=False) != want[p.id] for p in probes)
            detok = tok.detokenize(ref.encode(sample))
            print(f"{pre:24s} {bad:5d}/{len(probes)} probes differ; detokenize {detok!r}", flush=True)
            tok.close()


if __name__ == "__main__":
    main()
