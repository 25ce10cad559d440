"""Everything a fuzz run reads before it starts: the reference, the exports, the fixtures, the backends.

Every selected backend loads DIR's exports exactly as the gate does (``Exports.discover``
+ ``conformance.checks.loading.load_named``), after the same validation (a malformed file is
exit 2 before anything runs). :func:`load_one` is the one place the fuzz loads a
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
from conformance.core.fixtures import FixtureSet
from conformance.core.layout import Exports, require_any_export
from conformance.core.protocol import Backend, Capability
from conformance.fuzz.config import FuzzConfig
from conformance.fuzz.results import NOT_RUN, BackendRun
from conformance.validate import validate_directory
from stacktok_export import StackTokenizer

Loaded = tuple[StackTokenizer, FixtureSet, list[tuple[Backend, BackendRun]], list[BackendRun]]


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


def load_inputs(config: FuzzConfig, say: Callable[[str], None]) -> Loaded:
    """The reference, the fixtures, the backends to fuzz (each with its run) and the runs of the rest."""
    try:
        ref = StackTokenizer.load(config.artifact)
        exports = Exports.discover(config.directory, artifact=config.artifact)
        require_any_export(exports, config.directory, verb="fuzz")
        validate_directory(exports, directory=config.directory)  # malformed files: exit 2, as in the gate
        fixtures = FixtureSet.load()
    except input_errors() as exc:
        raise UsageError(str(exc)) from None
    loaded: list[tuple[Backend, BackendRun]] = []
    unloaded: list[BackendRun] = []
    for name in config.backends:
        got = load_one(name, exports)
        if isinstance(got, BackendRun):
            unloaded.append(got)
            continue
        loaded.append((got, BackendRun(name, version=got.version)))
        say(f"loaded {name} {got.version}")
    if not loaded and all(r.status in NOT_RUN for r in unloaded):
        reasons = "; ".join(f"{r.name}: {r.reason}" for r in unloaded)
        raise UsageError(f"no backend to fuzz ({reasons}); install one or choose others with --backends")
    return ref, fixtures, loaded, unloaded
