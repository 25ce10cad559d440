"""``stacktok gate DIR``: the release gate run before a checkpoint is published.

Order of work, so that a verdict is only ever given on input that was read correctly:

1. ``plan``: the arguments (``--backends`` not empty, ``--require`` within it), then the input
   plan every tool shares (``conformance.plan``: report paths writable and outside DIR, the
   artifact, the directory's layout, every file the gate reads validated once, every user file
   ``--probes/--text/--chats``): malformed input is exit 2 with one line naming the file, line
   or field, within seconds;
2. ``collect``: the rows -- static checks (``conformance.static``), the vocabulary surface id
   by id, every selected backend over the probes and chats, the static warnings judged by
   behaviour (``behaviour``), optionally the served path -- all as
   :class:`~conformance.core.rows.Row`, one exit rule (``rows.exit_code``);
3. ``command``: the table (check, backend, result, detail -> fix), the verdict line naming
   what was not checked, and the ``--json`` / ``--junit`` / ``--markdown`` / ``--html``
   reports (``conformance.report``).

Exit 0 conforms (declared divergences and warnings allowed), 1 any failing or error row,
2 usage error / malformed input, 4 INCOMPLETE (a backend that reads a file in DIR did not run
and was not excluded by name with ``--skip``/``--backends``, or a ``--require``d one cannot
run). The gate never writes into DIR and never runs code from it.

Out of scope: fixing anything -- every failure says how, the engineer decides.
"""

from __future__ import annotations

from conformance.core.rows import required_not_run
from conformance.gate.collect import collect_rows
from conformance.gate.command import add_arguments, main, run_gate
from conformance.gate.plan import plan
from conformance.plan import Plan

__all__ = ["Plan", "add_arguments", "collect_rows", "main", "plan", "required_not_run", "run_gate"]
