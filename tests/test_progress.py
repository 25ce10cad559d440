"""The one progress reporter (stacktok_export.util.progress) and the commands that use it."""

from __future__ import annotations

import io
import re
import threading
import time
from pathlib import Path

import pytest

import stacktok_cli
from stacktok_export.trainer.trainer import ProgressBar
from stacktok_export.util import progress as progress_mod
from stacktok_export.util.progress import Progress

from .conftest import stdlib_text
from .helpers import SHIPPED_HF, GateData, GateRun, run_gate, write_jsonl

# every line the non-terminal gate may print on stderr, whole
GATE_LINE = re.compile(
    r"  \.\. (static checks"
    r"|conformance: 3 probes, 0 chats, backends reference,tokenizers"
    r"|(reference|tokenizers): [\d,]+/3 probes(, .*/s, ETA .*)?"
    r"|(reference|tokenizers): done, 3/3 probes in [\d.]+s)"
)


class FakeTTY(io.StringIO):
    """A terminal to tqdm (or a pipe, ``tty=False``) that counts writes that overlap in time."""

    def __init__(self, tty: bool = True) -> None:
        super().__init__()
        self.tty = tty
        self.busy = threading.Lock()
        self.overlaps = 0

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> int:
        if not self.busy.acquire(blocking=False):
            self.overlaps += 1
            self.busy.acquire()
        try:
            time.sleep(0)  # invite another thread in
            return super().write(s)
        finally:
            self.busy.release()


@pytest.fixture()
def probes(tmp_path: Path) -> GateData:
    texts = ["hello", "wörld 👍", "a <|user|> b"]
    rows = [{"id": i, "category": "u", "text": t} for i, t in zip("abc", texts)]
    return GateData(write_jsonl(tmp_path / "p.jsonl", rows), None, tmp_path)


def gate(probes: GateData, capsys: pytest.CaptureFixture[str], *extra: str) -> GateRun:
    backends = "reference,tokenizers"
    return run_gate(SHIPPED_HF, *extra, data=probes, backends=backends, quiet=False, capture=capsys)


def test_gate_progress_off_a_terminal_is_a_few_whole_lines(probes, capsys) -> None:
    run = gate(probes, capsys)
    assert run.code == 0
    err = run.stderr
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    assert len(lines) <= 6, err
    assert all(GATE_LINE.fullmatch(line) for line in lines), err
    for name in ("reference", "tokenizers"):  # one final line per backend bar
        assert sum(line.startswith(f"  .. {name}: done, 3/3 probes") for line in lines) == 1, err


def test_gate_plain_lines_follow_each_backend_whole_and_in_order(probes, capsys, monkeypatch) -> None:
    monkeypatch.setattr(progress_mod, "PLAIN_INTERVAL", 0.0)  # a line per probe from both threads
    for workers in ("1", "2"):
        run = gate(probes, capsys, "--workers", workers)
        assert run.code == 0
        lines = run.stderr.splitlines()
        assert all(GATE_LINE.fullmatch(line) for line in lines), lines
        for name in ("reference", "tokenizers"):
            counts = [ln.split(": ", 1)[1].split("/")[0] for ln in lines if ln.startswith(f"  .. {name}: ")]
            if workers == "1":  # in this process: a line per probe
                assert counts == ["1", "2", "3", "done, 3"], lines
            else:  # a forked worker relays its counts in batches (checks/forked.py): whole, in order
                numbers = [int(c) for c in counts[:-1]]
                assert numbers == sorted(numbers) and counts[-2:] == ["3", "done, 3"], lines


def test_gate_quiet_prints_nothing_on_stderr(probes, capsys) -> None:
    run = gate(probes, capsys, "--quiet")
    assert run.code == 0
    assert run.stderr == ""
    assert "verdict: PASS" in run.stdout


def test_terminal_mode_draws_stacked_bars_and_is_thread_safe() -> None:
    tty = FakeTTY()
    progress = Progress(stream=tty)
    assert progress.live
    bars = [progress.bar(name, 300, unit="probes") for name in ("alpha", "beta")]
    assert sorted(b._position for b in bars) == [0, 1]  # stacked, not drawn over each other

    def work(bar) -> None:
        for _ in range(bar.total):
            bar.update()
        bar.close()

    threads = [threading.Thread(target=work, args=(b,)) for b in bars]
    for t in threads:
        t.start()
    progress.say("a message from the main thread")
    for t in threads:
        t.join()
    progress.close()
    out = tty.getvalue()
    assert tty.overlaps == 0
    assert "\ralpha:" in out and "\rbeta:" in out  # tqdm redraws in place
    assert "\x1b[A" in out  # the second bar lives one line down
    # one-off and "done" lines are whole lines, at a line start or where tqdm cleared a bar (\r, cursor-up)
    assert re.search(r"(^|\n|\r|\x1b\[A)  \.\. a message from the main thread\n", out)
    for name in ("alpha", "beta"):
        assert re.search(rf"(^|\n|\r|\x1b\[A)  \.\. {name}: done, 300/300 probes in [\d.]+s\n", out), out[
            -500:
        ]
    # a new bar takes the first free position again
    assert progress.bar("gamma", 1)._position == 0


def test_plain_mode_lines_stay_whole_when_two_threads_update_two_bars() -> None:
    pipe = FakeTTY(tty=False)
    progress = Progress(stream=pipe, interval=0.0)  # a line per update: maximal contention
    assert not progress.live
    bars = [progress.bar(name, 200, unit="probes") for name in ("alpha", "beta")]
    threads = [threading.Thread(target=lambda b=b: [b.update() for _ in range(b.total)]) for b in bars]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    progress.close()
    assert pipe.overlaps == 0
    lines = pipe.getvalue().splitlines()
    assert len(lines) == 402
    assert all(
        re.fullmatch(r"  \.\. (alpha|beta): ([\d,]+/200 probes.*|done, 200/200 probes in .*)", ln)
        for ln in lines
    )
    for name in ("alpha", "beta"):
        mine = [ln for ln in lines if ln.startswith(f"  .. {name}: ")]
        assert [ln.split(": ")[1].split("/")[0] for ln in mine[:-1]] == [str(n) for n in range(1, 201)]


def test_plain_mode_is_periodic_whole_lines_and_quiet_is_silent() -> None:
    stream = io.StringIO()
    progress = Progress(stream=stream, interval=0.0)
    assert not progress.live
    with progress.bar("x", 4, unit="items") as bar:
        bar.update(2)
        bar.set(4)
    bar.update()  # after close: ignored
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert re.fullmatch(r"  \.\. x: 2/4 items, [\d,]+/s, ETA .*", lines[0])
    assert lines[1] == "  .. x: 4/4 items"
    assert re.fullmatch(r"  \.\. x: done, 4/4 items in [\d.]+s", lines[2])

    slow = io.StringIO()
    bar = Progress(stream=slow, interval=3600).bar("y", 10)
    for _ in range(10):
        bar.update()
    bar.close()
    assert re.fullmatch(r"  \.\. y: done, 10/10 items in [\d.]+s\n", slow.getvalue())  # only "done"

    silent = FakeTTY()
    quiet = Progress(quiet=True, stream=silent)
    quiet.say("x")
    b = quiet.bar("z", 3)
    b.update()
    b.close()
    quiet.close()
    assert silent.getvalue() == ""


def test_train_progress_off_a_terminal_is_plain_periodic_lines(tmp_path, capsys, monkeypatch) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(stdlib_text(200_000), encoding="utf-8")
    monkeypatch.setattr(progress_mod, "PLAIN_INTERVAL", 0.0)  # every merge is "10 s later"
    argv = ["train", str(corpus), "--vocab-size", "400", "--out", str(tmp_path / "t.json")]
    assert stacktok_cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    m = re.fullmatch(r"  \.\. train: 1/([\d,]+) merges(, .*)?", lines[0])
    assert m, lines[:3]
    assert len(lines) > 10
    assert all(
        re.fullmatch(r"  \.\. train: [\d,]+/[\d,]+ merges(, [\d,]+/s, ETA .*)?", ln) for ln in lines[:-1]
    )
    assert re.fullmatch(rf"  \.\. train: done, {m.group(1)}/{m.group(1)} merges in [\d.]+s", lines[-1])


def test_train_progress_bar_keeps_its_call_signature() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream=stream, every=3600)
    for done in range(1, 6):
        bar(done, 10)  # a run that stopped early: the caller closes (or drops) the bar
    bar.close()
    bar.close()
    assert re.fullmatch(r"  \.\. train: stopped at 5/10 merges after [\d.]+s\n", stream.getvalue())
    dropped = io.StringIO()
    bar = ProgressBar(stream=dropped)
    bar(3, 7)
    del bar  # what `stacktok train` does after a shortfall
    assert dropped.getvalue().startswith("  .. train: stopped at 3/7 merges after ")
