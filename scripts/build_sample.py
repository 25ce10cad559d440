#!/usr/bin/env python3
"""Build a deterministic ~105 MB training text mix from Debian-packaged files.

The mix is made only of files that Debian (bookworm) packages install on this
machine, so it can be rebuilt anywhere from package names and versions:

* code: the CPython 3.11 standard library ``.py`` files (tests included) and
  C headers under ``/usr/include`` from a fixed list of ``-dev`` packages;
* English prose: the Python 3.11 docs (reST sources), man pages rendered to
  plain text, fortunes, the Debian Reference and the Debian Administrator's
  Handbook (HTML stripped to text);
* other languages (~23 %): Debian Reference de/fr/ja/zh-cn, the Handbook in
  several languages, German/Russian/Chinese fortunes and de/fr/ja/zh/ru man
  pages.

Procedure: every source group lists its packages; its files come from
``dpkg-query -L`` (sorted, de-duplicated). Groups with a byte budget take files
in a seeded hash order until the budget is met. Each document is cut into
pieces of at most 16 KiB at line boundaries, all pieces are shuffled with
``random.Random(20261130)``, the first ~5 MB become ``heldout.txt`` and the
next pieces up to 100,000,000 bytes (never more) become ``train.txt``. A JSON
manifest records packages, versions, byte counts and sha256 sums, and the
first <= 2,000,000 bytes of the held-out text are copied to
``fixtures/heldout-2mb.txt``.

Out of scope: downloading anything but Debian packages, de-duplication,
language identification, quality or licence filtering, and tokenizer training
itself. The outputs under ``data/`` are not meant to be committed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html.parser
import io
import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

SEED = 20261130
PIECE_BYTES = 16 * 1024
HELDOUT_BYTES = 5_000_000
TRAIN_BYTES = 100_000_000
FIXTURE_BYTES = 2_000_000
MIN_TOTAL_BYTES = HELDOUT_BYTES + TRAIN_BYTES
WORKERS = 2
BATCH = 32

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = "data/sample"
DEFAULT_MANIFEST = "tokenizer/stack100m-32768.sample-manifest.json"
DEFAULT_FIXTURE = "fixtures/heldout-2mb.txt"
DEBIAN_PYTHON = "/usr/bin/python3.11"
TOOL_PACKAGES = ("python3.11", "man-db", "groff-base", "bsdextrautils")
MAN_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LC_ALL": "C.UTF-8",
    "LANG": "C.UTF-8",
    "MANWIDTH": "80",
    "GROFF_NO_SGR": "1",
}
HEADER_PACKAGES = (
    "linux-libc-dev",
    "libc6-dev",
    "libicu-dev",
    "libssl-dev",
    "libgl-dev",
    "tcl8.6-dev",
    "libnss3-dev",
    "x11proto-dev",
    "libpython3.11-dev",
    "libfreetype-dev",
    "tk8.6-dev",
    "libgles-dev",
    "libsqlite3-dev",
    "libz3-dev",
    "libnspr4-dev",
    "libxcb1-dev",
    "libxml2-dev",
    "libgnutls28-dev",
    "libncurses-dev",
    "libx11-dev",
    "nettle-dev",
    "libgmp-dev",
    "liblzma-dev",
    "libpq-dev",
    "zlib1g-dev",
    "libffi-dev",
    "libexpat1-dev",
    "libreadline-dev",
    "libbz2-dev",
    "libgcrypt20-dev",
    "libgpg-error-dev",
    "libtirpc-dev",
    "libxt-dev",
    "libxext-dev",
    "libcrypt-dev",
    "valgrind",
)
MAN_EN_PACKAGES = (
    "manpages",
    "manpages-dev",
    "git-man",
    "coreutils",
    "util-linux",
    "bash",
    "apt",
    "dpkg",
    "iproute2",
    "openssl",
)
ANSI_SGR = re.compile(r"\x1b\[[0-9;]*m")  # colour codes, e.g. in fortunes-zh
HANDBOOK = "/usr/share/doc/debian-handbook/html/"
HANDBOOK_L10N = ("de-DE", "es-ES", "fr-FR", "ja-JP", "ru-RU", "zh-CN")


@dataclass(frozen=True)
class Group:
    """One source group: its packages, a path filter and an optional budget."""

    name: str
    lang: str
    packages: tuple[str, ...]
    accept: Callable[[str], bool]
    budget: int | None = None
    man: bool = False


@dataclass
class Loaded:
    """Documents read for one group, plus bookkeeping for the manifest."""

    group: Group
    docs: list[tuple[str, bytes]] = field(default_factory=list)
    candidates: int = 0
    skipped: int = 0


def python_stdlib_dir() -> str:
    """Stdlib dir of Debian's python3.11 (falls back to this interpreter)."""
    code = "import sysconfig; print(sysconfig.get_paths()['stdlib'])"
    try:
        out = subprocess.run(
            [DEBIAN_PYTHON, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        import sysconfig

        out = sysconfig.get_paths()["stdlib"]
    return out.rstrip("/") + "/"


def groups() -> list[Group]:
    """All source groups, in their fixed order."""
    std = python_stdlib_dir()
    return [
        Group(
            "py-stdlib",
            "code",
            (
                "libpython3.11-minimal",
                "libpython3.11-stdlib",
                "libpython3.11-testsuite",
                "python3-distutils",
                "python3-lib2to3",
            ),
            lambda p: p.startswith(std) and p.endswith(".py") and "-packages/" not in p,
        ),
        Group(
            "c-headers",
            "code",
            HEADER_PACKAGES,
            lambda p: p.startswith("/usr/include/") and p.endswith(".h"),
            budget=26_500_000,
        ),
        Group(
            "python-docs",
            "en",
            ("python3.11-doc",),
            lambda p: "/html/_sources/" in p and p.endswith(".rst.txt"),
        ),
        Group(
            "man-en",
            "en",
            MAN_EN_PACKAGES,
            man_filter("/usr/share/man/man"),
            budget=10_500_000,
            man=True,
        ),
        Group(
            "fortunes-en",
            "en",
            ("fortunes", "fortunes-min"),
            fortune_filter("/usr/share/games/fortunes/"),
        ),
        Group(
            "debian-docs-en",
            "en",
            ("debian-reference-en", "debian-handbook"),
            lambda p: p.endswith(".en.txt.gz") or (p.startswith(HANDBOOK + "en-US/") and p.endswith(".html")),
        ),
        Group(
            "debian-reference-l10n",
            "de,fr,ja,zh",
            tuple(f"debian-reference-{lang}" for lang in ("de", "fr", "ja", "zh-cn")),
            lambda p: p.endswith(".txt.gz") and "/debian-reference." in p,
        ),
        Group(
            "debian-handbook-l10n",
            ",".join(HANDBOOK_L10N),
            ("debian-handbook",),
            lambda p: (
                p.endswith(".html") and any(p.startswith(f"{HANDBOOK}{lang}/") for lang in HANDBOOK_L10N)
            ),
            budget=6_500_000,
        ),
        Group(
            "fortunes-l10n",
            "de,ru,zh",
            ("fortunes-de", "fortunes-ru", "fortunes-zh"),
            fortune_filter("/usr/share/games/fortunes/"),
            budget=5_000_000,
        ),
        *[
            Group(
                f"man-{lang}",
                lang,
                (f"manpages-{lang}",),
                man_filter(f"/usr/share/man/{sub}/man"),
                budget=2_000_000,
                man=True,
            )
            for lang, sub in (
                ("de", "de"),
                ("fr", "fr"),
                ("ja", "ja"),
                ("zh", "zh_CN"),
                ("ru", "ru"),
            )
        ],
    ]


def man_filter(prefix: str) -> Callable[[str], bool]:
    """Accept compressed man pages under prefix (e.g. /usr/share/man/man)."""
    return lambda p: p.startswith(prefix) and p.endswith(".gz")


def fortune_filter(prefix: str) -> Callable[[str], bool]:
    """Accept fortune text files (not the .dat indexes) under prefix."""
    return lambda p: p.startswith(prefix) and not p.endswith(".dat")


def all_packages(gs: Iterable[Group]) -> list[str]:
    """Every Debian package the build needs, deduplicated, in stable order."""
    names = [*TOOL_PACKAGES, *(p for g in gs for p in g.packages)]
    return list(dict.fromkeys(names))


def apt_command(pkgs: Iterable[str]) -> str:
    """The apt-get line that installs pkgs."""
    return "apt-get install -y --no-install-recommends " + " ".join(pkgs)


def install(pkgs: list[str]) -> None:
    """apt-get update, then install the missing packages the archive has.

    Packages already installed are left alone (no upgrades of bash, apt, ...);
    their versions are recorded in the manifest instead.
    """
    run = {"check": True, "env": {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}}
    subprocess.run(["apt-get", "update"], **run)
    missing = [p for p in pkgs if package_version(p) is None]
    known = [
        p for p in missing if subprocess.run(["apt-cache", "show", p], capture_output=True).returncode == 0
    ]
    for p in sorted(set(missing) - set(known)):
        print(f"warning: package {p} not in the archive, skipped", file=sys.stderr)
    if known:
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *known], **run)


def package_version(pkg: str) -> str | None:
    """Installed version of pkg, or None when it is not installed."""
    res = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Status}\t${Version}", pkg], capture_output=True, text=True
    )
    status, _, version = res.stdout.partition("\t")
    return version if res.returncode == 0 and status.endswith(" installed") else None


def package_files(pkgs: Iterable[str]) -> list[str]:
    """Regular, non-symlink files installed by pkgs; sorted, de-duplicated."""
    files: set[str] = set()
    for pkg in pkgs:
        res = subprocess.run(["dpkg-query", "-L", pkg], capture_output=True, text=True)
        if res.returncode == 0:
            files.update(res.stdout.splitlines())
    return sorted(f for f in files if os.path.isfile(f) and not os.path.islink(f))


def hash_order(paths: list[str]) -> list[str]:
    """A seeded, machine-independent order used to pick files under a budget."""
    key = lambda p: hashlib.sha256(f"{SEED}\0{p}".encode()).digest()  # noqa: E731
    return sorted(paths, key=key)


def decode(data: bytes) -> str | None:
    """UTF-8 text, or None when data has NUL bytes or is not valid UTF-8."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


class TextExtractor(html.parser.HTMLParser):
    """Collect the visible text of an HTML page, one block per line."""

    BLOCKS = {
        "p",
        "div",
        "br",
        "li",
        "tr",
        "pre",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "dt",
        "dd",
        "table",
        "ul",
        "ol",
        "dl",
        "section",
        "blockquote",
    }
    HIDDEN = {"head", "script", "style", "title"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0
        self.pre = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.hidden += tag in self.HIDDEN
        self.pre += tag == "pre"
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        self.hidden -= tag in self.HIDDEN and self.hidden > 0
        self.pre -= tag == "pre" and self.pre > 0
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.hidden:
            return
        if not self.pre:
            data = re.sub(r"\s+", " ", data)
            if not self.parts or self.parts[-1].endswith("\n"):
                data = data.lstrip()
        self.parts.append(data)


def html_to_text(page: str) -> str:
    """Strip tags from an HTML page; blank-line runs are collapsed."""
    parser = TextExtractor()
    parser.feed(page)
    parser.close()
    lines = (line.rstrip() for line in "".join(parser.parts).split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n") + "\n"


def is_man_stub(data: bytes) -> bool:
    """True for a man page that only redirects to another (.so)."""
    return data.lstrip().startswith(b".so ") and data.count(b"\n") <= 2


def render_man(path: str) -> bytes | None:
    """Render one man page to plain UTF-8 text (80 columns), or None."""
    with open(path, "rb") as fh:
        raw = fh.read()
    if is_man_stub(gzip.decompress(raw) if path.endswith(".gz") else raw):
        return None
    man = subprocess.run(["man", "-P", "cat", "-l", path], env=MAN_ENV, capture_output=True, timeout=120)
    col = subprocess.run(["col", "-bx"], input=man.stdout, env=MAN_ENV, capture_output=True, timeout=120)
    return col.stdout if man.returncode == 0 and col.returncode == 0 else None


def load_document(path: str, man: bool) -> bytes | None:
    """Read one source file as normalised UTF-8 bytes, or None to skip it."""
    if man:
        data = render_man(path)
    else:
        with open(path, "rb") as fh:
            data = fh.read()
        data = gzip.decompress(data) if path.endswith(".gz") else data
    text = decode(data) if data else None
    if text is not None and path.endswith(".html"):
        text = html_to_text(text)
    text = ANSI_SGR.sub("", text) if text else text
    if not text or not text.strip():
        return None
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")


def batches(items: list[str], size: int) -> Iterator[list[str]]:
    """Consecutive slices of items of at most size elements."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def load_group(group: Group, pool: ThreadPoolExecutor) -> Loaded:
    """Read a group's files (in seeded order under a budget) until it is met."""
    paths = [p for p in package_files(group.packages) if group.accept(p)]
    order = hash_order(paths) if group.budget else paths
    loaded, total = Loaded(group, candidates=len(paths)), 0
    for batch in batches(order, BATCH):
        docs = pool.map(lambda p: load_document(p, group.man), batch)
        for path, doc in zip(batch, docs, strict=True):
            if group.budget and total >= group.budget:
                break
            if doc is None:
                loaded.skipped += 1
                continue
            loaded.docs.append((path, doc))
            total += len(doc)
        if group.budget and total >= group.budget:
            break
    loaded.docs.sort()
    return loaded


def split_line(line: bytes, limit: int) -> Iterator[bytes]:
    """Split an over-long line into chunks <= limit at UTF-8 char boundaries."""
    while len(line) > limit:
        cut = limit
        while cut > 0 and (line[cut] & 0xC0) == 0x80:
            cut -= 1
        yield line[:cut]
        line = line[cut:]
    yield line


def pieces(doc: bytes, limit: int = PIECE_BYTES) -> Iterator[bytes]:
    """Cut a document into pieces of at most limit bytes at line boundaries."""
    buf: list[bytes] = []
    size = 0
    for line in io.BytesIO(doc):
        for chunk in split_line(line, limit):
            if size + len(chunk) > limit:
                yield b"".join(buf)
                buf, size = [], 0
            buf.append(chunk)
            size += len(chunk)
    if buf:
        yield b"".join(buf)


def take(items: list[tuple[int, bytes]], start: int, limit: int) -> int:
    """Index after the longest run from start whose bytes stay <= limit."""
    total, end = 0, start
    while end < len(items) and total + len(items[end][1]) <= limit:
        total += len(items[end][1])
        end += 1
    return end


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_atomic(path: Path, chunks: Iterable[bytes]) -> None:
    """Write chunks to path via a temp file in the same dir and os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def group_report(
    loaded: Loaded, train: list[tuple[int, bytes]], heldout: list[tuple[int, bytes]], index: int
) -> dict:
    """Manifest entry for one group."""
    g = loaded.group
    return {
        "lang": g.lang,
        "packages": {p: package_version(p) for p in g.packages},
        "budget_bytes": g.budget,
        "candidate_files": loaded.candidates,
        "files": len(loaded.docs),
        "skipped_files": loaded.skipped,
        "pool_bytes": sum(len(d) for _, d in loaded.docs),
        "train_bytes": sum(len(b) for i, b in train if i == index),
        "heldout_bytes": sum(len(b) for i, b in heldout if i == index),
    }


def rebuild_command(args: argparse.Namespace) -> str:
    """The command line that rebuilds this sample from the repo root."""
    cmd = ["python3", "scripts/build_sample.py", "--install"]
    for flag in ("out", "manifest", "fixture"):
        if getattr(args, flag) is not None:
            cmd += [f"--{flag}", getattr(args, flag)]
    return shlex.join(cmd)


def output_path(given: str | None, default: str) -> Path:
    """A user-given path (relative to the cwd) or the default (relative to the repo)."""
    return Path(given) if given is not None else REPO / default


def warn_empty(loaded: Loaded) -> None:
    """One-line warning for a group that yielded nothing."""
    missing = [p for p in loaded.group.packages if package_version(p) is None]
    pkgs = missing or list(loaded.group.packages)
    print(
        f"warning: group {loaded.group.name} yielded nothing "
        f"(missing package(s): {' '.join(pkgs)}); fix: {apt_command(pkgs)}",
        file=sys.stderr,
    )


def collect(gs: list[Group]) -> list[Loaded]:
    """Load every group, with progress on stderr."""
    out = []
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for g in gs:
            t0 = time.monotonic()
            loaded = load_group(g, pool)
            size = sum(len(d) for _, d in loaded.docs)
            print(
                f"{g.name}: {len(loaded.docs)} files, {size:,} bytes ({time.monotonic() - t0:.0f}s)",
                file=sys.stderr,
            )
            if not loaded.docs:
                warn_empty(loaded)
            out.append(loaded)
    return out


def build(args: argparse.Namespace) -> int:
    """Collect, cut, shuffle, split, write outputs and the manifest."""
    gs = groups()
    if args.install:
        install(all_packages(gs))
    loaded = collect(gs)
    items = [(i, piece) for i, ld in enumerate(loaded) for _, doc in ld.docs for piece in pieces(doc)]
    total = sum(len(b) for _, b in items)
    if total < MIN_TOTAL_BYTES:
        print(
            f"error: only {total:,} bytes collected, need {MIN_TOTAL_BYTES:,}; "
            f"install the sources with: {apt_command(all_packages(gs))}",
            file=sys.stderr,
        )
        return 1
    random.Random(SEED).shuffle(items)
    cut = take(items, 0, HELDOUT_BYTES)
    heldout, train = items[:cut], items[cut : take(items, cut, TRAIN_BYTES)]
    fixture = heldout[: take(heldout, 0, FIXTURE_BYTES)]
    out = output_path(args.out, DEFAULT_OUT)
    outputs = {
        "heldout.txt": (out / "heldout.txt", heldout),
        "train.txt": (out / "train.txt", train),
        args.fixture or DEFAULT_FIXTURE: (output_path(args.fixture, DEFAULT_FIXTURE), fixture),
    }
    for path, chosen in outputs.values():
        write_atomic(path, (b for _, b in chosen))
    manifest = {
        "seed": SEED,
        "piece_bytes": PIECE_BYTES,
        "targets": {
            "heldout_bytes": HELDOUT_BYTES,
            "train_bytes": TRAIN_BYTES,
            "fixture_bytes": FIXTURE_BYTES,
        },
        "groups": {ld.group.name: group_report(ld, train, heldout, i) for i, ld in enumerate(loaded)},
        "tools": {p: package_version(p) for p in TOOL_PACKAGES},
        "man_env": MAN_ENV,
        "totals": {
            "pool_bytes": total,
            "pool_pieces": len(items),
            "train_pieces": len(train),
            "heldout_pieces": len(heldout),
            "fixture_pieces": len(fixture),
        },
        "outputs": {
            name: {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
            for name, (path, _) in outputs.items()
        },
        "packages_command": apt_command(all_packages(gs)),
        "rebuild_command": rebuild_command(args),
    }
    text = json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=True) + "\n"
    write_atomic(output_path(args.manifest, DEFAULT_MANIFEST), [text.encode("ascii")])
    for name, info in manifest["outputs"].items():
        print(f"{name}: {info['bytes']:,} bytes sha256 {info['sha256']}")
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "--out",
        help=f"output directory (default {DEFAULT_OUT}, relative to the repo)",
    )
    ap.add_argument(
        "--manifest",
        help=f"manifest path (default {DEFAULT_MANIFEST}, relative to the repo)",
    )
    ap.add_argument(
        "--fixture",
        help=f"held-out fixture path (default {DEFAULT_FIXTURE}, relative to the repo)",
    )
    ap.add_argument("--packages", action="store_true", help="print the apt-get install command and exit")
    ap.add_argument(
        "--install", action="store_true", help="run apt-get update and install the packages first"
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.packages:
        print(f"apt-get update && {apt_command(all_packages(groups()))}")
        return 0
    return build(args)


if __name__ == "__main__":
    sys.exit(main())
