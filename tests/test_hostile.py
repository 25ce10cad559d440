"""A gate that untrusted checkpoints cannot hang, exhaust, crash or read secrets through (issue 37).

The catalogue is :data:`tests.helpers.hostile.CASES`: one case per class of hostile input (links and
special files, template bombs, resource bombs, leaks, Hub ids, output paths, log injection, a
crashing backend, ``stacktok import`` / ``pack`` bombs), each run as a real process tree
(``python -m stacktok``, its own process group) and held to its exit code, a wall-time bound, a
peak-memory bound of the whole tree, no traceback, no planted secret in any output, the inputs
byte-for-byte unchanged and no process left behind. Signals, which need a busy gate and a clock,
are the dedicated tests below, as is a check that the harness measures what it says.

Every case runs the real entry point with real backends (``reference,tokenizers`` on a few user
probes, to stay fast); nothing is mocked. Set ``STACKTOK_HOSTILE_LOG=FILE`` to append one JSON line
per case (id, exit code, seconds, peak MiB, problems).

Out of scope: ordinary malformed files (tests/test_gate_trust.py); the shipped directory's rows
(tests/test_gate.py).
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import stdlib_text
from .helpers.checkpoint import replace
from .helpers.hostile import (
    CASES,
    CLASSES,
    NESTED_RANGE,
    Case,
    Outcome,
    World,
    base_checkpoint,
    checkpoint,
    child_env,
    cleanup_big_files,
    fill,
    gate,
    make_world,
    new_marker,
    plain,
    report_flags,
    restore_devices,
    run_case,
    run_tree,
    tail,
    tree_state,
    written,
)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The module's one checkpoint (the shipped HF export); every case copies it."""
    return base_checkpoint(tmp_path_factory.mktemp("hostile-base") / "ckpt")


@pytest.fixture(scope="module")
def marker() -> str:
    return new_marker()


@pytest.fixture
def world(tmp_path, base, marker) -> Iterator[World]:
    """A fresh World per case; inputs over 32 MiB are deleted afterwards (pytest keeps tmp dirs)."""
    made = make_world(tmp_path, base=base, marker=marker)
    yield made
    cleanup_big_files(made)


@pytest.fixture(autouse=True)
def devices_intact():
    """A report path may name a device: a run that replaced one fails, and the node is put back."""
    assert not restore_devices(), "a device node was already replaced before this test"
    yield
    replaced = restore_devices()
    assert not replaced, f"the command replaced {replaced} with a file (restored by the test)"


def _log(case_id: str, outcome: Outcome, found: list[str]) -> None:
    path = os.environ.get("STACKTOK_HOSTILE_LOG")
    if path:
        line = {
            "id": case_id,
            "exit": outcome.code,
            "killed": outcome.killed,
            "seconds": round(outcome.seconds, 1),
            "peak_mib": round(outcome.peak_mib),
            "problems": found,
            "stderr": tail(outcome.stderr, 400),
        }
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input(case: Case, world: World) -> None:
    outcome, found = run_case(case, world)
    _log(case.id, outcome, found)
    assert not found, f"{case.id}: {outcome.summary()}\n  " + "\n  ".join(found)


def test_catalogue_covers_every_class() -> None:
    """One case per class at least (signals are the dedicated test below), ids unique."""
    covered = {c.cls for c in CASES} | {"signals"}
    assert covered == set(CLASSES), set(CLASSES) ^ covered
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert all(3 not in c.exit for c in CASES)  # an internal error is never an acceptable answer


# ------------------------------------------------------------------ signals end everything
@pytest.mark.parametrize(
    ("signum", "code", "to_group"),
    [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)],
    ids=["sigterm-to-the-gate", "sigint-to-the-group"],
)
def test_signal_during_a_template_hang_ends_everything(
    world: World, signum: int, code: int, to_group: bool
) -> None:
    """``kill PID`` (SIGTERM to the gate) or Ctrl-C (SIGINT to its group) 3 s into a gate busy
    rendering a template bomb and encoding 4 MB of text: exit 143/130 within 10 s, one line on
    stderr, no traceback, no report (not even a partial one), no process of the tree left, the
    input unchanged."""
    directory = checkpoint(plain(replace("chat_template.jinja", NESTED_RANGE)))(world)
    busy = world.inp / "user" / "busy.txt"  # ~9 s of encoding: busy at 3 s whatever the template budget
    busy.write_text(stdlib_text(4_000_000), encoding="utf-8")
    fields = world.fields(directory)
    argv = [fill(a, fields) for a in gate("--text", str(busy))]
    argv += report_flags(argv, world.out)
    before = tree_state(world.inp)
    outcome = run_tree(
        argv,
        env=child_env(world, {}, fields),
        cwd=world.out,
        logs=world.logs,
        out=world.out,
        seconds=13.0,  # 3 s busy + 10 s to end; the runner kills at +10 s
        peak_mib=2048,
        send=(3.0, signum, to_group),
    )
    where = f"{outcome.summary()}; stderr: {tail(outcome.stderr)!r}"
    assert outcome.running_at_signal, f"the gate was not busy 3 s in (it ended first): {where}"
    assert outcome.code == code, where
    assert outcome.seconds - (outcome.signalled_at or 0) < 10, where
    assert "Traceback" not in outcome.stderr, where
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, where
    assert not outcome.leftovers, f"processes alive after exit: {outcome.leftovers}"
    assert written(world.out) == {}, f"a report was written: {sorted(written(world.out))}"
    assert sorted(os.listdir(world.out)) == [], f"left in out/: {os.listdir(world.out)}"
    assert tree_state(world.inp) == before
    assert world.marker not in outcome.stdout + outcome.stderr


# ------------------------------------------------------------------ the harness itself
def test_harness_measures_the_whole_tree_and_finds_leftovers(tmp_path: Path, base: Path, marker: str) -> None:
    """A child that starts a grandchild holding 300 MiB and exits without waiting for it: the peak
    counts the grandchild, and the grandchild is a leftover (then killed by the harness)."""
    world = make_world(tmp_path, base=base, marker=marker)
    script = tmp_path / "inp" / "tree.py"
    script.write_text(
        textwrap.dedent(
            """
            import subprocess, sys, time
            code = "import time; b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(30)"
            subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
            time.sleep(2.5)
            """
        ),
        encoding="utf-8",
    )
    # run_tree runs ``python -m stacktok ...``; point it at the script through a stand-in package
    shim = tmp_path / "shim" / "stacktok"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("", encoding="utf-8")
    (shim / "__main__.py").write_text(f"import runpy; runpy.run_path({str(script)!r})\n", encoding="utf-8")
    env = {**child_env(world, {}, world.fields(None)), "PYTHONPATH": str(shim.parent)}
    outcome = run_tree(
        [], env=env, cwd=shim.parent, logs=world.logs, out=world.out, seconds=20, peak_mib=2048
    )
    assert outcome.code == 0, outcome.stderr
    assert outcome.peak_mib >= 290, outcome.summary()
    assert len(outcome.leftovers) == 1 and "bytearray" in outcome.leftovers[0], outcome.leftovers
    pid = int(outcome.leftovers[0].split(":")[0])
    state = (
        Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] if Path(f"/proc/{pid}").exists() else "gone"
    )
    assert state in ("Z", "X", "gone"), state
