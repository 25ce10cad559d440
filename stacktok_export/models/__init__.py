"""The tokenizer models, one subpackage per model type (Hugging Face's ``models/`` shape).

``bpe/`` (byte-level BPE over a ranked merge list: the reference tokenizer) is the one there is;
``sentencepiece/``, ``unigram/`` and ``wordpiece/`` come next, each a model of its own beside
it, reading the same pre-tokenizers (``split/``) and artifact formats (``artifact/``).

Out of scope: everything a model does not decide -- pre-tokenizing (``split/``), file formats
(``artifact/``, ``export/``, ``importers/``), training (``trainer/``).
"""
