"""Pre-tokenizers: text to the pieces a model merges within, and what decides them.

:mod:`.pretokenize` is the regex split (the Llama-3, Qwen2 and GPT-2 patterns under ``regex``,
and the record of that engine's Unicode tables every artifact keeps); :mod:`.ascii_split` gives
the same pieces faster on ASCII stretches; :mod:`.bytelevel` is GPT-2's byte <-> character
alphabet (tokenizer.json and GGUF spell byte-level tokens with it); :mod:`.drift` finds where
another engine's tables put a code point in another class.

Out of scope: merging (``models/``), normalization (none is applied).
"""
