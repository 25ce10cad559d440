"""A backend that crashes is a row, not a dead gate (issue 37 item 3).

Every backend runs in a forked child of its own (``conformance.checks.forked``, supervised by
``conformance.checks.supervise``): a child killed by a signal, stalled past the stall limit or
over its memory budget becomes a failing ``error`` row naming the backend, where it was and how
it ended; the other backends still run; the verdict, table and JSON report are written (exit 1);
no process is left behind. The gate runs here are real ``python -m stacktok gate`` processes on
the shipped export with a few user probes, crashed through the test hook
``STACKTOK_TEST_CRASH_BACKEND``; the in-process runs of ``run_suite`` crash a wrapped backend on
one probe or chat, to check the row names it.

Out of scope: signals sent to the gate itself (tests/test_signals.py); speed
(``benchmarks/bench_gate.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from conformance.backends import shared_reference
from conformance.checks import forked, loading
from conformance.checks.compare import Runner
from conformance.checks.loading import load_named
from conformance.checks.results import Part, result_rows
from conformance.checks.runner import run_suite
from conformance.checks.supervise import RemoteTraceback, TaskFailed
from conformance.checks.watch import Watch, Watched
from conformance.core.errors import UsageError
from conformance.core.fixtures import Chat, Divergence, FixtureSet, Probe
from conformance.core.layout import Exports
from conformance.core.protocol import Backend

from .helpers import HARD_STRINGS, ROOT, SHIPPED, SHIPPED_HF, gate_data

pytestmark = [
    pytest.mark.transformers,  # tokenizers is in the [hf] extra: runs under 4.57.x and 5.x
    pytest.mark.skipif(not forked.can_fork(), reason="no fork on this platform"),
]

TEXTS = ["Hello world, it's 2026!", "x != y , z", "don't DON'T", "中文 🚀 ünï"]


# ------------------------------------------------------------------ a gate as a process tree
def session_members(sid: int) -> list[str]:
    """Live processes of session ``sid`` (the gate started with ``start_new_session``), as
    ``"pid state cmdline"``; zombies are dead."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
        except OSError:
            continue
        if int(stat[3]) == sid and stat[0] not in ("Z", "X"):
            found.append(f"{entry} {stat[0]} {cmd}")
    return found


def kill_session(proc: subprocess.Popen) -> None:
    """End the whole session of ``proc`` (its group, then any member that left it) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for line in session_members(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)
    proc.wait()


def run_tree(argv: Sequence[str], env: Mapping[str, str], *, timeout: float = 120) -> dict:
    """``python -m stacktok *argv`` in its own session; its exit code, output, seconds, and what of
    its session is still alive a second after it returned."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacktok", *argv],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:  # a timeout: the whole session goes, whatever it left running
        kill_session(proc)
        raise
    seconds = time.monotonic() - start
    deadline, left = time.monotonic() + 1.0, session_members(proc.pid)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = session_members(proc.pid)
    for line in left:  # leftovers fail the test; end them anyway
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)
    return {"code": proc.returncode, "out": out, "err": err, "seconds": seconds, "left": left}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return gate_data(tmp_path_factory.mktemp("crash-data"), texts=TEXTS).probes


def gate(probes: Path, report: Path, *extra: str) -> list[str]:
    return [
        "gate",
        str(SHIPPED_HF),
        "--only-user-data",
        "--probes",
        str(probes),
        "--backends",
        "reference,tokenizers",
        "--quiet",
        "--json",
        str(report),
        *extra,
    ]


def rows_of(report: Path, backend: str) -> list[dict]:
    return [r for r in json.loads(report.read_text())["checks"] if r["backend"] == backend]


# ------------------------------------------------------------------ the gate, crashed by the hook
@pytest.mark.parametrize(
    ("hook", "signame", "workers"),
    [
        ("tokenizers", "SIGABRT", "1"),
        ("tokenizers:SIGSEGV", "SIGSEGV", "2"),
        ("tokenizers:KILL", "SIGKILL", "1"),
    ],
)
def test_a_backend_that_dies_is_a_failing_row(
    data: Path, tmp_path: Path, hook: str, signame: str, workers: str
):
    """The dead backend is one ``error`` row naming it, the signal and where it was; the other
    backend's rows are all there and pass; table, verdict and report written; exit 1."""
    report = tmp_path / "report.json"
    run = run_tree(gate(data, report, "--workers", workers), {forked.CRASH_ENV: hook})
    assert run["code"] == 1, run["err"]
    assert "verdict: FAIL" in run["out"] and "Traceback" not in run["err"], run
    dead = rows_of(report, "tokenizers")
    assert [(r["check"], r["status"]) for r in dead] == [("conformance", "error")], dead
    assert dead[0]["message"].startswith(f"tokenizers died with {signame} after loading, before probe t-0"), (
        dead
    )
    assert "reproduce it with `stacktok gate DIR --backends tokenizers`" in dead[0]["fix"]
    alive = rows_of(report, "reference")
    assert len(alive) == 9 and {r["status"] for r in alive} <= {"pass", "skip"}, alive
    assert f"tokenizers died with {signame}" in run["out"]  # the table shows it too
    assert run["left"] == [], run["left"]


def test_a_stalled_backend_is_killed_at_the_stall_limit(data: Path, tmp_path: Path) -> None:
    """A child that stops moving (SIGSTOP) is killed after STACKTOK_STALL_SECONDS: a row says so."""
    report = tmp_path / "report.json"
    env = {forked.CRASH_ENV: "tokenizers:SIGSTOP", forked.STALL_ENV: "1.5"}
    run = run_tree(gate(data, report, "--workers", "2"), env, timeout=60)
    assert run["code"] == 1, run["err"]
    (row,) = rows_of(report, "tokenizers")
    assert row["status"] == "error"
    assert (
        row["message"] == "tokenizers stalled for 1.5 s after loading, before probe t-0 (no progress: killed)"
    )
    assert run["seconds"] < 30 and run["left"] == [], run


def test_a_backend_over_its_memory_budget_is_killed(data: Path, tmp_path: Path) -> None:
    """A child whose resident memory passes STACKTOK_MEMORY_BUDGET is killed (a forked child holds
    well over 64 MiB from the start: the stopped one is killed for memory, not for stalling)."""
    report = tmp_path / "report.json"
    env = {forked.CRASH_ENV: "tokenizers:SIGSTOP", forked.MEMORY_ENV: "64MiB"}
    run = run_tree(gate(data, report), env, timeout=60)
    assert run["code"] == 1, run["err"]
    (row,) = rows_of(report, "tokenizers")
    assert row["status"] == "error", row
    assert row["message"].startswith("tokenizers went over the 64 MiB memory budget ("), row
    assert row["message"].endswith(" (killed)"), row  # where: loading, or stopped after it
    assert run["seconds"] < 30 and run["left"] == [], run


# ------------------------------------------------------------------ in process: where it died
class Bomb:
    """A real backend that kills its own process with SIGSEGV on any text or chat holding "boom"."""

    def __init__(self, backend, *, batch: bool) -> None:
        self.real = backend
        self.name, self.version, self.reads = backend.name, backend.version, backend.reads
        self.capabilities = backend.capabilities
        self.decode_exact, self.encodes_in_batch = backend.decode_exact, batch and backend.encodes_in_batch
        self.chat_requires_assistant = backend.chat_requires_assistant
        self.chat_injection_safe_path = backend.chat_injection_safe_path
        self.template_input = backend.template_input
        self.template_input_declaration = backend.template_input_declaration

    @staticmethod
    def _maybe(text: str) -> None:
        if "boom" in text:
            os.kill(os.getpid(), signal.SIGSEGV)

    def encode(self, text, *, allow_special):
        self._maybe(text)
        return self.real.encode(text, allow_special=allow_special)

    def encode_batch(self, texts, *, allow_special):
        self._maybe(" ".join(texts))
        return self.real.encode_batch(texts, allow_special=allow_special)

    def decode_bytes(self, ids):
        return self.real.decode_bytes(ids)

    def default_encode(self, text):
        return self.real.default_encode(text)

    def chat(self, messages, *, add_generation_prompt, tools=None, template_kwargs=None):
        self._maybe(" ".join(m["content"] for m in messages))
        return self.real.chat(
            messages,
            add_generation_prompt=add_generation_prompt,
            tools=tools,
            template_kwargs=template_kwargs,
        )

    def stream(self, ids):
        return self.real.stream(ids)


def fixture_set(texts: Sequence[str], chats: Sequence[str] = ()) -> FixtureSet:
    fs = FixtureSet.load(shipped=False)
    fs.probes = [Probe(f"p-{i}", "p", t) for i, t in enumerate(texts)]
    fs.chats = [
        Chat(f"c-{i}", ({"role": "user", "content": t}, {"role": "assistant", "content": "ok"}))
        for i, t in enumerate(chats)
    ]
    return fs


@pytest.fixture(scope="module")
def exports() -> Exports:
    return Exports.discover(SHIPPED_HF, artifact=SHIPPED)


@pytest.mark.parametrize(
    ("texts", "chats", "batch", "shards", "where"),
    [
        (["a", "b", "boom", "c"], [], False, None, "on probe p-2"),
        (["a", "b", "boom", "c"], [], False, 2, "on probe p-2"),  # in the second part
        (["a", "boom", "c"], [], True, None, "encoding probes p-0 to p-2 in one batch"),
        (["a", "b"], ["hi", "boom"], False, None, "on chat c-1"),  # reference: it has a chat path
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_the_row_names_the_probe_or_chat_it_died_on(
    monkeypatch, exports: Exports, texts, chats, batch, shards, where, workers
) -> None:
    target, other = ("reference", "tokenizers") if chats else ("tokenizers", "reference")
    real = loading.load_backend

    def load(name, exp):  # inherited by the forked children
        backend = real(name, exp)
        return Bomb(backend, batch=batch) if name == target else backend

    monkeypatch.setattr(loading, "load_backend", load)
    fs = fixture_set(texts, chats)
    results, stale, _ = run_suite(exports, fs, ["reference", "tokenizers"], workers=workers, shards=shards)
    dead, alive = sorted(results, key=lambda r: r.name != target)
    assert alive.name == other and alive.status == "ok" and alive.probes_run == len(texts), alive
    assert dead.status == "crashed" and dead.reason == f"died with SIGSEGV {where}", dead
    assert dead.version  # it had loaded and said so before it died
    rows = result_rows(results, stale=stale)
    assert [(r.check, r.status, r.message) for r in rows if r.backend == target] == [
        ("conformance", "error", f"{target} died with SIGSEGV {where}")
    ]


def test_the_children_give_the_results_of_a_run_in_this_process(exports: Exports) -> None:
    """On the normal path nothing changes: each backend in its own child, the probes cut in parts,
    gives the results, rows and stale declarations of one run in this process."""
    fs = fixture_set(HARD_STRINGS)
    fs.divergences = [Divergence("rotten", "tokenizers", "encode", "*", "no longer true", "-", category="p")]
    names = ["reference", "tokenizers", "tiktoken", "llama.cpp"]
    runner = Runner(shared_reference(exports.artifact), fs)
    want = [runner.run(loaded.backend) for loaded in (load_named(n, exports) for n in names)]
    got, stale, _ = run_suite(exports, fs, names, workers=2, shards=3)
    for a, b in zip(want, got):
        a.seconds = b.seconds = 0.0
    assert got == want
    assert stale == runner.stale_declarations(want) == ["rotten"]
    assert result_rows(got, stale=stale) == result_rows(want, stale=stale)


# ------------------------------------------------------------------ reaped on every path
def descendants() -> set[int]:
    """Live descendants of this process (zombies are dead)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if stat[0] not in ("Z", "X"):
                parent[int(entry)] = int(stat[1])
    out, todo = set(), [os.getpid()]
    while todo:
        pid = todo.pop()
        kids = [p for p, pp in parent.items() if pp == pid]
        out.update(kids)
        todo += kids
    return out


@pytest.mark.parametrize(
    "raised", [RuntimeError("static checks failed"), KeyboardInterrupt(), SystemExit(143)]
)
def test_children_are_killed_and_reaped_when_the_caller_fails(
    monkeypatch, exports: Exports, raised: BaseException
) -> None:
    """``meanwhile`` (the gate's static checks) raising while a backend's child is alive (stopped
    by the hook): the exception comes out of ``run_suite`` and no child of ours is left."""
    monkeypatch.setenv(forked.CRASH_ENV, "tokenizers:SIGSTOP")
    before = descendants()

    def meanwhile() -> None:
        deadline = time.monotonic() + 30
        while not any(
            Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
            for pid in descendants() - before
            if Path(f"/proc/{pid}").exists()
        ):
            if time.monotonic() > deadline:
                pytest.fail("the tokenizers child never stopped")
            time.sleep(0.02)
        raise raised

    with pytest.raises(type(raised)):
        run_suite(exports, fixture_set(TEXTS), ["reference", "tokenizers"], workers=2, meanwhile=meanwhile)
    assert descendants() - before == set()


def test_a_supervisor_that_dies_importing_a_library_is_replaced(monkeypatch, exports: Exports) -> None:
    """The supervisor imports the libraries two tasks share once; if that import kills it, the
    tasks run again under a new supervisor that does not import them: the same results."""
    fs = fixture_set(TEXTS)
    names = ["reference", "tokenizers"]
    want, _, _ = run_suite(exports, fs, names, workers=2, shards=2)

    def crash(plan, name) -> None:  # the first preload of a library that needs one
        if plan.get(name):
            os.kill(os.getpid(), signal.SIGSEGV)

    monkeypatch.setattr(forked, "_preload", crash)
    got, _, _ = run_suite(exports, fs, names, workers=2, shards=2)
    for a, b in zip(want, got):
        a.seconds = b.seconds = 0.0
    assert got == want


def test_a_bug_in_a_task_is_an_internal_error_of_one_line(monkeypatch, exports: Exports) -> None:
    """A Python exception of ours in a child is not a verdict on the backend: ``TaskFailed`` (exit
    3 at the command line), its message one line, the child's traceback its cause; nothing left."""
    real = Runner.run

    def run(self, backend, *, part=None):
        if backend.name == "tokenizers":
            raise ValueError("a bug of ours")
        return real(self, backend, part=part)

    monkeypatch.setattr(Runner, "run", run)
    before = descendants()
    with pytest.raises(TaskFailed) as info:
        run_suite(exports, fixture_set(TEXTS), ["reference", "tokenizers"], workers=2)
    assert str(info.value) == "task 1 of 2 raised: ValueError: a bug of ours"
    assert isinstance(info.value.__cause__, RemoteTraceback)
    assert "Traceback (most recent call last)" in str(info.value.__cause__)
    assert descendants() - before == set()


def test_a_watched_backend_is_still_a_backend(exports: Exports) -> None:
    """The child's wrapper (it marks where the backend is) carries every trait of the protocol."""
    backend = load_named("tokenizers", exports).backend
    slot = memoryview(bytearray(24)).cast("q")
    watched = Watched(backend, Watch(slot, Part(0, 1, extras=True)), [])
    assert isinstance(watched, Backend)
    for trait in Backend.__annotations__:
        assert getattr(watched, trait) == getattr(backend, trait), trait


# ------------------------------------------------------------------ settings
def test_limits_and_the_hook_are_read_from_the_environment() -> None:
    limits = forked.limits_from_env({forked.STALL_ENV: "300", forked.MEMORY_ENV: "8GiB"})
    assert (limits.stall_seconds, limits.memory_bytes) == (300.0, 8 << 30)
    assert forked.limits_from_env({forked.MEMORY_ENV: "512M"}).memory_bytes == 512 << 20
    assert forked.limits_from_env({}) == forked.Limits()
    for env, fix in (
        ({forked.STALL_ENV: "soon"}, "STACKTOK_STALL_SECONDS=300"),
        ({forked.STALL_ENV: "-1"}, "STACKTOK_STALL_SECONDS=300"),
        ({forked.MEMORY_ENV: "lots"}, "STACKTOK_MEMORY_BUDGET=8GiB"),
    ):
        with pytest.raises(UsageError, match=f"set e.g. {fix}"):
            forked.limits_from_env(env)
    assert forked.crash_hook({forked.CRASH_ENV: "llama.cpp"}) == ("llama.cpp", signal.SIGABRT)
    assert forked.crash_hook({forked.CRASH_ENV: "tokenizers:segv"}) == ("tokenizers", signal.SIGSEGV)
    with pytest.raises(UsageError, match="SIGNOPE is not a signal"):
        forked.crash_hook({forked.CRASH_ENV: "tokenizers:NOPE"})
