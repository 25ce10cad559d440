"""The pre-commit hooks and the GitHub Action, run for real (issue 22 item 2).

Unmarked tests check the hook manifest against the code (the ``files:`` pattern, the hook's
dependencies equal to the extras). The ``hooks`` tests (``nox -s hooks``; they install from
PyPI) run ``pre-commit try-repo`` on a copy of this checkout in a scratch git repository, and
run the action's ``run:`` steps from action.yml as a runner would: inputs and
``${{ github.action_path }}`` / ``${{ runner.temp }}`` substituted, ``GITHUB_STEP_SUMMARY`` and
``GITHUB_OUTPUT`` set, under ``bash --noprofile --norc -eo pipefail``.

Out of scope: the gate's verdicts (tests/test_gate.py); upload-artifact (a ``uses:`` step,
checked by actionlint in ``nox -s lint`` through .github/workflows/gate.yml).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement

from stacktok_cli.hooks import TOKENIZER_FILES, split_files

from .helpers.gate import check_report
from .helpers.paths import ROOT, SHIPPED_HF

MANIFEST = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
HOOKS = {h["id"]: h for h in MANIFEST}
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
FAST = "--backends reference"  # the gate step's args where the verdict, not the backends, is tested


def test_manifest_files_pattern_is_the_hook_code_pattern() -> None:
    assert set(HOOKS) == {"stacktok-export-check", "stacktok-gate"}
    for hook in HOOKS.values():
        assert hook["files"] == TOKENIZER_FILES
    pattern = re.compile(TOKENIZER_FILES)
    for path in ("tokenizer.json", "m/tokenizer_config.json", "a/b.tiktoken", "x.gguf", "tokenizer/m.json"):
        assert pattern.search(path), path
    for path in ("config.json", "README.md", "src/tokenizer.py", "data/train.json"):
        assert not pattern.search(path), path


def test_hook_dependencies_are_the_gate_extras() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = {
        str(Requirement(r))
        for extra in ("hf", "tiktoken", "gguf")
        for r in extras["optional-dependencies"][extra]
        if Requirement(r).name != "numpy"  # a core dependency already
    }
    for hook in HOOKS.values():
        assert {str(Requirement(r)) for r in hook["additional_dependencies"]} == wanted, hook["id"]


def test_split_files_takes_only_trailing_tokenizer_files(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    tj, probes = tmp_path / "m" / "tokenizer.json", tmp_path / "probes.jsonl"
    tj.write_text("{}")
    probes.write_text("")
    argv = ["--skip", "vllm", "--probes", str(probes), str(tj)]
    assert split_files(argv) == (argv[:-1], [str(tj)])
    assert split_files(["--quiet", str(tmp_path / "m" / "gone.gguf")])[1] == []  # not a file: an option


# ------------------------------------------------------------------ pre-commit, for real
def _copy_checkout(dest: Path) -> Path:
    """This checkout's working tree (uncommitted files too) as its own git repository."""
    anywhere = shutil.ignore_patterns(".git", ".nox", "__pycache__", ".hypothesis", ".*_cache", "*.egg-info")

    def skip(directory: str, names: list[str]) -> set[str]:
        # the checkout's own data/, build/, mutants/ (not stacktok_export/data, which is package data)
        top = {"mutants", "build", "data"} if Path(directory) == ROOT else set()
        return set(anywhere(directory, names)) | (top & set(names))

    shutil.copytree(ROOT, dest, ignore=skip)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "snapshot")
    return dest


def _git(repo: Path, *args: str) -> None:
    ident = ("-c", "user.name=stacktok-tests", "-c", "user.email=tests@stacktok.invalid")
    subprocess.run(["git", *ident, *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("hooks")
    source = _copy_checkout(base / "stacktok")
    user = base / "user"
    shutil.copytree(ROOT / "tokenizer", user / "tokenizer")
    _git(user, "init", "-q")
    _git(user, "add", "-A")
    return {"source": source, "user": user, "home": base / "pre-commit-home"}


def _try_repo(scratch: dict[str, Path], *files: str) -> subprocess.CompletedProcess[str]:
    """Every hook of the manifest on ``files`` (default: all files); try-repo installs a fresh hook
    environment per call (from PyPI), so the tests make two calls."""
    env = {**os.environ, "PRE_COMMIT_HOME": str(scratch["home"]), "TRANSFORMERS_VERBOSITY": "error"}
    which = ("--files", *files) if files else ("--all-files",)
    cmd = [sys.executable, "-m", "pre_commit", "try-repo", str(scratch["source"]), *which, "--verbose"]
    return subprocess.run(cmd, cwd=scratch["user"], env=env, capture_output=True, text=True, check=False)


def _hook_results(out: str) -> dict[str, str]:
    """``hook name -> Passed/Failed`` from pre-commit's status lines."""
    return {m[1].strip(): m[2] for m in re.finditer(r"^(\S.*?)\.{3,}(Passed|Failed|Skipped)", out, re.M)}


def _break_bos(directory: Path) -> Path:
    config = directory / "tokenizer_config.json"
    doc = json.loads(config.read_text(encoding="utf-8"))
    doc["add_bos_token"] = True  # BOS added outside the template that already adds it: a gate FAIL
    config.write_text(json.dumps(doc, indent=2))
    return config


@pytest.mark.hooks
def test_pre_commit_hooks_pass_then_fail_on_a_broken_file(scratch: dict[str, Path]) -> None:
    names = {h["name"]: h["id"] for h in MANIFEST}
    ok = _try_repo(scratch)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert _hook_results(ok.stdout) == {n: "Passed" for n in names}, ok.stdout
    assert "stacktok gate tokenizer/stack100m-32768-hf" in ok.stdout  # each directory gated
    config = _break_bos(scratch["user"] / "tokenizer" / "stack100m-32768-hf")
    failed = _try_repo(scratch, str(config.relative_to(scratch["user"])))  # the changed file only
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert _hook_results(failed.stdout) == {n: "Failed" for n in names}, failed.stdout
    assert "stale:" in failed.stdout and "config.no_double_bos" in failed.stdout, failed.stdout
    assert "Traceback" not in failed.stdout + failed.stderr


# ------------------------------------------------------------- the action's shell steps
def _step(step_id: str) -> dict:
    steps = ACTION["runs"]["steps"]
    return next(s for s in steps if s.get("id") == step_id or s.get("name") == step_id)


def _run_step(step: dict, *, inputs: dict[str, str], source: Path, temp: Path) -> dict:
    """One ``run:`` step as the runner executes it; its exit code, summary and outputs."""
    values = {**{k: v.get("default", "") for k, v in ACTION["inputs"].items()}, **inputs}

    def expand(text: str) -> str:
        text = text.replace("${{ github.action_path }}", str(source)).replace("${{ runner.temp }}", str(temp))
        return re.sub(r"\$\{\{ inputs\.([a-z_-]+) \}\}", lambda m: values[m[1]], text)

    assert "${{" not in step["run"], "run: blocks take inputs through env: only (no expression injection)"
    summary, output = temp / "summary.md", temp / "output.txt"
    summary.write_text("")
    output.write_text("")
    env = {**os.environ, **{k: expand(str(v)) for k, v in step.get("env", {}).items()}}
    env.update(GITHUB_STEP_SUMMARY=str(summary), GITHUB_OUTPUT=str(output), RUNNER_TEMP=str(temp))
    script = temp / "step.sh"
    script.write_text(step["run"])
    shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]
    done = subprocess.run(shell, env=env, capture_output=True, text=True, check=False)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return {
        "code": done.returncode,
        "log": done.stdout + done.stderr,
        "summary": summary.read_text(),
        "outputs": outputs,
    }


@pytest.mark.hooks
def test_action_installs_the_extras_asked_and_a_gate_failure_fails_the_step(
    scratch: dict[str, Path], tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    inputs = {"path": str(SHIPPED_HF), "extras": "tiktoken", "python": python}
    installed = _run_step(_step("install stacktok"), inputs=inputs, source=scratch["source"], temp=tmp_path)
    assert installed["code"] == 0, installed["log"]
    probe = "import importlib.util as u; print(*(bool(u.find_spec(m)) for m in ('tiktoken', 'transformers')))"
    found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert found == ["True", "False"]  # the extra asked for, and only it
    # that install alone: tokenizers/transformers missing -> INCOMPLETE, exit 4, and the step fails
    alone = _run_step(_step("gate"), inputs=inputs, source=scratch["source"], temp=tmp_path)
    assert alone["code"] == 4 and alone["outputs"]["exit-code"] == "4", alone["log"]
    assert "INCOMPLETE" in alone["summary"]


@pytest.mark.hooks
def test_action_gate_step_writes_the_summary_and_reports(scratch: dict[str, Path], tmp_path: Path) -> None:
    inputs = {"path": str(SHIPPED_HF), "args": FAST, "python": sys.executable}
    passed = _run_step(_step("gate"), inputs=inputs, source=scratch["source"], temp=tmp_path)
    assert passed["code"] == 0 and passed["outputs"]["exit-code"] == "0", passed["log"]
    md = (tmp_path / "stacktok-reports" / "report.md").read_text(encoding="utf-8")
    assert md.strip() and md in passed["summary"]
    report = json.loads((tmp_path / "stacktok-reports" / "report.json").read_text())
    check_report(report, where="the action's report.json")
    assert report["exit_code"] == 0
    assert "<testsuite" in (tmp_path / "stacktok-reports" / "junit.xml").read_text()
    broken = tmp_path / "broken"
    shutil.copytree(SHIPPED_HF, broken)
    _break_bos(broken)
    failed = _run_step(
        _step("gate"), inputs={**inputs, "path": str(broken)}, source=scratch["source"], temp=tmp_path
    )
    assert failed["code"] == 1 and failed["outputs"]["exit-code"] == "1", failed["log"]
    assert "config.no_double_bos" in failed["summary"] and "::error::stacktok gate exited 1" in failed["log"]
