"""``plan_inputs``: every input of a run checked and read once, before anything runs.

In this order (the first problem raises, one line, exit 2):

1. the target: a local path as given, or a Hub id ``org/name[@revision]`` resolved to a cached or
   fetched snapshot (``conformance.core.hub.resolve_target``); it must be a directory;
2. every report path, before anything is read (``conformance.core.outputs.check_outputs``);
3. the artifact: ``--artifact`` or the one default (``conformance.core.arguments.artifact_path``),
   and its reference, loaded once (``conformance.backends.shared_reference``: the runner and the
   adapters get the same one);
4. DIR's layout (``conformance.core.layout.Exports``; for a Hub snapshot the GGUF asked for with
   ``--gguf``, never one cached), with at least one export to read;
5. every file of it, validated once (``conformance.validate.validate_directory``); the parsed
   files are handed on in :attr:`Plan.files` and never read again;
6. the probes, chats and texts (``conformance.core.fixtures.FixtureSet.load``);
7. every report path again, against every file the run reads (a sibling ``NAME.gguf``, the
   artifact, a ``--probes`` file, a Hub blob);
8. a chat template whose render ran out of its budget in validation: no engine is asked to
   render it (``FixtureSet.refused_template``);
9. with a :class:`~conformance.plan.selection.Selection`: the selected backends that cannot run
   (looked up, not imported); a ``--require``d one stops the run here, INCOMPLETE (exit 4).

``target=None`` plans an artifact alone (``stacktok audit ARTIFACT``): no directory, so steps 1,
4 and 5 do not apply.

Out of scope: running anything; each tool's own flags and rules (the gate's ``--workers``, the
audit's ``ARTIFACT_OR_DIR``, the fuzz's budget), which each tool checks before it plans.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from conformance.backends import shared_reference, unavailable_backends
from conformance.core.arguments import artifact_path
from conformance.core.checkpoint_template import dir_template
from conformance.core.errors import UsageError
from conformance.core.fixtures import FixtureSet
from conformance.core.hub import Target, resolve_target
from conformance.core.layout import Exports, require_any_export
from conformance.core.outputs import check_outputs
from conformance.plan.selection import Selection
from conformance.validate import Validated, validate_directory
from conformance.validate.template import template_refusal
from stacktok_export import ArtifactError, StackTokenizer


@dataclass(frozen=True)
class FixtureFiles:
    """The probes, chats and texts a run reads: the user's files, and the shipped ones unless not."""

    probes: Sequence[Path] = ()
    chats: Sequence[Path] = ()
    texts: Sequence[Path] = ()
    shipped: bool = True
    #: no probe and no chat at all is a usage error (never an empty PASS)
    required: bool = False

    def load(self) -> FixtureSet:
        fixtures = FixtureSet.load(
            probes=self.probes, chats=self.chats, texts=self.texts, shipped=self.shipped
        )
        if self.required and not fixtures.probes and not fixtures.chats:
            raise UsageError("no probes to run: drop --only-user-data or pass --probes/--text/--chats")
        return fixtures

    def paths(self) -> list[Path]:
        return [*self.probes, *self.texts, *self.chats]


@dataclass(frozen=True)
class Plan:
    """What a run reads: the reference, DIR's exports and validated files, the probes and chats."""

    artifact: Path
    #: the artifact's tokenizer (None only when planned with ``keep_refused=True`` and refused)
    ref: StackTokenizer | None
    exports: Exports
    fixtures: FixtureSet
    #: every file validation read, parsed (later stages take them from here, never from disk)
    files: Validated
    #: the backends that run (``--backends`` less ``--skip``), in the order given
    backends: tuple[str, ...] = ()
    #: backends excluded by name (not selected, or ``--skip``ped): named in the report, never a gap
    excluded: tuple[str, ...] = ()
    #: selected backends that cannot run, with why (``missing``: the verdict will be INCOMPLETE)
    unavailable: tuple[tuple[str, str, str], ...] = ()
    #: what DIR named: the directory itself, or a Hub repo, revision and commit (None: no directory)
    target: Target | None = None
    #: why the reference refused the artifact (only with ``keep_refused=True``)
    refused: str = ""


def refuse_empty_snapshot(target: Target, exports: Exports) -> None:
    """A Hub snapshot with nothing the gate reads names the repo and commit (never a bare path)."""
    if exports.hf_dir is None and exports.tiktoken is None and exports.gguf is None:
        raise UsageError(
            f"{target.describe()}: the snapshot {target.directory} has no tokenizer.json or *.tiktoken "
            "(a GGUF is read only with --gguf FILE); check the repository's files"
        )


def plan_inputs(
    target: Target | str | os.PathLike[str] | None,
    *,
    tool: str,
    artifact: str | os.PathLike[str] | None = None,
    gguf: str | None = None,
    outputs: Mapping[str, Path | None] | None = None,
    fixtures: FixtureFiles | None = None,
    selection: Selection | None = None,
    verb: str = "check",
    keep_refused: bool = False,
) -> Plan:
    """Everything a run of ``tool`` will read, checked and read once (module docstring); errors
    are one line, exit 2. ``target`` is DIR or a Hub id (or a :class:`Target` already resolved);
    ``outputs`` maps each report flag to its path; ``fixtures`` None reads no probes; ``verb``
    says what the tool does to DIR ("nothing to check"); ``keep_refused`` keeps an artifact the
    reference refuses (the audit reports its merge list) instead of raising."""
    outputs = dict(outputs or {})
    chosen = artifact_path(artifact)
    if target is None:
        return _artifact_alone(chosen, tool=tool, outputs=outputs, keep_refused=keep_refused)
    target = target if isinstance(target, Target) else resolve_target(target, gguf=gguf)
    directory = target.directory
    if not directory.is_dir():
        raise UsageError(
            f"{directory} is not a directory; pass the checkpoint or tokenizer directory "
            "or a Hub id org/name[@revision]"
        )
    check_outputs(directory, outputs, tool=tool)  # in seconds, before anything is read
    ref, refused = _reference(chosen, keep_refused=keep_refused)
    exports = Exports.discover(directory, artifact=chosen)
    if target.repo is not None:  # a Hub snapshot: the GGUF asked for with --gguf, never one cached
        exports = replace(exports, gguf=target.gguf)
        refuse_empty_snapshot(target, exports)
    require_any_export(exports, directory, verb=verb)
    files = validate_directory(exports, directory=directory)
    fixture_set = fixtures.load() if fixtures is not None else FixtureSet()
    reads = [exports.tiktoken, exports.gguf, chosen, *(fixtures.paths() if fixtures is not None else ())]
    reads += [f.path for f in files.hf.values()]  # a Hub snapshot's files are blobs: resolved there
    check_outputs(directory, outputs, reads=reads, tool=tool)
    # a template that ran out of its budget in validation's render: no engine is asked to render it
    fixture_set = replace(
        fixture_set,
        refused_template=template_refusal(files),
        template=dir_template({n: f.value for n, f in files.hf.items()}),
    )
    unavailable = () if selection is None else _unavailable(selection, exports)
    return Plan(
        artifact=chosen,
        ref=ref,
        exports=exports,
        fixtures=fixture_set,
        files=files,
        backends=() if selection is None else selection.backends,
        excluded=() if selection is None else selection.excluded,
        unavailable=unavailable,
        target=target,
        refused=refused,
    )


def _reference(artifact: Path, *, keep_refused: bool) -> tuple[StackTokenizer | None, str]:
    """The artifact's tokenizer, loaded once and shared; or (keep_refused) None and why not."""
    try:
        return shared_reference(artifact), ""
    except ArtifactError as exc:
        if not keep_refused:
            raise
        return None, str(exc)


def _unavailable(selection: Selection, exports: Exports) -> tuple[tuple[str, str, str], ...]:
    return unavailable_backends(list(selection.backends), exports, required=list(selection.required))


def _artifact_alone(
    artifact: Path, *, tool: str, outputs: dict[str, Path | None], keep_refused: bool
) -> Plan:
    """An artifact with no directory: its reference, and the report paths checked against it."""
    check_outputs(None, outputs, tool=tool)
    ref, refused = _reference(artifact, keep_refused=keep_refused)
    check_outputs(None, outputs, reads=[artifact], tool=tool)
    return Plan(
        artifact=artifact,
        ref=ref,
        exports=Exports(artifact=artifact, hf_dir=None, tiktoken=None, gguf=None),
        fixtures=FixtureSet(),
        files=Validated(directory=None),
        refused=refused,
    )
