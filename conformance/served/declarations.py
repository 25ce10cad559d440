"""Which declared divergences cover a served row, matched through a stand-in for the server.

The server tokenizes with the same HF tokenizer the in-process ``vllm`` adapter
loads, so a declaration for backend ``vllm`` (:data:`SERVED_AS`) covers a
served difference: :func:`drift_proxy` builds the ``tokenizers`` adapter over
the tokenizer.json the server loaded, named ``vllm`` at the server's version,
and :func:`covering` asks the shared rule (:mod:`conformance.core.declared`)
with it. When that adapter cannot be built, no declaration covers a served row
(every difference counts), and :func:`drift_proxy` says so in a row.

Out of scope: the rule itself (:mod:`conformance.core.declared`), counting
(:mod:`conformance.served.tally`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance.core.declared import Declarations
from conformance.core.fixtures import Probe
from conformance.core.rows import Row
from conformance.served.fixes import BACKEND, FIX_DECLARATIONS
from conformance.served.items import Item

#: Declarations for these backends cover the served rows: the server tokenizes with the
#: same HF tokenizer the in-process ``vllm`` adapter loads.
SERVED_AS = (BACKEND, "vllm")
#: Which declared check covers which served row.
DECLARED_AS = {
    "served.tokenize_prompt": ("encode", "trusted"),
    "served.tokenize_messages": ("chat",),
    "served.detokenize": ("decode",),
}
DECLARATIONS_CHECK = "served.declarations"


def drift_proxy(tokenizer_json: Path, version: str) -> tuple[Any, Row | None]:
    """What declarations match the served rows against, or None and the row that says why not.

    The ``tokenizers`` adapter over the tokenizer.json the server loaded, named
    ``vllm`` at the server's ``version`` (vLLM splits text with that same HF
    tokenizer). Without it no declaration covers a served row: the row
    (``served.declarations``; *missing* without the library, else *skip* with
    the library's message) keeps that from passing unseen.
    """
    from conformance.backends.tokenizers_backend import TokenizersBackend

    try:
        proxy = TokenizersBackend(tokenizer_json, version)
    except Exception as exc:  # noqa: BLE001 -- any failure becomes the row below
        status = "missing" if isinstance(exc, ImportError) else "skip"
        why = (
            f"not checked: no declared divergence can cover a served row, every difference counts "
            f"(the tokenizers adapter over {tokenizer_json} did not load: {type(exc).__name__}: {exc})"
        )
        return None, Row(DECLARATIONS_CHECK, BACKEND, status, why, FIX_DECLARATIONS)
    proxy.name = "vllm"
    return proxy, None


def covering(declarations: Declarations | None, proxy: Any, check: str, item: Item) -> str | None:
    """The id of the declaration covering ``item``'s difference in served row ``check``, else None.

    The shared rule (``conformance.core.declared``), for backend ``vllm`` (the same HF tokenizer).
    """
    if declarations is None or proxy is None:
        return None
    probe = Probe(item.id, item.category, item.text)
    for declared_check in DECLARED_AS.get(check, ()):
        d = declarations.declared(proxy, declared_check, probe)
        if d is not None:
            return d.id
    return None
