"""The conformance suite: real backends, one shared probe set, one verdict.

``conformance.core`` is what every tool shares (the adapter protocol, the one row model and
exit rule, fixtures, errors), ``conformance.backends`` holds one adapter per backend,
``conformance.checks`` runs them over the probes, ``conformance.static`` checks the files,
``conformance.gate``, ``fuzz``, ``audit`` and ``served`` are the tools, ``conformance.report``
renders every tool's rows and ``conformance.matrix`` keeps the version matrix.
``python -m conformance`` runs the backends over the probes and judges the rows.

Imports nothing, so ``noxfile.py`` can import ``conformance.matrix.versions`` on the nox host.
Out of scope: the command line (``stacktok_cli``).
"""
