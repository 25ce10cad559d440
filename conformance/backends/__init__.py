"""One adapter module per backend, one :class:`Entry` each in :data:`BACKENDS`; loaded lazily.

An entry names the adapter module, its factory (``load(exports) -> Backend`` unless
the module builds two backends) and the export file the backend reads -- the data
behind :data:`REGISTRY`, :data:`READS` and every adapter's ``reads`` trait. A backend
whose library is not installed raises ``BackendMissing`` and is reported *missing*.

Out of scope: running backends (``conformance.checks``); the adapters never import a tool.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.core.arguments import comma_list
from conformance.core.errors import RequiredUnavailable
from conformance.core.layout import Exports
from conformance.core.protocol import EXPORT_FILES, Backend, BackendMissing, ExportAbsent
from stacktok_export import StackTokenizer


@dataclass(frozen=True)
class Entry:
    """One backend: where its adapter lives, which factory builds it, which export file it reads."""

    module: str  # adapter module, relative to this package
    reads: str  # the export file it loads: "artifact", "tokenizer.json", ".gguf" or ".tiktoken"
    loader: str = "load"  # the module's factory, ``loader(exports) -> Backend``
    #: the top-level modules the library needs (looked up, never imported, before a run starts)
    needs: tuple[str, ...] = ()
    #: how to install them (shown when the backend cannot run)
    install: str = ""

    def __post_init__(self) -> None:
        if self.reads not in EXPORT_FILES:
            raise ValueError(f"backend entry {self.module}: reads {self.reads!r}, not one of {EXPORT_FILES}")


#: every backend, in report order (the default ``--backends``); one entry each
_HF = "pip install 'stacktok[hf]'"
_LLAMA = "pip install 'stacktok[llama]' (builds llama-cpp-python from source, 3-13 min)"
_HEAVY = "see conformance/INSTALL-heavy.md (CPU torch first), or run `nox -s heavy`"
_SERVER = (
    "build it once: python -m conformance.served.llama_build --sdist llama_cpp_python-0.3.36.tar.gz "
    "(docs/install.md), or set STACKTOK_LLAMA_SERVER"
)
BACKENDS: dict[str, Entry] = {
    "reference": Entry(".reference", "artifact"),
    "tiktoken": Entry(
        ".tiktoken_backend", ".tiktoken", needs=("tiktoken",), install="pip install 'stacktok[tiktoken]'"
    ),
    "tokenizers": Entry(".tokenizers_backend", "tokenizer.json", needs=("tokenizers",), install=_HF),
    "transformers": Entry(".transformers_backend", "artifact", needs=("transformers",), install=_HF),
    "transformers-reload": Entry(
        ".transformers_backend", "tokenizer.json", loader="load_reload", needs=("transformers",), install=_HF
    ),
    "llama.cpp": Entry(".llama_backend", ".gguf", needs=("llama_cpp",), install=_LLAMA),
    "llama.cpp-detokenize": Entry(
        ".llama_backend", ".gguf", loader="load_detokenize", needs=("llama_cpp",), install=_LLAMA
    ),
    # llama.cpp's own server, built from the llama-cpp-python sdist (an adapter of the served path)
    "llama-server": Entry(
        "conformance.served.llama_server_backend", ".gguf", needs=("gguf", "numpy"), install=_SERVER
    ),
    "vllm": Entry(".vllm_backend", "tokenizer.json", needs=("vllm",), install=_HEAVY),
    "trl": Entry(".trl_backend", "tokenizer.json", needs=("trl", "datasets"), install=_HEAVY),
}

#: backend name -> adapter module (a view of :data:`BACKENDS`)
REGISTRY: dict[str, str] = {name: e.module for name, e in BACKENDS.items()}

# transformers' import-time advice ("PyTorch was not found ...") says nothing about the checkpoint:
# the suite never loads model weights through transformers. Its other warnings stay (issue #12).
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

#: the ground truth every other backend is compared with
REFERENCE = "reference"
#: which export file each backend reads (the gate judges a file's edits by its readers' rows);
#: a view of :data:`BACKENDS`, and each adapter's ``reads`` trait
READS: dict[str, str] = {name: e.reads for name, e in BACKENDS.items()}


def readers_of(export: str) -> tuple[str, ...]:
    """Backends that load ``export`` (``tokenizer.json``, ``.gguf``, ``.tiktoken``)."""
    return tuple(name for name, reads in READS.items() if reads == export)


def load_backend(name: str, exports: Exports) -> Backend:
    """Build backend ``name`` over ``exports``; may raise BackendMissing."""
    if name not in REGISTRY:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(REGISTRY)}")
    try:
        module = importlib.import_module(BACKENDS[name].module, __name__)
    except ModuleNotFoundError as exc:
        raise BackendMissing(f"the {name} adapter cannot be imported ({exc})") from None
    loader = getattr(module, BACKENDS[name].loader)
    return loader(exports)


@functools.lru_cache(maxsize=4)
def _load_reference(path: str, stamp: tuple[int, int]) -> StackTokenizer:
    return StackTokenizer.load(path)


def shared_reference(path: Path) -> StackTokenizer:
    """The artifact's tokenizer, loaded once per file version and shared by the runner and the
    adapters that need it (its pre-token cache then serves every one of them). A path that is
    not there raises the loader's own ``ArtifactError`` (exit 2), never an ``OSError``."""
    try:
        stat = Path(path).stat()
    except OSError:
        return StackTokenizer.load(path)  # raises: "no such artifact; check the path"
    return _load_reference(str(Path(path).resolve()), (stat.st_mtime_ns, stat.st_size))


def require(module: str, extra: str) -> object:
    """Import ``module`` or raise BackendMissing with the install command."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendMissing(f"{module} is not installed ({exc}); pip install 'stacktok[{extra}]'") from None


#: ``--backends a,b`` (and ``--require``, ``--skip``): known names, repeats dropped; an unknown
#: name is a usage error listing the known ones (``conformance.core.arguments.comma_list``)
backend_list = comma_list(tuple(REGISTRY), what="backend")


def reads_present(name: str, exports: Exports) -> bool:
    """Whether the directory holds the file backend ``name`` reads (the artifact always is)."""
    present = {
        "artifact": True,
        "tokenizer.json": exports.hf_dir is not None,
        ".gguf": exports.gguf is not None,
        ".tiktoken": exports.tiktoken is not None,
    }
    return present[READS[name]]


def cannot_run(name: str, exports: Exports) -> tuple[str, str] | None:
    """Why backend ``name`` cannot run on ``exports``, decided in milliseconds before any check
    (the library is looked up, not imported): ``("skip", why)`` when the directory has no file
    it reads, ``("missing", why)`` when its library is not installed; ``None`` when it can run."""
    import importlib.util

    entry = BACKENDS[name]
    if not reads_present(name, exports):
        return "skip", f"no {entry.reads} in the directory"
    absent = [m for m in entry.needs if importlib.util.find_spec(m) is None]
    if absent:
        return "missing", f"{', '.join(absent)} not installed; {entry.install}"
    return None


def unavailable_backends(
    backends: list[str], exports: Exports, *, required: list[str]
) -> tuple[tuple[str, str, str], ...]:
    """``(name, status, why)`` for each selected backend that cannot run; a required one raises
    :class:`RequiredUnavailable` (the run stops before any check, INCOMPLETE)."""
    out = []
    for name in backends:
        why = cannot_run(name, exports)
        if why is None:
            continue
        if name in required:
            raise RequiredUnavailable(
                f"required backend {name} cannot run: {why[1]}; install it, or drop it from --require"
            )
        out.append((name, *why))
    return tuple(out)


def check_selection(backends: list[str], required: list[str], *, skipped: Sequence[str] = ()) -> str | None:
    """Why ``--backends`` / ``--skip`` / ``--require`` cannot run (a usage error), or None."""
    if not backends:
        return f"--backends names no backend; give at least one of {', '.join(REGISTRY)}"
    both = [n for n in required if n in skipped]
    if both:
        return f"--require and --skip both name {','.join(both)}; drop it from one of them"
    excluded = [n for n in required if n not in backends]
    if excluded:
        return (
            f"--require {','.join(excluded)} names backend(s) that --backends excludes; "
            f"add them to --backends or drop them from --require"
        )
    return None


def dist_version(dist: str) -> str:
    """The installed distribution's version (older tiktoken has no ``__version__``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


__all__ = [
    "BACKENDS",
    "READS",
    "REFERENCE",
    "REGISTRY",
    "BackendMissing",
    "Entry",
    "ExportAbsent",
    "backend_list",
    "cannot_run",
    "check_selection",
    "dist_version",
    "load_backend",
    "readers_of",
    "reads_present",
    "require",
    "shared_reference",
    "unavailable_backends",
]
