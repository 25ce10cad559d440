"""llama.cpp's ``llama-server``: find the binary, or build it once per machine from the sdist.

llama-cpp-python's PyPI sdist vendors the llama.cpp it binds (``vendor/llama.cpp/``); the
server built from that source is the same llama.cpp the ``llama.cpp`` backend loads, so the
two agree on the version under test. :func:`build_llama_server` extracts that source (no
``models/``), configures an offline Release build and compiles the one target::

    cmake -S SRC -B SRC/build -DGGML_NATIVE=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=ON
          -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF
          -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release
    cmake --build SRC/build --target llama-server -j 2

(in this llama.cpp ``LLAMA_CURL`` is deprecated and ignored; HTTPS is ``LLAMA_OPENSSL``; the web
UI would be downloaded from a Hugging Face bucket unless ``LLAMA_USE_PREBUILT_UI=OFF``), then
copies the binary to ``CACHE/<version>/llama-server`` through a temporary file and a rename, so
a reader never sees half a binary. llama and ggml are linked in (libstdc++ and libgomp come from
the system); ``GGML_NATIVE=OFF`` gives ggml's default x86 variant (AVX2, FMA, F16C), not
``-march=native``, so the cached binary runs on any such CPU. :func:`find_llama_server` returns
``$STACKTOK_LLAMA_SERVER`` or that cached binary (the cache root is
``$STACKTOK_LLAMA_SERVER_CACHE``, default ``~/.cache/stacktok-llama-server``).

``python -m conformance.served.llama_build --sdist SDIST [--cache DIR]`` prints the binary's
path, building it only when the cache has none (exit 2 with the reason when it cannot).

Out of scope: downloading the sdist (nox's ``llama_sdist``), GPU backends, Windows and macOS,
two builds racing for one cache (the rename keeps the binary whole; the second build is wasted),
a build killed midway (its ``CACHE/<version>/build-*`` directory stays; delete it).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
BINARY = "llama-server"
CMAKE_OPTIONS = (
    "-DGGML_NATIVE=OFF",  # no -march=native: ggml's default x86 variant (AVX2, FMA, F16C)
    "-DLLAMA_OPENSSL=OFF",  # no HTTPS (127.0.0.1 only) and no libssl to find
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_UI=OFF",  # no npm
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # no download of the web UI at build time
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",  # one self-contained binary to cache
    "-DCMAKE_BUILD_TYPE=Release",
)
GET_SDIST = (
    "get the sdist with `pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36 "
    "-d .nox/llama-cpp-src`"
)
HOW = (
    "build it once with `python -m conformance.served.llama_build --sdist "
    ".nox/llama-cpp-src/llama_cpp_python-0.3.36.tar.gz` (" + GET_SDIST + "; needs cmake and a C++17 "
    "compiler; ~11 min on 2 cores), or set STACKTOK_LLAMA_SERVER to a llama-server binary"
)


class BuildError(RuntimeError):
    """The binary could not be built; the message says why and what to do."""


def cache_root() -> Path:
    """``$STACKTOK_LLAMA_SERVER_CACHE``, else ``~/.cache/stacktok-llama-server``."""
    env = os.environ.get("STACKTOK_LLAMA_SERVER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "stacktok-llama-server"


def cached_binary(cache: Path | None = None, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """Where the binary built from llama-cpp-python ``version``'s sdist is kept."""
    return (cache or cache_root()) / version / BINARY


def find_llama_server(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path | None:
    """``$STACKTOK_LLAMA_SERVER`` if set (``None`` when it names no executable file), else the
    cached binary if there is one, else ``None``."""
    env = os.environ.get("STACKTOK_LLAMA_SERVER")
    if env:
        path = Path(env)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    path = cached_binary(version=version)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def sdist_version(sdist: Path) -> str:
    """``0.3.36`` from ``llama_cpp_python-0.3.36.tar.gz``."""
    m = re.fullmatch(r"llama_cpp_python-(.+)\.tar\.gz", sdist.name)
    if not m:
        raise BuildError(f"{sdist.name} is not a llama_cpp_python-VERSION.tar.gz sdist: {GET_SDIST}")
    return m.group(1)


def extract_source(sdist: Path, out: Path) -> Path:
    """Extract ``llama_cpp_python-V/vendor/llama.cpp/`` (without ``models/``) into ``out``; its path."""
    root = f"llama_cpp_python-{sdist_version(sdist)}/vendor/llama.cpp/"
    skip = root + "models/"
    try:
        with tarfile.open(sdist) as tar:
            members = [m for m in tar if m.name.startswith(root) and not m.name.startswith(skip)]
            if not members:
                raise BuildError(f"{sdist} has no {root}: not a llama-cpp-python sdist")
            tar.extractall(out, members=members, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise BuildError(f"cannot read {sdist}: {exc}; delete it and {GET_SDIST}") from None
    return out / root


def _stderr_fd() -> int | None:
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced stderr (pytest): inherit stdout
        return None


def _run(cmd: list[str], log: Callable[[str], None]) -> None:
    log("$ " + " ".join(cmd))
    try:
        # the build's output goes to stderr, so stdout carries only the binary's path (main)
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=_stderr_fd(), check=False)
    except FileNotFoundError:
        raise BuildError(
            f"{cmd[0]} not found: install cmake and a C++17 compiler (apt-get install cmake g++)"
        ) from None
    if done.returncode:
        raise BuildError(f"`{' '.join(cmd[:3])} ...` failed with exit code {done.returncode}; see its output")


def build_llama_server(
    sdist: Path, cache: Path | None = None, *, jobs: int = 2, log: Callable[[str], None] = print
) -> Path:
    """Build ``llama-server`` from ``sdist`` into ``CACHE/<version>/llama-server``; its path.

    ``cache`` defaults to :func:`cache_root`. The source and build tree live in a temporary
    directory under the cache (removed after); the binary arrives by rename. Raises
    :class:`BuildError` with the reason.
    """
    sdist = Path(sdist)
    if not sdist.is_file():
        raise BuildError(f"no sdist at {sdist}: {GET_SDIST}")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("cmake not found: install cmake and a C++17 compiler (apt-get install cmake g++)")
    target = cached_binary(cache or cache_root(), sdist_version(sdist))
    target.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="build-", dir=target.parent) as tmp:
        src = extract_source(sdist, Path(tmp))
        build = src / "build"
        _run([cmake, "-S", str(src), "-B", str(build), *CMAKE_OPTIONS], log)
        _run([cmake, "--build", str(build), "--target", BINARY, "-j", str(jobs)], log)
        built = build / "bin" / BINARY
        if not built.is_file():
            raise BuildError(f"the build finished but left no {built}; see its output")
        partial = target.with_name(f".{BINARY}.{os.getpid()}.tmp")
        shutil.copy2(built, partial)
        os.chmod(partial, 0o755)
        os.replace(partial, target)
    log(f"built {target} in {time.monotonic() - t0:.0f}s")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.served.llama_build",
        description="Print the llama-server binary's path, building it once from the sdist.",
    )
    parser.add_argument("--sdist", type=Path, required=True, help="llama_cpp_python-VERSION.tar.gz")
    parser.add_argument("--cache", type=Path, default=None, help="cache root (default %(default)s)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rebuild", action="store_true", help="build even when the cache has one")
    args = parser.parse_args(argv)
    try:
        target = cached_binary(args.cache or cache_root(), sdist_version(args.sdist))
        if args.rebuild or not target.is_file():
            log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
            target = build_llama_server(args.sdist, args.cache, jobs=args.jobs, log=log)
    except BuildError as exc:
        print(f"llama_build: {exc}", file=sys.stderr)
        return 2
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
