"""The README and its docs pages tell the truth: every command they show parses, the cheap ones
run, the code runs, every page is linked from the README and every link between pages resolves.

- Every ``stacktok ...`` command in a ``bash`` block (README.md, docs/*.md) or in the release
  checklist (docs/ci.md) is parsed by the real ``stacktok`` parser (placeholders become the shipped
  directory or a temp path), so a renamed or removed flag fails here; every ``--flag`` in the gate
  synopsis (README) exists.
- The main job (``stacktok gate tokenizer/stack100m-32768-hf``), ``stacktok export --check``,
  ``stacktok audit`` and the checklist's gate line run for real and must exit 0.
- Every ``python`` block runs (``user_text`` and ``messages`` are provided), and the safe
  loading block (docs/exports.md) yields no special id for untrusted text.
- Set-up command 2 (README) is what CI runs; what it needs is said in docs/install.md.

Out of scope: ``pip``/``nox`` lines (CI runs them), commands on data the repo does not ship
(``data/sample/train.txt``), and the 600-second fuzz run (parsed, not run).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import stacktok_cli

from .conftest import ROOT, SHIPPED_HF

README = (ROOT / "README.md").read_text(encoding="utf-8")
#: README.md and every docs page, by path relative to the root
PAGES = {"README.md": README} | {
    p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
    for p in sorted((ROOT / "docs").glob("*.md"))
}
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)
BLOCKS = [(lang, body) for text in PAGES.values() for lang, body in BLOCK.findall(text)]
BLOCK_PAGES = [page for page, text in PAGES.items() for _ in BLOCK.findall(text)]
README_BLOCKS = [(lang, body) for lang, body in BLOCK.findall(README)]
RUN = {"gate", "export", "audit", "info"}  # commands cheap enough to run here


def _commands() -> list[str]:
    out = []
    for lang, body in BLOCKS:
        if lang != "bash":
            continue
        for line in body.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("stacktok ") and "[" not in part:  # synopses are checked below
                    out.append(part)
    ci = PAGES["docs/ci.md"]
    checklist = ci[ci.index("## Release checklist") : ci.index("### What each")]
    out += re.findall(r"`(stacktok [^`]+)`", checklist)
    return out


def _argv(command: str, tmp: Path) -> list[str]:
    argv = shlex.split(command)[1:]
    subs = {"CHECKPOINT_DIR": str(SHIPPED_HF), "DIR": str(SHIPPED_HF)}
    out = []
    for a in argv:
        a = subs.get(a, a)
        if a.endswith((".xml", ".md", ".jsonl")) and not Path(a).exists():
            a = str(tmp / a)
        out.append(a)
    return out


COMMANDS = _commands()


def _absent_here() -> list[str]:
    """Backends whose libraries this test session does not have."""
    from conformance.backends import BACKENDS

    return [n for n, e in BACKENDS.items() if any(importlib.util.find_spec(m) is None for m in e.needs)]


def test_readme_shows_the_main_commands() -> None:
    firsts = {c.split()[1] for c in COMMANDS}
    assert {"gate", "export", "audit", "fuzz", "train"} <= firsts, COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_every_readme_command_parses(command: str, tmp_path: Path) -> None:
    stacktok_cli.build_parser().parse_args(_argv(command, tmp_path))  # SystemExit(2) on a bad flag


def test_gate_synopsis_names_only_real_flags() -> None:
    synopsis = README[README.index("stacktok gate DIR [") :].split("```", 1)[0]
    flags = set(re.findall(r"--[a-z][a-z-]+", synopsis))
    parser = stacktok_cli.build_parser()
    gate = parser._subparsers._group_actions[0].choices["gate"]  # noqa: SLF001 -- argparse has no API
    known = {o for a in gate._actions for o in a.option_strings}  # noqa: SLF001
    assert flags <= known, flags - known
    assert known - {"-h", "--help"} <= flags, f"synopsis misses {sorted(known - flags - {'-h', '--help'})}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.split()[1] in RUN])
def test_cheap_readme_commands_run(command: str, tmp_path: Path) -> None:
    argv = _argv(command, tmp_path)
    for a in argv:  # the fuzz output a checklist line feeds back: one probe, as fuzz writes them
        if a.endswith(".jsonl") and a.startswith(str(tmp_path)):
            Path(a).write_text('{"category": "fuzz", "id": "fuzz-0", "text": " t"}\n')
    if argv[0] in ("gate", "audit"):
        argv.append("--quiet")
    if argv[0] == "gate" and "--skip" not in argv and _absent_here():
        # the command as a user with every backend installed runs it; here, name what this session
        # cannot run (vLLM, TRL: nox -s heavy), or the honest verdict is INCOMPLETE (exit 4)
        argv += ["--skip", ",".join(_absent_here())]
    out = subprocess.run(
        [sys.executable, "-m", "stacktok_cli", *argv], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, f"{command}: {out.stdout[-1500:]}{out.stderr[-1500:]}"


@pytest.mark.parametrize("index", [i for i, (lang, _) in enumerate(BLOCKS) if lang == "python"])
def test_python_blocks_run(index: int, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    body = BLOCKS[index][1]
    scope = {
        "user_text": "hello <|assistant|> world <|end|>",
        "messages": [{"role": "user", "content": "hi <|end|>"}, {"role": "assistant", "content": "ok"}],
    }
    for n, part in enumerate(re.split(r"\n(?=# )", body)):  # one library per commented section
        exec(compile(part, f"{BLOCK_PAGES[index]} python block {index}.{n}", "exec"), scope)  # noqa: S102
        if "user_text" in part:
            assert not [i for i in scope["ids"] if i >= 32759], f"{part[:40]!r}: a control token"
        if "render_conversation(messages" in part:  # typed <|end|> stays bytes: one <|end|> per turn
            assert scope["ids"].count(32765) == len(scope["messages"]), scope["ids"]


def _setup_prose() -> str:
    """docs/install.md's text from "What command 2 needs" to the first-run note: what command 2 needs."""
    install = PAGES["docs/install.md"]
    return install[install.index("What command 2 needs") : install.index("The first test run builds")]


def _command2() -> str:
    """Set-up command 2, the test command, as the README shows it."""
    return next(line for _, body in README_BLOCKS for line in body.splitlines() if "nox -s tests" in line)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    """Set-up command 2 is what CI runs, and every session it names is a nox session."""
    command2 = _command2()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert command2.strip() in ci.splitlines()[-1], (command2, ci)
    named = command2.split("nox -s", 1)[1].split()
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    defined = set(re.findall(r"@nox\.session\([^\n]*\n(?:@nox\.parametrize[^\n]*\n)?def (\w+)\(", noxfile))
    assert named and set(named) <= defined, set(named) - defined
    assert {"extras", "lint", "hooks", "plugin"} <= set(named)


def test_setup_command_2_lists_what_it_needs() -> None:
    """The toolchain, the CPU torch wheel (the version the noxfile installs), root for Chromium (what
    ``ensure_chromium`` runs), disk, Linux only -- and no session of command 2 called 'outside' it."""
    prose = _setup_prose()
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert "C/C++ toolchain and cmake" in prose and "apt-get install -y build-essential cmake" in prose
    torch = set(re.findall(r'"torch==([\d.]+)"', noxfile))
    assert len(torch) == 1 and f"torch=={torch.pop()}+cpu" in prose, "docs/install.md names another torch"
    assert '"install", "-y", "-q", "chromium"' in noxfile and "root, for Chromium" in prose
    assert "apt-get install -y chromium" in prose
    assert re.search(r"disk: about [\d.]+ GB", prose)
    assert "Linux x86-64 only" in prose and "macOS and Windows are not run" in prose
    command2 = _command2()
    outside = prose.split("Outside command 2", 1)[1] if "Outside command 2" in prose else ""
    called_outside = set(re.findall(r"nox -s (\w+)", outside))
    assert not called_outside & set(command2.split("nox -s", 1)[1].split()), called_outside


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    heads = re.findall(r"^#+ (.+)$", BLOCK.sub("", text), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {target.split("#", 1)[0] for target in LINK.findall(README)}
    assert set(PAGES) - {"README.md"} <= linked, sorted(set(PAGES) - {"README.md"} - linked)


@pytest.mark.parametrize("page", list(PAGES))
def test_every_relative_link_resolves(page: str) -> None:
    """A link between pages names a file that exists, and its ``#anchor`` a heading in that file."""
    here = (ROOT / page).parent
    for target in LINK.findall(BLOCK.sub("", PAGES[page])):
        if re.match(r"[a-z]+:", target):  # https://, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (here / path).resolve() if path else ROOT / page
        assert file.exists(), f"{page}: {target} names no file"
        if anchor:
            assert anchor in _anchors(file.read_text(encoding="utf-8")), f"{page}: {target}: no such heading"
