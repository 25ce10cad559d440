"""What the gate will read, checked before anything runs (every problem here is exit 2, one line).

In this order: the backend selection (``--backends`` not empty, ``--require`` within it and
not ``--skip``ped), ``--workers``, the target (a local path, or a Hub id ``org/name[@revision]``
resolved to a cached or fetched snapshot: ``conformance.core.hub``), DIR is a directory, every
report path (outside DIR, not a directory, writable: ``conformance.core.outputs``), the artifact,
DIR's layout (at least one export to check), every file the gate reads (``conformance.validate``), every user
file (``--probes/--text/--chats``, ``conformance.core.fixtures``), every report path again against
every file the run reads (a sibling ``NAME.gguf``, the artifact, a blob), and which selected backends
cannot run (library absent, or no file for them; looked up, not imported): a ``--require``d one
that cannot run stops the run here, INCOMPLETE (exit 4), within seconds.

Out of scope: running anything (``conformance.gate.collect``), the command line
(``conformance.gate.command``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

from conformance.backends import REGISTRY, check_selection, shared_reference, unavailable_backends
from conformance.core.errors import UsageError
from conformance.core.fixtures import FixtureSet
from conformance.core.hub import Target, resolve_target
from conformance.core.layout import Exports, require_any_export
from conformance.core.outputs import check_outputs
from conformance.validate import Validated, validate_directory
from conformance.validate.template import template_refusal
from stacktok_export import StackTokenizer
from stacktok_export.bpe import shipped_artifact_path


@dataclass(frozen=True)
class Plan:
    """What a gate run reads: the reference, DIR's exports, the probes and chats."""

    artifact: Path
    ref: StackTokenizer
    exports: Exports
    fixtures: FixtureSet
    #: every file validation read, parsed (later stages take them from here, never from disk)
    files: Validated | None = None
    #: the backends that run (``--backends`` less ``--skip``), in registry order of the selection
    backends: tuple[str, ...] = ()
    #: backends excluded by name (not selected, or ``--skip``ped): named in the report, never a gap
    excluded: tuple[str, ...] = ()
    #: selected backends that cannot run, with why (``missing``: the verdict will be INCOMPLETE)
    unavailable: tuple[tuple[str, str, str], ...] = ()
    #: what DIR named: the directory itself, or a Hub repo, revision and commit
    target: Target | None = None


def outputs(args: argparse.Namespace) -> dict[str, Path | None]:
    """The report flags and the paths they name (``None``: not asked for)."""
    return {"--json": args.json, "--junit": args.junit, "--markdown": args.markdown, "--html": args.html}


def refuse_empty_snapshot(target: Target, exports: Exports) -> None:
    """A Hub snapshot with nothing the gate reads names the repo and commit (never a bare path)."""
    if exports.hf_dir is None and exports.tiktoken is None and exports.gguf is None:
        raise UsageError(
            f"{target.describe()}: the snapshot {target.directory} has no tokenizer.json or *.tiktoken "
            "(a GGUF is read only with --gguf FILE); check the repository's files"
        )


def plan(args: argparse.Namespace) -> Plan:
    """Everything the gate will read, checked before anything runs (errors -> exit 2)."""
    skipped = list(args.skip)
    backends = [b for b in args.backends if b not in skipped]
    problem = check_selection(backends, args.require, skipped=skipped)
    if problem:
        raise UsageError(problem)
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    target = resolve_target(args.dir, gguf=args.gguf)
    directory = target.directory
    if not directory.is_dir():
        raise UsageError(
            f"{directory} is not a directory; pass the checkpoint or tokenizer directory "
            "or a Hub id org/name[@revision]"
        )
    check_outputs(directory, outputs(args), tool="gate")  # in seconds, before anything is read
    artifact = args.artifact or shipped_artifact_path()
    ref = shared_reference(artifact)  # the one the runner and the adapters use: loaded once
    exports = Exports.discover(directory, artifact=artifact)
    if target.repo is not None:  # a Hub snapshot: the GGUF asked for with --gguf, never one cached
        exports = replace(exports, gguf=target.gguf)
        refuse_empty_snapshot(target, exports)
    require_any_export(exports, directory, verb="check")
    files = validate_directory(exports, directory=directory)
    fixtures = FixtureSet.load(
        probes=args.probes, chats=args.chats, texts=args.text, shipped=not args.only_user_data
    )
    if not fixtures.probes and not fixtures.chats:
        raise UsageError("no probes to run: drop --only-user-data or pass --probes/--text/--chats")
    reads = [exports.tiktoken, exports.gguf, artifact, *args.probes, *args.text, *args.chats]
    reads += [f.path for f in files.hf.values()]  # a Hub snapshot's files are blobs: resolved there
    check_outputs(directory, outputs(args), reads=reads, tool="gate")
    # a template that ran out of its budget in validation's render: no engine is asked to render it
    fixtures = replace(fixtures, refused_template=template_refusal(files))
    unavailable = unavailable_backends(backends, exports, required=args.require)
    return Plan(
        artifact=artifact,
        ref=ref,
        exports=exports,
        fixtures=fixtures,
        files=files,
        backends=tuple(backends),
        excluded=tuple(b for b in REGISTRY if b not in backends),
        unavailable=unavailable,
        target=target,
    )
