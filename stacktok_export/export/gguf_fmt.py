"""llama.cpp export: a vocab-only GGUF and its metadata.

The GGUF holds the tokenizer and nothing else (no tensors, no hyperparameters):

- ``general.architecture = "llama"`` and ``general.name`` = the artifact name.
  ``llama.*`` hyperparameters are not needed: with ``vocab_only`` llama.cpp
  returns from ``llama_model::load_hparams`` right after the vocabulary keys
  (``src/llama-model.cpp:1317``), so ``llama.context_length`` would not even
  be read.
- ``tokenizer.ggml.model = "gpt2"`` (byte-level BPE); tokens are GPT-2
  byte->unicode strings for ordinary ids and the specials' plain text at their
  ids (v1: the top ids); ``token_type`` is NORMAL (1) for ordinary ids and CONTROL (3)
  for every special, ``<|unused_N|>`` fillers included (BYTE (6) is for
  SentencePiece ``<0xNN>`` tokens); USER_DEFINED (4), parsed as a special even in
  untrusted text, only for an imported artifact's ``in_text`` specials; merges are
  ``"left right"`` strings in rank order.
- bos/eos/pad/eot ids from the artifact's roles, ``add_bos_token`` / ``add_eos_token``
  as the artifact says (v1: false: nothing is added behind the chat template's back),
  ``tokenizer.chat_template`` (v1: our ChatML; an imported artifact: its own, if any),
  and the artifact's identity under ``stacktok.fingerprint`` / ``stacktok.artifact``.
- ``tokenizer.ggml.pre``: v1 ``smaug-bpe`` (below); an imported artifact: the pre type
  whose regexes and ``ignore_merges`` reproduce it (:mod:`~stacktok_export.gguf.pre`),
  else :class:`~stacktok_export.export.vocab.ExportRefused` says why none does.

Why ``tokenizer.ggml.pre = "smaug-bpe"`` -- checked in the llama.cpp that
llama-cpp-python 0.3.36 vendors (commit 0c1e57098bba), ``src/llama-vocab.cpp``:

- ``llm_tokenizer_bpe`` (lines 284-308) gives ``LLAMA3``, ``DBRX`` and
  ``SMAUG`` the same split regex: the Llama-3 pattern with ``(?i:'s|...)``
  spelled ``'[sS]|...`` ("adapted", PR#6920) -- :data:`~stacktok_export.
  pretokenize.LLAMA3_PATTERN` apart from case folding beyond ASCII (below).
- ``llama_vocab::impl::load`` maps ``"llama3"``, ``"llama-bpe"`` and friends to
  ``LLAMA3`` *and* sets ``ignore_merges = true`` and ``add_bos = true``
  (lines 2174-2185). ``add_bos`` can be overridden by ``add_bos_token``
  (lines 2637-2645) but ``ignore_merges`` has no GGUF key: a whole pre-token
  found in the vocabulary would skip the merges (line 634). That equals
  merge-list BPE only for a fully self-reachable vocabulary, so we do not rely
  on it.
- ``"dbrx"`` and ``"smaug-bpe"`` (lines 2275-2280) set only the pre type:
  merges respected, no BOS, ``clean_spaces`` left at the BPE default (true;
  it matters only to ``llama_detokenize``; no GGUF key and no pre type with
  this split turns it off: the ``llama.cpp-detokenize`` row declares it).
  ``smaug-bpe`` names a Llama-3-tokenizer model
  (Smaug-Llama-3-70B, ``convert_hf_to_gguf_update.py:112``) and, unlike
  ``dbrx``, is not also an architecture name.

Declared divergences from the reference (pinned in ``tests/test_export_gguf.py``):
llama.cpp's category tables (``src/unicode-data.cpp``) are Unicode 15.1, so
the 21,862 code points that the reference's newer ``regex`` tables call
``\\p{L}``/``\\p{N}`` and llama.cpp calls undefined can split differently
(``"\\u1c89's"``); and ``'[sS]`` misses U+017F LONG S, which ``(?i:'s)``
case-folds to ``s`` (``"'ſt"``). Bytes always round-trip.

llama.cpp's tokenizer over this file (single-call tokenize, byte-exact decoding) is
:class:`conformance.backends.llama_backend.LlamaCppTokenizer`.

Out of scope: model weights and hyperparameters, other GGUF tokenizer models
(SentencePiece, WordPiece), and llama.cpp's C++ chat-template engine.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from ..gguf import pre as gguf_pre
from ..gguf.reader import require
from .vocab import ExportRefused, chat_template, duplicate_strings, is_v1, token_chars

if TYPE_CHECKING:
    import gguf

    from ..models.bpe.bpe import StackTokenizer

ARCH = "llama"
TOKENIZER_MODEL = "gpt2"
TOKENIZER_PRE = "smaug-bpe"
FINGERPRINT_KEY = "stacktok.fingerprint"
ARTIFACT_KEY = "stacktok.artifact"
TOKEN_TYPE_NORMAL = 1  # gguf.TokenType.NORMAL
TOKEN_TYPE_CONTROL = 3  # gguf.TokenType.CONTROL
TOKEN_TYPE_USER_DEFINED = 4  # gguf.TokenType.USER_DEFINED (matched even in untrusted text)
TOKEN_TYPE_UNUSED = 5  # gguf.TokenType.UNUSED (embedding rows past the tokenizer's ids)
# Role -> the GGUF key suffix of its id (tokenizer.ggml.<suffix>_token_id); v1: <|bos|>, <|eos|>,
# <|pad|>, <|end|> -- written in this order.
_ROLE_ID_KEYS = {"bos": "bos", "eos": "eos", "pad": "padding", "eot": "eot"}


# ------------------------------------------------------------------ writing
def token_strings(tok: StackTokenizer) -> list[str]:
    """The GGUF token list: byte-level strings, the specials as plain text at their ids."""
    strings = token_chars(tok)
    if len(set(strings)) != len(strings):  # llama.cpp aborts the process on duplicates
        raise ExportRefused(
            "gguf",
            tok,
            f"token strings occur twice, which llama.cpp cannot load: {duplicate_strings(strings)}",
        )
    return strings


def token_types(tok: StackTokenizer) -> list[int]:
    """NORMAL for every ordinary id, CONTROL for every special (fillers included), USER_DEFINED
    for the specials the source matches in ordinary text (llama.cpp parses those always)."""
    types = [TOKEN_TYPE_NORMAL] * tok.vocab_size
    for text, token_id in tok.special_to_id.items():
        types[token_id] = TOKEN_TYPE_USER_DEFINED if text in tok.in_text else TOKEN_TYPE_CONTROL
    return types


def merge_strings(tok: StackTokenizer) -> list[str]:
    """``"left right"`` in rank order (byte-level strings never contain U+0020)."""
    chars = token_chars(tok)
    return [f"{chars[a]} {chars[b]}" for a, b in tok.merges]


def pre_type_name(tok: StackTokenizer) -> str:
    """v1: :data:`TOKENIZER_PRE`; an imported artifact: the pre type that reproduces its split
    (``ExportRefused`` when none does, or when llama.cpp would retype one of its tokens)."""
    if is_v1(tok):
        return TOKENIZER_PRE
    try:
        gguf_pre.control_looking(token_chars(tok), token_types(tok), control=TOKEN_TYPE_CONTROL)
        return gguf_pre.pre_type(tok)
    except gguf_pre.NotExpressible as exc:
        raise ExportRefused("gguf", tok, str(exc)) from None


def _add_metadata(writer: gguf.GGUFWriter, tok: StackTokenizer) -> None:
    writer.add_name(tok.name)
    add_tokenizer_metadata(writer, tok)


def padding_tokens(n_tokens: int, rows: int) -> tuple[list[str], list[int]]:
    """``[PAD{i}]`` strings and UNUSED types for embedding rows past the tokenizer's ids.

    llama.cpp sizes ``token_embd`` from the token list, so a model whose embeddings are padded
    (to a multiple of 64/128) needs one token per row; ``convert_hf_to_gguf.py`` writes the same.
    """
    extra = range(n_tokens, max(rows, n_tokens))
    return [f"[PAD{i}]" for i in extra], [TOKEN_TYPE_UNUSED] * len(extra)


def add_tokenizer_metadata(writer: gguf.GGUFWriter, tok: StackTokenizer, *, rows: int = 0) -> None:
    """Every ``tokenizer.*`` and ``stacktok.*`` key of ``tok`` (token list padded to ``rows``)."""
    strings, types, pre = token_strings(tok), token_types(tok), pre_type_name(tok)
    pad_strings, pad_types = padding_tokens(len(strings), rows)
    writer.add_tokenizer_model(TOKENIZER_MODEL)
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(strings + pad_strings)
    writer.add_token_types(types + pad_types)
    writer.add_token_merges(merge_strings(tok))
    for role, key in _ROLE_ID_KEYS.items():
        if role in tok.roles:
            writer.add_uint32(f"tokenizer.ggml.{key}_token_id", tok.roles[role])
    writer.add_add_bos_token(bool(tok.add_bos))
    writer.add_add_eos_token(bool(tok.add_eos))
    template = chat_template(tok)
    if template is not None:
        writer.add_chat_template(template)
    writer.add_string(ARTIFACT_KEY, tok.name)
    writer.add_string(FINGERPRINT_KEY, tok.fingerprint)


#: Prefix of every scratch file stacktok writes; ``export_all`` removes stale ones it finds.
TMP_PREFIX = ".stacktok-tmp-"
_PROC_FD = Path("/proc/self/fd")
#: Linux: write the scratch GGUF to anonymous memory (tests switch this off).
USE_MEMFD = hasattr(os, "memfd_create") and _PROC_FD.is_dir()


@contextmanager
def _scratch_path(tmp_dir: str | os.PathLike[str] | None) -> Iterator[Path]:
    """A path GGUFWriter can write to, removed on every exit path a process survives.

    On Linux the file is anonymous memory (``memfd``), so not even SIGKILL leaves
    anything behind. Elsewhere it is ``TMP_PREFIX*.gguf`` in ``tmp_dir`` (beside
    the export target; the next successful export removes it if a kill left it)
    or the system temp directory.
    """
    if USE_MEMFD:
        fd = os.memfd_create("stacktok-gguf")
        try:
            yield _PROC_FD / str(fd)
        finally:
            os.close(fd)
        return
    fd, name = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".gguf", dir=tmp_dir)
    os.close(fd)
    try:
        yield Path(name)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(name)


def gguf_bytes(tok: StackTokenizer, *, tmp_dir: str | os.PathLike[str] | None = None) -> bytes:
    """The vocab-only GGUF of ``tok`` as exact, deterministic bytes.

    GGUFWriter needs a path: see :func:`_scratch_path` for where the scratch
    file lives (``tmp_dir``: the export's output directory, if any).
    """
    gguf = require("gguf")
    with _scratch_path(tmp_dir) as path:
        writer = gguf.GGUFWriter(path, ARCH)
        try:
            _add_metadata(writer, tok)
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
        finally:
            writer.close()
        return path.read_bytes()
