"""``stacktok pack --engine ray`` on a 3-node Ray cluster on this machine: the local engine's bytes.

``ray.cluster_utils.Cluster`` starts three raylets (one CPU, 80 MB of object
store each); the pack runs as Ray tasks that write their own shards. Inputs
are small, so ``part_bytes`` is set small (64 KiB) to force several parts per
input -- the same code path a 200 MB input takes with the default 64 MiB.
Needs ray (the ``ray`` extra: ``nox -s tests-latest``).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from stacktok_export.corpus.corpus import CorpusOptions
from stacktok_export.pack import EngineError, PackOptions, pack
from stacktok_export.pack.plan import cut_units

from .conftest import need
from .test_pack import corpus_docs

STORE = 80 * 1024 * 1024
PART = 64 * 1024


@pytest.fixture(scope="module")
def cluster():
    ray = need("ray", "ray")
    from ray.cluster_utils import Cluster

    ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": STORE})
    for _ in range(2):
        c.add_node(num_cpus=1, object_store_memory=STORE)
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    c.wait_for_nodes()
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[Path]:
    """One input of every kind: JSON Lines plain / .gz / .zst, Parquet, text plain / .zst."""
    zstandard = need("zstandard", "pack")
    pa = need("pyarrow", "pack")
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("ray-inputs")
    docs = corpus_docs()
    lines = "".join(json.dumps({"text": t}) + "\n" for t in docs).encode()
    text = "\n\n".join(t.replace("\n\n", "\n") for t in docs if t.strip()).encode()
    (d / "a.jsonl").write_bytes(lines * 2)  # ~700 KB: 11 parts
    (d / "b.jsonl.gz").write_bytes(gzip.compress(lines))
    (d / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    pq.write_table(pa.table({"text": docs}), d / "d.parquet", row_group_size=16)
    (d / "e.txt").write_bytes(text)
    (d / "f.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(text))
    return [d / n for n in ("a.jsonl", "b.jsonl.gz", "c.jsonl.zst", "d.parquet", "e.txt", "f.txt.zst")]


def _pack(inputs, out, **kw):
    kw = {"quiet": True, "part_bytes": PART, "shard_tokens": 20_000, "text_docs": "paragraph", **kw}
    corpus = CorpusOptions(text_docs=kw.pop("text_docs"))
    return pack([str(p) for p in inputs], out, options=PackOptions(corpus=corpus, **kw))


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.fixture(scope="module")
def local(inputs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ray-local") / "pack"
    _pack(inputs, out, workers=1, fmt="megatron")
    return out


def test_three_nodes_write_the_local_engines_bytes(cluster, inputs, local, tmp_path: Path) -> None:
    import ray

    assert len([n for n in ray.nodes() if n["Alive"]]) == 3
    manifest = _pack(inputs, tmp_path / "ray", engine="ray", fmt="megatron")
    assert _files(tmp_path / "ray") == _files(local)  # every shard, index and the manifest
    # the big JSONL input was cut into byte ranges: several parts, each its own Ray task
    units = cut_units([str(inputs[0])], [inputs[0].stat().st_size], CorpusOptions(), part_bytes=PART)
    parts = {s["name"].split("-")[1] for s in manifest["shards"]}
    assert len(units) >= 8 and len(parts) >= len(units)
    assert not [p for p in (tmp_path / "ray").iterdir() if p.name.startswith((".", "part-"))]


def test_a_node_without_the_output_or_the_inputs_says_so_in_one_line(inputs, tmp_path: Path) -> None:
    """What a task reports on a node that does not share --out or lacks an input (no traceback)."""
    from stacktok_export.pack.part import PartJob, run_part
    from stacktok_export.pack.plan import group_parts
    from stacktok_export.pack.raycluster import _one_line

    units = cut_units([str(inputs[0])], [inputs[0].stat().st_size], CorpusOptions(), part_bytes=PART)
    [part, *_] = group_parts(units, part_bytes=PART)
    job = PartJob(
        part, (str(inputs[0]),), CorpusOptions(), str(tmp_path / "elsewhere"), 10, "plain", "<u2", "h", "t"
    )
    r = run_part(job, encode=lambda stream: iter(()))
    assert r["error"].startswith(f"--out {tmp_path / 'elsewhere'} does not exist on node ")
    assert r["error"].endswith("give a directory every node shares") and "\n" not in r["error"]
    job = PartJob(
        part, (str(tmp_path / "gone.jsonl"),), CorpusOptions(), str(tmp_path), 10, "plain", "<u2", "h", "t"
    )
    r = run_part(job, encode=lambda stream: iter(()))
    assert f"input {tmp_path / 'gone.jsonl'} is not on node " in r["error"] and "the same path" in r["error"]
    missing = _one_line(RuntimeError("Traceback ...\nModuleNotFoundError: No module named 'stacktok_export'"))
    assert missing.startswith("stacktok is not installed on a node") and "pip install" in missing


def test_a_node_killed_mid_run_then_rerun_gives_the_same_bytes(
    cluster, inputs, local, tmp_path: Path
) -> None:
    """Kill a node while its tasks write shards; the run (Ray retries, or a rerun) ends identical."""
    victim = cluster.add_node(num_cpus=1, object_store_memory=STORE)
    cluster.wait_for_nodes()
    out = tmp_path / "ray"
    failed: list[BaseException] = []

    def run() -> None:
        try:
            _pack(inputs, out, engine="ray", fmt="megatron")
        except EngineError as exc:  # the lost node's tasks ran out of retries: rerun
            failed.append(exc)

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and t.is_alive() and not (out.exists() and any(out.glob("part-*"))):
        time.sleep(0.02)
    assert t.is_alive(), "the run ended before a node could be killed; give it more parts"
    cluster.remove_node(victim, allow_graceful=False)  # SIGKILL: its tasks die mid-write
    t.join(timeout=300)
    assert not t.is_alive()
    _pack(inputs, out, engine="ray", fmt="megatron")  # the rerun: only parts not committed are redone
    assert _files(out) == _files(local)
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp") or p.name.startswith("part-")]


def test_a_killed_driver_rerun_redoes_only_the_parts_not_committed(cluster, inputs, local, tmp_path) -> None:
    """SIGKILL the driver (``stacktok pack --address``) mid-run; the rerun keeps committed parts."""
    args = [str(p) for p in inputs] + ["--out", str(tmp_path / "ray"), "--engine", "ray", "--quiet"]
    args += ["--address", cluster.address, "--part-bytes", str(PART), "--shard-tokens", "20000"]
    args += ["--text-docs", "paragraph", "--format", "megatron"]
    proc = subprocess.Popen([sys.executable, "-m", "stacktok_cli", "pack", *args], cwd=tmp_path)
    out, committed = tmp_path / "ray", None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None and committed is None:
        for record in sorted(out.glob("part-*.json")) if out.exists() else []:
            doc = json.loads(record.read_text() or "{}")
            if doc.get("done") and doc["shards"]:
                committed = out / f"{doc['shards'][0]['name']}.bin"
                break
        time.sleep(0.02)
    assert proc.poll() is None and committed is not None, "the run ended before the driver could be killed"
    proc.kill()
    proc.wait()
    assert not (out / "manifest.json").exists()
    inode = committed.stat().st_ino
    # what a SIGKILLed writer leaves (Ray's workers exit through Python and clean up themselves)
    for name in (
        ".shard-00000-00000.bin.x1.tmp",
        ".shard-00009-00001.offsets.npy.x2.tmp",
        ".part-00009.json.x.tmp",
    ):
        (out / name).write_bytes(b"partial")
    _pack(inputs, out, engine="ray", fmt="megatron")
    assert committed.stat().st_ino == inode  # a committed part is kept, not redone
    assert _files(out) == _files(local)
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp") or p.name.startswith("part-")]


@pytest.mark.parametrize(
    "address, env, hinted",
    [("10.0.0.9:6379", None, True), ("auto", None, False), ("10.0.0.9:6379", "token", False)],
)
def test_a_refused_join_by_address_names_token_authentication(monkeypatch, address, env, hinted) -> None:
    """Ray >= 2.59's `ray start` turns on token auth; a client naming HOST:PORT then fails to connect
    unless RAY_AUTH_MODE=token is set (measured on Ray 2.60). The one-line error says what to set."""
    ray = need("ray", "ray")
    from stacktok_export.pack import raycluster

    def refuse(**kwargs):
        raise ConnectionError(f"Failed to connect to Ray cluster at {kwargs['address']}")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    if env is None:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    else:
        monkeypatch.setenv("RAY_AUTH_MODE", env)
    with pytest.raises(EngineError) as err:
        raycluster.start(workers=2, address=address)
    line = str(err.value)
    assert (
        line.startswith(f"cannot start or join Ray (--address {address}): Failed to connect")
        and "\n" not in line
    )
    assert ("RAY_AUTH_MODE=token and RAY_AUTH_TOKEN" in line) is hinted
