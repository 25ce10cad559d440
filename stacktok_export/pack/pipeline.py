"""``pack()``: a corpus through the frozen tokenizer into verified shards, in parallel parts, resumable.

The steps: validate options and describe the inputs (size, sha256), decide
from ``DIR``'s state whether this is a fresh run, a resume or already done,
plan the parts (``plan``: inputs cut at document boundaries every
``part_bytes``, small inputs grouped; a count of the documents before each cut
numbers them exactly as one sequential read does), run every part not yet
committed on an engine (``part``: the worker writes the part's own shards
``shard-PPPPP-NNNNN`` and its ``part-PPPPP.json`` record), and, once every part
is committed, write ``manifest.json`` (the only file this process writes) and
remove the records. A killed run -- a worker, a node, this process -- restarted
with the same command redoes only the parts not committed (a part goes on
after its last good shard) and ends byte-identical to an uninterrupted run.

What a manifest pins (its ``header``): the tokenizer (fingerprint, regex
engine and Unicode version), the token dtype (``<u2``, or ``<u4`` for a
vocabulary over 65,536 ids), the fast encoder and verification rate, every
option that changes ids or shard boundaries (``part_bytes`` among them), and
the inputs. A different header in ``DIR`` is refused, never mixed. Engine,
worker and node count are not in it: they never change a byte.

Out of scope: appending new inputs to a finished pack (pack them into another
directory), deleting anything but the pack's own files.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifact.artifact import shipped_artifact_path
from ..corpus.corpus import CorpusOptions, describe_inputs
from ..corpus.corpus_io import CorpusError
from ..models.bpe.bpe import StackTokenizer, load_tokenizer
from ..split.pretokenize import engine_info
from ..util.atomic import write_text_atomic
from ..util.progress import Progress
from . import plan
from .encode import EncoderSpec, forget_worker, shared_worker
from .engines import ENGINES, EngineError, count_local, pool_encoder, run_local, start_pool
from .part import PartJob
from .writer import COUNTS, FORMATS, shard_files, token_dtype, zero_counts

FORMAT = "stacktok-pack-v2"
READS = ("stacktok-pack-v1", FORMAT)  # v1: shards shard-NNNNN, always <u2 (the reader reads both)
MANIFEST = "manifest.json"
DEFAULT_SHARD_TOKENS = 100_000_000
DEFAULT_RATE = 0.01


class PackError(ValueError):
    """Bad options or a directory this pack cannot use (exit 2); the message says the fix."""


class PackMismatch(RuntimeError):
    """The fast encoder and the reference differ on a document (exit 1); shards so far are kept."""


@dataclass(frozen=True)
class PackOptions:
    """Everything that decides the bytes of a pack (and how it is run, which does not)."""

    corpus: CorpusOptions = CorpusOptions()
    shard_tokens: int = DEFAULT_SHARD_TOKENS
    part_bytes: int = plan.DEFAULT_PART_BYTES
    fmt: str = "plain"
    keep_empty: bool = False
    verify: float = DEFAULT_RATE  # 1.0 = every document
    artifact: str | None = None
    engine: str = "local"
    workers: int = 0  # 0 = one per core
    address: str | None = None
    quiet: bool = True

    def check(self) -> None:
        if self.shard_tokens < 1:
            raise PackError(f"--shard-tokens must be at least 1, got {self.shard_tokens}")
        if self.part_bytes < 1:
            raise PackError(f"--part-bytes must be at least 1, got {self.part_bytes}")
        if self.fmt not in FORMATS:
            raise PackError(f"--format must be one of {', '.join(FORMATS)}, got {self.fmt!r}")
        if not 0.0 <= self.verify <= 1.0:
            raise PackError(f"--verify must be a fraction in [0, 1] or 'all', got {self.verify}")
        if self.engine not in ENGINES:
            raise PackError(f"--engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.workers < 0:
            raise PackError(f"--workers must be at least 1, got {self.workers}")
        if self.address and self.engine != "ray":
            raise PackError("--address joins a Ray cluster: use it with --engine ray")


def _tokenizer_info(tok: StackTokenizer) -> dict[str, Any]:
    regex_engine = engine_info(with_classes=False)
    return {
        "name": tok.name,
        "fingerprint": tok.fingerprint,
        "vocab_size": tok.vocab_size,
        "bos_id": tok.bos_id,
        "eos_id": tok.eos_id,
        "regex": {k: regex_engine[k] for k in sorted(regex_engine)},
    }


def header(tok: StackTokenizer, inputs: list[dict[str, Any]], opts: PackOptions) -> dict[str, Any]:
    import tiktoken

    c = opts.corpus
    return {
        "format": FORMAT,
        "plan": plan.PLAN_VERSION,
        "dtype": token_dtype(tok.vocab_size),
        "tokenizer": _tokenizer_info(tok),
        "encoder": {
            "fast": f"tiktoken {tiktoken.__version__}",
            "verify": "all" if opts.verify >= 1 else opts.verify,
        },
        "options": {
            "text_docs": c.text_docs,
            "field": c.field,
            "column": c.column,
            "errors": c.errors,
            "keep_empty": opts.keep_empty,
            "shard_tokens": opts.shard_tokens,
            "part_bytes": opts.part_bytes,
            "format": opts.fmt,
        },
        "inputs": inputs,
    }


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PackError(f"{path}: unreadable ({exc}); delete the directory and pack again") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PackError(f"{path}: not a {FORMAT} file; delete the directory and pack again")
    return doc


def _differs(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    keys = sorted(
        k for k in set(old) | set(new) if k not in ("shards", "totals") and old.get(k) != new.get(k)
    )
    return ", ".join(keys) or None


def header_id(head: dict[str, Any]) -> str:
    return hashlib.sha256(_dumps(head).encode("utf-8")).hexdigest()


def _ours(name: str) -> bool:
    return name == MANIFEST or name.startswith(("shard-", "part-", "."))


def _resume_state(out: Path, head: dict[str, Any]) -> str:
    """``"done"``, ``"resume"`` or ``"fresh"``; refuse a foreign ``out`` or another pack's."""
    if (out / MANIFEST).is_file():
        diff = _differs(_read_json(out / MANIFEST), head)
        if diff:
            raise PackError(
                f"--out {out} holds a pack made with a different {diff}; "
                "use another --out, or delete it to pack again"
            )
        return "done"
    if not out.exists():
        return "fresh"
    names = [p.name for p in out.iterdir()]
    if any(not _ours(n) for n in names):
        raise PackError(f"--out {out} is not empty and holds no pack; choose an empty or new directory")
    want = header_id(head)
    for name in sorted(n for n in names if n.startswith("part-") and n.endswith(".json")):
        try:
            theirs = json.loads((out / name).read_text(encoding="utf-8")).get("header")
        except (OSError, ValueError, AttributeError):
            continue  # a record is rewritten by its part
        if theirs != want:
            raise PackError(
                f"--out {out} holds an unfinished pack of other inputs or options ({name}); "
                "use another --out, or delete it to pack again"
            )
        return "resume"
    return "fresh"


def _totals(records: list[dict[str, Any]]) -> dict[str, int]:
    shards = [s for r in records for s in r["shards"]]
    totals = {"shards": len(shards), "documents": 0, "tokens": 0, **zero_counts()}
    for s in shards:
        totals["documents"] += s["documents"]
        totals["tokens"] += s["tokens"]
        for k in COUNTS:
            totals[k] += s["counts"][k]
    for r in records:
        for k in COUNTS:
            totals[k] += r["tail"][k]
    return totals


def pack(
    inputs: Sequence[str], out: str | os.PathLike[str], *, options: PackOptions | None = None
) -> dict[str, Any]:
    """Pack ``inputs`` (paths, already expanded) into ``out``; return the manifest."""
    opts = options or PackOptions()
    _preflight(inputs, Path(out), opts)
    out_dir = Path(out)
    artifact = str(Path(opts.artifact) if opts.artifact else shipped_artifact_path())
    spec = EncoderSpec(artifact, opts.verify, opts.keep_empty)
    # local: one per core; ray: 0 = one per CPU of the cluster (known once Ray is up)
    workers = opts.workers or (0 if opts.engine == "ray" else os.cpu_count() or 1)
    pool = start_pool(spec, workers=workers) if opts.engine == "local" else None
    try:
        return _pack(list(inputs), out_dir, opts, spec, pool=pool, workers=workers)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        forget_worker()


def _pack(
    inputs: list[str], out_dir: Path, opts: PackOptions, spec: EncoderSpec, *, pool: Any, workers: int
) -> dict[str, Any]:
    shared = shared_worker()  # the forked workers' encoder: its reference is the one to describe
    tok = shared.ref if shared is not None else load_tokenizer(spec.artifact)
    head = header(tok, describe_inputs(inputs), opts)
    if _resume_state(out_dir, head) == "done":
        return _read_json(out_dir / MANIFEST)
    out_dir.mkdir(parents=True, exist_ok=True)
    if opts.engine == "ray":
        from . import raycluster

        workers = raycluster.start(workers=workers, address=opts.address)
    sizes = [i["bytes"] for i in head["inputs"]]
    units = plan.cut_units(inputs, sizes, opts.corpus, part_bytes=opts.part_bytes)
    todo = plan.needs_count(units)
    tasks = [(inputs[units[i].source], units[i].span) for i in todo]
    if opts.engine == "ray":
        counted = raycluster.count_ray(tasks, opts.corpus, workers=workers)
    else:
        counted = count_local(tasks, opts.corpus, pool)
    for result in counted:
        if isinstance(result, str):
            raise CorpusError(result)
    counts = {i: c for i, c in zip(todo, counted) if not isinstance(c, str)}
    parts = plan.group_parts(plan.number_units(units, counts), part_bytes=opts.part_bytes)
    jobs = [
        PartJob(
            p,
            tuple(inputs),
            opts.corpus,
            str(out_dir),
            opts.shard_tokens,
            opts.fmt,
            head["dtype"],
            header_id(head),
            head["encoder"]["fast"],
        )
        for p in parts
    ]
    if opts.engine == "ray":
        records = raycluster.run_ray(jobs, spec, workers=workers)
    else:
        records = run_local(jobs, pool_encoder(spec, pool, workers=workers))
    done = _collect(records, jobs, opts)
    _check_shared(out_dir, done, opts.fmt)
    manifest = {**head, "shards": [s for r in done for s in r["shards"]], "totals": _totals(done)}
    write_text_atomic(out_dir / MANIFEST, _dumps(manifest))
    for p in out_dir.iterdir():
        if p.name.startswith("part-") or (
            p.name.startswith((".shard-", ".part-")) and p.name.endswith(".tmp")
        ):
            p.unlink(missing_ok=True)
    return manifest


def _collect(records: Any, jobs: list[PartJob], opts: PackOptions) -> list[dict[str, Any]]:
    """Every part's record, in part order; the first problem a part reports stops the run."""
    done: list[dict[str, Any] | None] = [None] * len(jobs)
    total = sum(j.part.size for j in jobs)
    with Progress(quiet=opts.quiet) as progress:
        bar = progress.bar("pack", -(-total // 1_000_000), unit="MB")
        finished = shards = docs = 0
        try:
            for r in records:
                if "mismatch" in r:
                    raise PackMismatch(r["mismatch"])
                if "error" in r:
                    raise CorpusError(r["error"])
                r.pop("host", None)
                done[r["part"]] = r
                finished += jobs[r["part"]].part.size
                shards += len(r["shards"])
                docs += sum(s["documents"] for s in r["shards"])
                bar.note(f"{docs:,} docs, {shards} shards")
                bar.set(finished // 1_000_000)
        except BaseException:
            bar.close(line=False)  # the error is the line the user needs
            raise
        bar.set(bar.total)
        bar.close()
    return [r for r in done if r is not None]


def _check_shared(out: Path, records: list[dict[str, Any]], fmt: str) -> None:
    """Workers on other nodes wrote these shards: they must be here too, or ``out`` is not shared."""
    for r in records:
        for s in r["shards"]:
            for name in shard_files(s["name"], fmt):
                if not (out / name).is_file():
                    raise EngineError(
                        f"{out / name} was written by a worker but is not in --out here: give --out a "
                        "directory every node shares (NFS, a mounted bucket), then rerun the same command"
                    )


def _preflight(inputs: Sequence[str], out: Path, opts: PackOptions) -> None:
    opts.check()
    if not inputs:
        raise PackError("no inputs: give files or globs to pack")
    if out.exists() and not out.is_dir():
        raise PackError(f"--out {out} is a file; give a directory")
    try:
        import tiktoken  # noqa: F401 -- the fast encoder
    except ImportError:
        raise PackError("stacktok pack encodes with tiktoken: pip install 'stacktok[pack]'") from None
