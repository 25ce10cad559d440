"""llama.cpp's ``clean_spaces`` pass, as ``llama_detokenize`` applies it to a decoded text; and
transformers' ``clean_up_tokenization``, as ``decode`` applies it when a tokenizer sets
``clean_up_tokenization_spaces`` (:func:`hf_clean_up`).

``llama_vocab::impl::detokenize`` (``src/llama-vocab.cpp``, llama.cpp vendored in
llama-cpp-python 0.3.36) runs three in-place passes over the joined pieces when the
vocabulary's pre-tokenizer type keeps ``clean_spaces`` on -- every BPE type that splits
with the Llama-3 pattern does (``llama3``/``llama-bpe``, ``smaug-bpe``, ``dbrx``,
``chatglm-bpe``), and no GGUF key turns it off:

1. the space before ``?``, ``!``, ``.``, ``,`` is deleted;
2. ``" ' "`` loses both spaces (and the second space is blanked in the buffer, so it
   no longer counts as a space for the next character);
3. the space before ``'s``, ``'m``, ``'re``, ``'ve`` is deleted (``'t``, ``'d``,
   ``'ll`` keep it).

Hand-written because no library exposes the transform on its own: the declaration
``cause: "clean_spaces"`` (:mod:`conformance.core.declared`) covers a decode difference
only when the backend's bytes equal *exactly* this transform of the original bytes,
so a different decode bug can never hide behind it. ``tests/test_llama_decode.py``
pins it to the real ``llama_detokenize``.

:func:`hf_clean_up` is ``PreTrainedTokenizerBase.clean_up_tokenization`` of transformers 4.57.6
(ten ``str.replace`` calls). 4.57's ``PreTrainedTokenizerFast.decode`` applies it whenever the
tokenizer's ``clean_up_tokenization_spaces`` is true; 5.x (measured 5.25.0) skips it for a BPE
model with a warning ("Ignoring clean_up_tokenization_spaces=True for BPE tokenizer").

Out of scope: the other detokenize options (``remove_special`` with add-BOS/EOS
vocabularies, SentencePiece's leading-space removal).
"""

from __future__ import annotations

_SPACE, _QUOTE = 0x20, 0x27


def clean_spaces(data: bytes) -> bytes:
    """``data`` after llama.cpp's three clean-up passes (byte for byte as the C code does)."""
    buf = bytearray(data)
    n = _drop_space_before_punctuation(buf, len(buf))
    n = _drop_spaces_around_quote(buf, n)
    n = _drop_space_before_contraction(buf, n)
    return bytes(buf[:n])


def _drop_space_before_punctuation(buf: bytearray, n: int) -> int:
    total = 1 if n else 0
    for i in range(1, n):
        x = buf[i]
        if buf[i - 1] == _SPACE and x in b"?!.,":
            total -= 1
        buf[total] = x
        total += 1
    return total


def _drop_spaces_around_quote(buf: bytearray, n: int) -> int:
    total = 1 if n else 0
    i = 1
    while i < n:
        x = buf[i]
        if x == _QUOTE and i + 1 < n and buf[i - 1] == _SPACE and buf[i + 1] == _SPACE:
            total -= 1
            i += 1
            buf[i] = 0  # the C code blanks the next space in place ("text[++i] = '\0'")
        buf[total] = x
        total += 1
        i += 1
    return total


def _drop_space_before_contraction(buf: bytearray, n: int) -> int:
    total = 1 if n else 0
    for i in range(1, n):
        x = buf[i]
        if buf[i - 1] == _SPACE and x == _QUOTE and i + 1 < n:
            x1 = buf[i + 1]
            if x1 in b"sm":
                total -= 1
            elif i + 2 < n and (x1, buf[i + 2]) in ((ord("r"), ord("e")), (ord("v"), ord("e"))):
                total -= 1
        buf[total] = x
        total += 1
    return total


#: ``clean_up_tokenization``'s replacements, in its order
_HF_CLEAN_UP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


def hf_clean_up(text: str) -> str:
    """``text`` after transformers' ``clean_up_tokenization``.

    >>> hf_clean_up("x != y , z . I 'm")
    "x!= y, z. I'm"
    """
    for old, new in _HF_CLEAN_UP:
        text = text.replace(old, new)
    return text
