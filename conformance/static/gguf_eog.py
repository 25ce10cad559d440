"""llama.cpp's own end-of-generation set for the GGUF: exactly {<|eos|>, <|end|>}.

The one static check that runs a backend: it loads the GGUF in llama.cpp
(``LlamaCppTokenizer``) and asks which ids end generation -- in a forked child under
:data:`BUDGET` (``stacktok_export.util.bounded``), so a GGUF that crashes or hangs llama.cpp is
an ``error`` row, never a dead gate. ``missing`` when llama-cpp-python is not installed,
``error`` when llama.cpp refuses, crashes on or hangs on the file.

Out of scope: the GGUF's metadata as written (``conformance.static.gguf``); tokenizing
with llama.cpp (the conformance runner).
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.backends.llama_backend import LlamaCppTokenizer
from conformance.core.expect import is_ours, stop_ids
from conformance.core.layout import Exports
from conformance.core.rows import Row, row, skip
from stacktok_export import StackTokenizer
from stacktok_export.util.bounded import Budget, run_bounded

#: loading a GGUF in llama.cpp (a vocab-only load: well under a second and 200 MB on a 128k vocabulary)
BUDGET = Budget(seconds=60.0, memory=4 << 30)
_MISSING = ("ImportError", "ModuleNotFoundError", "BackendMissing")


@dataclass(frozen=True)
class _Seen:
    """What llama.cpp says of the GGUF, gathered in a child process (plain data)."""

    eog: frozenset[int]
    adds: tuple[bool, bool]
    pieces: dict[int, bytes]


def _ask_llama(path: str) -> _Seen:
    """In the child: load the GGUF in llama.cpp and ask it (a crash here kills only the child)."""
    lt = LlamaCppTokenizer(path)
    eog = frozenset(i for i in range(lt.n_vocab) if lt.is_eog(i))
    return _Seen(eog, (lt.adds_bos, lt.adds_eos), {i: lt.decode_bytes([i]) for i in sorted(eog)[:64]})


def check_gguf_eog(exports: Exports, ref: StackTokenizer) -> list[Row]:
    """llama.cpp's own end-of-generation set must be exactly {<|eos|>, <|end|>}."""
    if exports.gguf is None:
        return [skip("gguf.eog", "no .gguf file", backend="llama.cpp")]
    got = run_bounded(_ask_llama, str(exports.gguf), budget=BUDGET)  # llama.cpp may crash on a GGUF
    if got.kind == "raised" and got.error_type in _MISSING:
        return [
            Row(
                "gguf.eog",
                "llama.cpp",
                "missing",
                "llama-cpp-python is not installed",
                "pip install 'stacktok[llama]'",
            )
        ]
    if not got.ok:  # llama.cpp refusing, crashing on or hanging on the file is a finding
        why = got.message if got.kind == "raised" else got.describe(BUDGET)
        return [
            Row(
                "gguf.eog",
                "llama.cpp",
                "error",
                f"llama.cpp cannot load the GGUF ({why})",
                "rebuild the GGUF",
            )
        ]
    seen: _Seen = got.value
    eog = set(seen.eog)
    if not is_ours(ref):
        return _imported_rows(seen, ref, eog)
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


def _imported_rows(seen: _Seen, ref: StackTokenizer, eog: set[int]) -> list[Row]:
    """An imported artifact: llama.cpp stops at the source's eos and end of turn (its own extra
    end-of-generation guesses warn, naming them), and adds BOS/EOS exactly when the source does."""
    want = stop_ids(ref)
    extra = sorted(eog - want)
    pieces = ", ".join(f"{i} {seen.pieces.get(i, b'')!r}" for i in extra[:5])
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
    adds = seen.adds
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
