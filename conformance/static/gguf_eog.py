"""llama.cpp's own end-of-generation set for the GGUF: exactly {<|eos|>, <|end|>}.

The one static check that runs a backend: it loads the GGUF in llama.cpp
(``LlamaCppTokenizer``) and asks which ids end generation. ``missing`` when
llama-cpp-python is not installed, ``error`` when llama.cpp refuses the file.

Out of scope: the GGUF's metadata as written (``conformance.static.gguf``); tokenizing
with llama.cpp (the conformance runner).
"""

from __future__ import annotations

from conformance.core.layout import Exports
from conformance.core.protocol import BackendMissing
from conformance.core.rows import Row, row, skip
from stacktok_export import StackTokenizer


def check_gguf_eog(exports: Exports, ref: StackTokenizer) -> list[Row]:
    """llama.cpp's own end-of-generation set must be exactly {<|eos|>, <|end|>}."""
    if exports.gguf is None:
        return [skip("gguf.eog", "no .gguf file", backend="llama.cpp")]
    try:
        from conformance.backends.llama_backend import LlamaCppTokenizer

        lt = LlamaCppTokenizer(exports.gguf)
    except (ImportError, BackendMissing):
        return [
            Row(
                "gguf.eog",
                "llama.cpp",
                "missing",
                "llama-cpp-python is not installed",
                "pip install 'stacktok[llama]'",
            )
        ]
    except Exception as exc:  # noqa: BLE001 -- llama.cpp refusing the file is a finding
        return [
            Row(
                "gguf.eog",
                "llama.cpp",
                "error",
                f"llama.cpp cannot load the GGUF ({exc})",
                "rebuild the GGUF",
            )
        ]
    eog = {i for i in range(lt.n_vocab) if lt.is_eog(i)}
    want = {ref.special_to_id["<|eos|>"], ref.special_to_id["<|end|>"]}
    return [
        row(
            "gguf.eog",
            eog == want,
            f"llama.cpp stops on {sorted(eog)}, want {sorted(want)}",
            "set eos=<|eos|>, eot=<|end|> and make no other special EOG",
            backend="llama.cpp",
        )
    ]
