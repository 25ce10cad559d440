"""The conformance suite: real backends, one shared probe set, one verdict.

``conformance.core.protocol`` is the adapter contract, ``conformance.backends``
holds one adapter per backend, ``conformance.core.fixtures`` loads probes, chats
and declared divergences, ``conformance.checks.runner`` runs the checks and
``conformance.report`` renders them. ``python -m conformance`` runs it all.
"""
