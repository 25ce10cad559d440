"""Which backend version a conformance row installs: command-line flags, explicit resolution, CPU torch.

``nox -s conformance -- --transformers 5.25.0 --vllm latest`` names backend packages
(:data:`PACKAGES`); each value is an exact version, ``latest`` or a path to a wheel file.
:func:`resolve` turns a value into one exact version *before* anything is installed:
``latest`` asks the package index at run time (``uv pip compile``, with the
same ``--index-url`` / ``--find-links`` / ``--no-index`` flags the install then gets), and
the row installs ``name==version``, so a reused environment can never answer with the
version it already holds. ``latest`` is the newest release *whose dependencies the index can
satisfy*, what ``pip install name`` would give a user of that index: a release published before
its own dependencies reach a mirror (transformers 5.25.0 needs ``kernels>=0.19.1``) is passed
over, and :attr:`Resolved.newest` names it so the row's log says which release was skipped.
Packages installed over the CPU torch wheel resolve with ``installable=False`` (``--no-deps``):
their GPU dependencies are overridden at install time, not judged here.

:func:`cpu_overrides` keeps the CPU torch wheel this machine kind has on disk for the
rows that need torch (vLLM, TRL): uv overrides pin ``torch`` to that file and drop the
GPU-only packages a wheel's metadata asks for (``name; sys_platform == 'never'``), so
the rest of what the wheel's ``Requires-Dist`` names is installed as published.

This module runs on the nox host (stdlib + ``packaging``, which nox itself needs).
Out of scope: a row's release, extras and install check (``conformance.matrix.resolve``), running
a row (``noxfile.py``), comparing rows (``conformance.matrix.changes``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: flag name (= distribution) -> the conformance backends a row of that package runs
PACKAGES: dict[str, str] = {
    "transformers": "transformers,transformers-reload",
    "tokenizers": "tokenizers",
    "tiktoken": "tiktoken",
    "llama-cpp-python": "llama.cpp,llama.cpp-detokenize",
    "vllm": "vllm",
    "trl": "trl",
}
LATEST = "latest"
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[A-Za-z0-9.]+)?$")
#: GPU-only packages a vLLM/TRL wheel's metadata may ask for (CUDA runtimes, kernels, CUDA builds
#: of torchvision/torchaudio); none of them is imported by the tokenizer layer on a CPU.
GPU_ONLY = re.compile(
    r"^(nvidia-.*|cuda-.*|nccl.*|.*triton.*|flashinfer.*|tilelang|quack-kernels|tokenspeed-.*|"
    r"humming-kernels|pynvvideocodec|xformers|deep-gemm|deep-ep|cupy.*|torchvision|torchaudio|torchcodec)$"
)
#: where this machine kind keeps its CPU torch wheel (pip's find-links, /etc/xdg/pip); a hosted CI
#: downloads one and names its directory in STACKTOK_CPU_WHEELS (.github/workflows/conformance.yml)
CPU_WHEEL_DIRS = tuple(
    Path(p) for p in os.environ.get("STACKTOK_CPU_WHEELS", "/opt/wheels").split(os.pathsep)
)


class VersionError(ValueError):
    """A flag value that names no installable release; the message says how to fix it."""


@dataclass(frozen=True)
class Resolved:
    package: str
    value: str  # what was asked: a version, "latest" or a wheel path
    version: str  # the exact version that will be installed
    requirement: str  # what to install: ``name==version`` or the wheel path
    newest: str | None = None  # for ``latest``: a newer release passed over (dependencies not on the index)

    @property
    def slot(self) -> str:
        """The support-matrix slot of a named row: ``transformers-latest`` or ``transformers-5.25.0``."""
        return f"{self.package}-{LATEST if self.value == LATEST else self.version}"


def flag_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nox -s conformance --", add_help=False)
    for name in PACKAGES:
        p.add_argument(f"--{name}", dest=name, metavar="VERSION|latest|WHEEL", default=None)
    p.add_argument("--update", action="store_true", help="accept the new rows into the support matrix")
    p.add_argument("--index-url", default=None, help="package index for resolving and installing")
    p.add_argument("--find-links", action="append", default=[], help="a directory of wheels (repeatable)")
    p.add_argument("--no-index", action="store_true", help="only --find-links, no package index")
    return p


@dataclass(frozen=True)
class Flags:
    named: dict[str, str]  # package -> value for each named backend
    update: bool
    index: tuple[str, ...]  # uv/pip index options, for resolving and installing alike
    rest: tuple[str, ...]  # everything else, for ``python -m conformance``


def parse_flags(posargs: list[str] | tuple[str, ...]) -> Flags:
    """Split nox posargs into backend versions, ``--update``, index options and the rest."""
    args, rest = flag_parser().parse_known_args(list(posargs))
    named = {name: getattr(args, name) for name in PACKAGES if getattr(args, name)}
    index = (("--index-url", args.index_url) if args.index_url else ()) + ("--no-index",) * args.no_index
    for d in args.find_links:
        index += ("--find-links", str(Path(d).resolve()))
    return Flags(named, args.update, index, tuple(rest))


def wheel_version(path: Path, package: str) -> str:
    """The version in a wheel's file name (``name-version-...whl``), checked against ``package``."""
    parts = path.name.split("-")
    if path.suffix != ".whl" or len(parts) < 5:
        raise VersionError(f"{path}: not a wheel file name (name-version-python-abi-platform.whl)")
    if _norm(parts[0]) != _norm(package):
        raise VersionError(f"{path}: a wheel of {parts[0]}, not {package}; pass a {package} wheel")
    if not path.is_file():
        raise VersionError(f"{path}: no such wheel file; give an existing path, a version or 'latest'")
    return parts[1]


def resolve(
    package: str, value: str, *, index: tuple[str, ...] = (), python: str = "3.11", installable: bool = True
) -> Resolved:
    """One exact version for ``--package value``; ``latest`` asks the index now (uv pip compile)."""
    if package not in PACKAGES:
        raise VersionError(f"unknown backend package {package!r}; choose from {', '.join(PACKAGES)}")
    if value.endswith(".whl"):
        path = Path(value).resolve()
        return Resolved(package, value, wheel_version(path, package), str(path))
    if value == LATEST:
        return resolve_newest(
            package, package, value=LATEST, index=index, python=python, installable=installable
        )
    if _VERSION.match(value):
        version = value
    else:
        raise VersionError(
            f"--{package} {value!r}: give an exact version (e.g. 5.25.0), 'latest' or a path to a .whl"
        )
    return Resolved(package, value, version, f"{package}=={version}")


def resolve_newest(
    package: str,
    requirement: str,
    *,
    value: str,
    index: tuple[str, ...] = (),
    python: str = "3.11",
    installable: bool = True,
) -> Resolved:
    """The newest (installable) release of ``requirement`` -- ``package`` itself or a range such
    as ``transformers>=4.57,<4.58`` -- with the newer release it passed over, if any."""
    newest = latest_version(requirement, index=index, python=python, installable=False)
    version = latest_version(requirement, index=index, python=python) if installable else newest
    passed_over = None if version == newest else newest
    return Resolved(package, value, version, f"{package}=={version}", passed_over)


def latest_version(
    requirement: str, *, index: tuple[str, ...] = (), python: str = "3.11", installable: bool = True
) -> str:
    """The newest release matching ``requirement`` on the index, resolved right now (never cached).

    ``installable`` (the default) resolves its dependencies too, so the answer is the newest
    release that can be installed from this index; if no release resolves with its
    dependencies, the newest release alone is the answer and the install says why it fails.
    """
    name = requirement_name(requirement)
    cmd = [uv_binary(), "pip", "compile", "--no-header", "--no-annotate", "--quiet"]
    cmd += ["--refresh-package", name, *index, "--python-version", python, "-"]
    out = None
    if installable:
        out = subprocess.run(cmd, input=requirement + "\n", capture_output=True, text=True, check=False)
    if out is None or out.returncode != 0:
        cmd.insert(3, "--no-deps")
        out = subprocess.run(cmd, input=requirement + "\n", capture_output=True, text=True, check=False)
    for line in out.stdout.splitlines():
        left, sep, version = line.strip().partition("==")
        if sep and _norm(left) == name:
            return version.strip()
    why = (out.stderr.strip().splitlines() or ["no output"])[-1]
    raise VersionError(f"cannot resolve the newest {requirement} on the package index: {why}")


def requirement_name(requirement: str) -> str:
    """``transformers>=4.57,<4.58`` -> ``transformers`` (normalized)."""
    return _norm(re.split(r"[<>=!~; \[@]", requirement.strip(), maxsplit=1)[0])


def uv_binary() -> str:
    """uv from PATH or from the ``uv`` Python package (nox installs it beside itself)."""
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin
    except ImportError:
        raise VersionError("uv is not installed: python3 -m pip install uv") from None
    return find_uv_bin()


def cpu_torch_wheel(dirs: tuple[Path, ...] = CPU_WHEEL_DIRS) -> Path:
    """The CPU torch wheel on this machine's disk (the newest if several)."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheels = sorted(w for d in dirs for w in d.glob(f"torch-*+cpu-{tag}-*.whl"))
    if not wheels:
        where = ", ".join(str(d) for d in dirs)
        raise VersionError(f"no CPU torch wheel (torch-*+cpu-{tag}-*.whl) in {where}; vLLM/TRL rows need one")
    return wheels[-1]


def cpu_overrides(torch_wheel: Path, gpu_only: list[str] | tuple[str, ...] = ()) -> str:
    """uv ``--override`` lines: torch is the CPU wheel on disk; each GPU-only package is dropped."""
    lines = [f"torch @ {torch_wheel.resolve().as_uri()}"]
    lines += [f"{name}; sys_platform == 'never'" for name in sorted(set(gpu_only))]
    return "\n".join(lines) + "\n"


def gpu_only_in(resolution: str) -> list[str]:
    """GPU-only distributions named in ``uv pip compile`` output (``name==version`` lines)."""
    names = [re.split(r"[=@ ]", line.strip(), maxsplit=1)[0] for line in resolution.splitlines()]
    return sorted({_norm(n) for n in names if n and not n.startswith("#") and GPU_ONLY.match(_norm(n))})


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def released_versions(package: str, *, since: str, index: tuple[str, ...] = ()) -> list[str]:
    """Final releases of ``package`` from ``since`` on, oldest first (``pip index versions``)."""
    from packaging.version import InvalidVersion, Version

    cmd = [sys.executable, "-m", "pip", "index", "versions", package, *index]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = next((x for x in out.stdout.splitlines() if x.startswith("Available versions:")), None)
    if line is None:
        why = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise VersionError(f"cannot list the releases of {package} on the package index: {why}")
    found = []
    for v in line.split(":", 1)[1].split(","):
        try:
            parsed = Version(v.strip())
        except InvalidVersion:
            continue
        if not parsed.is_prerelease and parsed >= Version(since):
            found.append(parsed)
    return [str(v) for v in sorted(found)]


def bisect_oldest(candidates: list[str], passes) -> tuple[str | None, dict[str, bool]]:
    """The oldest of ``candidates`` (oldest first) for which ``passes(version)`` holds, by bisection.

    Assumes that once a release passes every newer one does (checked at both ends: the newest
    must pass, else there is no floor). Returns (floor or None, every version tried -> verdict).
    """
    tried: dict[str, bool] = {}

    def check(v: str) -> bool:
        if v not in tried:
            tried[v] = bool(passes(v))
        return tried[v]

    if not candidates or not check(candidates[-1]):
        return None, tried
    lo, hi = 0, len(candidates) - 1  # candidates[hi] passes
    while lo < hi:
        mid = (lo + hi) // 2
        if check(candidates[mid]):
            hi = mid
        else:
            lo = mid + 1
    return candidates[hi], tried
