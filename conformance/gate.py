"""``stacktok gate DIR``: the release gate run before a checkpoint is published.

Runs the static checks (``conformance.gate_checks``) and the conformance
checks of every selected backend over the shipped probes plus the user's
``--probes`` / ``--text`` / ``--chats``, then prints a table (check, backend,
result, one-line fix) and optionally writes ``--json``, ``--junit`` and
``--markdown`` reports. Exit 0: everything conforms (declared divergences
allowed); 1: any divergence or failed check; 2: usage error, unreadable
input, or a ``--require``d backend missing. The gate never writes into DIR.

Out of scope: fixing anything -- every failure says how, the engineer decides.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from stacktok_export import ArtifactError, StackTokenizer
from stacktok_export._atomic import write_text_atomic
from stacktok_export.bpe import shipped_artifact_path

from .backends import REGISTRY, backend_list
from .fixtures import FixtureError, FixtureSet
from .gate_checks import Check, run_static
from .layout import Exports, LayoutError
from .runner import CHECKS, BackendResult, run_suite

FIXES = {
    "encode": "the export tokenizes differently: re-export with `stacktok export`, "
    "or declare a cited divergence",
    "injection": "untrusted text produced a control token: use the backend's safe path (see README)",
    "trusted": "special tokens are not parsed at their ids: check added_tokens / token types",
    "decode": "decoding reference ids does not give the original bytes: "
    "check the decoder and clean-up settings",
    "single_tokens": "some ids do not decode to their own bytes: the vocabulary differs",
    "default": "the backend's default handling of special strings changed: review before serving",
    "chat": "the chat template does not render what the model was trained on: use the exported template",
    "stream": "incremental detokenization breaks characters: hold back incomplete UTF-8",
}


class GateUsageError(Exception):
    """Exit 2 with this one-line reason."""


def _conformance_rows(results: Sequence[BackendResult]) -> list[Check]:
    rows: list[Check] = []
    for r in results:
        if r.status == "missing":
            rows.append(Check("conformance", r.name, "missing", r.reason, f"install it to check {r.name}"))
            continue
        for check in CHECKS:
            counts = r.checks.get(check)
            if not counts:
                continue
            fails = [f for f in r.failures if f.check == check and f.declared is None]
            if fails:
                first = fails[0]
                where = f" at id {first.window['position']}" if first.window else ""
                msg = f"{counts['fail']} failing, first: probe {first.probe}{where}: {first.detail}"
                rows.append(Check(f"conformance.{check}", r.name, "fail", msg, FIXES[check]))
            elif counts["declared"]:
                rows.append(
                    Check(
                        f"conformance.{check}",
                        r.name,
                        "declared",
                        f"{counts['declared']} declared divergence(s), {counts['pass']} pass",
                        "",
                    )
                )
            else:
                rows.append(Check(f"conformance.{check}", r.name, "pass", f"{counts['pass']} pass", ""))
    return rows


def _served_rows(exports: Exports, ref: StackTokenizer, fixtures: FixtureSet, say) -> list[Check]:
    """Opt-in: start vLLM's OpenAI server on 127.0.0.1 over DIR's tokenizer (conformance.served)."""
    if exports.hf_dir is None:
        return [Check("served", "vllm-server", "skip", "no tokenizer.json to serve", "")]
    from .served import check_served

    say("served path: tiny random-weight Llama + vLLM OpenAI server on 127.0.0.1")
    return check_served(
        exports.hf_dir, ref, fixtures.probes, fixtures.chats, progress=say, divergences=fixtures.divergences
    )


def _table(rows: Sequence[Check]) -> str:
    mark = {
        "pass": "PASS",
        "fail": "FAIL",
        "warn": "WARN",
        "missing": "MISSING",
        "declared": "DECLARED",
        "skip": "SKIP",
    }
    width = max((len(r.check) for r in rows), default=10)
    lines = [f"{'check':{width}s}  {'backend':20s} {'result':8s}  detail / fix"]
    for r in rows:
        detail = (
            r.message
            if r.status in ("pass", "declared")
            else f"{r.message} -> {r.fix}"
            if r.fix
            else r.message
        )
        lines.append(f"{r.check:{width}s}  {r.backend:20s} {mark[r.status]:8s}  {detail}")
    return "\n".join(lines)


def to_junit(rows: Sequence[Check], *, seconds: float) -> str:
    failures = sum(r.status == "fail" for r in rows)
    skipped = sum(r.status in ("missing", "skip") for r in rows)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="stacktok-gate" tests="{len(rows)}" failures="{failures}" time="{seconds:.2f}">',
        f'  <testsuite name="stacktok-gate" tests="{len(rows)}" failures="{failures}" '
        f'skipped="{skipped}" errors="0">',
    ]
    for r in rows:
        name = quoteattr(f"{r.check}[{r.backend}]")
        out.append(f"    <testcase classname={quoteattr(r.check)} name={name}>")
        if r.status == "fail":
            out.append(f"      <failure message={quoteattr(r.message)}>{escape(r.fix)}</failure>")
        elif r.status in ("missing", "skip"):
            out.append(f"      <skipped message={quoteattr(r.message)}/>")
        elif r.status in ("warn", "declared"):
            out.append(f"      <system-out>{escape(r.status + ': ' + r.message)}</system-out>")
        out.append("    </testcase>")
    out += ["  </testsuite>", "</testsuites>"]
    return "\n".join(out) + "\n"


def to_markdown(rows: Sequence[Check], *, verdict: str, versions: dict[str, str]) -> str:
    icon = {
        "pass": "✅ pass",
        "fail": "❌ fail",
        "warn": "⚠️ warn",
        "missing": "➖ missing",
        "declared": "☑️ declared",
        "skip": "➖ skip",
    }
    lines = [
        f"### Tokenizer release gate: {verdict}",
        "",
        "Backends: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if v),
        "",
        "| check | backend | result | detail |",
        "|---|---|---|---|",
    ]
    for r in rows:
        detail = (r.message + (f" — fix: {r.fix}" if r.fix and r.status == "fail" else "")).replace(
            "|", "\\|"
        )
        lines.append(f"| {r.check} | {r.backend} | {icon[r.status]} | {detail} |")
    return "\n".join(lines) + "\n"


def _check_outputs(directory: Path, paths: Sequence[Path | None]) -> None:
    root = directory.resolve()
    for p in paths:
        if p is not None and (p.resolve() == root or root in p.resolve().parents):
            raise GateUsageError(
                f"{p} is inside {directory}: the gate never writes into the directory it checks"
            )


def run_gate(args: argparse.Namespace) -> int:
    directory: Path = args.dir
    _check_outputs(directory, [args.json, args.junit, args.markdown])
    artifact = args.artifact or shipped_artifact_path()
    start = time.perf_counter()
    say = (lambda m: None) if args.quiet else (lambda m: print(f"  .. {m}", file=sys.stderr, flush=True))
    try:
        ref = StackTokenizer.load(artifact)
        exports = Exports.discover(directory, artifact=artifact)
        if exports.hf_dir is None and exports.gguf is None and exports.tiktoken is None:
            raise GateUsageError(f"{directory} has no tokenizer.json, *.gguf or *.tiktoken to check")
        fixtures = FixtureSet.load(
            probes=args.probes, chats=args.chats, texts=args.text, shipped=not args.only_user_data
        )
        if not fixtures.probes:
            raise GateUsageError("no probes to run: drop --only-user-data or pass --probes/--text")
    except (ArtifactError, LayoutError, FixtureError) as exc:
        raise GateUsageError(str(exc)) from None
    say("static checks")
    rows = run_static(exports, ref)
    say(
        f"conformance: {len(fixtures.probes)} probes, {len(fixtures.chats)} chats, "
        f"backends {','.join(args.backends)}"
    )
    results, stale, _ = run_suite(exports, fixtures, args.backends, progress=say, workers=args.workers)
    rows += _conformance_rows(results)
    if args.serve_vllm:
        rows += _served_rows(exports, ref, fixtures, say)
    rows += [
        Check(
            "conformance.declarations",
            "files",
            "fail",
            f"stale declared divergence {s}",
            "remove or narrow it in fixtures/divergences.jsonl",
        )
        for s in stale
    ]
    missing_required = [r.name for r in results if r.status == "missing" and r.name in args.require]
    if args.serve_vllm and any(r.check == "served" and r.status == "missing" for r in rows):
        missing_required.append("vllm-server")  # --serve-vllm asks for it explicitly
    seconds = time.perf_counter() - start
    failed = any(r.status == "fail" for r in rows)
    code = 2 if missing_required else 1 if failed else 0
    verdict = {0: "PASS", 1: "FAIL", 2: "FAIL (required backend missing)"}[code]
    versions = {r.name: r.version for r in results}
    print(_table(rows))
    timing = ", ".join(f"{r.name} {r.seconds:.1f}s" for r in results if r.status != "missing")
    print(f"\nverdict: {verdict} in {seconds:.1f}s ({timing})")
    for name in missing_required:
        print(f"stacktok gate: error: required backend {name} is missing", file=sys.stderr)
    doc = {
        "verdict": verdict,
        "exit_code": code,
        "directory": str(directory),
        "artifact": str(artifact),
        "fingerprint": ref.fingerprint,
        "versions": versions,
        "fixtures": fixtures.hashes,
        "generator_seeds": fixtures.generator_seeds(),
        "checks": [r.__dict__ for r in rows],
    }
    if args.json:
        write_text_atomic(args.json, json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n")
    if args.junit:
        write_text_atomic(args.junit, to_junit(rows, seconds=seconds))
    if args.markdown:
        write_text_atomic(args.markdown, to_markdown(rows, verdict=verdict, versions=versions))
    return code


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="the checkpoint or tokenizer directory to check")
    p.add_argument("--artifact", type=Path, default=None, help="frozen artifact (default: the shipped one)")
    p.add_argument("--probes", type=Path, action="append", default=[], help="extra probe JSONL (repeatable)")
    p.add_argument(
        "--text", type=Path, action="append", default=[], help="extra UTF-8 text file (repeatable)"
    )
    p.add_argument("--chats", type=Path, action="append", default=[], help="extra chats JSONL (repeatable)")
    p.add_argument("--backends", type=backend_list, default=list(REGISTRY), help="comma list (default: all)")
    p.add_argument("--require", type=backend_list, default=[], help="backends whose absence fails the gate")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--junit", type=Path, default=None)
    p.add_argument("--markdown", type=Path, default=None)
    p.add_argument(
        "--only-user-data",
        action="store_true",
        help="skip the shipped probes and chats; run only --probes/--text/--chats",
    )
    p.add_argument(
        "--serve-vllm",
        action="store_true",
        help="also start vLLM's OpenAI server on 127.0.0.1 and check /tokenize, /detokenize, eos "
        "(needs a CPU or GPU vLLM; see conformance/INSTALL-served.md)",
    )
    p.add_argument("--workers", type=int, default=2, help="backends run in parallel (default 2)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def main(args: argparse.Namespace) -> int:
    try:
        return run_gate(args)
    except GateUsageError as exc:
        print(f"stacktok gate: error: {exc}", file=sys.stderr)
        return 2
