"""llama.cpp's vocabulary-only GGUFs and their Hugging Face ground truth, read from the sdist.

llama-cpp-python's sdist vendors llama.cpp, whose ``models/`` holds ``ggml-vocab-NAME.gguf``
with ``.gguf.inp`` (the texts) and ``.gguf.out`` (the ids ``AutoTokenizer.encode(text,
add_special_tokens=False)`` gave, written by ``convert_hf_to_gguf_update.py``). The framing is
that script's and ``tests/test-tokenizer-0.cpp``'s: every text is followed by
``"\\n__ggml_vocab_test__\\n"`` (the last one too), and ``.out`` has one line per text, its
ids each preceded by one space (an empty line for an empty text).

The sdist is ``$STACKTOK_LLAMA_SDIST``, else the one nox builds llama.cpp from
(``.nox/llama-cpp-src/llama_cpp_python-*.tar.gz`` under the checkout). Nothing is downloaded.

Beside the vocabularies, ``models/templates/`` holds real chat templates as their publishers ship
them (``meta-llama-Llama-3.1-8B-Instruct.jinja``, ...): :func:`template` reads one by name.

Out of scope: running llama.cpp (tests/test_gguf_*), building the sdist (nox).
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from .paths import ROOT

SEP = "\n__ggml_vocab_test__\n"
MODELS = "vendor/llama.cpp/models"
HOW = (
    "the llama.cpp vocab test reads llama-cpp-python's sdist: `nox -s convert` downloads it to "
    ".nox/llama-cpp-src/ (or `pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36 "
    "-d .nox/llama-cpp-src`), or set STACKTOK_LLAMA_SDIST to the .tar.gz; deselect with -m 'not llama_vocab'"
)


def sdist() -> Path | None:
    """The sdist to read, or ``None`` when there is none."""
    env = os.environ.get("STACKTOK_LLAMA_SDIST")
    if env:
        return Path(env) if Path(env).is_file() else None
    found = sorted((ROOT / ".nox" / "llama-cpp-src").glob("llama_cpp_python-*.tar.gz"))
    return found[-1] if found else None


def extract_models(path: Path, out: Path) -> Path:
    """Write every ``models/ggml-vocab-*`` file of the sdist into ``out`` (one pass over the tar)."""
    prefix = f"/{MODELS}/ggml-vocab-"
    with tarfile.open(path) as tar:
        for member in tar:
            if member.isfile() and prefix in f"/{member.name}":
                f = tar.extractfile(member)
                if f is not None:
                    (out / Path(member.name).name).write_bytes(f.read())
    return out


def template(path: Path, name: str) -> str:
    """The text of ``models/templates/NAME.jinja`` in the sdist at ``path`` (KeyError naming it when
    this sdist has no such template)."""
    wanted = f"/{MODELS}/templates/{name}.jinja"
    with tarfile.open(path) as tar:
        for member in tar:
            if member.isfile() and f"/{member.name}".endswith(wanted):
                f = tar.extractfile(member)
                if f is not None:
                    return f.read().decode("utf-8")
    raise KeyError(f"{path.name} has no {MODELS}/templates/{name}.jinja")


def all_templates(path: Path) -> dict[str, str]:
    """Every ``models/templates/*.jinja`` of the sdist at ``path``: ``{name: text}``, by name."""
    marker = f"/{MODELS}/templates/"
    out: dict[str, str] = {}
    with tarfile.open(path) as tar:
        for member in tar:
            name = f"/{member.name}"
            if member.isfile() and marker in name and name.endswith(".jinja"):
                f = tar.extractfile(member)
                if f is not None:
                    out[Path(name).stem] = f.read().decode("utf-8")
    return dict(sorted(out.items()))


def sdist_or_fail() -> Path:
    """The sdist; FAILS (never skips) saying how to get it."""
    found = sdist()
    if found is None:
        pytest.fail(f"no llama-cpp-python sdist: {HOW}")
    return found


def models_or_fail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh folder with the sdist's vocab files; FAILS (never skips) saying how to get the sdist."""
    return extract_models(sdist_or_fail(), tmp_path_factory.mktemp("vocab"))


def split_inp(raw: str) -> list[str]:
    """The texts of an ``.inp`` file, as test-tokenizer-0.cpp splits them."""
    texts, pos = [], 0
    while pos < len(raw):
        nxt = raw.find(SEP, pos)
        if nxt < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:nxt])
        pos = nxt + len(SEP)
    return texts


def cases(models: Path, name: str) -> list[tuple[str, list[int]]]:
    """``(text, expected ids)`` of one vocabulary (in a folder from :func:`extract_models`)."""
    base = models / f"ggml-vocab-{name}.gguf"
    texts = split_inp(Path(f"{base}.inp").read_bytes().decode("utf-8"))
    lines = Path(f"{base}.out").read_bytes().decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline after the last line
    if len(texts) != len(lines):
        raise ValueError(f"{base}: {len(texts)} texts but {len(lines)} id lines")
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines)]
