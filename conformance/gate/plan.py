"""What the gate will read, checked before anything runs (every problem here is exit 2, one line).

The gate's own checks first -- the backend selection (``--backends`` not empty, ``--require``
within it and not ``--skip``ped: ``conformance.plan.select_backends``) and ``--workers`` -- then
the one input plan every tool shares (``conformance.plan.plan_inputs``): the target (a local
path or a Hub id), every report path (``--json``, ``--junit``, ``--markdown``, ``--html``), the
artifact and its reference, DIR's layout, every file validated once, the probes, chats and texts
(at least one of them), the report paths again against every file read, and which selected
backends cannot run: a ``--require``d one that cannot stops the run here, INCOMPLETE (exit 4).

Out of scope: the plan's steps (``conformance.plan``), running anything
(``conformance.gate.collect``), the command line (``conformance.gate.command``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from conformance.core.errors import UsageError
from conformance.plan import FixtureFiles, Plan, plan_inputs, select_backends


def outputs(args: argparse.Namespace) -> dict[str, Path | None]:
    """The report flags and the paths they name (``None``: not asked for)."""
    return {"--json": args.json, "--junit": args.junit, "--markdown": args.markdown, "--html": args.html}


def plan(args: argparse.Namespace) -> Plan:
    """Everything the gate will read, checked before anything runs (errors -> exit 2)."""
    selection = select_backends(args.backends, require=args.require, skip=args.skip)
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    fixtures = FixtureFiles(
        probes=args.probes, chats=args.chats, texts=args.text, shipped=not args.only_user_data, required=True
    )
    return plan_inputs(
        args.dir,
        tool="gate",
        artifact=args.artifact,
        gguf=args.gguf,
        outputs=outputs(args),
        fixtures=fixtures,
        selection=selection,
    )
