"""llama.cpp's own end-of-generation set for the GGUF: exactly {<|eos|>, <|end|>}.

The one static check that runs a backend: it loads the GGUF in llama.cpp
(``LlamaCppTokenizer``) and asks which ids end generation. ``missing`` when
llama-cpp-python is not installed, ``error`` when llama.cpp refuses the file.

Out of scope: the GGUF's metadata as written (``conformance.static.gguf``); tokenizing
with llama.cpp (the conformance runner).
"""

from __future__ import annotations

from conformance.backends.llama_backend import LlamaCppTokenizer
from conformance.core.expect import is_ours, stop_ids
from conformance.core.layout import Exports
from conformance.core.protocol import BackendMissing
from conformance.core.rows import Row, row, skip
from stacktok_export import StackTokenizer


def check_gguf_eog(exports: Exports, ref: StackTokenizer) -> list[Row]:
    """llama.cpp's own end-of-generation set must be exactly {<|eos|>, <|end|>}."""
    if exports.gguf is None:
        return [skip("gguf.eog", "no .gguf file", backend="llama.cpp")]
    try:
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
    if not is_ours(ref):
        return _imported_rows(lt, ref, eog)
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


def _imported_rows(lt: LlamaCppTokenizer, ref: StackTokenizer, eog: set[int]) -> list[Row]:
    """An imported artifact: llama.cpp stops at the source's eos and end of turn (its own extra
    end-of-generation guesses warn, naming them), and adds BOS/EOS exactly when the source does."""
    want = stop_ids(ref)
    extra = sorted(eog - want)
    pieces = ", ".join(f"{i} {lt.decode_bytes([i])!r}" for i in extra[:5])
    if not want:
        eog_row = skip("gguf.eog", "the artifact records no eos or end-of-turn role", backend="llama.cpp")
    elif not want <= eog:
        eog_row = Row(
            "gguf.eog",
            "llama.cpp",
            "fail",
            f"llama.cpp stops on {sorted(eog)}, not at the source's eos/end of turn {sorted(want)}",
            "set tokenizer.ggml.eos_token_id / eot_token_id to the source's ids",
        )
    elif extra:
        eog_row = Row(
            "gguf.eog",
            "llama.cpp",
            "warn",
            f"llama.cpp stops at the source's {sorted(want)} and also on {pieces} "
            "(its own guess by token text)",
            "nothing to do unless the model emits those tokens mid-answer",
        )
    else:
        eog_row = Row("gguf.eog", "llama.cpp", "pass", f"stops on {sorted(want)}")
    adds = (lt.adds_bos, lt.adds_eos)
    return [
        eog_row,
        row(
            "gguf.adds_bos",
            adds == (ref.add_bos, ref.add_eos),
            f"llama.cpp adds BOS={adds[0]}, EOS={adds[1]}; "
            f"the source adds BOS={ref.add_bos}, EOS={ref.add_eos}",
            f"set tokenizer.ggml.add_bos_token {str(ref.add_bos).lower()} (the pre type's default decides "
            "when the key is absent)",
            backend="llama.cpp",
        ),
    ]
