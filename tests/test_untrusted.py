"""Reading a hostile file and running hostile work (issue 37): ``stacktok_export.util``.

``untrusted.read_untrusted`` refuses a link out of its roots, a FIFO or a device before opening it
and a file over its limit before reading it; ``bounded.run_bounded`` returns a hang, a memory bomb
or a crash of the work as a value; ``conformance.core.outputs`` keeps reports off the inputs.

Out of scope: the whole gate on hostile checkpoints (tests/test_hostile.py).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from conformance.core.errors import UsageError
from conformance.core.layout import trusted_roots
from conformance.core.outputs import check_outputs
from conformance.validate.entries import guard_directory
from stacktok_export.util.atomic import write_report
from stacktok_export.util.bounded import Budget, run_bounded
from stacktok_export.util.limits import Limits, current, raised
from stacktok_export.util.untrusted import UntrustedFileError, escape, read_untrusted

SECRET = "SECRET-5f0c9e"


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    ckpt, outside = tmp_path / "ckpt", tmp_path / "home"
    ckpt.mkdir()
    outside.mkdir()
    (outside / "id_rsa").write_text(SECRET)
    (ckpt / "tokenizer.json").write_text('{"a": 1}')
    return {"ckpt": ckpt, "outside": outside}


def test_a_link_out_of_the_roots_is_refused_naming_where_it_points(tree) -> None:
    link = tree["ckpt"] / "chat_template.jinja"
    link.symlink_to(tree["outside"] / "id_rsa")
    with pytest.raises(UntrustedFileError) as err:
        read_untrusted(link, limit=1 << 20, roots=(tree["ckpt"],))
    assert "is a symlink to" in str(err.value) and str(tree["outside"] / "id_rsa") in str(err.value)
    assert SECRET not in str(err.value)
    inner = tree["ckpt"] / "alias.json"  # a link inside the roots is read
    inner.symlink_to("tokenizer.json")
    assert read_untrusted(inner, limit=1 << 20, roots=(tree["ckpt"],)) == b'{"a": 1}'
    assert read_untrusted(link, limit=1 << 20) == SECRET.encode()  # no roots: the user named it


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/urandom", "/dev/null"])
def test_special_files_are_refused_before_they_are_opened(tree, special) -> None:
    path = tree["ckpt"] / "tokenizer.json"
    path.unlink()
    if special == "fifo":
        os.mkfifo(path)  # opening it for reading would block forever
    else:
        path.symlink_to(special)
    start = time.monotonic()
    with pytest.raises(UntrustedFileError, match="not a regular file"):
        read_untrusted(path, limit=1 << 20)
    assert time.monotonic() - start < 2


def test_size_is_checked_before_reading_and_while_reading(tree) -> None:
    big = tree["ckpt"] / "big.json"
    with open(big, "wb") as f:
        f.truncate(5 << 30)  # sparse: 5 GiB by stat, nothing on disk
    with pytest.raises(UntrustedFileError, match="over the 1,024-byte limit.*--max-file-mb"):
        read_untrusted(big, limit=1024)
    proc = Path("/proc/self/environ")  # st_size 0: only the bounded read can notice
    with pytest.raises(UntrustedFileError, match="over the 16-byte limit"):
        read_untrusted(proc, limit=16)
    assert read_untrusted(tree["ckpt"] / "tokenizer.json", limit=8) == b'{"a": 1}'  # exactly the limit


def test_escape_keeps_one_line() -> None:
    assert escape("x.gguf\nverdict: PASS") == "x.gguf\\nverdict: PASS"
    assert escape("中文 ü") == "中文 ü"
    assert escape("\x1b[31mred") == "\\x1b[31mred"
    assert len(escape("a" * 500, limit=20)) == 20


def test_limits_are_raised_by_the_flag_and_restored() -> None:
    before = current()
    with raised(300):
        assert current().tokenizer_json == 300 << 20 and current().template == 300 << 20
        assert current().vocab_entries > Limits().vocab_entries
    with raised(None):
        assert current() == before
    assert current() == before


def test_the_directory_guard(tree) -> None:
    ckpt = tree["ckpt"]
    guard_directory(ckpt)  # a plain directory passes
    (ckpt / "model.safetensors").symlink_to("/nonexistent/shared/weights")  # weights are passed over
    guard_directory(ckpt)
    (ckpt / "vocab.json").symlink_to(tree["outside"] / "id_rsa")  # a name only transformers reads
    with pytest.raises(UntrustedFileError, match="vocab.json: file: is a symlink to"):
        guard_directory(ckpt)
    (ckpt / "vocab.json").unlink()
    os.mkfifo(ckpt / "merges.txt")
    with pytest.raises(UntrustedFileError, match="a FIFO"):
        guard_directory(ckpt)
    (ckpt / "merges.txt").unlink()
    sub = ckpt / "additional_chat_templates"
    sub.symlink_to(tree["outside"])
    with pytest.raises(UntrustedFileError, match="additional_chat_templates"):
        guard_directory(ckpt)


def test_a_hugging_face_snapshot_may_point_into_its_blobs(tmp_path) -> None:
    repo = tmp_path / "models--org--name"
    snap = repo / "snapshots" / ("a" * 40)
    (repo / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    (repo / "blobs" / "abc").write_text("{}")
    (snap / "tokenizer.json").symlink_to("../../blobs/abc")
    assert trusted_roots(snap) == (snap.resolve(), (repo / "blobs").resolve())
    guard_directory(snap)
    assert read_untrusted(snap / "tokenizer.json", limit=10, roots=trusted_roots(snap)) == b"{}"
    (snap / "config.json").symlink_to("../../refs/main")  # in the repo, but not a blob
    with pytest.raises(UntrustedFileError):
        guard_directory(snap)


def _render(source: str) -> str:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment().from_string(source).render()


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("{{ 'a' * 10**10 }}", "memory"),
        # no output: pure time (with an "x" per pass the output buffer may hit the memory cap first)
        ("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "timeout"),
        ("{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", "raised"),
        ("{{ 1 / 0 }}", "raised"),
        ("hello {{ 'world' }}", "ok"),
    ],
    ids=["memory", "time", "recursion", "error", "ok"],
)
def test_bounded_work_ends_with_a_value(source, kind) -> None:
    start = time.monotonic()
    got = run_bounded(_render, source, budget=Budget(seconds=2, memory=256 << 20))
    assert got.kind == kind, got
    assert time.monotonic() - start < 5
    if kind == "ok":
        assert got.value == "hello world"
    if kind == "timeout":
        assert "exceeded 2 s / 256 MiB" in got.describe(Budget(seconds=2, memory=256 << 20))


def _children() -> set[int]:
    """This process's children now, zombies included (what ``waitpid`` could still reap)."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        found |= {int(pid) for pid in (task / "children").read_text().split()}
    return found


def test_a_crash_is_named_by_its_signal_and_leaves_no_child() -> None:
    before = _children()  # a whole-suite run may hold other tests' children
    got = run_bounded(os.abort, budget=Budget(seconds=5))
    assert (got.kind, got.error_type) == ("crashed", "SIGABRT")
    assert _children() <= before  # reaped: no child of its own left, not even a zombie


def test_reports_never_land_on_inputs(tmp_path, tree) -> None:
    ckpt, sibling = tree["ckpt"], tmp_path / "x.gguf"
    sibling.write_bytes(b"GGUF")
    flags = {"--json": sibling}
    with pytest.raises(UsageError, match="a file the gate reads"):
        check_outputs(ckpt, flags, reads=[sibling], tool="gate")
    alias = tmp_path / "alias.json"
    alias.symlink_to(sibling)
    with pytest.raises(UsageError, match="a file the gate reads"):
        check_outputs(ckpt, {"--json": alias}, reads=[sibling], tool="gate")
    with pytest.raises(UsageError, match="is inside"):
        check_outputs(ckpt, {"--json": ckpt / "r.json"}, tool="gate")
    with pytest.raises(UsageError, match="does not exist"):
        check_outputs(ckpt, {"--junit": tmp_path / "no" / "r.xml"}, tool="gate")
    check_outputs(ckpt, {"--json": tmp_path / "r.json", "--html": Path("/dev/null")}, tool="gate")


def test_an_unwritable_place_is_refused_up_front(tmp_path, tree) -> None:
    """Writability is tried (a temp file) before the run: /proc refuses new files even to root."""
    with pytest.raises(UsageError, match="cannot write in /proc"):
        check_outputs(tree["ckpt"], {"--junit": Path("/proc/stacktok-report.xml")}, tool="gate")
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="cannot be written"):
        check_outputs(tree["ckpt"], {"--json": tmp_path / "file" / "r.json"}, tool="gate")


def test_a_device_or_pipe_is_written_through_never_replaced(tmp_path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "to-null"
    link.symlink_to("/dev/null")
    write_report(link, "{}")
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_report(fifo, "report")
        assert os.read(reader, 100) == b"report"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    regular = tmp_path / "r.json"
    alias = tmp_path / "alias.json"
    regular.write_text("old")
    alias.symlink_to(regular)
    write_report(alias, "new")
    assert alias.is_symlink() and regular.read_text() == "new"


def test_a_gguf_that_crashes_llama_cpp_in_the_static_check_is_a_row(monkeypatch) -> None:
    """issue 37: ``gguf.eog`` loaded the GGUF in llama.cpp inside the gate's own process, so a GGUF
    that crashes llama.cpp killed the gate; it runs in a bounded child now."""
    from conformance.core.layout import Exports
    from conformance.static import gguf_eog
    from stacktok_export import load_tokenizer

    monkeypatch.setattr(gguf_eog, "_ask_llama", lambda path: os.abort())
    exports = Exports(artifact=Path("a.json"), hf_dir=None, tiktoken=None, gguf=Path("x.gguf"))
    (got,) = gguf_eog.check_gguf_eog(exports, load_tokenizer())
    assert (got.check, got.backend, got.status) == ("gguf.eog", "llama.cpp", "error")
    assert "died with SIGABRT" in got.message
