"""Run backends in forked task children: ``run_forked``, how ``run_suite`` runs every backend.

Each backend runs in a child process of its own, under one supervisor
(``conformance.checks.supervise``): a segfault, an abort, a hang or a memory blow-up in a
library ends that child only and becomes the backend's result -- status ``crashed``, a failing
``error`` row that names the backend, what it was doing and how it ended ("llama.cpp died with
SIGSEGV on probe long-a-1m"; where it was is kept by ``conformance.checks.watch``). The other
backends still run, and the table, verdict and reports are written as always. The process that
calls ``run_forked`` never loads a backend's library; ``--workers 1`` runs one child at a time.

How the work is cut: a fixture set of :data:`SHARD_FROM` probes or more is cut into one
contiguous :class:`~conformance.checks.results.Part` per worker, balanced by an estimate of each
probe's cost (:func:`plan_parts`; the last part also carries the once-per-backend checks), and
each (backend, part) is one task, at most ``workers`` at once, part by part. The supervisor
computes the reference's ids for a part once, before its first task, and every child of that
part inherits them; it also imports the libraries the tasks need once (:data:`PRELOAD`), so no
child pays for the import again. The parts of a backend are joined by
:func:`~conformance.checks.results.merge_parts` into exactly the result one whole run gives; a
declaration is stale when it is stale in every part. A small fixture set runs one whole backend
per task.

A child loads its backend through :func:`~conformance.checks.loading.load_named`; its bars and
lines are relayed to the caller's ``progress`` (a backend's parts share one bar). A library that
redirects fds 1 and 2 while loading (issue #20) does so in its child, whose fds are its own.
``meanwhile`` runs in the caller while the children work (the gate's static checks).

Limits (:func:`limits_from_env`): a child that makes no progress for ``STACKTOK_STALL_SECONDS``
(default 120) or whose resident memory passes ``STACKTOK_MEMORY_BUDGET`` (default 4GiB; the
shipped directory's children peak under 0.5 GiB) is killed, and the row says so.

Test hook (tests only, never set it in production): ``STACKTOK_TEST_CRASH_BACKEND=NAME[:SIGNAL]``
makes backend NAME's task child send itself SIGNAL (default SIGABRT; e.g. ``SIGSEGV``, or
``SIGSTOP`` to stall) right after loading, before its first probe.

Out of scope: deciding how many workers (``run_suite``'s ``workers``), platforms without
``fork`` (``run_suite`` runs the backends in threads there, without this isolation).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conformance.backends import BACKENDS
from conformance.checks.compare import Runner
from conformance.checks.loading import Loaded, load_named
from conformance.checks.plumbing import GIB, Channel
from conformance.checks.results import STREAM_MAX_CHARS, BackendResult, Part, merge_parts
from conformance.checks.supervise import Ended, Limits, run_supervised
from conformance.checks.watch import LOAD, SEND, STALE, START, TaskProgress, Watch, Watched, where
from conformance.core.errors import UsageError
from conformance.core.fixtures import Probe
from conformance.core.layout import Exports
from stacktok_export.util.progress import Bar, Progress

#: fixture sets this large are cut into one part per worker (smaller: a whole backend per task)
SHARD_FROM = 500
#: the cost model that balances the parts, in microseconds (measured on the shipped probes with
#: transformers, the slowest plain backend): a fixed cost per probe, a cost per character of a
#: streamed probe (the stream decodes every token) or of a longer one, and the once-per-backend
#: checks. A longer probe's cost was refitted to all seven plain backends together (2026-12-05):
#: tiktoken and llama.cpp are superlinear on one long pre-token (the 1 MB ``long-a-1m``: 0.36 s
#: and 0.92 s), so at 0.7 the part holding the long probes took 7.1 s against the other's 6.0 s
_PER_PROBE, _PER_STREAMED_CHAR, _PER_CHAR, _EXTRAS = 100.0, 3.3, 1.1, 450_000.0
#: libraries the supervisor imports once when two tasks or more need them (each child inherits
#: them): imports that start no thread and read no input. vLLM and TRL (torch) load in their child.
PRELOAD = ("tokenizers", "tiktoken", "transformers", "llama_cpp")
STALL_ENV, MEMORY_ENV, CRASH_ENV = (
    "STACKTOK_STALL_SECONDS",
    "STACKTOK_MEMORY_BUDGET",
    "STACKTOK_TEST_CRASH_BACKEND",
)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": GIB, "t": 1 << 40}


def can_fork() -> bool:
    return hasattr(os, "fork") and hasattr(signal, "pthread_sigmask")


def limits_from_env(environ: Mapping[str, str] = os.environ) -> Limits:
    """The children's limits: ``STACKTOK_STALL_SECONDS`` (seconds without progress, default 120)
    and ``STACKTOK_MEMORY_BUDGET`` (resident bytes, e.g. ``8GiB``, ``512M``; default 4 GiB)."""
    limits = Limits()
    stall, memory = environ.get(STALL_ENV, "").strip(), environ.get(MEMORY_ENV, "").strip()
    seconds, budget = limits.stall_seconds, limits.memory_bytes
    if stall:
        try:
            seconds = float(stall)
        except ValueError:
            seconds = -1.0
        if not 0 < seconds < float("inf"):
            raise UsageError(
                f"{STALL_ENV}={stall!r}: not a number of seconds above 0; set e.g. {STALL_ENV}=300"
            )
    if memory:
        got = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", memory.lower())
        budget = int(float(got[1]) * _UNITS[got[2]]) if got else 0
        if budget <= 0:
            raise UsageError(f"{MEMORY_ENV}={memory!r}: not an amount of memory; set e.g. {MEMORY_ENV}=8GiB")
    return Limits(stall_seconds=seconds, memory_bytes=budget)


def crash_hook(environ: Mapping[str, str] = os.environ) -> tuple[str, int] | None:
    """``STACKTOK_TEST_CRASH_BACKEND=NAME[:SIGNAL]`` (tests only) as (NAME, signal number)."""
    spec = environ.get(CRASH_ENV, "").strip()
    if not spec:
        return None
    name, _, sig = spec.partition(":")
    sig = (sig.strip() or "SIGABRT").upper()
    sig = sig if sig.startswith("SIG") else f"SIG{sig}"
    if sig not in signal.Signals.__members__:
        raise UsageError(f"{CRASH_ENV}={spec!r}: {sig} is not a signal; e.g. {CRASH_ENV}=llama.cpp:SIGSEGV")
    return name.strip(), int(signal.Signals[sig])


class _Relay:
    """The children's bars and lines, drawn by the caller only; a backend's parts share one bar,
    which closes when every part has ended (a part whose child died counts as ended)."""

    def __init__(self, progress: Progress | Callable[[str], None], names: Sequence[str], parts: int) -> None:
        self.progress, self.names, self.parts = progress, names, parts
        self.bars: dict[str, Bar] = {}
        self.closed: dict[str, int] = {}
        self.ended: set[int] = set()

    def __call__(self, task: int, msg: tuple[Any, ...] | None) -> None:
        if msg is None or msg[0] == "close":
            self._close(task)
        elif msg[0] == "say":
            self.progress(msg[1])
        elif msg[0] == "open":
            if msg[1] not in self.bars and isinstance(self.progress, Progress):
                self.bars[msg[1]] = self.progress.bar(msg[1], msg[2], unit=msg[3])
        elif msg[0] == "update" and msg[1] in self.bars:
            self.bars[msg[1]].update(msg[2])

    def _close(self, task: int) -> None:
        if task in self.ended:
            return
        self.ended.add(task)
        name = self.names[task]
        self.closed[name] = self.closed.get(name, 0) + 1
        if self.closed[name] == self.parts and name in self.bars:
            self.bars.pop(name).close()


def plan_parts(probes: Sequence[Probe], n: int) -> list[Part]:
    """``probes`` cut into ``n`` contiguous parts of about equal estimated cost, the last one
    carrying the once-per-backend checks (never an empty part unless there are fewer probes)."""
    cost = [
        _PER_PROBE + len(p.text) * (_PER_STREAMED_CHAR if len(p.text) <= STREAM_MAX_CHARS else _PER_CHAR)
        for p in probes
    ]
    total = sum(cost) + _EXTRAS
    parts, start, done = [], 0, 0.0
    for k in range(1, n):
        stop, target = start, total * k / n
        while stop < len(probes) - (n - k) and done + cost[stop] / 2 < target:
            done += cost[stop]
            stop += 1
        parts.append(Part(start, stop, extras=False))
        start = stop
    parts.append(Part(start, len(probes), extras=True))
    return parts


def not_run(loaded: Loaded) -> BackendResult:
    """The result of a backend that did not load: its status and the reason, one line."""
    reason = loaded.line(400) if loaded.status == "error" else loaded.reason
    return BackendResult(name=loaded.name, status=loaded.status, reason=reason)


def run_forked(
    runner: Runner,
    exports: Exports,
    names: Sequence[str],
    *,
    workers: int,
    quiet: bool,
    shards: int | None = None,
    meanwhile: Callable[[], object] | None = None,
    limits: Limits | None = None,
) -> tuple[list[BackendResult], list[str]]:
    """Every backend of ``names``, each in its own child, up to ``workers`` at once; results in
    ``names`` order, the stale declarations in declaration order.

    ``shards`` parts of the probes (default: one per worker from :data:`SHARD_FROM` probes, else
    1: a whole backend per task); ``meanwhile`` runs here while the children work; ``limits``
    default to :func:`limits_from_env`."""
    probes = runner.fx.probes
    n = shards if shards is not None else (workers if len(probes) >= SHARD_FROM else 1)
    parts: list[Part | None] = list(plan_parts(probes, n)) if n > 1 else [None]
    tasks = [(name, part) for part in parts for name in names]
    progress = runner.progress
    mode = "quiet" if quiet else "bars" if isinstance(progress, Progress) else "lines"
    hook = crash_hook()
    preload = _preload_plan(names, len(parts))

    def work(task: int, channel: Channel) -> None:
        name, part = tasks[task]
        _run_task(runner, exports, name, part, channel, mode=mode, hook=hook)

    def before(task: int) -> None:
        part = tasks[task][1]
        runner.prepare(probes if part is None else probes[part.start : part.stop])

    def describe(task: int, slot: tuple[int, ...]) -> str:
        part = tasks[task][1] or Part(0, len(probes), extras=True)
        return where(slot[0], slot[1], part=part, probes=probes, chats=runner.fx.chats)

    ended = run_supervised(
        len(tasks),
        work,
        workers=workers,
        describe=describe,
        on_message=_Relay(progress, [name for name, _ in tasks], len(parts)),
        limits=limits or limits_from_env(),
        before=before,
        preload=(lambda task: _preload(preload, tasks[task][0])) if preload else None,
        meanwhile=meanwhile,
    )
    by_name: dict[str, list[tuple[BackendResult, list[str]]]] = {name: [] for name in names}
    for (name, _), end in zip(tasks, ended):
        by_name[name].append(_outcome(name, end))  # tasks are in part order: so is each list
    order = {d.id: i for i, d in enumerate(runner.decl.divergences)}
    results, stale = [], set()
    for name in names:
        got = by_name[name]
        results.append(merge_parts([r for r, _ in got]))
        if results[-1].status in ("ok", "diverged"):
            stale |= set.intersection(*(set(found) for _, found in got))
    return results, sorted(stale, key=order.__getitem__)


def _run_task(
    runner: Runner,
    exports: Exports,
    name: str,
    part: Part | None,
    channel: Channel,
    *,
    mode: str,
    hook: tuple[str, int] | None,
) -> None:
    """In the task child: load ``name``, run it over ``part``, send (result, stale declarations)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the parent may have used its pool
    watch = Watch(channel.slot, part or Part(0, len(runner.fx.probes), extras=True))
    watch.at(LOAD)
    runner.progress = TaskProgress(watch, lambda msg: channel.send("progress", msg), mode)
    loaded = load_named(name, exports)
    if loaded.backend is None:
        channel.send("result", (not_run(loaded), []))
        return
    channel.send("hello", loaded.backend.version)
    watch.at(START)
    if hook is not None and hook[0] == name:
        os.kill(os.getpid(), hook[1])
    result = runner.run(Watched(loaded.backend, watch, runner.fx.chats), part=part)  # type: ignore[arg-type] -- the protocol, by duck typing
    watch.at(STALE)
    stale = runner.stale_declarations([result])
    watch.at(SEND)
    channel.send("result", (result, stale))


def _outcome(name: str, end: Ended) -> tuple[BackendResult, list[str]]:
    if end.done:
        return end.payload
    return BackendResult(name=name, version=end.hello or "", status="crashed", reason=end.reason), []


def _preload_plan(names: Sequence[str], parts: int) -> dict[str, tuple[str, ...]]:
    """For each backend, the :data:`PRELOAD` libraries it needs that two tasks or more need."""
    need = {
        name: [m for m in BACKENDS[name].needs if m in PRELOAD] if name in BACKENDS else [] for name in names
    }
    count: dict[str, int] = {}
    for modules in need.values():
        for m in modules:
            count[m] = count.get(m, 0) + parts
    return {name: tuple(m for m in modules if count[m] > 1) for name, modules in need.items() if modules}


def _preload(plan: Mapping[str, tuple[str, ...]], name: str) -> None:
    """In the supervisor, before ``name``'s task child: import what it needs, once (an import that
    fails is left to the child, which reports it)."""
    for module in plan.get(name, ()):
        with contextlib.suppress(Exception):
            if importlib.util.find_spec(module) is not None:
                importlib.import_module(module)
