"""The artifact formats: data in, data out.

:mod:`.artifact` is the versioned JSON file (format v1, our fixed id layout; where the shipped
artifact lives; fingerprint; save; the validating read that returns the file's data), and
:mod:`.vocab` the general id layout of format v2 (any byte-level BPE: validated into a
:class:`~.vocab.Vocabulary`, and its JSON form).

Neither builds a tokenizer nor writes one's state: the model (``models/bpe``) builds itself from
the data they return, and hands them what they write (any object with the attributes their
``Protocol`` names).

Out of scope: migrating between formats (an artifact is frozen), exporting to other formats
(``export/``), reading other tokenizers' files (``importers/``).
"""
