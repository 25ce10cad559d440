"""The input plan: what a run reads, resolved, checked and read once before anything runs.

One :class:`Plan` for every tool that reads a checkpoint -- ``stacktok gate``, ``python -m
conformance``, ``stacktok fuzz`` and ``stacktok audit`` -- built by :func:`plan_inputs`:

- ``inputs``: the target (a local directory, or a Hub id resolved by ``conformance.core.hub``),
  the report paths (``conformance.core.outputs``: once before anything is read, again against
  every file the run reads), the artifact (the one default rule,
  ``conformance.core.arguments.artifact_path``) and its reference (loaded once,
  ``conformance.backends.shared_reference``), DIR's layout, every file validated once
  (``conformance.validate``: the parsed files are handed on in :attr:`Plan.files`, never read
  again), the probes, chats and texts (``conformance.core.fixtures``);
- ``selection``: which backends run (``--backends`` less ``--skip``, ``--require`` within it),
  for the gate and ``python -m conformance``.

Each tool keeps its own flags, messages and exit codes; only the planning is shared.

Out of scope: running anything (``conformance.checks``, the tools' own packages); the tools'
command lines (each tool's ``command`` module).
"""

from conformance.plan.inputs import FixtureFiles, Plan, plan_inputs
from conformance.plan.selection import Selection, select_backends

__all__ = ["FixtureFiles", "Plan", "Selection", "plan_inputs", "select_backends"]
