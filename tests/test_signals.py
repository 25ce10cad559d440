"""Signals end everything (issue 37 item 5): SIGINT or SIGTERM to a gate, at any moment, ends its
backends' children and exits 130 / 143 with one line on stderr, no traceback, no report.

Each test runs a real process in its own session -- ``python -m stacktok gate`` on the shipped
export with a few user probes, ``python -m conformance``, or a small script around
:func:`conformance.report.entry.run_main` for what a gate cannot be made to do on cue (a signal
landing inside a C callback, a main thread stuck in C, a forked worker) -- sends the signal to
the process (``kill PID``) or to its process group (Ctrl-C), and checks the exit code, stderr,
the reports folder and that nothing of the session is left alive.

Out of scope: a backend that crashes on its own (tests/test_crash_isolation.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from conformance.checks import forked
from conformance.report.entry import FORCE_AFTER

from .helpers import ROOT, SHIPPED_HF, gate_data
from .test_crash_isolation import kill_session, session_members

pytestmark = [
    pytest.mark.transformers,  # tokenizers is in the [hf] extra: runs under 4.57.x and 5.x
    pytest.mark.skipif(not forked.can_fork(), reason="no fork on this platform"),
]

ENDS = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated")}


def run_signalled(
    cmd: Sequence[str],
    *,
    signum: int,
    when: Callable[[subprocess.Popen, float], bool],
    to_group: bool,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> dict:
    """Start ``cmd`` in its own session; send ``signum`` (to its group: Ctrl-C) as soon as
    ``when(proc, seconds)`` holds; its exit code, stderr, seconds from the signal to the end, and
    what of its session is alive a second later (then killed). ``sent`` is False when it ended
    before the signal went."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    sent_at = None
    try:
        while proc.poll() is None and time.monotonic() - start < timeout:
            if when(proc, time.monotonic() - start):
                sent_at = time.monotonic()
                (os.killpg if to_group else os.kill)(proc.pid, signum)
                break
            time.sleep(0.02)
        _, err = proc.communicate(timeout=timeout)
    except BaseException:  # a timeout: the whole session goes, whatever it left running
        kill_session(proc)
        raise
    ended = time.monotonic()
    deadline, left = ended + 1.0, session_members(proc.pid)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = session_members(proc.pid)
    for line in left:  # leftovers fail the test; end them anyway
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)
    took = ended - sent_at if sent_at is not None else None
    return {"code": proc.returncode, "err": err, "took": took, "left": left, "sent": sent_at is not None}


def a_child_stopped(proc: subprocess.Popen, seconds: float) -> bool:
    """The backend's child stopped itself (the hook's SIGSTOP): the gate is busy with backends."""
    return any(line.split()[1] == "T" for line in session_members(proc.pid))


def assert_ended(run: dict, signum: int, prog: str, out: Path | None = None) -> None:
    code, word = ENDS[signum]
    assert run["code"] == code, run
    assert run["err"] == f"{prog}: {word}\n", run  # one line, no traceback (of ours or a worker's)
    assert run["took"] < 10, run
    assert run["left"] == [], run
    if out is not None:
        assert sorted(os.listdir(out)) == [], "a report or temp file was left"


@pytest.fixture(scope="module")
def probes(tmp_path_factory) -> Path:
    return gate_data(tmp_path_factory.mktemp("signal-data"), texts=["Hello world", "x != y , z"]).probes


def gate_cmd(probes: Path, out: Path, *extra: str) -> list[str]:
    reports = [f"--{kind}={out / f'r.{kind}'}" for kind in ("json", "junit", "markdown", "html")]
    return [sys.executable, "-m", "stacktok", "gate", str(SHIPPED_HF), "--only-user-data", "--quiet"] + [
        "--probes",
        str(probes),
        "--backends",
        "reference,tokenizers",
        *reports,
        *extra,
    ]


@pytest.mark.parametrize(
    ("signum", "to_group"), [(signal.SIGTERM, False), (signal.SIGINT, True)], ids=["kill", "ctrl-c"]
)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_signal_while_backends_run_ends_everything(
    probes: Path, tmp_path: Path, signum: int, to_group: bool, workers: str
) -> None:
    """The tokenizers child stops itself (so the gate waits on it); the signal ends the gate, the
    stopped child and the reference's: 130/143, one line, no report, nothing left running."""
    out = tmp_path / "out"
    out.mkdir()
    run = run_signalled(
        gate_cmd(probes, out, "--workers", workers),
        signum=signum,
        when=a_child_stopped,
        to_group=to_group,
        env={forked.CRASH_ENV: "tokenizers:SIGSTOP"},
    )
    assert run["sent"], run
    assert_ended(run, signum, "stacktok", out)


@pytest.mark.parametrize("after", [0.3, 0.8, 1.3, 2.0])
def test_a_signal_at_any_moment_ends_everything(probes: Path, tmp_path: Path, after: float) -> None:
    """SIGTERM at several moments of a gate busy for a few seconds (importing, validating, static
    checks, backends over 1 MB of text): each time 143, one line, no report, nothing left."""
    out, text = tmp_path / "out", tmp_path / "busy.txt"
    out.mkdir()
    text.write_text(("Hello world, it's 2026! x != y , z. " * 30 + "\n") * 1000, encoding="utf-8")
    run = run_signalled(
        gate_cmd(probes, out, "--text", str(text)),
        signum=signal.SIGTERM,
        when=lambda proc, seconds: seconds >= after,
        to_group=False,
    )
    assert run["sent"], f"the gate ended within {after} s: make it busier"
    assert_ended(run, signal.SIGTERM, "stacktok", out)


@pytest.mark.parametrize(
    ("signum", "to_group"), [(signal.SIGTERM, False), (signal.SIGINT, True)], ids=["kill", "ctrl-c"]
)
def test_a_signal_while_the_command_is_still_importing(tmp_path: Path, signum: int, to_group: bool) -> None:
    """The first ~0.2 s of ``python -m stacktok`` are imports, before any command runs: a signal
    there is the one line and 130/143 too, not a traceback from the import machinery or a bare
    death by SIGTERM. The imports are made slow on purpose (a ``sitecustomize`` that sleeps 3 s
    before ``conformance.report.entry`` is found), so the signal lands among them."""
    (tmp_path / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import sys, time

            class Slow:
                @staticmethod
                def find_spec(name, path=None, target=None):
                    if name == "conformance.report.entry":
                        time.sleep(3)
                    return None

            sys.meta_path.insert(0, Slow)
            """
        ),
        encoding="utf-8",
    )
    env = {
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    }
    cmd = [sys.executable, "-m", "stacktok", "gate", str(SHIPPED_HF), "--quiet"]
    run = run_signalled(
        cmd, signum=signum, when=lambda proc, seconds: seconds >= 1.5, to_group=to_group, env=env
    )
    assert run["sent"], run
    assert_ended(run, signum, "stacktok")


def test_python_m_conformance_ends_on_sigterm(probes: Path) -> None:
    cmd = [sys.executable, "-m", "conformance", str(SHIPPED_HF), "--only-user-data", "--quiet"]
    cmd += ["--probes", str(probes), "--backends", "reference,tokenizers"]
    run = run_signalled(
        cmd,
        signum=signal.SIGTERM,
        when=a_child_stopped,
        to_group=False,
        env={forked.CRASH_ENV: "tokenizers:SIGSTOP"},
    )
    assert run["sent"], run
    assert_ended(run, signal.SIGTERM, "conformance")


# ------------------------------------------------------------------ what a gate cannot do on cue
def script(body: str, ready: Path) -> list[str]:
    """``python -c`` running ``main()`` (defined in ``body``) under ``run_main(prog="demo")``;
    ``ready`` is created once ``main`` runs (``ready()`` in the body)."""
    code = "import os, signal, sys, time\n"
    code += f"def ready():\n    open({str(ready)!r}, 'w').close()\n"
    code += textwrap.dedent(body) + "\nfrom conformance.report.entry import run_main\n"
    code += "sys.exit(run_main(main, prog='demo'))\n"
    return [sys.executable, "-c", code]


def exists(path: Path) -> Callable[[subprocess.Popen, float], bool]:
    return lambda proc, seconds: path.exists()


def test_a_signal_that_lands_in_a_c_callback_is_raised_again(tmp_path: Path) -> None:
    """A signal handled while a ctypes callback runs (llama.cpp's log callback, in the gate's
    static checks) cannot propagate from there: it is not printed ("Exception ignored ...") but
    sent again, and ends the run at once -- not after the FORCE_AFTER fallback."""
    body = """
    import ctypes

    def inside():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):  # the handler runs here, inside the callback
            pass

    callback = ctypes.CFUNCTYPE(None)(inside)

    def main():
        callback()
        time.sleep(30)
        return 0
    """
    run = run_signalled(script(body, tmp_path / "ready"), signum=0, when=lambda p, s: False, to_group=False)
    assert run["code"] == 143 and run["err"] == "demo: terminated\n", run
    assert run["left"] == []


def test_a_main_thread_stuck_in_c_is_ended_after_the_grace(tmp_path: Path) -> None:
    """A main thread in a library call that does not return to Python (OpenSSL's PBKDF2 over a
    billion rounds, with the GIL released as ctypes and the tokenizer libraries release it) cannot
    run the handler: the signal watcher ends the process FORCE_AFTER s after the signal, with the
    one line."""
    body = """
    import hashlib

    def main():
        ready()
        hashlib.pbkdf2_hmac("sha256", b"x", b"y", 10**9)  # minutes in C, no signal checks
        return 0
    """
    ready = tmp_path / "ready"
    run = run_signalled(script(body, ready), signum=signal.SIGINT, when=exists(ready), to_group=True)
    assert run["sent"] and run["code"] == 130 and run["err"] == "demo: interrupted\n", run
    assert FORCE_AFTER - 0.5 < run["took"] < FORCE_AFTER + 3, run
    assert run["left"] == []


def test_a_worker_forked_inside_dies_silently_on_ctrl_c(tmp_path: Path) -> None:
    """A process forked while a command runs starts with SIGINT at its default: Ctrl-C to the group
    ends it without a traceback of its own, and the command with its one line."""
    body = """
    def main():
        if os.fork() == 0:
            ready()  # the worker is past its fork
            while True:  # busy in Python: it would raise KeyboardInterrupt here
                sum(range(1000))
        while True:
            time.sleep(0.1)
    """
    ready = tmp_path / "ready"
    run = run_signalled(script(body, ready), signum=signal.SIGINT, when=exists(ready), to_group=True)
    assert run["sent"], run
    assert_ended(run, signal.SIGINT, "demo")


def test_reports_are_written_whole_or_not_at_all(tmp_path: Path) -> None:
    """A signal while the reports are written (``signals_deferred``, around the gate's report
    writing) takes effect once every one is written: never some of them."""
    body = f"""
    from conformance.report.entry import signals_deferred

    def main():
        with signals_deferred():
            ready()
            for name in ("r.json", "r.xml", "r.md", "r.html"):
                time.sleep(0.3)  # the signal arrives while these are written
                open(os.path.join({str(tmp_path)!r}, name), "w").write("whole")
        time.sleep(30)
        return 0
    """
    ready = tmp_path / "ready"
    run = run_signalled(script(body, ready), signum=signal.SIGTERM, when=exists(ready), to_group=False)
    assert run["sent"] and run["code"] == 143 and run["err"] == "demo: terminated\n", run
    assert sorted(p.name for p in tmp_path.glob("r.*")) == ["r.html", "r.json", "r.md", "r.xml"]
    assert run["took"] < 3, run  # then at once, not after the 30 s sleep
