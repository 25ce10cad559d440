"""Hostile inputs (issue 37): one table of cases, their builders, and the one runner that measures
a case as a real process tree.

Each :class:`Case` is one hostile input for ``stacktok gate`` (or ``import`` / ``pack``): its id,
its class (:data:`CLASSES`), a builder that makes the input under a fresh :class:`World` (a tmp
folder with ``inp/`` for everything the command reads, ``out/`` for what it may write, and a fake
``home/`` holding planted secrets), the argv, the exit codes it may end with, a wall-time bound,
a peak-memory bound of the whole process tree, and the strings that must never reach any output
(the planted secret marker always). :data:`CASES` is the table; :func:`run_tree` runs one command
as ``python -m stacktok`` in its own session and process group, polling ``/proc`` every 50 ms for
the summed VmRSS of every process of the tree (same process group or session, or a descendant of
one, even after it is re-parented); :func:`problems` says everything a finished case did wrong.

What every case asserts (:func:`problems`): the exit code is one the case allows (3, an internal
error, never is); it ended within its time bound and under its memory bound (the runner kills the
group at 10 s past the time bound, or as soon as the tree passes the memory bound); no
``Traceback`` on stderr; the secret marker in none of stdout, stderr or any file written under
``out/``; every entry under ``inp/`` (DIR, its siblings, the Hub cache, the user data) and the
planted secrets byte-for-byte, link-for-link, type-for-type unchanged; no process of the tree
alive after the command returned; exit 2 is one line on stderr naming what the case says (and,
for the gate, wrote no report); a failing row names what the case says.

Example::

    world = make_world(tmp_path, base=base_checkpoint, marker=new_marker())
    outcome, found = run_case(case_by_id("links-jinja-to-ssh-key"), world)
    assert not found, "\\n".join(found)

Out of scope: the product's own behaviour on ordinary malformed files (tests/test_gate_trust.py);
anything that needs root beyond restoring a device node the product replaced
(:func:`restore_devices`); the network (every case runs with ``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checkpoint import build_checkpoint, replace, symlink
from .data import CHATS, gate_data
from .json_edit import edit_json
from .paths import GGUF, ROOT, TIKTOKEN

MIB = 1 << 20
FAST = "reference,tokenizers"
#: the bounds the issue sets for every case, and the tighter ones for what must be refused at once
SECONDS, PEAK_MIB = 60.0, 2048
QUICK_SECONDS, QUICK_MIB = 20.0, 1024  # "refused before it is opened / read": fast, low memory
BEFORE_SECONDS = 10.0  # "decided before any check runs"
#: the environment variable the secret marker is planted in (read through /proc/self/environ)
SECRET_ENV = "AWS_SECRET_ACCESS_KEY"
FORGED = "verdict: PASS (forged)"  # planted in file names and revisions: a log-injection line
#: a stream longer than this is a flood: the runner kills the tree
FLOOD_BYTES = 64 * MIB
#: the classes of issue 37, each with at least one case
CLASSES = (
    "control",
    "links",
    "template",
    "resource",
    "leaks",
    "hub",
    "outputs",
    "log",
    "crash",
    "signals",
    "import",
    "pack",
)
TEXTS = ["Hello world, it's 2026!", "x != y , z", "don't DON'T", "hello <|assistant|> world", "中文 🚀 ünï"]
HUB_REPO = "acme/stack"
HUB_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def new_marker() -> str:
    """A fresh secret marker: ``SECRET-`` and 32 random hex digits."""
    return f"SECRET-{secrets.token_hex(16)}"


# ------------------------------------------------------------------ the world a case runs in
@dataclass(frozen=True)
class World:
    """A case's folders: ``inp`` (everything read; snapshotted), ``out`` (reports, cwd), ``home``
    (the child's ``$HOME``, with the planted secrets), ``logs`` (the child's stdout/stderr)."""

    root: Path
    base: Path  # the module's checkpoint, copied per case
    marker: str

    @property
    def inp(self) -> Path:
        return self.root / "inp"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def secret_key(self) -> Path:
        return self.home / ".ssh" / "id_rsa"

    @property
    def credentials(self) -> Path:
        return self.home / ".config" / "gcloud" / "application_default_credentials.json"

    @property
    def watched(self) -> tuple[Path, ...]:
        """What no run may change: every input, and the planted secrets (not the rest of ``home``,
        where a library may keep a cache)."""
        return (self.inp, self.secret_key.parent, self.credentials.parent)

    @property
    def probes(self) -> Path:
        return self.inp / "user" / "probes.jsonl"

    @property
    def chats(self) -> Path:
        return self.inp / "user" / "chats.jsonl"

    @property
    def hub(self) -> Path:
        return self.inp / "hub"

    def fields(self, directory: Path | None) -> dict[str, str]:
        """What ``{name}`` in a case's argv and env stands for."""
        return {
            "dir": str(directory) if directory is not None else "",
            "inp": str(self.inp),
            "out": str(self.out),
            "home": str(self.home),
            "hub": str(self.hub),
            "probes": str(self.probes),
            "chats": str(self.chats),
            "marker": self.marker,
        }


def make_world(root: Path, *, base: Path, marker: str) -> World:
    """Make the folders, the user data (small probes, the shared chats) and the planted secrets."""
    world = World(root=root, base=base, marker=marker)
    for folder in (
        world.inp / "user",
        world.out,
        world.logs,
        world.secret_key.parent,
        world.credentials.parent,
    ):
        folder.mkdir(parents=True, exist_ok=True)
    gate_data(world.inp / "user", texts=TEXTS, chats=CHATS)
    world.secret_key.write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        f"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ{marker}\n"
        "-----END OPENSSH PRIVATE KEY-----\n",
        encoding="utf-8",
    )
    world.secret_key.chmod(0o600)
    creds = {
        "type": "service_account",
        "project_id": "acme-prod",
        "private_key_id": marker,
        "private_key": f"-----BEGIN PRIVATE KEY-----\n{marker}\n-----END PRIVATE KEY-----\n",
        "client_email": "ci@acme-prod.iam.gserviceaccount.com",
    }
    world.credentials.write_text(json.dumps(creds, indent=2), encoding="utf-8")
    return world


def base_checkpoint(dest: Path) -> Path:
    """The module's one checkpoint (the shipped HF export), copied by every case that needs one."""
    return build_checkpoint(dest)


# ------------------------------------------------------------------ the case table
Builder = Callable[[World], "Path | None"]
Edit = Callable[[Path, World], None]
Verify = Callable[["Outcome", World], list[str]]


@dataclass(frozen=True)
class Case:
    """One hostile input and everything it must (not) do; see the module docstring."""

    id: str
    cls: str
    build: Builder  # makes the input under world.inp; returns DIR ({dir} in argv), or None
    argv: tuple[str, ...]  # after ``stacktok``; ``{dir}``, ``{inp}``, ``{out}``... are filled in
    exit: frozenset[int]
    seconds: float = SECONDS
    peak_mib: int = PEAK_MIB
    absent: tuple[str, ...] = ()  # besides the marker, which is always absent
    mentions: tuple[str, ...] = ()  # exit 2: all in the one stderr line (case-insensitive)
    row: str | None = None  # exit 1: a regex one failing row (check, message, fix) must match
    reports: bool = True  # gate: add --json/--junit/--markdown/--html under out/ (unless in argv)
    #: gate, exit 2: no report may exist (false only where the failure is writing a report)
    no_report_on_2: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = "{out}"
    verify: Verify | None = None

    @property
    def gate(self) -> bool:
        return self.argv[:1] == ("gate",)


def gate(*extra: str, directory: str = "{dir}", backends: str = FAST) -> tuple[str, ...]:
    """``gate DIR`` on the small user data only, two fast backends, quiet; then ``extra``."""
    return (
        "gate",
        directory,
        "--only-user-data",
        "--probes",
        "{probes}",
        "--chats",
        "{chats}",
        "--quiet",
        "--backends",
        backends,
        *extra,
    )


def checkpoint(*edits: Edit, name: str = "ckpt", gguf: bool = False, layout: str = "inside") -> Builder:
    """A copy of the module's checkpoint as ``inp/name`` (``layout="beside"``: ``inp/NAME-hf`` with
    the shipped ``.gguf`` and ``.tiktoken`` beside it), then each edit."""

    def build(world: World) -> Path:
        directory = world.inp / name
        shutil.copytree(world.base, directory, symlinks=True)
        if layout == "beside":
            for export in (GGUF, TIKTOKEN):
                shutil.copy(ROOT / "tokenizer" / export, world.inp / export)
        elif gguf:
            shutil.copy(ROOT / "tokenizer" / GGUF, directory / GGUF)
        for edit in edits:
            edit(directory, world)
        return directory

    return build


def plain(edit: Callable[[Path], None]) -> Edit:
    """A :mod:`tests.helpers.checkpoint` edit (``replace``, ``remove``, ...) as a case edit."""
    return lambda directory, _world: edit(directory)


def link(name: str, target: Callable[[World], Path | str]) -> Edit:
    """``DIR/name`` becomes a symlink to ``target(world)`` (a path, or a relative link text)."""
    return lambda directory, world: symlink(name, Path(target(world)))(directory)


def fifo(name: str) -> Edit:
    """``DIR/name`` becomes a FIFO nobody writes to (reading it blocks forever)."""

    def edit(directory: Path, _world: World) -> None:
        (directory / name).unlink(missing_ok=True)
        os.mkfifo(directory / name)

    return edit


def unix_socket(name: str) -> Edit:
    """``DIR/name`` becomes a Unix socket (bound from inside DIR: socket paths are short)."""

    def edit(directory: Path, _world: World) -> None:
        (directory / name).unlink(missing_ok=True)
        cwd = os.getcwd()
        os.chdir(directory)
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(name)
        finally:
            os.chdir(cwd)

    return edit


def write(name: str, writer: Callable[[Any], None]) -> Edit:
    """``DIR/name`` written by ``writer(binary file)`` (for inputs too big to build in memory)."""

    def edit(directory: Path, _world: World) -> None:
        with open(directory / name, "wb") as f:
            writer(f)

    return edit


def sparse(name: str, size: int) -> Edit:
    """``DIR/name`` of ``size`` zero bytes, made with truncate (no disk, no time)."""

    def edit(directory: Path, _world: World) -> None:
        with open(directory / name, "wb") as f:
            f.truncate(size)

    return edit


def moved_into_blob(name: str) -> Edit:
    """``DIR/name`` becomes a relative symlink to ``DIR/blobs/<sha256>`` holding its bytes: a link
    that stays inside DIR (legitimate)."""

    def edit(directory: Path, _world: World) -> None:
        data = (directory / name).read_bytes()
        blob = directory / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(exist_ok=True)
        blob.write_bytes(data)
        symlink(name, Path("blobs") / blob.name)(directory)

    return edit


def config_template(template: str) -> Edit:
    """The chat template lives only in ``tokenizer_config.json``: ``template`` there, no .jinja."""

    def edit(directory: Path, _world: World) -> None:
        (directory / "chat_template.jinja").unlink()
        edit_json(directory / "tokenizer_config.json", set={"chat_template": template})

    return edit


def hf_cache(world: World, source: Path) -> Path:
    """``source``'s files as huggingface_hub caches them: ``inp/hub/models--acme--stack/`` with
    ``blobs/<sha256>``, ``refs/main`` and ``snapshots/<commit>/<file> -> ../../blobs/<sha256>``;
    returns the snapshot."""
    storage = world.hub / "models--acme--stack"
    snap = storage / "snapshots" / HUB_COMMIT
    (storage / "blobs").mkdir(parents=True)
    (storage / "refs").mkdir()
    (storage / "refs" / "main").write_text(HUB_COMMIT, encoding="utf-8")
    snap.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copy(path, storage / "blobs" / sha)
        (snap / path.name).symlink_to(f"../../blobs/{sha}")
    return snap


def cached(*edits: Edit, outside: bool = False) -> Builder:
    """The module's checkpoint in a Hub cache (:func:`hf_cache`), each edit applied to the snapshot;
    ``outside``: a valid checkpoint also at ``inp/outside`` (where ``..`` in a revision leads)."""

    def build(world: World) -> Path:
        snap = hf_cache(world, world.base)
        if outside:
            shutil.copytree(world.base, world.inp / "outside")
        for edit in edits:
            edit(snap, world)
        return snap

    return build


HUB_ENV = {"HF_HUB_CACHE": "{hub}", "HF_HUB_OFFLINE": "1"}


# ------------------------------------------------------------------ hostile content
NESTED_RANGE = "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}"
EXPONENTIAL_MACRO = (
    "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(64) }}"
)
STRING_TIMES = "{{ 'a' * 10**10 }}"
DEEP_PARENS = "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}"
#: exit 1 on a template bomb: a failing row names the file and states the budget it ran out of
#: ("chat_template.jinja: rendering a 3-message chat exceeded 5 s / 1 GiB")
BUDGET_ROW = r"(?is)(chat_template\.jinja|tokenizer_config\.json).*\d ?(s|ms|seconds?|GiB|MiB|GB|MB)\b"


def gguf_bomb(elem_type: int, count: int = 2**40) -> bytes:
    """A GGUF v3 header with no tensors and one key, ``tokenizer.ggml.tokens``, declared an ARRAY
    (type 9) of ``count`` elements of ``elem_type`` (5 INT32, 8 STRING), then 64 zero bytes."""
    key = b"tokenizer.ggml.tokens"
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
    return head + struct.pack("<IIQ", 9, elem_type, count) + b"\0" * 64


def huge_vocab(entries: int) -> Callable[[Any], None]:
    """The shipped tokenizer.json with ``model.vocab`` replaced by ``entries`` made-up tokens
    (~16 bytes each), written in chunks."""

    def writer(f: Any) -> None:
        doc = json.loads((ROOT / "tokenizer" / "stack100m-32768-hf" / "tokenizer.json").read_bytes())
        doc["model"]["vocab"] = {"@VOCAB@": 0}
        head, tail = json.dumps(doc).encode().split(b'{"@VOCAB@": 0}')
        f.write(head + b"{")
        step = 200_000
        for start in range(0, entries, step):
            chunk = b",".join(b'"t%x":%d' % (i, i) for i in range(start, min(start + step, entries)))
            f.write(chunk if start == 0 else b"," + chunk)
        f.write(b"}" + tail)

    return writer


def byte_ranks(extra: Sequence[bytes] = ()) -> bytes:
    """A ``.tiktoken`` body: the 256 byte tokens, then ``extra``, ranks in order."""
    tokens = [bytes([b]) for b in range(256)] + list(extra)
    return b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in enumerate(tokens))


#: a ``.tiktoken`` of five tokens and none of the 256 byte tokens: most text cannot be encoded
NO_BYTE_TOKENS = b"".join(
    base64.b64encode(t) + b" %d\n" % r for r, t in enumerate([b"h", b"i", b"hi", b" ", b"hi "])
)


def one_long_line(size: int) -> Callable[[Any], None]:
    """A ``.tiktoken`` whose first line is ``size`` bytes of base64 ``A`` and a rank."""

    def writer(f: Any) -> None:
        block = b"A" * (4 * MIB)
        for _ in range(size // len(block)):
            f.write(block)
        f.write(b" 0\n")

    return writer


def jsonl_one_line(size: int) -> Callable[[Any], None]:
    """A JSONL file of one document ``{"text": "aaa..."}`` of ``size`` bytes."""

    def writer(f: Any) -> None:
        block = b"a" * (4 * MIB)
        f.write(b'{"text": "')
        for _ in range(size // len(block)):
            f.write(block)
        f.write(b'"}\n')

    return writer


def zstd_bomb(size: int) -> Callable[[Any], None]:
    """``size`` bytes of ``b"0\\n"`` zstd-compressed as a stream (the file is a few hundred KB)."""

    def writer(f: Any) -> None:
        import zstandard

        block = b"0\n" * (4 * MIB)
        with zstandard.ZstdCompressor(level=3).stream_writer(f, closefd=False) as z:
            for _ in range(size // len(block)):
                z.write(block)

    return writer


def file_in(edit: Edit) -> Builder:
    """Bare input files under ``inp/files/`` (for import and pack), made by ``edit``; DIR is None."""

    def build(world: World) -> None:
        target = world.inp / "files"
        target.mkdir(exist_ok=True)
        edit(target, world)

    return build


def in_out(edit: Callable[[World], None]) -> Callable[[Builder], Builder]:
    """Also prepare something under ``out/`` (a report path that is a link, a file as a parent)."""

    def wrap(builder: Builder) -> Builder:
        def build(world: World) -> Path | None:
            edit(world)
            return builder(world)

        return build

    return wrap


# ------------------------------------------------------------------ extra checks (verify)
def no_forged_line(outcome: Outcome, world: World) -> list[str]:
    """No output line (stdout, stderr, a text report) begins with the forged verdict."""
    texts = {"stdout": outcome.stdout, "stderr": outcome.stderr}
    texts.update({name: data.decode("utf-8", "replace") for name, data in outcome.reports.items()})
    return [
        f"{where}: a line begins with the forged verdict (a name printed unescaped): {line!r}"
        for where, text in texts.items()
        for line in text.splitlines()
        if line.lstrip(" #>*-|`").startswith(FORGED)
    ]


def still_link_to_dev_null(outcome: Outcome, world: World) -> list[str]:
    """The report path given as a link to /dev/null is still that link (written through or refused)."""
    path = world.out / "report-link.json"
    if not path.is_symlink() or os.readlink(path) != "/dev/null":
        kind = "a regular file" if path.is_file() else "gone" if not os.path.lexists(path) else "changed"
        return [f"--json {path} (a link to /dev/null) was replaced: now {kind}"]
    return []


def names_dev_full(outcome: Outcome, world: World) -> list[str]:
    """Writing the report to /dev/full fails: stderr must say so, naming /dev/full."""
    if outcome.code == 2 or "/dev/full" in outcome.stderr:
        return []
    return [
        f"--html /dev/full: exit {outcome.code} and stderr does not name /dev/full (a failed write unsaid)"
    ]


def crash_row(backend: str, sig: str) -> Verify:
    """The crashing backend is a failing row naming it and the signal; the verdict and the JSON
    report are written."""

    def verify(outcome: Outcome, world: World) -> list[str]:
        found = []
        if "verdict: FAIL" not in outcome.stdout:
            found.append(f"no 'verdict: FAIL' line on stdout: {tail(outcome.stdout)!r}")
        doc = outcome.json_report()
        if doc is None:
            return [*found, "no JSON report written (--json)"]
        rows = [
            r
            for r in doc.get("checks", [])
            if r.get("backend") == backend and r.get("status") in ("fail", "error")
        ]
        if not any(sig in f"{r.get('message', '')} {r.get('fix', '')}" for r in rows):
            found.append(f"no failing row of {backend} naming {sig} (rows of {backend}: {len(rows)} failing)")
        return found

    return verify


# ------------------------------------------------------------------ the table
def _key(world: World) -> Path:
    return world.secret_key


def _creds(world: World) -> Path:
    return world.credentials


CASES: tuple[Case, ...] = (
    # -------- control: the harness and the unchanged shipped behaviour
    Case("control-shipped-copy", "control", checkpoint(), gate(), frozenset({0})),
    # -------- links & special files
    Case(
        "links-jinja-to-ssh-key",
        "links",
        checkpoint(link("chat_template.jinja", _key)),
        gate(),
        frozenset({2}),
        absent=("BEGIN OPENSSH PRIVATE KEY",),
        mentions=("chat_template.jinja", "id_rsa"),
    ),
    Case(
        "links-jinja-relative-escape",
        "links",
        checkpoint(link("chat_template.jinja", lambda w: Path("../../home/.ssh/id_rsa"))),
        gate(),
        frozenset({2}),
        absent=("BEGIN OPENSSH PRIVATE KEY",),
        mentions=("chat_template.jinja", "id_rsa"),
    ),
    Case(
        "links-config-to-credentials",
        "links",
        checkpoint(link("tokenizer_config.json", _creds)),
        gate(),
        frozenset({2}),
        absent=("acme-prod", "BEGIN PRIVATE KEY"),
        mentions=("tokenizer_config.json", "application_default_credentials.json"),
    ),
    Case(
        "links-jinja-to-proc-environ",
        "links",
        checkpoint(link("chat_template.jinja", lambda w: "/proc/self/environ")),
        gate(),
        frozenset({2}),
        absent=(f"{SECRET_ENV}=",),
        mentions=("chat_template.jinja", "environ"),
    ),
    Case(
        "links-tokenizer-json-to-dev-zero",
        "links",
        checkpoint(link("tokenizer.json", lambda w: "/dev/zero")),
        gate(),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        peak_mib=QUICK_MIB,
        mentions=("tokenizer.json", "/dev/zero"),
    ),
    Case(
        "links-tokenizer-json-to-dev-urandom",
        "links",
        checkpoint(link("tokenizer.json", lambda w: "/dev/urandom")),
        gate(),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        peak_mib=QUICK_MIB,
        mentions=("tokenizer.json", "/dev/urandom"),
    ),
    Case(
        "links-tiktoken-to-dev-zero",
        "links",
        checkpoint(link(TIKTOKEN, lambda w: "/dev/zero")),
        gate(),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        peak_mib=QUICK_MIB,
        mentions=(TIKTOKEN, "/dev/zero"),
    ),
    Case(
        "links-fifo-tokenizer-json",
        "links",
        checkpoint(fifo("tokenizer.json")),
        gate(),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        peak_mib=QUICK_MIB,
        mentions=("tokenizer.json",),
    ),
    Case(
        "links-fifo-gguf",
        "links",
        checkpoint(fifo(GGUF)),
        gate(),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        peak_mib=QUICK_MIB,
        mentions=(GGUF,),
    ),
    Case(
        "links-socket-tokenizer-json",
        "links",
        checkpoint(unix_socket("tokenizer.json")),
        gate(),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        peak_mib=QUICK_MIB,
        mentions=("tokenizer.json",),
    ),
    Case(
        "links-text-dev-zero",
        "links",
        checkpoint(),
        gate("--text", "/dev/zero"),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        peak_mib=QUICK_MIB,
        mentions=("/dev/zero",),
    ),
    Case(
        "links-inside-dir-accepted",
        "links",
        checkpoint(moved_into_blob("tokenizer.json"), moved_into_blob("chat_template.jinja")),
        gate(),
        frozenset({0}),
    ),
    Case("links-hf-cache-snapshot-accepted", "links", cached(), gate(), frozenset({0})),
    # -------- template bombs: a failing row naming the file and its budget, or exit 2
    *(
        Case(
            f"template-{name}",
            "template",
            checkpoint(plain(replace("chat_template.jinja", text))),
            gate(),
            frozenset({1, 2}),
            mentions=("chat_template.jinja",),
            row=BUDGET_ROW,
        )
        for name, text in (
            ("nested-range", NESTED_RANGE),
            ("exponential-macro", EXPONENTIAL_MACRO),
            ("string-times-1e10", STRING_TIMES),
            ("parens-5000-deep", DEEP_PARENS),
        )
    ),
    Case(
        "template-nested-range-in-config",
        "template",
        checkpoint(config_template(NESTED_RANGE)),
        gate(),
        frozenset({1, 2}),
        mentions=("tokenizer_config.json",),
        row=BUDGET_ROW,
    ),
    # -------- resource bombs
    Case(
        "resource-vocab-10m-entries",
        "resource",
        checkpoint(write("tokenizer.json", huge_vocab(10_000_000))),
        gate(),
        frozenset({1, 2}),
        mentions=("tokenizer.json",),
    ),
    Case(
        "resource-gguf-int32-array-2e40",
        "resource",
        checkpoint(plain(replace(GGUF, gguf_bomb(5)))),
        gate(),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        peak_mib=QUICK_MIB,
        mentions=(GGUF,),
    ),
    Case(
        "resource-gguf-string-array-2e40",
        "resource",
        checkpoint(plain(replace(GGUF, gguf_bomb(8)))),
        gate(),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        peak_mib=QUICK_MIB,
        mentions=(GGUF,),
    ),
    Case(
        "resource-tiktoken-1gib",
        "resource",
        checkpoint(sparse(TIKTOKEN, 1 << 30)),
        gate(),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        peak_mib=QUICK_MIB,
        mentions=(TIKTOKEN,),
    ),
    # -------- leaks: files whose read would print a secret
    Case(
        "leaks-special-tokens-map-to-ssh-key",
        "leaks",
        checkpoint(link("special_tokens_map.json", _key)),
        gate(),
        frozenset({2}),
        absent=("BEGIN OPENSSH PRIVATE KEY", "b3BlbnNzaC1rZXkt"),
        mentions=("special_tokens_map.json",),
    ),
    Case(
        "leaks-generation-config-to-environ",
        "leaks",
        checkpoint(link("generation_config.json", lambda w: "/proc/self/environ")),
        gate(),
        frozenset({2}),
        absent=(f"{SECRET_ENV}=",),
        mentions=("generation_config.json",),
    ),
    Case(
        "leaks-hub-snapshot-link-out-of-cache",
        "leaks",
        cached(link("chat_template.jinja", _key)),
        gate(directory=HUB_REPO),
        frozenset({2}),
        absent=("BEGIN OPENSSH PRIVATE KEY",),
        mentions=("chat_template.jinja",),
        env=HUB_ENV,
    ),
    # -------- Hub ids: a revision is a revision, never a path
    *(
        Case(
            f"hub-revision-{name}",
            "hub",
            cached(outside=True),
            gate(directory=f"{HUB_REPO}@{revision}"),
            frozenset({2}),
            seconds=QUICK_SECONDS,
            mentions=("revision", "valid"),
            env=HUB_ENV,
        )
        for name, revision in (
            ("dotdot", "../../../outside"),
            ("dotdot-percent-encoded", "..%2F..%2F..%2Foutside"),
            ("absolute", "{inp}/outside"),
        )
    ),
    Case(
        "hub-revision-newline",
        "hub",
        cached(outside=True),
        gate(directory=f"{HUB_REPO}@main\n{FORGED}"),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        mentions=(HUB_REPO,),
        env=HUB_ENV,
        verify=no_forged_line,
    ),
    # -------- outputs never touch inputs
    Case(
        "outputs-json-over-sibling-gguf",
        "outputs",
        checkpoint(name="stack100m-32768-hf", layout="beside"),
        gate("--json", "{inp}/" + GGUF),
        frozenset({2}),
        seconds=BEFORE_SECONDS,
        mentions=(GGUF,),
    ),
    Case(
        "outputs-markdown-over-file-in-dir",
        "outputs",
        checkpoint(),
        gate("--markdown", "{dir}/chat_template.jinja"),
        frozenset({2}),
        seconds=BEFORE_SECONDS,
        mentions=("chat_template.jinja",),
    ),
    Case(
        "outputs-json-link-to-dev-null",
        "outputs",
        in_out(lambda w: (w.out / "report-link.json").symlink_to("/dev/null"))(checkpoint()),
        gate("--json", "{out}/report-link.json"),
        frozenset({0, 2}),
        verify=still_link_to_dev_null,
    ),
    Case(
        "outputs-html-dev-full",
        "outputs",
        checkpoint(),
        gate("--html", "/dev/full"),
        frozenset({1, 2}),
        mentions=("/dev/full",),
        no_report_on_2=False,  # the other reports may be written; /dev/full fails when written
        verify=names_dev_full,
    ),
    Case(
        "outputs-junit-missing-dir",
        "outputs",
        checkpoint(),
        gate("--junit", "{out}/no/such/dir/report.xml"),
        frozenset({2}),
        seconds=BEFORE_SECONDS,
        mentions=("junit",),
    ),
    Case(
        "outputs-junit-parent-is-a-file",
        "outputs",
        in_out(lambda w: (w.out / "plain-file").write_text("x"))(checkpoint()),
        gate("--junit", "{out}/plain-file/report.xml"),
        frozenset({2}),
        seconds=BEFORE_SECONDS,
        mentions=("junit",),
    ),
    # -------- log injection: names are escaped wherever printed
    Case(
        "log-gguf-name-with-newline",
        "log",
        checkpoint(lambda d, w: shutil.copy(ROOT / "tokenizer" / GGUF, d / f"evil\n{FORGED}\n.gguf")),
        gate(),
        frozenset({0, 1, 2}),
        verify=no_forged_line,
    ),
    Case(
        "log-malformed-gguf-name-with-newline",
        "log",
        checkpoint(lambda d, w: (d / f"evil\n{FORGED}\n.gguf").write_bytes(b"GGUF\x03\0\0\0 not a gguf")),
        gate(),
        frozenset({2}),
        mentions=("evil",),
        verify=no_forged_line,
    ),
    Case(
        "log-dir-name-with-newline",
        "log",
        checkpoint(plain(replace("tokenizer.json", "{not json")), name=f"ckpt\n{FORGED}"),
        gate(),
        frozenset({2}),
        mentions=("tokenizer.json",),
        verify=no_forged_line,
    ),
    # -------- a crashing backend is a row, not a dead gate
    *(
        Case(
            f"crash-backend-{name}-workers-{workers}",
            "crash",
            checkpoint(),
            gate("--workers", str(workers)),
            frozenset({1}),
            env={"STACKTOK_TEST_CRASH_BACKEND": hook},
            verify=crash_row("tokenizers", sig),
        )
        for name, hook, sig, workers in (
            ("abort", "tokenizers", "SIGABRT", 1),  # the hook's default signal: os.abort()
            ("abort", "tokenizers", "SIGABRT", 2),
            ("segv", "tokenizers:SIGSEGV", "SIGSEGV", 2),  # what llama.cpp did on long-a-1m
        )
    ),
    # -------- import bombs
    Case(
        "import-tiktoken-100mb-line",
        "import",
        file_in(write("x.tiktoken", one_long_line(100 * MIB))),
        ("import", "{inp}/files/x.tiktoken", "--out", "{out}/a.json", "--pattern", r"\S+|\s+"),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        mentions=("x.tiktoken",),
        reports=False,
    ),
    Case(
        "import-tiktoken-5000-digit-rank",
        "import",
        file_in(plain(replace("x.tiktoken", byte_ranks() + b"YWI= " + b"9" * 5000 + b"\n"))),
        ("import", "{inp}/files/x.tiktoken", "--out", "{out}/a.json", "--pattern", r"\S+|\s+"),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        mentions=("x.tiktoken",),
        reports=False,
    ),
    Case(
        "import-tokenizer-json-nested-100000",
        "import",
        file_in(plain(replace("tokenizer.json", "[" * 100_000 + "]" * 100_000))),
        ("import", "{inp}/files/tokenizer.json", "--out", "{out}/a.json"),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        mentions=("tokenizer.json",),
        reports=False,
    ),
    Case(
        "import-tiktoken-without-byte-tokens",
        "import",
        file_in(plain(replace("x.tiktoken", NO_BYTE_TOKENS))),
        ("import", "{inp}/files/x.tiktoken", "--out", "{out}/a.json", "--pattern", r"\S+|\s+"),
        frozenset({2}),
        seconds=QUICK_SECONDS,
        mentions=("x.tiktoken", "byte"),
        reports=False,
    ),
    # -------- pack bombs: refused or streamed, bounded memory
    Case(
        "pack-zstd-bomb-3gb-of-zero-lines",
        "pack",
        file_in(write("bomb.txt.zst", zstd_bomb(3 * 1024 * MIB))),
        ("pack", "{inp}/files/bomb.txt.zst", "--out", "{out}/pack", "--quiet"),
        frozenset({0, 2}),
        mentions=("bomb.txt.zst",),
        reports=False,
    ),
    Case(
        "pack-jsonl-one-500mb-line",
        "pack",
        file_in(write("big.jsonl", jsonl_one_line(500 * MIB))),
        ("pack", "{inp}/files/big.jsonl", "--out", "{out}/pack", "--quiet"),
        frozenset({0, 2}),
        mentions=("big.jsonl",),
        reports=False,
    ),
)


def case_by_id(case_id: str) -> Case:
    return next(c for c in CASES if c.id == case_id)


# ------------------------------------------------------------------ measuring a process tree
@dataclass
class Outcome:
    """What one run did: exit code (None when the runner killed it, then ``killed`` says why),
    wall time, peak RSS of the tree, output, the files written under ``out/``, leftovers."""

    code: int | None
    seconds: float
    peak_mib: float
    stdout: str
    stderr: str
    reports: dict[str, bytes]
    leftovers: list[str]
    killed: str | None = None
    signalled_at: float | None = None  # seconds after start, when a signal was sent
    running_at_signal: bool = False

    def summary(self) -> str:
        end = f"killed ({self.killed})" if self.killed else f"exit {self.code}"
        return f"{end} in {self.seconds:.1f} s, peak {self.peak_mib:.0f} MiB"

    def json_report(self) -> dict | None:
        data = self.reports.get("report.json")
        try:
            return json.loads(data) if data is not None else None
        except ValueError:
            return None


def _procs() -> dict[int, tuple[int, int, int, int, str]]:
    """Every process: pid -> (ppid, pgid, sid, start time, state), from /proc/PID/stat."""
    found: dict[int, tuple[int, int, int, int, str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        rest = data[data.rindex(b")") + 2 :].split()
        found[int(name)] = (int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]), rest[0].decode())
    return found


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:160]
    except OSError:
        return "?"


class ProcessTree:
    """The processes of one child: its process group and session, every descendant, and every
    process ever seen in it (by pid and start time, so a re-parented orphan stays counted)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.known: dict[int, int] = {}

    def alive(self) -> list[int]:
        """The members now alive (zombies are dead)."""
        procs = _procs()
        members = {
            pid
            for pid, (_ppid, pgid, sid, start, _state) in procs.items()
            if pgid == self.root or sid == self.root or self.known.get(pid) == start
        }
        children: dict[int, list[int]] = {}
        for pid, (ppid, *_rest) in procs.items():
            children.setdefault(ppid, []).append(pid)
        stack = list(members | ({self.root} if self.root in procs else set()))
        while stack:
            for child in children.get(stack.pop(), []):
                if child not in members:
                    members.add(child)
                    stack.append(child)
        for pid in members:
            self.known[pid] = procs[pid][3]
        return sorted(pid for pid in members if procs[pid][4] not in ("Z", "X"))

    def kill(self) -> None:
        """SIGKILL the group and every live member (all started by this runner); wait up to 5 s
        for them to be gone."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.root, signal.SIGKILL)
        for pid in self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while self.alive() and time.monotonic() < deadline:  # SIGKILL is delivered, not awaited
            time.sleep(0.05)


def child_env(world: World, extra: Mapping[str, str], fields: Mapping[str, str]) -> dict[str, str]:
    """The parent's environment without Hub/test hooks, then: ``HOME`` the fake home, offline Hub,
    the secret marker in :data:`SECRET_ENV`, and ``extra`` (filled in)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("STACKTOK_TEST_", "HF_", "HUGGINGFACE_")) and k != SECRET_ENV
    }
    env.update(
        HOME=str(world.home),
        HF_HOME=str(world.home / ".cache" / "huggingface"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_VERBOSITY="error",
    )
    env[SECRET_ENV] = world.marker
    env.update({k: fill(v, fields) for k, v in extra.items()})
    return env


def fill(text: str, fields: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` of ``fields`` replaced (other braces kept as they are)."""
    for name, value in fields.items():
        text = text.replace("{" + name + "}", value)
    return text


def run_tree(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    logs: Path,
    out: Path,
    seconds: float,
    peak_mib: float,
    send: tuple[float, int, bool] | None = None,
) -> Outcome:
    """Run ``python -m stacktok *argv`` in its own session; poll its tree every 50 ms; kill it
    at ``seconds + 10`` or when it passes ``peak_mib``. ``send=(after, signum, to_group)`` sends a
    signal that many seconds after the start, to the child or its whole group (Ctrl-C)."""
    stdout, stderr = logs / "stdout", logs / "stderr"
    cmd = [sys.executable, "-m", "stacktok", *argv]
    with open(stdout, "wb") as so, open(stderr, "wb") as se:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=cwd, env=dict(env), stdout=so, stderr=se, start_new_session=True)
    tree, peak, killed = ProcessTree(proc.pid), 0, None
    signalled_at, running_at_signal = None, False
    try:
        while proc.poll() is None:
            elapsed = time.monotonic() - start
            if send is not None and signalled_at is None and elapsed >= send[0]:
                running_at_signal = proc.poll() is None
                (os.killpg if send[2] else os.kill)(proc.pid, send[1])
                signalled_at = elapsed
            peak = max(peak, sum(_rss_bytes(pid) for pid in tree.alive()))
            flood = max(stdout.stat().st_size, stderr.stat().st_size)
            if peak >= peak_mib * MIB:
                killed = f"the tree passed {peak_mib:.0f} MiB"
            elif elapsed > seconds + 10:
                killed = f"still running {elapsed:.0f} s after the start (bound {seconds:.0f} s)"
            elif flood > FLOOD_BYTES:
                killed = f"flooded its output ({flood / MIB:.0f} MiB)"
            if killed:
                tree.kill()
                proc.wait()
                break
            time.sleep(0.05)
        elapsed = time.monotonic() - start
        code = None if killed else proc.returncode
        leftovers = _leftovers(tree)
        peak = max(peak, sum(_rss_bytes(pid) for pid in tree.alive()))
        described = [f"{pid}: {_cmdline(pid)}" for pid in leftovers]
    finally:
        if proc.poll() is None:
            tree.kill()
            proc.wait()
        tree.kill()  # leftovers found above are ended here (and counted as a failure)
    return Outcome(
        code=code,
        seconds=elapsed,
        peak_mib=peak / MIB,
        stdout=_read(stdout),
        stderr=_read(stderr),
        reports=written(out),
        leftovers=described,
        killed=killed,
        signalled_at=signalled_at,
        running_at_signal=running_at_signal,
    )


def _leftovers(tree: ProcessTree, grace: float = 1.0) -> list[int]:
    """The members still alive ``grace`` seconds after the child returned (workers must be reaped
    before it exits; the grace only absorbs /proc lag)."""
    deadline = time.monotonic() + grace
    alive = tree.alive()
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = tree.alive()
    return alive


def _read(path: Path) -> str:
    with open(path, "rb") as f:
        return f.read(FLOOD_BYTES + 1).decode("utf-8", "replace")


def written(out: Path) -> dict[str, bytes]:
    """Every regular file under ``out`` (not following links), by relative path, first 64 MiB."""
    found: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(out):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            with open(path, "rb") as f:
                found[str(path.relative_to(out))] = f.read(FLOOD_BYTES)
    return found


# ------------------------------------------------------------------ byte-for-byte snapshots
def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` by relative path: ``("file", size, sha256)``, ``("link", target)``,
    ``("dir",)`` or ``(kind, rdev)`` for FIFOs, sockets and devices; never follows a link or opens
    anything but a regular file."""
    state: dict[str, tuple] = {}

    def visit(path: str, rel: str) -> None:
        st = os.lstat(path)
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            state[rel] = ("link", os.readlink(path))
        elif stat.S_ISDIR(mode):
            state[rel] = ("dir",)
            for name in sorted(os.listdir(path)):
                visit(os.path.join(path, name), f"{rel}/{name}" if rel else name)
        elif stat.S_ISREG(mode):
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(4 * MIB):
                    digest.update(chunk)
            state[rel] = ("file", st.st_size, digest.hexdigest())
        else:
            kind = "fifo" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "device"
            state[rel] = (kind, st.st_rdev)

    if os.path.lexists(root):
        visit(str(root), "")
    return state


def state_diff(before: Mapping[str, tuple], after: Mapping[str, tuple]) -> list[str]:
    """What changed between two :func:`tree_state` snapshots, one phrase per path (at most 10)."""
    changes = []
    for rel in sorted(set(before) | set(after)):
        if before.get(rel) != after.get(rel):
            was, now = before.get(rel), after.get(rel)
            what = "added" if was is None else "removed" if now is None else f"{was[0]} -> {now[0]} changed"
            changes.append(f"{rel!r} {what}")
    return changes[:10]


#: device nodes a report path may name; a product that replaces one gets it back, and fails
DEVICES = {"/dev/null": (1, 3), "/dev/full": (1, 7), "/dev/zero": (1, 5), "/dev/urandom": (1, 9)}


def restore_devices() -> list[str]:
    """Each of :data:`DEVICES` that is no longer its character device: put it back (as root),
    and say which."""
    replaced = []
    for path, (major, minor) in DEVICES.items():
        try:
            st = os.lstat(path)
            intact = stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(major, minor)
        except FileNotFoundError:
            intact = False
        if intact:
            continue
        replaced.append(path)
        with contextlib.suppress(OSError):
            if os.path.lexists(path):
                os.unlink(path)
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
            os.chmod(path, 0o666)
    return replaced


# ------------------------------------------------------------------ running and judging a case
def run_case(case: Case, world: World) -> tuple[Outcome, list[str]]:
    """Build ``case`` in ``world``, snapshot the inputs, run it, and return what happened and every
    problem found (empty: the case holds)."""
    directory = case.build(world)
    fields = world.fields(directory)
    argv = [fill(a, fields) for a in case.argv]
    if case.gate and case.reports:
        argv += report_flags(argv, world.out)
    watched = {path: tree_state(path) for path in world.watched}
    out_before = set(written(world.out))
    outcome = run_tree(
        argv,
        env=child_env(world, case.env, fields),
        cwd=Path(fill(case.cwd, fields)),
        logs=world.logs,
        out=world.out,
        seconds=case.seconds,
        peak_mib=case.peak_mib,
    )
    found = problems(case, outcome, world, watched=watched, out_before=out_before)
    return outcome, found


def report_flags(argv: Sequence[str], out: Path) -> list[str]:
    """``--json/--junit/--markdown/--html`` under ``out`` for each the argv does not already give."""
    names = {
        "--json": "report.json",
        "--junit": "report.xml",
        "--markdown": "report.md",
        "--html": "report.html",
    }
    return [a for flag, name in names.items() if flag not in argv for a in (flag, str(out / name))]


def problems(
    case: Case,
    outcome: Outcome,
    world: World,
    *,
    watched: Mapping[Path, Mapping[str, tuple]],
    out_before: set[str],
) -> list[str]:
    """Everything ``outcome`` did that ``case`` forbids (see the module docstring)."""
    found: list[str] = []
    code, err = outcome.code, outcome.stderr
    if outcome.killed:
        found.append(f"killed by the harness: {outcome.killed}")
    elif code not in case.exit:
        found.append(
            f"exit {code}, expected {' or '.join(map(str, sorted(case.exit)))}; stderr: {tail(err)!r}"
        )
    if outcome.seconds >= case.seconds:
        found.append(f"took {outcome.seconds:.1f} s (bound {case.seconds:.0f} s)")
    if outcome.peak_mib >= case.peak_mib:
        found.append(f"peak {outcome.peak_mib:.0f} MiB (bound {case.peak_mib} MiB)")
    if "Traceback" in err:
        found.append(f"a traceback on stderr: {tail(err)!r}")
    found += leaks(case, outcome, world)
    for path, before in watched.items():
        changes = state_diff(before, tree_state(path))
        if changes:
            found.append(f"{path.relative_to(world.root)}/ changed: {'; '.join(changes)}")
    if outcome.leftovers:
        found.append(f"processes alive after exit: {outcome.leftovers}")
    if code == 2:
        found += one_line(case, err)
        new = sorted(set(outcome.reports) - out_before)
        if case.gate and case.no_report_on_2 and new:
            found.append(f"exit 2 but wrote {new}")
    if code == 1 and case.row is not None:
        found += failing_row(case, outcome)
    if case.verify is not None:
        found += case.verify(outcome, world)
    return found


def leaks(case: Case, outcome: Outcome, world: World) -> list[str]:
    """The marker (and the case's other secret strings) in stdout, stderr or a written file."""
    needles = [world.marker, *case.absent]
    places = {"stdout": outcome.stdout.encode(), "stderr": outcome.stderr.encode(), **outcome.reports}
    return [
        f"secret text {needle[:24]!r} in {where}"
        for needle in needles
        for where, data in places.items()
        if needle.encode() in data
    ]


def one_line(case: Case, err: str) -> list[str]:
    """Exit 2 is one non-empty line on stderr, naming each of ``case.mentions``."""
    lines = [line for line in err.splitlines() if line.strip()]
    if len(lines) != 1:
        return [f"exit 2 with {len(lines)} stderr lines, expected 1: {tail(err)!r}"]
    missing = [m for m in case.mentions if m.lower() not in lines[0].lower()]
    return [f"the exit-2 line does not name {missing}: {lines[0][:300]!r}"] if missing else []


def failing_row(case: Case, outcome: Outcome) -> list[str]:
    """Exit 1: some failing row of the JSON report matches ``case.row``."""
    doc = outcome.json_report()
    if doc is None:
        return ["exit 1 but no readable JSON report"]
    rows = [r for r in doc.get("checks", []) if r.get("status") in ("fail", "error")]
    texts = [f"{r.get('check')} {r.get('message', '')} {r.get('fix', '')}" for r in rows]
    if any(re.search(case.row or "", t) for t in texts):
        return []
    return [f"no failing row matches {case.row!r}: {[t[:160] for t in texts][:5]}"]


def tail(text: str, n: int = 600) -> str:
    return text if len(text) <= n else "..." + text[-n:]


def cleanup_big_files(world: World, over: int = 32 * MIB) -> None:
    """Delete inputs larger than ``over`` (pytest keeps the last three runs' tmp folders)."""
    for dirpath, _dirs, files in os.walk(world.root):
        for name in files:
            path = Path(dirpath) / name
            with contextlib.suppress(OSError):
                if not path.is_symlink() and path.is_file() and path.stat().st_size > over:
                    path.unlink()


__all__ = [
    "CASES",
    "CLASSES",
    "FORGED",
    "NESTED_RANGE",
    "SECRET_ENV",
    "Case",
    "Outcome",
    "ProcessTree",
    "World",
    "base_checkpoint",
    "case_by_id",
    "checkpoint",
    "child_env",
    "cleanup_big_files",
    "gate",
    "make_world",
    "new_marker",
    "problems",
    "report_flags",
    "restore_devices",
    "run_case",
    "run_tree",
    "tree_state",
    "written",
]
