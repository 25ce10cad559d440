"""The words of the served rows: their backend name and every fix text they carry.

Data only, so :mod:`conformance.served.tally`, :mod:`conformance.served.checks`
and :mod:`conformance.served` (the entry) say the same thing the same way.

Out of scope: when a row fails (:mod:`conformance.served.checks`), how rows are
rendered (:mod:`conformance.report`).
"""

from __future__ import annotations

#: The subject of every served row (``Row.backend``).
BACKEND = "vllm-server"
INSTALL_HINT = "install a CPU vLLM: conformance/INSTALL-served.md"

FIX_PROMPT = (
    "the tokenizer.json vLLM loads splits text differently from the frozen artifact: "
    "serve the tokenizer.json written by `stacktok export`, or declare a cited divergence"
)
FIX_INJECTION = (
    "vLLM parses special strings in request text and has no per-request safe path: never send "
    "untrusted text as a prompt string -- tokenize it with stacktok (encode without allowed_special) "
    "or the HF tokenizer with split_special_tokens=True and send token ids, and render chats with "
    "render_conversation (ids) instead of the string template"
)
FIX_MESSAGES = (
    "vLLM's chat ids differ from render_conversation: if served.tokenize_prompt fails too, fix the "
    "tokenizer first; else serve the exported chat_template.jinja (no --chat-template override) "
    "and check add_bos_token and the template's BOS"
)
FIX_DETOKENIZE = (
    "decoding reference ids does not give the original text: check tokenizer.json's decoder, "
    "clean_up_tokenization_spaces=false and the added tokens' flags"
)
FIX_EOS = (
    "set generation_config.json eos_token_id to [<|eos|>, <|end|>] = [32760, 32765] "
    "(and nothing else that may be generated mid-turn), vllm#4180"
)
FIX_DECLARATIONS = (
    "install tokenizers (`pip install tokenizers`) and check that DIR's tokenizer.json loads in "
    "`tokenizers.Tokenizer.from_file`, so the cited divergences in fixtures/divergences.jsonl "
    "apply to the served rows"
)
