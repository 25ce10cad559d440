"""``stacktok gate org/name[@revision]``: Hub ids through a hand-built, offline Hugging Face cache.

The cache is laid out as huggingface_hub writes it -- ``models--acme--stack100m/`` with ``blobs/``
(content by hash), ``refs/main`` and ``refs/v1`` (a commit each) and ``snapshots/<commit>/`` whose
files are relative symlinks into ``blobs/`` -- from the shipped HF export, and read with
``HF_HUB_OFFLINE=1``: a Hub id gives the same verdict and rows as the snapshot directory, a
revision resolves through ``refs/``, a missing repo or revision is exit 2 with one line naming the
fix, an existing local path always wins, and nothing is downloaded (sockets refuse to connect,
the cache is byte-identical afterwards).

Out of scope: the Hub itself (tests never download); what the gate checks (tests/test_gate.py).
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import pytest

from conformance.core.errors import UsageError
from conformance.core.hub import ALLOW_PATTERNS, cache_dir, resolve_target
from tests.helpers import GGUF as GGUF_NAME
from tests.helpers import SHIPPED_HF, run_gate, snapshot
from tests.helpers import TIKTOKEN as TIKTOKEN_NAME

FAST = "reference,tiktoken,tokenizers"
REPO = "acme/stack100m"
MAIN = "a" * 8 + "0123456789abcdef0123456789abcdef"  # 40 hex: the commit refs/main names
V1 = "b" * 8 + "0123456789abcdef0123456789abcdef"
BARE = "c" * 8 + "0123456789abcdef0123456789abcdef"  # refs/bare: a snapshot with config.json only
GGUF, TIKTOKEN = SHIPPED_HF.parent / GGUF_NAME, SHIPPED_HF.parent / TIKTOKEN_NAME


def _commit(storage: Path, commit: str, files: dict[str, Path], *, refs: tuple[str, ...]) -> Path:
    """Write ``files`` into ``blobs/`` (by sha256, as LFS blobs are) and link them from
    ``snapshots/<commit>/`` with relative symlinks; point each of ``refs`` at ``commit``."""
    snap = storage / "snapshots" / commit
    snap.mkdir(parents=True)
    (storage / "blobs").mkdir(exist_ok=True)
    for name, source in files.items():
        data = source.read_bytes()
        blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snap / name
        link.symlink_to(os.path.relpath(blob, link.parent))
    for ref in refs:
        (storage / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (storage / "refs" / ref).write_text(commit, encoding="utf-8")  # no newline, as hf writes it
    return snap


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """An offline HF cache holding ``acme/stack100m`` at ``main`` (the HF files and the
    ``.tiktoken``), ``v1`` (the same plus the GGUF) and ``bare`` (config.json only); cwd is an
    empty folder."""
    cache = tmp_path / "hf-home" / "hub"
    storage = cache / "models--acme--stack100m"
    hf = {p.name: p for p in sorted(SHIPPED_HF.iterdir())}
    _commit(storage, MAIN, {**hf, TIKTOKEN.name: TIKTOKEN}, refs=("main",))
    _commit(storage, V1, {**hf, TIKTOKEN.name: TIKTOKEN, GGUF.name: GGUF}, refs=("v1",))
    config = tmp_path / "config.json"
    config.write_text('{"vocab_size": 32768}', encoding="utf-8")
    _commit(storage, BARE, {"config.json": config}, refs=("bare",))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return cache


@pytest.fixture
def no_network(monkeypatch) -> None:
    """Any name look-up or connection from this process fails the test (huggingface_hub falls back
    to the cache on a network error, so only a failure that is no network error shows an attempt)."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"the gate tried to reach the network: {args[1:2] or args}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def _comparable(report: dict) -> dict:
    """What must not depend on how DIR was named: verdict, rows, versions, each file's bytes."""
    files = sorted((f["role"], Path(f["path"]).name, f["sha256"], f["size"]) for f in report["files"])
    keep = ("verdict", "exit_code", "checks", "versions", "fingerprint", "fixtures", "excluded")
    return {**{k: report[k] for k in keep}, "files": files}


def test_hub_id_gives_the_same_verdict_and_rows_as_the_snapshot(
    hub_cache, no_network, gate_files, tmp_path
) -> None:
    before = snapshot(hub_cache)
    by_id = run_gate(REPO, data=gate_files, backends=FAST, report=tmp_path / "by-id.json")
    snap = hub_cache / "models--acme--stack100m" / "snapshots" / MAIN
    by_dir = run_gate(snap, data=gate_files, backends=FAST, report=tmp_path / "by-dir.json")
    assert by_id.code == by_dir.code == 0, by_id.stderr
    assert by_id.report["verdict"] == "PASS"
    assert _comparable(by_id.report) == _comparable(by_dir.report)
    assert len(by_id.report["checks"]) > 20 and {r["backend"] for r in by_id.report["checks"]} >= {
        "tiktoken",
        "tokenizers",
    }
    assert by_id.report["inputs"] == {
        "kind": "hub",
        "directory": str(snap),
        "repo": REPO,
        "revision": "main",
        "commit": MAIN,
        "gguf": None,
    }
    assert by_dir.report["inputs"]["kind"] == "directory" and by_dir.report["inputs"]["repo"] is None
    # the report's digests are the blobs' names (the snapshot's files are symlinks to them)
    blobs = {p.resolve().name for p in snap.iterdir()}
    hashed = {f["sha256"] for f in by_id.report["files"] if f["role"] != "artifact"}
    assert hashed == blobs and len(blobs) == 6  # the 5 HF files and the .tiktoken
    assert snapshot(hub_cache) == before  # nothing downloaded, nothing written into the cache
    assert sorted(p.name for p in hub_cache.iterdir()) == ["models--acme--stack100m"]


def test_revision_resolves_through_refs_and_a_commit_directly(hub_cache, no_network) -> None:
    assert resolve_target(REPO).commit == MAIN
    tagged = resolve_target(f"{REPO}@v1")
    assert (tagged.revision, tagged.commit) == ("v1", V1)
    assert tagged.directory == hub_cache / "models--acme--stack100m" / "snapshots" / V1
    pinned = resolve_target(f"{REPO}@{MAIN}")
    assert (pinned.revision, pinned.commit) == (MAIN, MAIN)
    assert (pinned.directory / "tokenizer.json").is_symlink()


def test_gguf_is_checked_only_when_asked_for(hub_cache, no_network, gate_files, tmp_path) -> None:
    """v1's snapshot holds a GGUF: a Hub run reads it with ``--gguf`` only."""
    plain = run_gate(f"{REPO}@v1", data=gate_files, backends="reference", report=tmp_path / "plain.json")
    asked = run_gate(
        f"{REPO}@v1", "--gguf", GGUF.name, data=gate_files, backends="reference", report=tmp_path / "g.json"
    )
    assert plain.code == 0 and asked.code == 0, asked.stderr
    assert "gguf" not in {f["role"] for f in plain.report["files"]}
    gguf = [f for f in asked.report["files"] if f["role"] == "gguf"]
    assert [f["sha256"] for f in gguf] == [hashlib.sha256(GGUF.read_bytes()).hexdigest()]
    assert asked.report["inputs"]["gguf"] == str(
        hub_cache / "models--acme--stack100m" / "snapshots" / V1 / GGUF.name
    )
    assert len(asked.report["checks"]) > len(plain.report["checks"])  # the GGUF's checks ran


@pytest.mark.parametrize(
    ("target", "extra", "says"),
    [
        (
            "acme/nothing",
            (),
            ["acme/nothing is not a local path, not in the local cache", "`hf download acme/nothing`"],
        ),
        (
            f"{REPO}@nope",
            (),
            ["revision 'nope' is not in the local cache (cached: bare, main, v1, ", "--revision nope"],
        ),
        (
            f"{REPO}@v1",
            ("--gguf", "other.gguf"),
            ["other.gguf is not in the snapshot", f"hf download {REPO} other.gguf"],
        ),
        (f"{REPO}@bare", (), [f"{REPO}@bare (commit {BARE}): the snapshot ", "has no tokenizer.json"]),
    ],
    ids=["missing-repo", "missing-revision", "missing-gguf", "nothing-to-check"],
)
def test_what_is_not_cached_is_exit_2_with_the_fix(hub_cache, no_network, target, extra, says) -> None:
    before = snapshot(hub_cache)
    run = run_gate(target, *extra, backends="reference")
    assert run.code == 2 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stacktok gate: error: "), run.stderr
    assert all(s in lines[0] for s in says), lines[0]
    if target.startswith("acme/nothing") or "nope" in target:
        assert "HF_HUB_OFFLINE=1" in lines[0] and "unset HF_HUB_OFFLINE" in lines[0]
    assert snapshot(hub_cache) == before


def test_an_existing_local_path_is_never_a_repo_id(hub_cache, no_network) -> None:
    """``acme/stack100m`` exists here (empty): the gate checks it, and says it has nothing to check."""
    Path("acme/stack100m").mkdir(parents=True)
    run = run_gate("acme/stack100m", backends="reference")
    assert run.code == 2 and "acme/stack100m has no tokenizer.json" in run.stderr
    with pytest.raises(UsageError, match="--gguf x.gguf names a file in a Hub repository"):
        resolve_target("acme/stack100m", gguf="x.gguf")
    assert resolve_target("acme/stack100m").repo is None


def test_a_string_that_is_no_hub_id_stays_a_path(hub_cache) -> None:
    run = run_gate("/no/such/dir", backends="reference")
    assert run.code == 2 and "/no/such/dir is not a directory" in run.stderr
    assert resolve_target("a/b/c").repo is None and resolve_target("./x").repo is None


def test_without_huggingface_hub_a_hub_id_names_the_extra(hub_cache, monkeypatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "huggingface_hub", None)
    with pytest.raises(UsageError, match=r"needs huggingface_hub: pip install 'stacktok\[hf\]'"):
        resolve_target(REPO)


def test_the_cache_is_where_the_environment_says_now(tmp_path, monkeypatch) -> None:
    """``HF_HUB_CACHE`` wins, else ``HF_HOME/hub`` (read at each call, not at import)."""
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    assert cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"


def test_only_tokenizer_and_config_files_are_fetched() -> None:
    """huggingface_hub's own filter over a typical repository: never a weight or a GGUF."""
    from huggingface_hub.utils import filter_repo_objects

    repo = [
        *("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"),
        *("generation_config.json", "chat_template.jinja", "additional_chat_templates/tools.jinja"),
        *("o200k.tiktoken", "vocab.json", "merges.txt", "model.safetensors", "pytorch_model.bin"),
        *("model-00001-of-00002.safetensors", "model.Q4_K_M.gguf", "README.md", "onnx/model.onnx"),
    ]
    fetched = set(filter_repo_objects(repo, allow_patterns=list(ALLOW_PATTERNS)))
    assert fetched == set(repo[:10])


def test_every_report_names_the_repo_and_commit(hub_cache, no_network, gate_files, tmp_path) -> None:
    """The terminal, the Markdown (the job summary) and the HTML say which commit was checked."""
    md, page = tmp_path / "gate.md", tmp_path / "gate.html"
    run = run_gate(
        f"{REPO}@v1", "--markdown", str(md), "--html", str(page), data=gate_files, backends="reference"
    )
    assert run.code == 0, run.stderr
    named = f"{REPO}@v1 (commit {V1})"
    assert run.stdout.startswith(f"checked: {named}\n")
    assert f"Checked: `{named}`" in md.read_text(encoding="utf-8")
    assert f'<code id="directory">{named}</code>' in page.read_text(encoding="utf-8")
    local = run_gate(SHIPPED_HF, "--markdown", str(md), data=gate_files, backends="reference")
    assert not local.stdout.startswith("checked:")  # a typed path is not echoed back
    assert f"Checked: `{SHIPPED_HF}`" in md.read_text(encoding="utf-8")


def test_online_the_hub_is_asked_for_tokenizer_and_config_files_only(hub_cache, monkeypatch) -> None:
    """Without ``HF_HUB_OFFLINE`` a branch is asked of the Hub, with ``allow_patterns`` (and the
    ``--gguf`` file only when named): huggingface_hub's ``snapshot_download`` is replaced by a
    recorder answering with the hand-built snapshot, so nothing leaves the machine."""
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls: list[dict] = []
    snap = hub_cache / "models--acme--stack100m" / "snapshots" / V1

    def recorder(repo_id, **kwargs):
        calls.append({"repo_id": repo_id, **kwargs})
        return str(snap)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", recorder)
    target = resolve_target(f"{REPO}@v1")
    assert target.commit == V1 and len(calls) == 1
    assert calls[0]["repo_id"] == REPO and calls[0]["revision"] == "v1"
    assert calls[0]["allow_patterns"] == list(ALLOW_PATTERNS) and not calls[0]["local_files_only"]
    resolve_target(f"{REPO}@v1", gguf=GGUF.name)
    assert calls[1]["allow_patterns"] == [*ALLOW_PATTERNS, GGUF.name]
    resolve_target(f"{REPO}@{V1}")  # a commit never moves: the cache is asked first
    assert calls[2]["local_files_only"] is True


def test_fuzz_and_audit_take_a_hub_id_too(hub_cache, no_network, tmp_path) -> None:
    """``stacktok fuzz org/name`` and ``stacktok audit org/name`` check the cached snapshot."""
    import argparse

    from conformance.audit import command as audit_command
    from conformance.fuzz.command import add_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = config_from_args(parser.parse_args([REPO, "--examples", "5", "--out", str(tmp_path / "f")]))
    assert config.directory == hub_cache / "models--acme--stack100m" / "snapshots" / MAIN
    aparser = argparse.ArgumentParser()
    audit_command.add_arguments(aparser)
    args = aparser.parse_args([f"{REPO}@bogus", "--backends", "none", "--quiet"])
    with pytest.raises(UsageError, match="bogus"):
        audit_command.run_audit(args)


@pytest.mark.parametrize(
    "revision",
    ["../../../../tmp", "main/../../x", "refs/../..", "/etc", "a..b", ".hidden", "main/"],
)
def test_a_revision_that_is_no_git_name_is_refused_before_look_up(hub_cache, no_network, revision) -> None:
    """issue 37: ``org/name@..`` resolved outside the cache and was gated as if it were the repo."""
    with pytest.raises(UsageError, match="is not a valid revision") as err:
        resolve_target(f"{REPO}@{revision}")
    assert "\n" not in str(err.value)


def test_a_ref_pointing_out_of_the_snapshots_is_refused(hub_cache, no_network, tmp_path) -> None:
    """A cache ``refs/`` file whose content leads out of ``snapshots/`` is never followed."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "tokenizer.json").write_text("{}", encoding="utf-8")
    ref = hub_cache / "models--acme--stack100m" / "refs" / "evil"
    ref.write_text(os.path.relpath(outside, ref.parent.parent / "snapshots"), encoding="utf-8")
    with pytest.raises(UsageError, match="not a snapshot of the repository"):
        resolve_target(f"{REPO}@evil")
    assert resolve_target(f"{REPO}@v1").commit == V1  # a real ref still resolves
