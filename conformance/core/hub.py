"""What a command's target names: a local directory, or a Hub id ``org/name[@revision]``.

:func:`resolve_target` turns the argument of ``stacktok gate`` (and ``fuzz``, ``audit``) into a
:class:`Target`: the local directory to check plus, for a Hub id, the repository, the revision
asked for and the commit it resolved to. A string that is an existing local path is always that
path, never a repo id (``acme/stack100m`` beside you wins over the Hub's). A Hub id goes through
huggingface_hub's cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``, read when called):

- with ``HF_HUB_OFFLINE=1`` only the cache is read; a 40-hex commit is read from the cache
  when it is there (a commit never changes), else fetched;
- a branch or tag (``main`` by default): ``snapshot_download`` asks the Hub where it points now
  (a branch moves; the cache alone could check a stale ``main``), reuses every cached blob and
  fetches only what the gate reads (:data:`ALLOW_PATTERNS`: tokenizer, config and chat-template
  files); when the Hub cannot be reached, huggingface_hub falls back to the cache;
- never weights: a GGUF is fetched only when named with ``gguf=`` (``--gguf FILE``).

A snapshot's files are symlinks into ``blobs/``; that is the normal layout and is read as is.
Every failure (no such repo or revision, not cached while offline, huggingface_hub absent) is a
one-line :class:`~conformance.core.errors.UsageError` naming the fix (exit 2).

    >>> resolve_target("tokenizer/stack100m-32768-hf").repo is None  # doctest: +SKIP
    True

Out of scope: checking what was fetched (``conformance.validate``), datasets and spaces (models
only), writing anything but huggingface_hub's own cache.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.core.errors import UsageError

#: what a Hub run fetches: the files the gate reads, never weights
ALLOW_PATTERNS = (
    *("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"),
    *("config.json", "generation_config.json", "chat_template.jinja", "chat_template.json"),
    *("additional_chat_templates/*.jinja", "*.tiktoken", "vocab.json", "merges.txt"),
)

#: ``org/name`` or ``org/name@revision`` (a revision may hold ``/``: ``refs/pr/1``)
HUB_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>\S+))?")
COMMIT = re.compile(r"[0-9a-f]{40}")
#: a branch, tag or commit: git's ref-name characters (``refs/pr/1``, ``v1.0``, ``main``), at most 255
REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,254}")
_TRUE = {"1", "ON", "YES", "TRUE"}


@dataclass(frozen=True)
class Target:
    """What a command checks: ``directory``, and where it came from when it is a Hub snapshot.

    ``repo`` / ``revision`` / ``commit`` are None for a local directory; ``gguf`` is the GGUF asked
    for with ``--gguf`` (inside the snapshot), None otherwise.
    """

    directory: Path
    repo: str | None = None
    revision: str | None = None
    commit: str | None = None
    gguf: Path | None = None

    def to_json(self) -> dict[str, Any]:
        """The report's ``inputs``: ``kind`` ("directory" or "hub"), the directory, repo, revision,
        commit and GGUF (null where they do not apply)."""
        return {
            "kind": "directory" if self.repo is None else "hub",
            "directory": str(self.directory),
            "repo": self.repo,
            "revision": self.revision,
            "commit": self.commit,
            "gguf": None if self.gguf is None else str(self.gguf),
        }

    def describe(self) -> str:
        """``DIR`` or ``org/name@revision (commit C)``: what a message or report says was checked."""
        return describe_inputs(self.to_json())


def describe_inputs(inputs: dict[str, Any]) -> str:
    """The words for a report's ``inputs`` (:meth:`Target.to_json`): the directory, or
    ``org/name@revision (commit C)`` for a Hub id."""
    if inputs["kind"] != "hub":
        return inputs["directory"]
    return f"{inputs['repo']}@{inputs['revision']} (commit {inputs['commit']})"


def resolve_target(arg: str | os.PathLike[str], *, gguf: str | None = None) -> Target:
    """The directory ``arg`` names: itself when it exists locally (or is no Hub id), else the
    cached or fetched snapshot of the Hub repository ``org/name[@revision]``."""
    text = os.fspath(arg)
    match = HUB_ID.fullmatch(text)
    if os.path.lexists(text) or match is None:
        if gguf is not None:
            raise UsageError(
                f"--gguf {gguf} names a file in a Hub repository (org/name[@revision]); "
                f"{text} is a local path: put the GGUF in it instead"
            )
        return Target(directory=Path(text))
    repo, revision = match["repo"], match["revision"] or "main"
    check_revision(repo, revision)
    folder = _snapshot(repo, revision, gguf=gguf)
    _refuse_escape(repo, revision, folder)
    commit = folder.name
    found = None
    if gguf is not None:
        found = folder / gguf
        if not found.is_file():
            raise UsageError(
                f"{repo}@{revision}: {gguf} is not in the snapshot {folder}; "
                f"check the file name, or run `hf download {repo} {gguf} --revision {revision}`"
            )
    return Target(directory=folder, repo=repo, revision=revision, commit=commit, gguf=found)


def check_revision(repo: str, revision: str) -> None:
    """A revision is a branch, tag or commit as git names them (``main``, ``v1.0``, ``refs/pr/1``,
    40 hex digits): a ``..`` part, a leading or doubled ``/`` or a character git refuses could lead
    the cache look-up out of the repository's folder, so it is a usage error before any look-up."""
    parts = revision.split("/")
    bad = (
        not REVISION.fullmatch(revision)
        or any(part in ("", ".", "..") or part.startswith(".") or part.endswith(".lock") for part in parts)
        or ".." in revision
    )
    if bad:
        raise UsageError(
            f"{repo}@{revision}: {revision!r} is not a valid revision (a branch, tag or commit: letters, "
            "digits, '.', '_', '-', '/' between names, no '..'); check the id"
        )


def _refuse_escape(repo: str, revision: str, folder: Path) -> None:
    """The snapshot must be a commit folder of the repository's own ``snapshots/`` in the cache
    (whatever a ref file in the cache says)."""
    from huggingface_hub.file_download import repo_folder_name

    expected = Path(os.path.realpath(cache_dir() / repo_folder_name(repo_id=repo, repo_type="model")))
    real = Path(os.path.realpath(folder))
    if real.parent != expected / "snapshots" or not COMMIT.fullmatch(real.name):
        raise UsageError(
            f"{repo}@{revision}: resolved to {folder}, which is not a snapshot of the repository in the "
            "Hugging Face cache; check the cache (`hf cache scan`) and the revision"
        )


def cache_dir() -> Path:
    """huggingface_hub's cache, from the environment as it is now (huggingface_hub reads it once,
    at import): ``HF_HUB_CACHE``, ``HUGGINGFACE_HUB_CACHE``, ``HF_HOME/hub``, else its default."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or the older ``TRANSFORMERS_OFFLINE``) forbids the network."""
    return any(os.environ.get(n, "").upper() in _TRUE for n in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _snapshot(repo: str, revision: str, *, gguf: str | None) -> Path:
    """The snapshot folder of ``repo@revision`` (see the module docstring for cache vs Hub)."""
    try:
        import huggingface_hub as hub
        from huggingface_hub import errors
    except ImportError:
        raise UsageError(
            f"{repo} is not a local path, and reading it as a Hub id needs huggingface_hub: "
            "pip install 'stacktok[hf]' (or pass a directory)"
        ) from None
    cache, patterns = cache_dir(), [*ALLOW_PATTERNS, *([gguf] if gguf else [])]
    # a commit never moves: the cache answers when it has it; a branch or tag is asked of the Hub
    cache_only = offline()
    first = cache_only or COMMIT.fullmatch(revision) is not None
    try:
        try:
            found = hub.snapshot_download(
                repo, revision=revision, cache_dir=cache, allow_patterns=patterns, local_files_only=first
            )
        except errors.LocalEntryNotFoundError:
            if cache_only or not first:
                raise
            found = hub.snapshot_download(repo, revision=revision, cache_dir=cache, allow_patterns=patterns)
    except errors.HFValidationError as exc:
        raise UsageError(f"{repo}: not a directory here and not a valid Hub id ({_first(exc)})") from None
    except errors.RepositoryNotFoundError:
        raise UsageError(
            f"{repo}: not a local path, and no such repository on the Hub (or it is private or gated): "
            "check the name, or log in with `hf auth login`"
        ) from None
    except errors.RevisionNotFoundError:
        raise UsageError(f"{repo}@{revision}: the repository has no revision {revision!r}") from None
    except errors.LocalEntryNotFoundError as exc:
        raise UsageError(_not_cached(repo, revision, cache=cache, exc=exc)) from None
    except (errors.HfHubHTTPError, OSError) as exc:
        raise UsageError(f"{repo}@{revision}: the Hub refused or failed: {_first(exc)}") from None
    return Path(found)


def _not_cached(repo: str, revision: str, *, cache: Path, exc: BaseException) -> str:
    """Why ``repo@revision`` is not in the cache, and the one command that puts it there."""
    from huggingface_hub.file_download import repo_folder_name

    storage = cache / repo_folder_name(repo_id=repo, repo_type="model")
    why = "HF_HUB_OFFLINE=1" if offline() else "the Hub could not be reached"
    fix = f"`hf download {repo}" + ("`" if revision == "main" else f" --revision {revision}`")
    fix += " or unset HF_HUB_OFFLINE" if offline() else ""
    if type(exc).__name__ == "IncompleteSnapshotError":  # huggingface_hub >= 1.x: a partial download
        return f"{repo}@{revision}: the cached snapshot is incomplete ({_first(exc)[:120]}); run {fix}"
    if not storage.is_dir():
        return f"{repo} is not a local path, not in the local cache ({cache}), and {why}: run {fix}"
    have = ", ".join(_cached_revisions(storage)) or "none"
    where = f"{repo}@{revision}: revision {revision!r}"
    return f"{where} is not in the local cache (cached: {have}) and {why}: run {fix}"


def _cached_revisions(storage: Path) -> list[str]:
    """The branch/tag names under ``refs/`` and the commits under ``snapshots/``, sorted."""
    refs = storage / "refs"
    names = [p.relative_to(refs).as_posix() for p in refs.rglob("*") if p.is_file()] if refs.is_dir() else []
    snaps = [p.name for p in (storage / "snapshots").glob("*") if p.is_dir()]
    return sorted(names) + sorted(snaps)


def _first(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:200] if lines else type(exc).__name__
