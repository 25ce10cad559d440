"""stacktok's sessions: tests across transformers majors, export check, benchmarks, lint.

``nox -s tests`` is the test command CI runs (.ci/run). Environments are
reused (``reuse_venv = "yes"``) and installs go through uv's cache, so the
llama-cpp-python source build (~10-13 min on 2 cores) is paid once per
machine. Pass pytest arguments after ``--``: ``nox -s tests -- -k chat``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests", "export"]

PYTHON = "3.11"
# llama-cpp-python has no wheel on PyPI: build portable (no -march=native) so
# the cached wheel runs on any x86-64 CPU.
BUILD_ENV = {"CMAKE_ARGS": "-DGGML_NATIVE=OFF"}
LLAMA_VERSION = "0.3.36"
# uv's source-build cache keys differ between environments, so the built
# wheel is kept in a wheelhouse of our own and installed from there.
WHEELHOUSE = Path(os.environ.get("STACKTOK_WHEELHOUSE", Path.home() / ".cache" / "stacktok-wheels"))
TRANSFORMERS = {"4.57": "transformers>=4.57,<4.58", "latest": "transformers>=5"}


def llama_wheel(session: nox.Session) -> str:
    """Path of the llama-cpp-python wheel, building it once per machine."""
    pattern = f"llama_cpp_python-{LLAMA_VERSION}-*.whl"
    wheels = sorted(WHEELHOUSE.glob(pattern))
    if not wheels:
        session.log(f"building llama-cpp-python {LLAMA_VERSION} from source (once, ~13 min)")
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        session.run(
            sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(WHEELHOUSE),
            f"llama-cpp-python=={LLAMA_VERSION}", env=BUILD_ENV, external=True,
        )
        wheels = sorted(WHEELHOUSE.glob(pattern))
    if not wheels:
        session.error(f"no {pattern} in {WHEELHOUSE} after building; see the pip output above")
    return str(wheels[-1])


def install_project(session: nox.Session, *extras: str, pins: tuple[str, ...] = ()) -> None:
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-e", spec, *pins)


@nox.session(python=PYTHON)
@nox.parametrize("transformers", list(TRANSFORMERS), ids=list(TRANSFORMERS))
def tests(session: nox.Session, transformers: str) -> None:
    """Unit and export tests with every backend, under transformers 4.57.x and latest 5.x."""
    install_project(
        session, "hf", "tiktoken", "gguf", "test", pins=(TRANSFORMERS[transformers], llama_wheel(session))
    )
    session.run("pytest", *(session.posargs or ("-q",)), env={"TRANSFORMERS_VERBOSITY": "error"})


@nox.session(python=PYTHON)
def export(session: nox.Session) -> None:
    """Fail if the committed exports are not exactly what the frozen artifact produces."""
    install_project(session, "hf", "tiktoken", "gguf")
    session.run("stacktok", "export", "--check", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks as ratios vs tiktoken / HF tokenizers / rustbpe (needs data/sample, see README)."""
    install_project(session, "hf", "tiktoken", pins=("rustbpe",))
    session.run("python", "benchmarks/bench_encode.py", *session.posargs)
    sample = os.path.join("data", "sample", "train.txt")
    if os.path.exists(sample):
        session.run("python", "benchmarks/bench_train.py", sample)
    else:
        session.log(f"{sample} missing: run `python scripts/build_sample.py --install` for the trainer benchmark")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff lint and format check."""
    session.install("ruff")
    session.run("ruff", "check", "stacktok_export", "tests", "benchmarks", "noxfile.py")
