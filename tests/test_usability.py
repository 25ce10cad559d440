"""The first hour of a new user (issue #12): no leftovers, paths from anywhere, CLI basics, true hints."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

import stacktok_cli
from stacktok_cli import tokens
from stacktok_export.artifact import artifact as artifact_module
from stacktok_export.artifact.artifact import shipped_artifact_path
from stacktok_export.export import export_all, gguf_fmt, stale_temps

from .conftest import ROOT, SHIPPED, SHIPPED_HF, need
from .helpers import build_checkpoint

NAME = "stack100m-32768"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stacktok_cli", *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def dot_entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


@pytest.fixture()
def artifact(tmp_path: Path, small_tok) -> Path:
    """The small tokenizer saved under the shipped name (fast exports, the same temp names)."""
    path = tmp_path / "art" / f"{NAME}.json"
    path.parent.mkdir()
    small_tok.save(path)
    return path


# ------------------------------------------------------------ no leftovers (item 6)
def _plant(out: Path, mtime: float) -> dict[str, Path]:
    planted = {
        "tiktoken tmp": out / f".{NAME}.tiktoken.abc.tmp",
        "gguf tmp": out / f".{NAME}.gguf.k3j2.tmp",
        "scratch file": out / ".stacktok-tmp-x",
        "scratch dir": out / ".stacktok-tmp-dir",
        "hf tmp dir": out / f".{NAME}-hf.q1w2.tmp",
        "hf set-aside dir": out / f".{NAME}-hf.old-z9",
    }
    for key, path in planted.items():
        if key.endswith("dir"):
            path.mkdir()
            (path / "vocab.gguf").write_bytes(b"GGUF partial")
        else:
            path.write_bytes(b"partial")
        os.utime(path, (mtime, mtime))
    return planted


def test_export_removes_stale_temp_files_it_owns(tmp_path: Path, artifact: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    planted = _plant(out, time.time() - 3600)
    foreign = [out / ".other.tiktoken.abc.tmp", out / ".keep", out / "notes.txt"]
    for path in foreign:
        path.write_text("not ours")
        os.utime(path, (time.time() - 3600,) * 2)
    export_all(artifact, out)
    assert [k for k, p in planted.items() if os.path.lexists(p)] == []
    assert all(p.exists() for p in foreign), "removed a file export does not own"
    assert stale_temps(out, NAME) == []


def test_export_spares_temp_files_newer_than_itself(tmp_path: Path, artifact: Path) -> None:
    """A concurrent export's live temp files (modified after this one started) are left alone."""
    out = tmp_path / "out"
    out.mkdir()
    planted = _plant(out, time.time() + 3600)
    export_all(artifact, out)
    assert all(os.path.lexists(p) for p in planted.values())


def test_cli_export_cleans_the_leftovers_of_a_killed_run(tmp_path: Path, artifact: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    _plant(out, time.time() - 60)
    res = run("export", "--artifact", str(artifact), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert dot_entries(out) == []


@pytest.fixture()
def scratch_on_disk(monkeypatch) -> list[Path]:
    """Force the portable path (a scratch file, not memfd) and record where GGUFWriter writes."""
    gguf = need("gguf", "gguf")
    monkeypatch.setattr(gguf_fmt, "USE_MEMFD", False)
    paths: list[Path] = []
    real_init = gguf.GGUFWriter.__init__

    def spy(self, path, *args, **kwargs):
        paths.append(Path(path))
        real_init(self, path, *args, **kwargs)

    monkeypatch.setattr(gguf.GGUFWriter, "__init__", spy)
    return paths


def test_gguf_scratch_file_is_beside_the_target(tmp_path: Path, artifact: Path, scratch_on_disk) -> None:
    out = tmp_path / "out"
    export_all(artifact, out)
    [scratch] = scratch_on_disk
    assert scratch.parent == out and scratch.name.startswith(gguf_fmt.TMP_PREFIX)
    assert not scratch.exists()
    assert dot_entries(out) == []


def _raise(*args, **kwargs):
    raise RuntimeError("disk on fire")


@pytest.mark.parametrize("where", ["gguf writer", "gguf rename", "tiktoken write"])
def test_export_that_raises_midway_leaves_no_temp_files(
    tmp_path: Path, artifact: Path, scratch_on_disk, monkeypatch, where: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    if where == "gguf writer":
        gguf = need("gguf", "gguf")
        monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", _raise)
    elif where == "gguf rename":
        real_replace = os.replace

        def flaky_replace(src, dst, *a, **k):
            if str(dst).endswith(".gguf"):
                raise RuntimeError("disk on fire")
            return real_replace(src, dst, *a, **k)

        monkeypatch.setattr(os, "replace", flaky_replace)
    else:  # the first single-file write (NAME.tiktoken) fails before its rename
        monkeypatch.setattr(os, "fsync", _raise)
    with pytest.raises(RuntimeError, match="disk on fire"):
        export_all(artifact, out)
    monkeypatch.undo()
    assert dot_entries(out) == []
    if where == "gguf writer":
        assert scratch_on_disk and not scratch_on_disk[0].exists()


def test_gguf_bytes_leaves_nothing_in_the_temp_dir(tmp_path: Path, small_tok, monkeypatch) -> None:
    """The default (no output directory: gate, audit) writes no file anywhere, even when it fails."""
    gguf = need("gguf", "gguf")
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert gguf_fmt.gguf_bytes(small_tok)[:4] == b"GGUF"
    monkeypatch.setattr(gguf.GGUFWriter, "write_kv_data_to_file", _raise)
    with pytest.raises(RuntimeError):
        gguf_fmt.gguf_bytes(small_tok)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd is Linux-only")
def test_gguf_scratch_is_anonymous_memory_on_linux(small_tok, monkeypatch) -> None:
    """Nothing on disk at all, so not even SIGKILL can leave a partial GGUF behind."""
    gguf = need("gguf", "gguf")
    paths: list[str] = []
    real_init = gguf.GGUFWriter.__init__

    def spy(self, path, *args, **kwargs):
        paths.append(str(path))
        real_init(self, path, *args, **kwargs)

    monkeypatch.setattr(gguf.GGUFWriter, "__init__", spy)
    assert gguf_fmt.USE_MEMFD
    gguf_fmt.gguf_bytes(small_tok, tmp_dir="/nonexistent")
    [path] = paths
    assert path.startswith("/proc/self/fd/")


# ------------------------------------------------------------------- paths (item 5)
def test_export_check_works_from_any_directory(tmp_path: Path) -> None:
    res = run("export", "--check", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    expected = f"using artifact {ROOT / 'tokenizer' / f'{NAME}.json'}, exports in {ROOT / 'tokenizer'}"
    assert expected in res.stdout.splitlines()
    assert list(tmp_path.iterdir()) == []


def test_project_root_is_this_checkout() -> None:
    assert artifact_module.project_root() == ROOT


def test_installed_package_uses_shipped_artifact_and_local_exports(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(artifact_module, "project_root", lambda: None)
    build_checkpoint(tmp_path / "tokenizer", source=ROOT / "tokenizer")
    monkeypatch.chdir(tmp_path)
    assert stacktok_cli.main(["export", "--check"]) == 0
    out = capsys.readouterr().out
    assert f"using artifact {shipped_artifact_path()}, exports in tokenizer" in out.splitlines()


def test_no_export_directory_is_a_one_line_hint(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(artifact_module, "project_root", lambda: None)
    monkeypatch.chdir(tmp_path)
    assert stacktok_cli.main(["export", "--check"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "pass --out DIR" in err and "Traceback" not in err


def test_check_of_a_missing_out_directory_is_a_usage_error(tmp_path: Path) -> None:
    res = run("export", "--check", "--out", str(tmp_path / "nope"))
    assert res.returncode == 2
    assert "no such directory" in res.stderr and "Traceback" not in res.stderr


# -------------------------------------------------------------- CLI basics (item 4)
def test_info_summarises_shortfall_fillers(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    art = tmp_path / "toy.json"
    res = run("train", str(corpus), "--vocab-size", "512", "--out", str(art), "--quiet")
    assert res.returncode == 0, res.stderr
    info = run("info", str(art))
    assert info.returncode == 0, info.stderr
    lines = info.stdout.splitlines()
    assert "  215 fillers <|unused_0|>..<|unused_214|> at ids 288-502 (training shortfall)" in lines
    assert sum("unused" in line for line in lines) == 1
    assert "     503  <|bos|>" in lines and "     511  <|tool_result|>" in lines
    assert len(lines) < 25
    full = json.loads(run("info", str(art), "--json").stdout)["special_tokens"]
    assert sum(k.startswith("<|unused_") for k in full) == 215


def test_special_lines_runs() -> None:
    specials = {"<|unused_0|>": 10, "<|unused_1|>": 11, "<|unused_5|>": 12, "<|bos|>": 13, "<|unused_9|>": 14}
    assert tokens.special_lines(specials) == [
        "  2 fillers <|unused_0|>..<|unused_1|> at ids 10-11 (training shortfall)",
        "      12  <|unused_5|>  (training shortfall filler)",
        "      13  <|bos|>",
        "      14  <|unused_9|>  (training shortfall filler)",
    ]


def test_shipped_info_has_no_fillers() -> None:
    res = run("info", str(SHIPPED))
    assert res.returncode == 0 and "filler" not in res.stdout


@pytest.mark.parametrize("workers", ["0", "-3"])
def test_train_workers_below_one_is_a_usage_error(tmp_path: Path, workers: str) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("abc abd " * 100)
    res = run("train", str(corpus), "--out", str(tmp_path / "t.json"), "--workers", workers, "--quiet")
    assert res.returncode == 2
    assert f"--workers must be at least 1, got {workers}" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "t.json").exists()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


@pytest.mark.parametrize("command", ["train", "info", "encode", "decode", "export"])
def test_every_option_has_help_with_its_default(command: str) -> None:
    sub = _subparsers(stacktok_cli.build_parser())[command]
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help, f"{command} {name} has no help text"
        if not action.required and action.nargs not in ("+",):
            assert "default" in action.help, f"{command} {name}: help names no default: {action.help!r}"


def test_help_output_shows_defaults() -> None:
    res = run("train", "--help")
    assert res.returncode == 0
    flat = " ".join(res.stdout.split())
    assert "(default: 32768)" in flat and "(default: one per core)" in flat
    export_help = " ".join(run("export", "--help").stdout.split())
    assert "--check" in export_help and "(default: off)" in export_help


# ------------------------------------------------------------ true hints (item 3)
def test_trl_missing_names_trl_not_datasets(monkeypatch) -> None:
    from conformance.backends import trl_backend
    from conformance.core.protocol import BackendMissing

    monkeypatch.setitem(sys.modules, "trl", None)
    monkeypatch.setitem(sys.modules, "datasets", None)  # absent too, as on a fresh machine
    with pytest.raises(BackendMissing) as info:
        trl_backend.load(SHIPPED_HF)
    message = str(info.value)
    assert message.startswith("trl is not installed;"), message
    assert "No module named" not in message and "datasets is not" not in message
    assert trl_backend.INSTALL_HINT in message


def test_trl_present_but_datasets_missing_names_datasets(monkeypatch) -> None:
    from conformance.backends import trl_backend
    from conformance.core.protocol import BackendMissing

    monkeypatch.setitem(sys.modules, "trl", types.ModuleType("trl"))
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(BackendMissing) as info:
        trl_backend.load(SHIPPED_HF)
    assert str(info.value) == "datasets is not installed (TRL needs it); install: pip install datasets"


def test_sigterm_during_export_leaves_no_temp_files(tmp_path: Path) -> None:
    """`kill PID` mid-export exits 143 through the clean-up paths (SIGKILL is left to the next export)."""
    import signal

    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "stacktok_cli", "export", "--artifact", str(SHIPPED), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("using artifact"), first
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.strip() == "stacktok: terminated"
    assert dot_entries(out) == []


def test_every_package_ships_in_the_wheel() -> None:
    """A package directory missing from pyproject's list works editable and breaks when installed."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("stacktok_cli", "stacktok_export", "conformance")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
