"""The conformance suite: real backends, one shared probe set, one verdict.

``conformance.protocol`` is the adapter contract, ``conformance.backends``
holds one adapter per backend, ``conformance.fixtures`` loads probes, chats
and declared divergences, ``conformance.runner`` runs the checks and
``conformance.report`` renders them. ``python -m conformance`` runs it all.
"""
