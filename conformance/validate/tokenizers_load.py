"""tokenizers itself loads ``tokenizer.json`` -- in a child process, its own message quoted.

``Tokenizer.from_str`` runs in a child because a pyo3 panic can abort the whole interpreter
(and Rust prints a backtrace to stderr); a crash becomes one line naming the signal and the
panic. The parent hands the child the text it already read (on stdin), so the file is read
once.

Out of scope: the schema checks that run first (``conformance.validate.tokenizer_json``);
loading with transformers (the gate's backends do that).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from conformance.backends import dist_version
from conformance.validate.common import fail, first_line
from conformance.validate.jsonfile import decode_utf8, read_bytes
from stacktok_export.util import limits

LOAD_TIMEOUT_S = 120.0
NOT_LOADED = (
    "tokenizer.json not loaded by tokenizers: tokenizers is not installed; pip install 'stacktok[hf]'"
)

_LOAD_SCRIPT = r"""
import json, sys
try:
    import resource  # no core file when a panic aborts this child (POSIX only)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
except (ImportError, ValueError, OSError):
    pass
try:
    import tokenizers
except ImportError:
    print(json.dumps({"missing": True}))
    raise SystemExit(0)
version = getattr(tokenizers, "__version__", "?")
text = sys.stdin.buffer.read().decode("utf-8")
try:
    tokenizers.Tokenizer.from_str(text)
except BaseException as exc:
    print(json.dumps({"version": version, "error": type(exc).__name__ + ": " + str(exc)}))
else:
    print(json.dumps({"version": version}))
"""


def tokenizers_installed() -> bool:
    return importlib.util.find_spec("tokenizers") is not None


#: the address space the loading child may map (tokenizers on the largest real tokenizer.json, 33 MB,
#: maps well under 1 GiB; a bomb hits this and is reported as a crash, not an exhausted runner)
LOAD_MEMORY = 3 << 30


def _cap_memory() -> None:  # in the child, before exec
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (LOAD_MEMORY, LOAD_MEMORY))


def load_with_tokenizers(path: Path, *, text: str | None = None) -> bool:
    """``Tokenizer.from_str`` on ``text`` (default: the file at ``path``, read here) in a child.

    Returns False when tokenizers is not installed (nothing was loaded), True when it loaded;
    raises :class:`InputError` when tokenizers refuses the file or crashes on it.
    """
    if not tokenizers_installed():
        return False
    if text is None:
        text = decode_utf8(path, read_bytes(path, limit=limits.current().tokenizer_json))
    env = dict(os.environ, RUST_BACKTRACE="0")
    cmd = [sys.executable, "-c", _LOAD_SCRIPT]
    try:
        proc = subprocess.run(
            cmd,
            input=text,
            capture_output=True,
            encoding="utf-8",
            errors="replace",
            timeout=LOAD_TIMEOUT_S,
            env=env,
            preexec_fn=_cap_memory,
        )
    except subprocess.TimeoutExpired:
        fail(path, "file", f"tokenizers did not load it within {LOAD_TIMEOUT_S:.0f} s", "check its size")
    result = _child_result(proc)
    if result is not None:
        if "error" in result:
            fail(
                path,
                "file",
                f"tokenizers {result['version']} cannot load it: {first_line(result['error'])}",
                "fix the field the message names, or re-export with `stacktok export`",
            )
        return True
    version = dist_version("tokenizers")
    fail(
        path,
        "file",
        f"tokenizers {version} crashed loading it ({_crash(proc)})",
        "re-export with `stacktok export`",
    )


def _child_result(proc: subprocess.CompletedProcess[str]) -> dict[str, Any] | None:
    """The child's JSON verdict, or None when it died before printing one."""
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except ValueError:
        return None
    return result if isinstance(result, dict) else None


def _crash(proc: subprocess.CompletedProcess[str]) -> str:
    code = proc.returncode
    how = (
        f"signal {signal.Signals(-code).name}"
        if code < 0 and -code in signal.valid_signals()
        else f"exit {code}"
    )
    lines = proc.stderr.splitlines()
    panics = [lines[i + 1] for i, line in enumerate(lines[:-1]) if " panicked at " in line]
    return f"{how}: {first_line(panics[0] if panics else proc.stderr)}"
