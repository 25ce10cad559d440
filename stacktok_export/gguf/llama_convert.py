"""Run llama.cpp's own ``convert_hf_to_gguf.py`` with our tokenizer's hash registered.

``python -m stacktok_export.gguf.llama_convert CONVERTER.py MODEL_DIR [converter options...]``

The stock converter identifies a BPE pre-tokenizer by hashing the ids of a fixed text
(``get_vocab_base_pre``) and refuses unknown hashes ("BPE pre-tokenizer was not
recognized", llama.cpp #8649, #27277); ours is :data:`CHKHSH`. This wrapper imports the
user's converter from its own checkout (its ``conversion`` package and ``gguf-py``
included), wraps every ``get_vocab_base_pre`` it defines so that our hash answers
``smaug-bpe`` (the Llama-3 split with merges respected and no forced BOS -- see
:mod:`stacktok_export.export.gguf_fmt`), and runs the converter's ``main()`` with the
remaining arguments. Every other hash goes to the converter's own table unchanged.

The registration is the converter's own recipe (``convert_hf_to_gguf_update.py`` adds
``if chkhsh == ...: res = ...`` lines); it is injected at run time instead of patching
or copying the file, so any converter version that still has ``get_vocab_base_pre``
works. :data:`CHKTXT` is the converter's check text (unchanged since llama.cpp PR#6920);
the hash is computed with our copy, so a converter that changes its text still
recognises us.

Out of scope: the converter's own requirements (torch, transformers, safetensors: install
them as llama.cpp's ``requirements/requirements-convert_hf_to_gguf.txt`` says), tokenizer
keys the converter does not write (``stacktok retokenize`` then makes them the artifact's).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable, Iterator, Sequence
from hashlib import sha256
from pathlib import Path
from typing import Any

#: the converter's ``chktxt`` (``get_vocab_base_pre``, llama.cpp ``convert_hf_to_gguf.py``)
CHKTXT = (
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n"
    "🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 "
    "3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ "
    "------======= нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, "
    "'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL"
)
#: sha256 of ``str(ids of CHKTXT)`` under the frozen artifact (checked by tests/test_gguf_convert.py)
CHKHSH = "de74c1f7aea8a35a52d7950155738cfd6dbe5e1e2abd7a5a97672e2bf5299f29"
PRE = "smaug-bpe"
HOOK = "get_vocab_base_pre"


def chkhsh(ids: Sequence[int]) -> str:
    """The converter's hash of the ids it got for :data:`CHKTXT`."""
    return sha256(str(list(ids)).encode()).hexdigest()


def _registered(original: Callable[[Any, Any], str]) -> Callable[[Any, Any], str]:
    @functools.wraps(original)
    def get_vocab_base_pre(self: Any, tokenizer: Any) -> str:
        if chkhsh(tokenizer.encode(CHKTXT)) == CHKHSH:
            return PRE
        return original(self, tokenizer)

    get_vocab_base_pre.stacktok_registered = True  # type: ignore[attr-defined]
    return get_vocab_base_pre


def _classes(modules: Sequence[Any]) -> Iterator[type]:
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and HOOK in vars(value):
                yield value


def register(modules: Sequence[Any]) -> list[str]:
    """Wrap ``get_vocab_base_pre`` on every class of ``modules`` that defines it; their names."""
    done = []
    for cls in dict.fromkeys(_classes(modules)):
        hook = vars(cls)[HOOK]
        if not getattr(hook, "stacktok_registered", False):
            setattr(cls, HOOK, _registered(hook))
        done.append(f"{cls.__module__}.{cls.__qualname__}")
    return done


def load_converter(path: Path) -> Any:
    """Import the converter file as a module (its directory first on ``sys.path``)."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("convert_hf_to_gguf", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"stacktok: error: {path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.splitlines()[2])
        return 0 if args else 2
    path = Path(args[0]).resolve()
    if not path.is_file():
        print(f"stacktok: error: {args[0]}: no such file; give the path of llama.cpp's convert_hf_to_gguf.py")
        return 2
    converter = load_converter(path)
    ours = [
        m
        for name, m in list(sys.modules.items())
        if name == converter.__name__ or name.startswith("conversion")
    ]
    if not register(ours):
        print(f"stacktok: error: {path}: defines no {HOOK}(); is this llama.cpp's convert_hf_to_gguf.py?")
        return 2
    sys.argv = [str(path), *args[1:]]
    result = converter.main()
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
