"""How a matrix row gets its release: which row a run names, the one exact release it installs,
what goes beside it, and the uv overrides that keep the CPU torch.

A row of ``nox -s conformance`` is a package and a value (``ROWS`` in ``noxfile.py``). This module
holds every decision about a row that needs no nox session, so the sessions stay thin:

- :func:`row_value`: the value a row runs with, or ``None`` when the run names other packages
  (a named package runs in its ``-latest`` row, else its only row);
- :func:`resolve_row`: the exact release, resolved *before* anything is installed -- an exact
  version, ``latest`` or a wheel through :func:`versions.resolve`, a range such as
  ``transformers>=4.57,<4.58`` through :func:`versions.resolve_newest` -- and
  :func:`resolution_log`, what the row's log says about it;
- :data:`ROW_EXTRAS` and :data:`ON_CPU_TORCH`: the project extras a row installs beside its
  package, and the packages installed over the CPU torch wheel on disk;
- :func:`cpu_torch_overrides`: the resolution loop that overrides every GPU-only package away;
- :func:`frozen_names` and :func:`installed_check`: emptying a reused environment, and checking
  that it holds exactly the resolved release.

Runs on the nox host (stdlib + ``packaging``, which nox itself needs), like ``versions``.
Out of scope: running anything (the sessions in ``noxfile.py`` install and run through nox, so its
logs and ``-R`` keep working), what a value means and how the index is asked (``versions``),
comparing rows (``changes``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from conformance.matrix import versions
from conformance.matrix.versions import Flags, Resolved

#: the project extras each package's row installs beside it
ROW_EXTRAS: dict[str, tuple[str, ...]] = {
    "transformers": ("hf",),
    "llama-cpp-python": ("gguf",),
    "vllm": ("hf", "tiktoken"),
    "trl": ("hf",),
}
#: packages whose wheels pin a CUDA torch: installed over the CPU torch on disk (INSTALL-heavy.md),
#: with what else each needs beside it
ON_CPU_TORCH: dict[str, tuple[str, ...]] = {"vllm": (), "trl": ("datasets",)}
#: distribution names ``importlib.metadata`` is asked for, where they differ from the package's
_DIST = {"llama-cpp-python": "llama_cpp_python"}


def usage() -> str:
    """The one-line usage of the conformance session's flags, for ``session.error``."""
    flags = " ".join(f"[--{name} V|latest|WHEEL]" for name in versions.PACKAGES)
    return f"Usage: nox -s conformance -- {flags} [--update] [--find-links DIR] [--no-index]"


def row_value(row: str, rows: Mapping[str, tuple[str, str]], flags: Flags) -> str | None:
    """The value ``row`` of ``rows`` (row id -> (package, default value)) runs with.

    Without named packages, its default. With them, a named package's value in that package's
    ``-latest`` row (its only row if it has no ``-latest`` one); ``None`` for every other row,
    which the run skips.
    """
    package, default = rows[row]
    if not flags.named:
        return default
    primary = f"{package}-latest" if f"{package}-latest" in rows else row
    if package not in flags.named or row != primary:
        return None
    return flags.named[package]


def resolve_row(package: str, value: str, *, index: tuple[str, ...] = (), python: str = "3.11") -> Resolved:
    """The exact release of one row, resolved before anything is installed (``VersionError`` if none).

    A package installed over the CPU torch resolves without its dependencies: its GPU ones are
    overridden at install time (:func:`cpu_torch_overrides`), not judged here.
    """
    installable = package not in ON_CPU_TORCH
    if value == versions.LATEST or not any(c in value for c in "<>~"):
        return versions.resolve(package, value, index=index, python=python, installable=installable)
    # a default range such as transformers>=4.57,<4.58: its newest installable release, now
    return versions.resolve_newest(
        package, value, value=value, index=index, python=python, installable=installable
    )


def resolution_log(resolved: Resolved) -> list[str]:
    """What a row logs about its resolution: a release passed over, then what it installs."""
    package, value = resolved.package, resolved.value
    passed = [f"{package} {resolved.newest} passed over: its dependencies are not on this index"]
    installs = f"{package}: {value} resolves to {resolved.version} (installing {resolved.requirement})"
    return [*(passed if resolved.newest else []), installs]


def cpu_torch_overrides(
    torch: Path, compile_with: Callable[[str], str], *, rounds: int = 4
) -> tuple[str, list[str]]:
    """uv ``--override`` lines that install requirements over the CPU torch wheel ``torch``.

    ``compile_with(overrides)`` resolves the requirements with those override lines
    (``uv pip compile``) and returns the resolution; every GPU-only package it names
    (``versions.GPU_ONLY``) is overridden away and the resolution repeated until none is left.
    Returns the final override lines and the GPU-only packages dropped, sorted; raises
    ``VersionError`` when some remain after ``rounds`` resolutions.
    """
    gpu: list[str] = []
    for _ in range(rounds):
        overrides = versions.cpu_overrides(torch, gpu)
        found = versions.gpu_only_in(compile_with(overrides))
        if not found:
            return overrides, sorted(set(gpu))
        gpu += found
    raise versions.VersionError(
        f"GPU-only packages remain after dropping {sorted(set(gpu))}; see the resolution above"
    )


def frozen_names(freeze: str) -> list[str]:
    """The distributions ``uv pip freeze`` lists (``name==version`` or ``name @ url`` lines)."""
    return [m.group(1) for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:==| @ )", freeze, re.M)]


def installed_check(resolved: Resolved) -> str:
    """Python code (``python -c``) that exits non-zero unless exactly the resolved release is installed."""
    dist = _DIST.get(resolved.package, resolved.package)
    return (
        f"import importlib.metadata as m, sys; v = m.version({dist!r}); "
        f"sys.exit(0 if v == {resolved.version!r} else f'installed {{v}}, resolved {resolved.version}')"
    )
