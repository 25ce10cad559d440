"""The gate's checks on files: static checks (provenance, config, HF files, chat, GGUF) and the
vocabulary surface id by id (``conformance.static.surface``).

``run_static`` runs the static checks in the gate's order (``conformance.static.run``);
``check_gguf_eog`` is the one that loads llama.cpp (``conformance.static.gguf_eog``).

Out of scope: behaviour (ids for text: ``conformance.checks``) and judging static warnings by
behaviour (``conformance.gate.behaviour``).
"""

from conformance.static.gguf_eog import check_gguf_eog
from conformance.static.run import run_static

__all__ = ["check_gguf_eog", "run_static"]
