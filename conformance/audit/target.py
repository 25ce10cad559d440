"""What ``stacktok audit ARTIFACT_OR_DIR [--artifact A]`` audits, planned as every tool plans.

An artifact JSON alone, or a tokenizer directory (a Hub id ``org/name[@revision]``: its
snapshot, ``conformance.core.hub``) -- then its ``tokenizer.json`` *and* the artifact given by
``--artifact`` (else the one default, ``conformance.core.arguments.artifact_path``). Every other
combination is a usage error that names the fix. :func:`plan_audit` turns the arguments into the
suite's one input plan (``conformance.plan.plan_inputs``): ``--json`` checked before anything
is read, the directory's files validated once (a malformed one is exit 2, as in the gate) and
handed on, the artifact loaded once -- and kept when the loader refuses it, so that a broken
merge list is a finding, not a usage error.

Out of scope: reading either vocabulary (``vocab``, ``tokenizer_json``).
"""

from __future__ import annotations

from pathlib import Path

from conformance.core.errors import UsageError
from conformance.core.hub import resolve_target
from conformance.plan import Plan, plan_inputs


def plan_audit(path: Path | None, artifact: Path | None, *, json: Path | None = None) -> Plan:
    """ARTIFACT_OR_DIR (+ ``--artifact``, ``--json``) -> the audit's input plan; usage errors name the fix."""
    outputs = {"--json": json}
    if path is None:
        return plan_inputs(None, tool="audit", artifact=artifact, outputs=outputs, keep_refused=True)
    target = resolve_target(path)
    where = target.directory
    if where.is_dir():
        if not (where / "tokenizer.json").is_file():
            raise UsageError(f"{where} has no tokenizer.json; pass a tokenizer directory or an artifact JSON")
        return plan_inputs(target, tool="audit", artifact=artifact, outputs=outputs, keep_refused=True)
    if where.is_file():
        if artifact is not None:
            raise UsageError("--artifact is for directory input; pass the artifact JSON once")
        return plan_inputs(None, tool="audit", artifact=where, outputs=outputs, keep_refused=True)
    raise UsageError(f"{where}: no such file or directory")


def subject_label(subject: str, plan: Plan) -> str:
    """How a finding's subject is named in human output ("" for ``backends``)."""
    if subject == "artifact":
        return plan.artifact.name
    if subject == "tokenizer.json" and plan.target is not None:
        return f"{plan.target.directory.name}/tokenizer.json"
    return ""
