"""The version matrix: which backend versions a row installs (``versions``, run on the nox host)
and the change report of new rows against the committed ones (``changes``,
``python -m conformance.matrix.changes``).

Imports nothing: ``noxfile.py`` imports ``conformance.matrix.versions`` without the package's
dependencies. Out of scope: running a row (``python -m conformance``), rendering the matrix
(``conformance.report.matrix``).
"""
