"""One adapter module per backend; :func:`load_backend` imports them lazily.

Each module has ``load(exports) -> Backend``; a backend whose
library is not installed raises ``BackendMissing`` and is reported *missing*.
"""

from __future__ import annotations

import functools
import importlib
import os
from pathlib import Path

from stacktok_export import StackTokenizer

from conformance.core.layout import Exports
from conformance.core.protocol import Backend, BackendMissing, ExportAbsent

#: backend name -> adapter module (relative to this package)
REGISTRY: dict[str, str] = {
    "reference": ".reference",
    "tiktoken": ".tiktoken_backend",
    "tokenizers": ".tokenizers_backend",
    "transformers": ".transformers_backend",
    "transformers-reload": ".transformers_backend",
    "llama.cpp": ".llama_backend",
    "llama.cpp-detokenize": ".llama_backend",
    "vllm": ".vllm_backend",
    "trl": ".trl_backend",
}

#: backends that are a second path of another adapter module: name -> its factory's name
LOADERS = {"transformers-reload": "load_reload", "llama.cpp-detokenize": "load_detokenize"}


# transformers' import-time advice ("PyTorch was not found ...") says nothing about the checkpoint:
# the suite never loads model weights through transformers. Its other warnings stay (issue #12).
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

#: the ground truth every other backend is compared with
REFERENCE = "reference"
#: which export file each backend reads (the gate judges a file's edits by its readers' rows)
READS: dict[str, str] = {
    "reference": "artifact",
    "tiktoken": ".tiktoken",
    "tokenizers": "tokenizer.json",
    "transformers": "artifact",
    "transformers-reload": "tokenizer.json",
    "llama.cpp": ".gguf",
    "llama.cpp-detokenize": ".gguf",
    "vllm": "tokenizer.json",
    "trl": "tokenizer.json",
}


def readers_of(export: str) -> tuple[str, ...]:
    """Backends that load ``export`` (``tokenizer.json``, ``.gguf``, ``.tiktoken``)."""
    return tuple(name for name, reads in READS.items() if reads == export)


def load_backend(name: str, exports: Exports) -> Backend:
    """Build backend ``name`` over ``exports``; may raise BackendMissing."""
    if name not in REGISTRY:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(REGISTRY)}")
    try:
        module = importlib.import_module(REGISTRY[name], __name__)
    except ModuleNotFoundError as exc:
        raise BackendMissing(f"the {name} adapter cannot be imported ({exc})") from None
    loader = getattr(module, LOADERS.get(name, "load"))
    return loader(exports)


@functools.lru_cache(maxsize=4)
def _load_reference(path: str, stamp: tuple[int, int]) -> StackTokenizer:
    return StackTokenizer.load(path)


def shared_reference(path: Path) -> StackTokenizer:
    """The artifact's tokenizer, loaded once per file version and shared by the runner and the
    adapters that need it (its pre-token cache then serves every one of them)."""
    stat = Path(path).stat()
    return _load_reference(str(Path(path).resolve()), (stat.st_mtime_ns, stat.st_size))


def require(module: str, extra: str) -> object:
    """Import ``module`` or raise BackendMissing with the install command."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendMissing(f"{module} is not installed ({exc}); pip install 'stacktok[{extra}]'") from None


def backend_list(value: str) -> list[str]:
    """Parse ``--backends a,b``; an unknown name is a usage error listing the known ones."""
    import argparse

    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown backend(s) {unknown}; choose from {', '.join(REGISTRY)}")
    return list(dict.fromkeys(names))


def check_selection(backends: list[str], required: list[str]) -> str | None:
    """Why ``--backends`` / ``--require`` cannot run (a usage error), or None."""
    if not backends:
        return f"--backends names no backend; give at least one of {', '.join(REGISTRY)}"
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


__all__ = ["REGISTRY", "load_backend", "require", "BackendMissing", "ExportAbsent", "check_selection"]
