"""Everything a fuzz run reads before it starts: the input plan, then the backends.

The inputs are planned as every tool plans them (``conformance.plan.plan_inputs``: the ``--out``
path checked, the reference loaded once, DIR's layout, every file validated once -- a malformed
file is exit 2 before anything runs -- and the shipped fixtures). Every selected backend then
loads DIR's exports exactly as the gate does (``conformance.checks.loading.load_named``).
:func:`load_one` is the one place the fuzz loads a
backend: a library that is absent is ``missing``, one that refuses the export is
``error`` (a finding, not a usage error), one without the ``ENCODE`` capability (TRL is
chat-only, llama.cpp-detokenize decode-only) is ``skip``. No backend to fuzz at all is
a usage error.

Out of scope: running anything (``conformance.fuzz.engine``).
"""

from __future__ import annotations

from collections.abc import Callable

from conformance.checks.loading import load_named
from conformance.core.errors import UsageError, input_errors
from conformance.core.layout import Exports
from conformance.core.protocol import Backend, Capability
from conformance.fuzz.config import FuzzConfig
from conformance.fuzz.results import NOT_RUN, BackendRun
from conformance.plan import FixtureFiles, Plan, plan_inputs

Loaded = tuple[Plan, list[tuple[Backend, BackendRun]], list[BackendRun]]


def load_one(name: str, exports: Exports) -> Backend | BackendRun:
    """Backend ``name`` on ``exports`` (through the one loader, ``conformance.checks.loading``), or
    the :class:`BackendRun` that says why it cannot be fuzzed: a library that is not installed is
    *missing* (the verdict is then INCOMPLETE), a directory without the file it reads *skip*."""
    loaded = load_named(name, exports)
    if loaded.status in ("missing", "skip"):
        return BackendRun(name, status=loaded.status, reason=loaded.reason)
    if loaded.status == "error":  # the library refuses the export: a finding, not a usage error
        return BackendRun(name, status="error", reason=f"cannot load the export: {loaded.reason}"[:300])
    backend = loaded.backend
    if Capability.ENCODE not in backend.capabilities:
        why = "declares no encode capability (chat-only or decode-only): nothing to fuzz"
        return BackendRun(name, version=backend.version, status="skip", reason=why)
    return backend


def plan(config: FuzzConfig) -> Plan:
    """The input plan of a fuzz run (bad input: a :class:`UsageError`, exit 2)."""
    try:
        return plan_inputs(
            config.target or config.directory,
            tool="fuzz",
            artifact=config.artifact,
            outputs={"--out": config.out},
            fixtures=FixtureFiles(),  # the shipped probes (the generators' seeds) and declarations
            verb="fuzz",
        )
    except input_errors() as exc:
        raise UsageError(str(exc)) from None


def load_inputs(config: FuzzConfig, say: Callable[[str], None]) -> Loaded:
    """The input plan, the backends to fuzz (each with its run) and the runs of the rest."""
    inputs = plan(config)
    loaded: list[tuple[Backend, BackendRun]] = []
    unloaded: list[BackendRun] = []
    for name in config.backends:
        got = load_one(name, inputs.exports)
        if isinstance(got, BackendRun):
            unloaded.append(got)
            continue
        loaded.append((got, BackendRun(name, version=got.version)))
        say(f"loaded {name} {got.version}")
    if not loaded and all(r.status in NOT_RUN for r in unloaded):
        reasons = "; ".join(f"{r.name}: {r.reason}" for r in unloaded)
        raise UsageError(f"no backend to fuzz ({reasons}); install one or choose others with --backends")
    return inputs, loaded, unloaded
