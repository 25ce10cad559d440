"""``stacktok pack``: a pretraining corpus through the frozen tokenizer into ``uint16``/``uint32`` shards.

Every document becomes ``<|bos|>`` + its text encoded as untrusted (special
strings are plain text) + ``<|eos|>``; empty documents are dropped (counted)
unless ``keep_empty``. Ids are exactly the reference's: the tiktoken export
encodes, documents holding code points its tables classify differently are
encoded by the reference, and a sample (all with ``verify=1``) is checked
against the reference -- a difference stops the run. Modules:

- ``pipeline``: :func:`pack`, resumable, the manifest;
- ``plan``: inputs cut into parts at document boundaries; ``part``: one part, run by a worker;
- ``encode``: the encoder; ``engines``: the local process pool; ``raycluster``: Ray tasks;
- ``writer``: shard files (plain ``.bin`` + ``.offsets.npy``, Megatron ``.idx``);
- ``reader``: :class:`PackReader` (documents or training windows) and :func:`check_pack`.

Out of scope: deduplication, filtering, mixing ratios, shuffling.
"""

from .engines import EngineError
from .pipeline import MANIFEST, PackError, PackMismatch, PackOptions, pack
from .reader import PackReader, check_pack

__all__ = [
    "MANIFEST",
    "EngineError",
    "PackError",
    "PackMismatch",
    "PackOptions",
    "PackReader",
    "check_pack",
    "pack",
]
