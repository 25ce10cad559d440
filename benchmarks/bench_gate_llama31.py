"""Gate benchmark on a real checkpoint: the Llama-3.1-8B-Instruct-shaped directory (128,256 ids).

Builds the directory ``tests/helpers/real_checkpoint.py`` builds (llama.cpp's llama-bpe vocabulary
from the llama-cpp-python sdist, ``stacktok import`` + ``stacktok export``, Meta's template and
configs), runs ``stacktok gate DIR --artifact A.json`` with every installed engine (one untimed
run first: "warm" is a user's second run), and prints its wall time beside what the engines
themselves take to load the same files in this process -- the floor no gate can go under:
``tokenizers.Tokenizer.from_file``, ``AutoTokenizer.from_pretrained``, tiktoken on the
``.tiktoken``, llama.cpp's vocab-only load of the GGUF, and llama-server (a model GGUF around the
vocabulary, then start to ``/health``). Target (issue 39): <= 30 s on 2 cores.

    STACKTOK_LLAMA_SDIST=... python benchmarks/bench_gate_llama31.py [--backends LIST]

Out of scope: the shipped directory (``bench_gate.py``), vLLM/TRL (``nox -s heavy``), cold
installs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ENGINES = (
    "reference,tiktoken,tokenizers,transformers,transformers-reload,llama.cpp,llama.cpp-detokenize,"
    "llama-server"
)


def _timed(label: str, fn) -> float:
    start = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 -- a missing engine is reported, not fatal
        print(f"  {label:34s} not measured: {type(exc).__name__}: {exc}"[:160])
        return 0.0
    seconds = time.perf_counter() - start
    print(f"  {label:34s} {seconds:6.1f} s")
    return seconds


def engine_loads(hf: Path, gguf: Path, tiktoken_file: Path) -> float:
    """Each engine loading the checkpoint's files in this process; the sum, in seconds."""
    total = 0.0

    def tokenizers_load() -> None:
        import tokenizers

        tokenizers.Tokenizer.from_file(str(hf / "tokenizer.json"))

    def transformers_load() -> None:
        import transformers

        transformers.AutoTokenizer.from_pretrained(str(hf))

    def tiktoken_load() -> None:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        ranks = load_tiktoken_bpe(str(tiktoken_file))
        tiktoken.Encoding("bench", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})

    def llama_load() -> None:
        from conformance.backends.llama_backend import LlamaCppTokenizer

        LlamaCppTokenizer(gguf)

    def llama_server_start() -> None:
        from conformance.served.llama_build import find_llama_server
        from conformance.served.llama_server import llama_server
        from conformance.served.tiny_gguf import write_model_gguf

        binary = find_llama_server()
        if binary is None:
            raise RuntimeError("no llama-server binary (docs/install.md)")
        with tempfile.TemporaryDirectory() as tmp:
            model = write_model_gguf(gguf, Path(tmp) / "model.gguf")
            with llama_server(binary, model):
                pass

    for label, fn in (
        ("tokenizers: Tokenizer.from_file", tokenizers_load),
        ("transformers: AutoTokenizer", transformers_load),
        ("tiktoken: .tiktoken ranks", tiktoken_load),
        ("llama.cpp: vocab-only GGUF", llama_load),
        ("llama-server: model + start + stop", llama_server_start),
    ):
        total += _timed(label, fn)
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default=ENGINES)
    args = ap.parse_args()
    from tests.helpers import llama_vocab
    from tests.helpers import real_checkpoint as rc

    sdist = llama_vocab.sdist()
    if sdist is None:
        print(f"bench_gate_llama31: no llama-cpp-python sdist: {llama_vocab.HOW}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        exports = rc.export_llama_bpe(Path(tmp) / "export", sdist)
        ckpt = rc.llama31(Path(tmp) / "ckpt", exports)
        print(f"checkpoint built in {time.perf_counter() - start:.1f} s (import + export of 128,256 ids)")
        report = Path(tmp) / "gate.json"
        cmd = [
            sys.executable, "-m", "stacktok_cli", "gate", str(ckpt.directory), "--artifact",
            str(ckpt.artifact), "--backends", args.backends, "--quiet", "--json", str(report),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        wall = time.perf_counter() - start
        if not report.exists():
            print(
                f"bench_gate_llama31: no report (exit {done.returncode}): {done.stderr[-500:]}",
                file=sys.stderr,
            )
            return 2
        doc = json.loads(report.read_text())
        verdict = [line for line in done.stdout.splitlines() if line.startswith("verdict:")]
        target = f"target <= 30 s: {wall / 30:.2f}x"
        print(f"gate exit {done.returncode} verdict {doc['verdict']}: wall {wall:.1f} s ({target})")
        print(verdict[-1] if verdict else "(no verdict line)")
        print("the engines loading the same files, in this process:")
        beside = ckpt.directory.parent
        floor = engine_loads(ckpt.directory, beside / "llama31.gguf", beside / "llama31.tiktoken")
        ratio = wall / max(floor, 0.1)
        print(f"  {'sum of loads':34s} {floor:6.1f} s -> the gate takes {ratio:.1f}x its engines' loads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
