"""``pack()``: a corpus through the frozen tokenizer into verified ``uint16`` shards, resumable.

The steps: validate options and describe the inputs (size, sha256), decide
from ``DIR``'s state whether this is a fresh run, a resume or already done,
then stream :class:`~.encode.Encoded` batches from an engine into a
:class:`~.writer.ShardWriter`. After every shard, ``pack.journal.json``
records the shards so far and where the next one starts (atomically); the
last step writes ``manifest.json`` and removes the journal. A killed run,
restarted with the same command, re-hashes the journaled shards, keeps those
that match and goes on from the first one that does not.

What a manifest pins (its ``header``): the tokenizer (fingerprint, regex
engine and Unicode version), the fast encoder and verification rate, every
option that changes ids or shard boundaries, and the inputs. A different
header in ``DIR`` is refused, never mixed. Engine and worker count are not
in it: they never change a byte.

Out of scope: appending new inputs to a finished pack (pack them into another
directory), deleting anything but the pack's own files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._atomic import write_text_atomic
from ..bpe import StackTokenizer, load_tokenizer, shipped_artifact_path
from ..corpus import CorpusOptions, describe_inputs
from ..pretokenize import engine_info
from ..progress import Progress
from .encode import EMPTY, FLAG_NAMES, REFERENCE, SKIPPED, VERIFIED, Encoded, EncoderSpec
from .engines import ENGINES, run_local, run_ray, start_pool
from .writer import COUNTS, FORMATS, ShardWriter, sha256_file, shard_files, zero_counts

FORMAT = "stacktok-pack-v1"
MANIFEST = "manifest.json"
JOURNAL = "pack.journal.json"
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
        "dtype": "<u2",
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
        k for k in set(old) | set(new) if k not in ("shards", "totals", "next") and old.get(k) != new.get(k)
    )
    return ", ".join(keys) or None


def _ours(name: str) -> bool:
    return name in (MANIFEST, JOURNAL) or name.startswith("shard-") or name.startswith(".")


def _resume_state(out: Path, head: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """``("done", shards)``, ``("resume", good shards)`` or ``("fresh", [])``; refuse a foreign ``out``."""
    for name, state in ((MANIFEST, "done"), (JOURNAL, "resume")):
        path = out / name
        if path.is_file():
            old = _read_json(path)
            diff = _differs(old, head)
            if diff:
                raise PackError(
                    f"--out {out} holds a pack made with a different {diff}; "
                    "use another --out, or delete it to pack again"
                )
            shards = old.get("shards", [])
            return (state, shards) if state == "done" else (state, _good_prefix(out, shards, head))
    if out.exists() and any(not _ours(p.name) for p in out.iterdir()):
        raise PackError(f"--out {out} is not empty and holds no pack; choose an empty or new directory")
    return "fresh", []


def _good_prefix(out: Path, shards: list[dict[str, Any]], head: dict[str, Any]) -> list[dict[str, Any]]:
    good = []
    for shard in shards:
        files = shard_files(shard["name"], head["options"]["format"])
        if not all((out / f).is_file() for f in files) or sha256_file(out / files[0]) != shard["sha256"]:
            break
        good.append(shard)
    return good


def _clean(out: Path, keep: int) -> None:
    """Remove shard files past the first ``keep`` shards and temp files left by a killed run."""
    for p in out.iterdir():
        stale_shard = p.name.startswith("shard-") and int(p.name[6:11]) >= keep
        if stale_shard or (p.name.startswith(".shard-") and p.name.endswith(".tmp")):
            p.unlink()


def _counts(e: Encoded, i: int) -> dict[str, int]:
    flag = int(e.flags[i])
    counts = {FLAG_NAMES[bit]: 1 for bit in (VERIFIED, REFERENCE, EMPTY, SKIPPED) if flag & bit}
    if e.replaced[i]:
        counts["invalid_utf8_replaced"] = int(e.replaced[i])
    return counts


def _totals(shards: list[dict[str, Any]], tail: dict[str, int]) -> dict[str, int]:
    totals = {"shards": len(shards), "documents": 0, "tokens": 0, **zero_counts()}
    for s in shards:
        totals["documents"] += s["documents"]
        totals["tokens"] += s["tokens"]
        for k in COUNTS:
            totals[k] += s["counts"][k]
    for k in COUNTS:
        totals[k] += tail[k]
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


def _pack(
    inputs: list[str], out_dir: Path, opts: PackOptions, spec: EncoderSpec, *, pool: Any, workers: int
) -> dict[str, Any]:
    head = header(load_tokenizer(spec.artifact), describe_inputs(inputs), opts)
    state, shards = _resume_state(out_dir, head)
    if state == "done":
        return _read_json(out_dir / MANIFEST)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clean(out_dir, len(shards))
    start = tuple(shards[-1]["end"]) if shards else (0, 0)
    if opts.engine == "ray":
        results = run_ray(inputs, opts.corpus, spec, start=start, workers=workers, address=opts.address)
    else:
        results = run_local(inputs, opts.corpus, spec, start=start, pool=pool, workers=workers)
    writer = ShardWriter(out_dir, opts.shard_tokens, opts.fmt, next_index=len(shards))
    _write(results, writer, head, shards, out_dir, opts)
    manifest = {**head, "shards": shards, "totals": _totals(shards, writer.counts)}
    write_text_atomic(out_dir / MANIFEST, _dumps(manifest))
    (out_dir / JOURNAL).unlink(missing_ok=True)
    return manifest


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


def _write(
    results: Iterator[Encoded],
    writer: ShardWriter,
    head: dict[str, Any],
    shards: list[dict[str, Any]],
    out: Path,
    opts: PackOptions,
) -> None:
    sizes = [i["bytes"] for i in head["inputs"]]
    before, total = [sum(sizes[:k]) for k in range(len(sizes))], sum(sizes)
    with Progress(quiet=opts.quiet) as progress:
        bar = progress.bar("pack", -(-total // 1_000_000), unit="MB")
        docs = 0
        try:
            for e in results:
                if e.mismatch is not None:
                    raise PackMismatch(e.mismatch.message(head["encoder"]["fast"]))
                start = 0
                for i, n in enumerate(e.lengths.tolist()):
                    ids = e.ids[start : start + n]
                    start += n
                    shard = writer.add(ids, source=e.source, number=int(e.numbers[i]), counts=_counts(e, i))
                    if shard is not None:
                        shards.append(shard)
                        write_text_atomic(out / JOURNAL, _dumps({**head, "shards": shards}))
                docs += len(e.lengths)
                bar.note(f"{docs:,} docs, {len(shards)} shards")
                bar.set(min(before[e.source] + e.consumed, total) // 1_000_000)
        except BaseException:
            writer.abort()
            bar.close(line=False)  # the error is the line the user needs
            raise
        if writer.documents:
            shards.append(writer.flush())
        bar.note(f"{docs:,} docs, {len(shards)} shards")
        bar.set(bar.total)
        bar.close()
