"""The entry points people type (issue 22 item 4): ``python -m stacktok``, shell completion,
``--debug`` after the subcommand, ``stacktok info`` on every format, ``stacktok matrix``.

Out of scope: what each command computes (its own tests), the gate (tests/test_gate.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from stacktok_cli import main
from stacktok_cli.table import build_parser
from stacktok_export import load_tokenizer

from .helpers.paths import ROOT, SHIPPED_HF

EXPORTS = ROOT / "tokenizer"
GGUF = EXPORTS / "stack100m-32768.gguf"
TIKTOKEN = EXPORTS / "stack100m-32768.tiktoken"


def _run(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, input=stdin, check=False, cwd=ROOT)


def _stacktok_script() -> str:
    script = Path(sys.executable).with_name("stacktok")
    assert script.is_file(), f"no console script beside {sys.executable}; pip install -e ."
    return str(script)


def test_python_m_stacktok_is_the_stacktok_script() -> None:
    for argv in (["--version"], ["info", "--json"], ["encode", "hello <|end|> world"]):
        module = _run(sys.executable, "-m", "stacktok", *argv)
        script = _run(_stacktok_script(), *argv)
        assert module.returncode == script.returncode == 0, module.stderr
        assert module.stdout == script.stdout
    bad = _run(sys.executable, "-m", "stacktok", "gate")  # usage error: same exit, same prog name
    assert bad.returncode == 2 and bad.stderr.startswith("stacktok: error:"), bad.stderr


def test_debug_is_accepted_before_and_after_the_subcommand() -> None:
    parser = build_parser()
    assert parser.parse_args(["--debug", "info"]).debug is True
    assert parser.parse_args(["info", "--debug"]).debug is True
    assert parser.parse_args(["gate", "somedir", "--debug"]).debug is True
    assert parser.parse_args(["info"]).debug is False
    for argv in (["info", "--debug"], ["--debug", "info"], ["matrix", "--debug"]):
        done = _run(sys.executable, "-m", "stacktok", *argv)
        assert done.returncode == 0, (argv, done.stderr)


def test_debug_after_double_dash_is_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["encode", "--", "--debug"]) == 0
    ids = [int(x) for x in capsys.readouterr().out.split()]
    assert load_tokenizer().decode_bytes(ids) == b"--debug"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_script_names_every_command(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    commands = [a for a in build_parser()._subparsers._group_actions[0].choices]  # noqa: SLF001
    assert {"gate", "info", "matrix", "completion"} <= set(commands)
    for name in commands:
        assert name in script, f"{shell} completion lacks {name}"
    assert ("#compdef stacktok" in script) if shell == "zsh" else ("complete" in script)


def test_bash_completion_completes_commands_and_flags(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash, "bash is needed to source the completion script"
    script = tmp_path / "stacktok.bash"
    script.write_text(_run(sys.executable, "-m", "stacktok", "completion", "bash").stdout)
    probe = (
        f"source {script}\n"
        "COMP_WORDS=(stacktok ga); COMP_CWORD=1; COMP_LINE='stacktok ga'; COMP_POINT=11\n"
        '_shtab_stacktok stacktok ga stacktok; echo "cmds:${COMPREPLY[*]}"\n'
        "COMP_WORDS=(stacktok gate --sk); COMP_CWORD=2; COMP_LINE='stacktok gate --sk'; COMP_POINT=18\n"
        '_shtab_stacktok stacktok --sk gate; echo "flags:${COMPREPLY[*]}"\n'
    )
    out = _run(bash, "-c", probe).stdout
    assert "cmds:gate" in out, out
    assert "flags:--skip" in out, out


def test_info_on_an_hf_directory_matches_the_artifact() -> None:
    tok = load_tokenizer()
    doc = json.loads(_run(sys.executable, "-m", "stacktok", "info", str(SHIPPED_HF), "--json").stdout)
    assert doc["format"] == "huggingface"
    assert doc["vocab_size"] == tok.vocab_size
    assert doc["merges"] == len(tok.merges)
    assert doc["special_tokens"] == dict(tok.special_to_id)
    assert doc["patterns"] == [tok.pattern]
    assert (doc["add_bos"], doc["add_eos"], doc["chat_template"]) == (False, False, True)
    assert doc["fingerprint_label"] == tok.fingerprint


def test_info_on_a_gguf_matches_the_artifact() -> None:
    tok = load_tokenizer()
    doc = json.loads(_run(sys.executable, "-m", "stacktok", "info", str(GGUF), "--json").stdout)
    assert (doc["format"], doc["model"], doc["pre"]) == ("gguf", "gpt2", "smaug-bpe")
    assert doc["vocab_size"] == tok.vocab_size and doc["merges"] == len(tok.merges)
    assert doc["special_tokens"] == dict(tok.special_to_id)
    assert doc["roles"]["bos"] == tok.special_to_id["<|bos|>"]
    assert doc["roles"]["eot"] == tok.special_to_id["<|end|>"]
    assert (doc["add_bos"], doc["chat_template"], doc["tensors"]) == (False, True, 0)
    assert doc["fingerprint_label"] == tok.fingerprint
    table = _run(sys.executable, "-m", "stacktok", "info", str(GGUF)).stdout
    assert "smaug-bpe" in table and "<|tool_result|>" in table


def test_info_on_a_tiktoken_file(tmp_path: Path) -> None:
    tok = load_tokenizer()
    doc = json.loads(_run(sys.executable, "-m", "stacktok", "info", str(TIKTOKEN), "--json").stdout)
    assert doc["format"] == "tiktoken"
    assert doc["ranks"] == tok.vocab_size - len(tok.special_to_id)
    assert doc["max_rank"] == doc["ranks"] - 1 and doc["dense"] is True
    broken = tmp_path / "broken.tiktoken"
    broken.write_bytes(TIKTOKEN.read_bytes()[:200] + b"\nnot-base64!! x\n")
    done = _run(sys.executable, "-m", "stacktok", "info", str(broken))
    assert done.returncode == 2 and "line" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_info_without_tokenizer_json_is_a_usage_error(tmp_path: Path) -> None:
    done = _run(sys.executable, "-m", "stacktok", "info", str(tmp_path))
    assert done.returncode == 2 and "has no tokenizer.json" in done.stderr, done.stderr
    gone = _run(sys.executable, "-m", "stacktok", "info", str(tmp_path / "x.gguf"))
    assert gone.returncode == 2 and "no such file" in gone.stderr, gone.stderr


def test_matrix_prints_the_shipped_rows() -> None:
    shipped = ROOT / "conformance" / "support_matrix.jsonl"
    rows = [json.loads(line) for line in shipped.read_text(encoding="utf-8").splitlines() if line.strip()]
    table = _run(sys.executable, "-m", "stacktok", "matrix").stdout
    for r in rows:
        assert f"| {r['backend']} | {r['version']} |" in table
    assert table == (ROOT / "conformance" / "SUPPORT_MATRIX.md").read_text(encoding="utf-8")
    doc = json.loads(_run(sys.executable, "-m", "stacktok", "matrix", "--json").stdout)
    assert [(r["backend"], r["version"], r["result"]) for r in doc["rows"]] == [
        (r["backend"], r["version"], r["result"]) for r in rows if r["backend"] != "reference"
    ]
    assert doc["floors"] == json.loads((ROOT / "conformance" / "floors.json").read_text(encoding="utf-8"))


def test_the_matrix_files_ship_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    data = config["package-data"]["conformance"]
    assert {"support_matrix.jsonl", "floors.json"} <= set(data)
    assert "stacktok" in config["packages"]


def test_info_on_the_artifact_names_bos_behaviour_and_template() -> None:
    doc = json.loads(_run(sys.executable, "-m", "stacktok", "info", "--json").stdout)
    assert (doc["format"], doc["add_bos"], doc["add_eos"], doc["chat_template"]) == (
        "stacktok-bpe-v1",
        False,
        False,
        False,
    )
    assert doc["roles"] == {"bos": 32759, "eos": 32760, "eot": 32765, "pad": 32761}
    assert doc["patterns"] == [doc["pattern"]]
