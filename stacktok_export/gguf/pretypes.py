"""GGUF pre types (``tokenizer.ggml.pre``) -> the regex splits llama.cpp applies for each.

Facts from llama.cpp's ``src/llama-vocab.cpp`` (the copy vendored by llama-cpp-python 0.3.36):
``llama_vocab::impl::load`` maps each pre name to a pre type (and sets ``ignore_merges`` /
``add_bos`` for some), and ``llm_tokenizer_bpe`` lists the regexes of each pre type, applied
in order, every match and every gap between matches its own piece (isolated splits).

Translation to Python ``regex``: llama.cpp's engine has no ``(?i:...)`` and no possessive
quantifiers, so llama.cpp rewrites some tokenizer.json regexes and keeps the original in a
comment; ``regex`` runs the originals, so those are used here (the rewrite ``'[sS]`` is not the
same as ``(?i:'s)``, which also matches ``'ſ``). llama.cpp's GPT-2 regex lacks the final
``|\\s+`` of the tokenizer.json one: under isolated splits the two give the same pieces (a
lone white space ``\\s+(?!\\S)`` refuses is a gap, so a piece of its own either way), so the
tokenizer.json form (:data:`GPT2_PATTERN`) is used. Every other regex is llama.cpp's string
as it is (C escapes resolved); each compiles with ``regex`` and means the same there.

Out of scope (refused by :func:`pre_type`, naming it): pre types whose split is hand-written
code in llama.cpp (kimi-k2, afmoe), zero-width splits (superbpe), models that are not
GPT-2-byte-encoded (gemma4, sarvam-moe, whitespace), pre types that add a separator token
(jina-v1-en, jina-v2-code, roberta-bpe), and the rest of llama.cpp's list not written here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..split.pretokenize import GPT2_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN


@dataclass(frozen=True)
class PreType:
    """What one llama.cpp BPE pre type means: its splits and the flags it sets."""

    patterns: tuple[str, ...]
    ignore_merges: bool = False
    #: llama.cpp's default before ``tokenizer.ggml.add_bos_token`` overrides it
    add_bos: bool = False


_QWEN35 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
_DEEPSEEK_LLM = (
    "[\r\n]",
    "\\s?[A-Za-z\xb5\xc0-\xd6\xd8-\xf6\xf8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    "\\s+$",  # pieces hold no newline here (the first split isolates them), so $ is the end
    _CJK,
    "\\p{N}+",
)
_DEEPSEEK_CODER = ("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK, r"\p{N}")
_DEEPSEEK3 = (
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
    r"""| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
)
_TEKKEN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_GPT4O = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SEED_CODER = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_BLOOM = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"

_GROUPS: dict[PreType, tuple[str, ...]] = {
    PreType((r"[\p{P}\$\+<=>\^~\|]+", GPT2_PATTERN, r"\p{N}+", "[0-9][0-9][0-9]")): ("default",),
    PreType((LLAMA3_PATTERN,), ignore_merges=True, add_bos=True): (
        "llama3",
        "llama-v3",
        "llama-bpe",
        "falcon3",
        "falcon-h1",
        "pixtral",
        "midm-2.0",
        "lfm2",
        "jina-v5-nano",
    ),
    PreType((LLAMA3_PATTERN,)): ("dbrx", "smaug-bpe"),
    PreType(_DEEPSEEK_LLM): ("deepseek-llm",),
    PreType(_DEEPSEEK_CODER): ("deepseek-coder",),
    PreType(_DEEPSEEK3): ("deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"),
    PreType((r"[\p{P}\$\+<=>\^~\|`]+", GPT2_PATTERN, "[0-9][0-9][0-9]")): ("falcon",),
    PreType((r"\p{N}", GPT2_PATTERN)): (
        "starcoder",
        "refact",
        "command-r",
        "smollm",
        "codeshell",
        "exaone",
        "minerva-7b",
        "mellum2",
    ),
    PreType((GPT2_PATTERN,)): (
        "gpt-2",
        "phi-2",
        "jina-es",
        "jina-de",
        "gigachat",
        "jina-v2-es",
        "jina-v2-de",
        "a.x-4.0",
        "mellum",
        "modern-bert",
        "mpt",
        "olmo",
        "jais",
        "trillion",
        "granite-docling",
        "exaone4",
    ),
    PreType((QWEN2_PATTERN,)): (
        "qwen2",
        "deepseek-r1-qwen",
        "kormo",
        "f2llmv2",
        "megrez",
        "stablelm2",
        "hunyuan",
        "solar-open",
    ),
    PreType((_QWEN35,)): ("qwen35",),
    PreType((_TEKKEN,), ignore_merges=True, add_bos=True): ("tekken",),
    PreType((_GPT4O,)): ("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"),
    PreType((_SEED_CODER,)): ("seed-coder",),
    PreType((_BLOOM,)): ("poro-chat", "bloom", "gpt3-finnish"),
    PreType((_BLOOM, r"\p{N}")): ("viking",),
}

#: single splits under which ``findall`` is the whole split: every character starts some match
#: (letters, numbers, white space and the rest each have an alternative of their own), so no
#: text falls between matches -- where tiktoken, which keeps only the matches, would drop it
COVERING = frozenset({LLAMA3_PATTERN, GPT2_PATTERN, QWEN2_PATTERN, _QWEN35, _GPT4O})

#: pre name -> what it means
PRE_TYPES: dict[str, PreType] = {name: pt for pt, names in _GROUPS.items() for name in names}


def pre_type(name: str) -> PreType | None:
    """The pre type llama.cpp reads from ``tokenizer.ggml.pre`` (``None``: not in this table)."""
    return PRE_TYPES.get(name)
