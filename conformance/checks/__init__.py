"""Behaviour checks: every backend against the reference, as rows.

One idea per module: ``runner`` (``run_suite``: load, run, threads), ``loading``
(the one backend loader, shared with fuzz and audit), ``compare`` (the checks of
one backend), ``results`` (``BackendResult`` and ``result_rows``), ``windows``
(first-difference windows), ``bars`` (progress). Import from the module you need;
``conformance.checks.runner`` re-exports the names older callers use.

Out of scope: static checks on files (``conformance.static``) and rendering
(``conformance.report``).
"""
