"""The BPE trainer: documents in, a ranked merge list out.

:mod:`.trainer` counts pre-tokens (in worker processes) and runs the merge loop; its first,
busiest merges run over every word at once in numpy (:mod:`.train_flat`) and very long words
keep their own slot lists (:mod:`.train_long`). The trainer never builds a tokenizer:
``StackTokenizer.train_from_iterable`` calls it and builds itself from the merges.

Out of scope: encoding (``models/``), reading corpus files (``corpus/``).
"""
