"""What llama.cpp infers when it loads a GGUF, which no key overrides: the pre type, and
control-looking token texts. Which ``tokenizer.ggml.pre`` reproduces an imported artifact, or
why none does; which token texts llama.cpp would turn into control tokens.

llama.cpp has no GGUF key for the split regexes or for ``ignore_merges``: the pre type name
selects both (``llama_vocab::impl::load``, ``src/llama-vocab.cpp`` of the llama.cpp that
llama-cpp-python 0.3.36 vendors). So a pre type fits an artifact when

- its regexes equal the artifact's patterns, in order, and it sets ``ignore_merges`` exactly
  when the artifact does -- both from the importers' table of facts,
  :data:`stacktok_export.gguf.pretypes.PRE_TYPES`;
- it does not change BOS behind the ``add_bos_token`` key: ``chatglm-bpe``, ``glm4`` and
  ``glm5`` drop the BOS id, ``gemma4`` forces ``add_bos`` on (:data:`BOS_ALTERED`).

``add_bos`` (also set by some pre types) is always written explicitly, so it never decides.

llama.cpp also makes every token whose text is in :data:`CONTROL_LOOKING` a control token
(and most of them end-of-generation), whatever ``token_type`` says (``llama_vocab::impl::load``,
lines 2686-2920, "control-looking token ... its type will be overridden"): a NORMAL one would be
matched as a special in trusted text, a USER_DEFINED one would no longer be matched in
untrusted text. :func:`control_looking` finds them (Qwen2's ordinary ``</s>``, id 128247).

Both raise :class:`NotExpressible`; the writer (:mod:`stacktok_export.export.gguf_fmt`) reports it
as an ``ExportRefused``.

Out of scope: the regex tables themselves (:mod:`.pretypes`) and v1 artifacts (their pre type is
fixed in :mod:`stacktok_export.export.gguf_fmt`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .pretypes import PRE_TYPES

if TYPE_CHECKING:
    from ..models.bpe.bpe import StackTokenizer

#: token texts llama.cpp forces to CONTROL on load (EOT / EOM / FIM / EOG auto-detection)
CONTROL_LOOKING = frozenset(
    {
        "</s>", "<EOT>", "<MID>", "<PAD>", "<PRE>", "<REPO>", "<SUF>", "<end_of_turn>",
        "<end_of_utterance>", "<eos>", "<fim-middle>", "<fim-pad>", "<fim-prefix>", "<fim-repo>",
        "<fim-suffix>", "<fim_middle>", "<fim_pad>", "<fim_prefix>", "<fim_suffix>", "<reponame>",
        "<turn|>", "<|calls|>", "<|call|>", "<|code_middle|>", "<|code_prefix|>", "<|code_suffix|>",
        "<|end_of_text|>", "<|endoftext|>", "<|end|>", "<|eom_id|>", "<|eot_id|>", "<|file_sep|>",
        "<|fim_middle|>", "<|fim_pad|>", "<|fim_prefix|>", "<|fim_repo|>", "<|fim_suffix|>",
        "<|flush|>", "<|im_end|>", "<|middle|>", "<|prefix|>", "<|repo_name|>", "<|return|>",
        "<|suffix|>", "<|tool_response>", "<\uff5cend\u2581of\u2581sentence\uff5c>",
        "<\uff5cfim\u2581begin\uff5c>", "<\uff5cfim\u2581end\uff5c>", "<\uff5cfim\u2581hole\uff5c>",
        "[EOS]", "[EOT]", "[PAD]", "[e~[", "_<EOT>", "\u2581<MID>", "\u2581<PRE>", "\u2581<SUF>",
    }
)  # fmt: skip
#: pre types that override the BOS the GGUF keys ask for (kept out even if the table gains them)
BOS_ALTERED = frozenset({"chatglm-bpe", "glm4", "glm5", "gemma4"})


class NotExpressible(ValueError):
    """llama.cpp would not load the artifact as it encodes; the message says why (the GGUF writer
    reports it as its ``ExportRefused``)."""


def pre_type(tok: StackTokenizer) -> str:
    """The pre type to write for ``tok``; :class:`NotExpressible` names why none fits."""
    table = PRE_TYPES
    found = [name for name, pt in table.items() if pt.patterns == tuple(tok.patterns)]
    if not found:
        raise NotExpressible(
            f"no llama.cpp pre type splits with these {len(tok.patterns)} pattern(s) "
            "(llama.cpp reads the split from the pre type name only)",
        )
    fits = [
        name
        for name in found
        if table[name].ignore_merges == bool(tok.ignore_merges) and name not in BOS_ALTERED
    ]
    if not fits:
        raise NotExpressible(
            f"the pre type(s) with these patterns ({', '.join(found)}) do not match the artifact's "
            f"ignore_merges={bool(tok.ignore_merges)} (llama.cpp has no key for it) or alter BOS",
        )
    return fits[0]  # the table lists each group's canonical name first


def control_looking(strings: list[str], types: list[int], *, control: int) -> None:
    """:class:`NotExpressible` when llama.cpp would make a non-control token a control one."""
    for token_id, (text, kind) in enumerate(zip(strings, types)):
        if kind != control and text in CONTROL_LOOKING:
            raise NotExpressible(
                f"token id {token_id} {text!r} is not a control token, but llama.cpp makes every token "
                "with this text one on load (trusted text would split it out, or untrusted text not)",
            )
