"""The byte-level BPE model: the reference tokenizer and everything its encoder reads.

Three layers, each a class on the one below (not mixins: each is whole at its level):
:mod:`.bpe` is the tokenizer (:class:`~.bpe.StackTokenizer`: the one encode surface -- text to
pre-tokens to ids -- decode, load, save, train); :mod:`.model` merges one pre-token's bytes (or
many at once) by the ranked merge list; :mod:`.tables` is the vocabulary as tables (ids <-> bytes,
specials, roles, pair ranks). Beside them: :mod:`.specials` plans which special-token strings a
call splits out or refuses; :mod:`.batch` merges many short pre-tokens in numpy lock-step;
:mod:`.hard_cuts` cuts long pre-tokens where no merge can join; :mod:`.textbook` is the rule
written plainly, the oracle every fast path is tested against.

Out of scope: the artifact formats (``artifact/``: the model builds itself from their data) and
learning merges (``trainer/``: the model trains itself through it).
"""
