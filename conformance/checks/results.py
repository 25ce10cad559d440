"""What a backend's run found, and the rows it becomes (``result_rows``).

:class:`BackendResult` is the runner's record of one backend: its status (``ok``,
``diverged``, or -- when it never ran -- ``missing`` / ``skip`` / ``error``, or ``crashed``
when its process died on the way: a signal, a stall, its memory budget), tallies per check
and every :class:`Failure` with its first-difference window.
:func:`result_rows` turns results into :class:`~conformance.core.rows.Row` values:
one per (backend, check) in :data:`CHECK_CAPS` order, then one per stale declaration.
The gate's reports are compared byte for byte across releases: the row order and
every message here are part of its output.

Out of scope: running the checks (``conformance.checks.compare``), exit codes
(``conformance.core.rows``) and rendering (``conformance.report``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.checks.template_chats import refused_shapes_note
from conformance.core.protocol import Capability
from conformance.core.rows import Row, skip

STREAM_MAX_CHARS = 20_000  # streaming is per token: skip the megabyte probes
#: statuses of a backend that did not run to the end: one row each (``conformance``), no check rows
NOT_RUN = ("missing", "skip", "error", "crashed")


@dataclass
class Failure:
    check: str
    probe: str
    detail: str
    window: dict[str, Any] | None = None
    declared: str | None = None  # id of the covering declaration


@dataclass
class BackendResult:
    name: str
    version: str = ""
    status: str = "ok"  # ok | diverged | missing | skip (no export) | error (cannot load) | crashed
    reason: str = ""
    seconds: float = 0.0
    checks: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    default_behaviour: str = ""
    chat_injection_counts: dict[str, int] = field(default_factory=dict)  # safe / unsafe / raises
    chat_injection_safe_path: str | None = None  # the backend's own safe chat path, if it has one
    not_streamed: int = 0  # probes over STREAM_MAX_CHARS (named in the stream row)
    chats_not_applicable: int = 0  # chats the backend cannot take (e.g. no assistant turn for TRL)
    #: conversations DIR's template raises on, on the reference and this backend alike (id (shape))
    chat_shapes_refused: list[str] = field(default_factory=list)
    capabilities: tuple[str, ...] = ()
    #: checks that do not apply to this artifact, with why (an imported artifact's chat rows)
    not_applicable: dict[str, str] = field(default_factory=dict)
    probes_run: int = 0
    probes_identical: int = 0
    probes_diverged: int = 0
    probes_declared: int = 0

    @property
    def chat_injection(self) -> str:
        """Empty when no injected chat ran, else "unsafe" (any became control tokens) or "safe"."""
        if not self.chat_injection_counts:
            return ""
        return "unsafe" if self.chat_injection_counts.get("unsafe") else "safe"

    def tally(self, check: str, outcome: str) -> None:
        counts = self.checks.setdefault(check, {"pass": 0, "fail": 0, "declared": 0})
        counts[outcome] += 1


@dataclass(frozen=True)
class Part:
    """Probes ``start:stop`` of a fixture set, and whether the once-per-backend checks (single
    tokens, default, chats) run with them: a share of one backend's run (parts in order, the
    last one carrying those checks, join into the whole run: :func:`merge_parts`)."""

    start: int
    stop: int
    extras: bool


def merge_parts(parts: Sequence[BackendResult]) -> BackendResult:
    """One backend's result from the results of its :class:`Part` runs, given in probe order (the
    last one ran the once-per-backend checks): equal to the result of one whole run, the time
    aside (``seconds`` is the parts' sum). A part that did not run (missing, skip, error) is the
    result: every part loads the same files the same way; so is a part whose process died
    (crashed): the backend has no whole run to report."""
    for r in parts:
        if r.status in NOT_RUN:
            return r
    first = parts[0]
    out = BackendResult(
        name=first.name,
        version=first.version,
        capabilities=first.capabilities,
        chat_injection_safe_path=first.chat_injection_safe_path,
        not_applicable=dict(first.not_applicable),
    )
    for r in parts:
        for check, counts in r.checks.items():
            mine = out.checks.setdefault(check, {"pass": 0, "fail": 0, "declared": 0})
            for outcome, n in counts.items():
                mine[outcome] += n
        for key, n in r.chat_injection_counts.items():
            out.chat_injection_counts[key] = out.chat_injection_counts.get(key, 0) + n
        out.failures += r.failures
        out.default_behaviour = r.default_behaviour or out.default_behaviour
        out.seconds += r.seconds
        out.not_streamed += r.not_streamed
        out.chats_not_applicable += r.chats_not_applicable
        out.chat_shapes_refused += r.chat_shapes_refused
        out.probes_run += r.probes_run
        out.probes_identical += r.probes_identical
        out.probes_diverged += r.probes_diverged
        out.probes_declared += r.probes_declared
        if r.status == "diverged":
            out.status = "diverged"
    out.seconds = round(out.seconds, 2)
    return out


# --------------------------------------------------------------------- rows
FIXES = {
    "encode": "the export tokenizes differently: re-export with `stacktok export`, "
    "or declare a cited divergence in fixtures/divergences.jsonl",
    "injection": "untrusted text produced a control token: use the backend's safe path "
    "(docs/exports.md: Loading the exports safely) and check the special tokens' flags / token types",
    "trusted": "special tokens are not parsed at their ids: check added_tokens / token types",
    "decode": "decoding reference ids does not give the original bytes: "
    "check the decoder and clean-up settings",
    "single_tokens": "some ids do not decode to their own bytes: the vocabulary differs",
    "default": "the backend's default handling of special strings changed: review it before serving",
    "chat": "the chat template does not render what the model was trained on: use the exported template",
    "chat_injection": "build chat ids with stacktok_export.chat.chat.render_conversation (role markers by "
    "id, content as untrusted text) for any content a user typed",
    "stream": "incremental detokenization breaks characters: hold back incomplete UTF-8",
}
#: the fix of a ``crashed`` backend's row
CRASHED_FIX = (
    "{name} ended its process on this input, so a server using {name} would too: reproduce it with "
    "`stacktok gate DIR --backends {name}`, then fix the file or report it to {name}'s maintainers; "
    "on a slow or small machine raise STACKTOK_STALL_SECONDS or STACKTOK_MEMORY_BUDGET"
)
#: every conformance check, in report order, with the capability that makes it apply
CHECK_CAPS = {
    "encode": Capability.ENCODE,
    "injection": Capability.ENCODE,
    "trusted": Capability.TRUSTED,
    "decode": Capability.DECODE,
    "single_tokens": Capability.SINGLE_TOKENS,
    "default": Capability.DEFAULT,
    "chat": Capability.CHAT,
    "chat_injection": Capability.CHAT,
    "stream": Capability.STREAM,
}


def result_rows(
    results: Sequence[BackendResult], *, stale: Sequence[str] = (), imported: bool = False
) -> list[Row]:
    """Every finding of the runner as rows: one per (backend, check), plus stale declarations.

    A stale declaration fails for our own artifact (the fixtures are written for it); for an
    imported reference (``imported``) it warns: a declaration about our vocabulary may simply
    not apply to another (e.g. a pre type with llama.cpp's clean_spaces off)."""
    rows: list[Row] = []
    for r in results:
        if r.status in NOT_RUN:
            rows.append(_absent_row(r))
            continue
        for check, cap in CHECK_CAPS.items():
            rows.append(_check_row(r, check, cap))
    rows += [
        Row(
            "conformance.declarations",
            "files",
            "warn" if imported else "fail",
            f"declared divergence {s} matched nothing although the data could show it (stale)"
            + (" -- it may not apply to this imported vocabulary" if imported else ""),
            "remove or narrow it in fixtures/divergences.jsonl",
        )
        for s in stale
    ]
    return rows


def _absent_row(r: BackendResult) -> Row:
    if r.status == "missing":
        return Row("conformance", r.name, "missing", r.reason, f"install it to check {r.name}: {r.reason}")
    if r.status == "skip":
        return skip("conformance", r.reason, backend=r.name)
    if r.status == "crashed":  # "llama.cpp died with SIGSEGV on probe long-a-1m"
        return Row("conformance", r.name, "error", f"{r.name} {r.reason}", CRASHED_FIX.format(name=r.name))
    return Row(
        "conformance",
        r.name,
        "error",
        f"{r.name} cannot load the directory: {r.reason}",
        "every serving stack that uses this library will fail the same way: fix the file it names",
    )


def _check_row(r: BackendResult, check: str, cap: Capability) -> Row:
    name = f"conformance.{check}"
    if cap.value not in r.capabilities:
        return Row(name, r.name, "skip", f"not applicable: {r.name} has no {cap.value} path")
    if check in r.not_applicable:
        return skip(name, r.not_applicable[check], backend=r.name)
    if check == "chat_injection":
        return _chat_injection_row(r)
    counts = r.checks.get(check)
    if not counts:
        why = "no probe or chat exercised it"
        if check == "chat" and r.chats_not_applicable:
            why = f"{r.chats_not_applicable} chat(s) not applicable ({r.name} needs an assistant turn)"
        return Row(name, r.name, "skip", f"not run: {why}")
    fails = [f for f in r.failures if f.check == check and f.declared is None]
    if fails:
        first = fails[0]
        where = f" at id {first.window['position']}" if first.window and "position" in first.window else ""
        msg = f"{counts['fail']} failing, first: {first.probe}{where}: {first.detail}"
        return Row(name, r.name, "fail", msg, FIXES[check], window=first.window)
    declared = sorted({f.declared for f in r.failures if f.check == check and f.declared})
    msg = f"{counts['pass']} pass"
    if counts["declared"]:
        msg += f", {counts['declared']} declared ({', '.join(declared)})"
    if check == "default":
        return _default_row(r, msg)
    if check == "stream" and r.not_streamed:
        msg += f"; {r.not_streamed} probe(s) over {STREAM_MAX_CHARS:,} chars not streamed (per-token cost)"
    if check == "chat" and r.chats_not_applicable:
        msg += f"; {r.chats_not_applicable} chat(s) without an assistant turn not applicable to {r.name}"
    if check == "chat":
        msg += refused_shapes_note(r.chat_shapes_refused)
    return Row(name, r.name, "pass", msg, declared=counts["declared"])


def _default_row(r: BackendResult, msg: str) -> Row:
    if r.default_behaviour == "unsafe":
        return Row(
            "conformance.default",
            r.name,
            "warn",
            f"{msg}; with no flags {r.name} turns typed special strings into control tokens (unsafe, "
            "as recorded in fixtures/defaults.json)",
            FIXES["injection"],
        )
    return Row("conformance.default", r.name, "pass", f"{msg}; default is {r.default_behaviour}")


def _chat_injection_row(r: BackendResult) -> Row:
    counts = r.chat_injection_counts
    total = sum(counts.values())
    if not total:
        return Row(
            "conformance.chat_injection", r.name, "skip", "not run: no chat content holds a special string"
        )
    unsafe = counts.get("unsafe", 0)
    if not unsafe:
        return Row(
            "conformance.chat_injection", r.name, "pass", f"{total} chat(s) keep typed specials as text"
        )
    msg = (
        f"{unsafe}/{total} chat(s) with special strings in content became control tokens "
        f"in {r.name}'s chat path"
    )
    if r.chat_injection_safe_path:
        return Row(
            "conformance.chat_injection",
            r.name,
            "fail",
            msg
            + f" although {r.name} has a safe path ({r.chat_injection_safe_path}) that the settings defeat",
            f"restore the safe path: {r.chat_injection_safe_path}",
        )
    return Row(
        "conformance.chat_injection",
        r.name,
        "warn",
        msg + f" ({r.name} offers no safe path for string templates{_cite(r.name)})",
        FIXES["chat_injection"],
    )


def _cite(name: str) -> str:
    """The issue that says a library renders string templates with specials parsed: transformers'
    (vLLM and TRL render through it); llama-cpp-python's handler does the same, with no issue."""
    return ", transformers#29279" if name.startswith("transformers") or name in ("vllm", "trl") else ""
