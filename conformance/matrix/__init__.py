"""The version matrix: which backend versions a row installs (``versions``: flags, ``latest``,
the CPU torch; ``resolve``: a row's release, extras and install check, what the noxfile's sessions
call; both run on the nox host) and the change report of new rows against the committed ones
(``changes``, ``python -m conformance.matrix.changes``).

Imports nothing: ``noxfile.py`` imports ``conformance.matrix.versions`` and ``resolve`` without the
package's dependencies. Out of scope: running a row (``python -m conformance``), rendering the matrix
(``conformance.report.matrix``).
"""
