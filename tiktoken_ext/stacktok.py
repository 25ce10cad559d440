"""tiktoken plugin: ``tiktoken.get_encoding("stack100m-32768")``, offline, from the installed wheel.

tiktoken imports every ``tiktoken_ext.*`` module (``tiktoken_ext`` is a namespace package: no
``__init__.py``) and calls the constructor registered under the name asked for; the constructor
returns ``tiktoken.Encoding``'s keyword arguments. Ours reads the frozen artifact packaged in
``stacktok_export/data/`` -- no download, no ``TIKTOKEN_CACHE_DIR`` -- through the tiktoken
exporter (``stacktok_export.export.tiktoken_fmt``), so the plugin, ``stacktok export`` and the
gate's tiktoken backend build the same ranks.

Everything is imported inside the constructor: tiktoken imports this module even to build
``cl100k_base``, so it must import nothing heavy and never fail.

Out of scope: encodings other than the shipped artifact (build those with
``stacktok_export.export.tiktoken_fmt.to_tiktoken``), and downloading anything.
"""

from __future__ import annotations

from typing import Any

NAME = "stack100m-32768"  # the stem of stacktok_export.artifact.artifact.ARTIFACT_NAME (checked by the tests)


def stack100m_32768() -> dict[str, Any]:
    """``tiktoken.Encoding`` keyword arguments for the artifact shipped in the wheel."""
    from stacktok_export.artifact.artifact import shipped_artifact_path
    from stacktok_export.export.tiktoken_fmt import to_tiktoken
    from stacktok_export.models.bpe.bpe import StackTokenizer

    enc = to_tiktoken(StackTokenizer.load(shipped_artifact_path()), name=NAME)
    # tiktoken's own pickling form of an Encoding: its constructor's arguments
    kwargs: dict[str, Any] = enc.__getstate__()
    kwargs["explicit_n_vocab"] = enc.n_vocab
    return kwargs


ENCODING_CONSTRUCTORS = {NAME: stack100m_32768}
