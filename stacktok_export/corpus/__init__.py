"""Corpus reading for ``stacktok train`` and ``stacktok pack``: documents from files.

:mod:`.corpus` turns paths and globs into documents (text, JSON Lines, Parquet; one document per
file, paragraph or line); :mod:`.corpus_io` is the byte sources below it (files, gzip, Zstandard,
byte ranges), every read streamed and bounded.

Out of scope: tokenizing (``models/``), packing (``pack/``), deduplication and filtering.
"""
