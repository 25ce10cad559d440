"""The ``served.*`` rows asked of a running server, compared with the reference tokenizer.

- ``served.tokenize_prompt``: ``POST /tokenize {"prompt", "add_special_tokens":
  false}`` equals the reference's *trusted* ids (``allowed_special="all"``):
  vLLM parses special strings in request text, so trusted ids are what it
  must match.
- ``served.injection`` (*warn*, never *pass*, when it happens): the same
  text as a client sends it by default (``{"prompt"}`` only) turns typed
  special strings into control tokens where the untrusted reference has
  none; chats with special strings in content likewise (string template).
  vLLM has no per-request safe path; the fix says what to do instead.
- ``served.tokenize_messages``: ``POST /tokenize {"messages",
  "add_generation_prompt"}`` equals ``render_conversation`` ids, for chats
  without special strings in content.
- ``served.detokenize``: ``POST /detokenize {"tokens": reference ids}``
  returns the original text (trusted and untrusted ids).
- ``served.eos`` (:func:`eos_row`): generation (``/v1/completions``,
  ``temperature=0``, ``logit_bias`` +100 on one id, ``max_tokens=3``) stops
  after one token for ``<|eos|>`` and ``<|end|>`` and does not stop for
  ``<|pad|>`` / ``<|assistant|>`` -- the served generation config really ends
  turns (vllm#4180).
- ``served.shutdown`` (:func:`shutdown_row`): the whole process group exited;
  nothing left.
- ``served.declarations`` (first, only when it applies): declarations were
  given but no adapter could match them (:mod:`conformance.served.declarations`).

Out of scope: starting and stopping the server (:mod:`conformance.served.server`),
``served.start`` and the order of a whole run (:func:`conformance.served.check_served`),
sampling quality (the weights are random).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conformance.checks.windows import first_difference
from conformance.core.declared import Declarations
from conformance.core.rows import Row
from conformance.served.client import UNREACHABLE, HttpError
from conformance.served.declarations import drift_proxy
from conformance.served.fixes import (
    BACKEND,
    FIX_DETOKENIZE,
    FIX_EOS,
    FIX_INJECTION,
    FIX_MESSAGES,
    FIX_PROMPT,
)
from conformance.served.items import Item, chat_items, probe_items
from conformance.served.server import ProgressCallback, Server
from conformance.served.tally import Budget, Tally, run_items
from stacktok_export import StackTokenizer
from stacktok_export.chat.chat import ChatFormatError, render_conversation


def excerpt(text: str, n: int = 40) -> str:
    return repr(text if len(text) <= n else text[:n] + "…")


def served_rows(
    server: Server,
    ref: StackTokenizer,
    probes: Sequence[Any],
    chats: Sequence[Any],
    *,
    budget: Budget,
    divergences: Sequence[Any] = (),
    progress: ProgressCallback = None,
    tokenizer_json: Path | None = None,
) -> list[Row]:
    say = progress or (lambda _m: None)
    specials = sorted(ref.special_to_id, key=len, reverse=True)
    first_special = min(ref.special_to_id.values())
    items = probe_items(probes)
    model = server.model

    declarations = Declarations(divergences, ref) if divergences else None
    proxy, no_proxy = None, None
    if divergences and tokenizer_json:
        proxy, no_proxy = drift_proxy(tokenizer_json, server.version)
    rows: list[Row] = [] if no_proxy is None else [no_proxy]

    def tally(check: str, fix: str) -> Tally:
        return Tally(check, fix, declarations, proxy)

    def control(ids: Sequence[int]) -> list[int]:
        return [i for i in ids if i >= first_special]

    # -- /tokenize prompt (trusted ids) and the injection finding
    say(f"served: /tokenize over {len(items)} probes")
    tok = tally("served.tokenize_prompt", FIX_PROMPT)
    inj_prompt = {"n": 0, "hit": 0, "first": ""}

    def one_prompt(item: Item) -> None:
        text = item.text
        try:
            want = ref.encode(text, allowed_special="all")
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: not sendable as UTF-8 JSON either
            tok.skipped += 1
            return
        tok.n += 1
        body = {"model": model, "prompt": text, "add_special_tokens": False}
        got = server.request("/tokenize", body)["tokens"]
        tok.compare_ids(item, got, want, label=f"probe {item.id} ({excerpt(text)})", against="reference")
        if any(sp in text for sp in specials):
            inj_prompt["n"] += 1
            default = server.request("/tokenize", {"model": model, "prompt": text})["tokens"]
            injected = control(default)
            if injected and not control(ref.encode(text)):
                inj_prompt["hit"] += 1
                if not inj_prompt["first"]:
                    inj_prompt["first"] = f"probe {item.id} ({excerpt(text)}) -> control ids {injected[:6]}"

    run_items(tok, budget, items, one_prompt)
    rows.append(tok.row())

    # -- /tokenize messages
    chats_sent = chat_items(chats)
    say(f"served: /tokenize over {len(chats_sent)} chat renders")
    msg = tally("served.tokenize_messages", FIX_MESSAGES)
    inj_chat = {"n": 0, "hit": 0, "first": ""}

    def one_chat(item: Item) -> None:
        messages, gen = [dict(m) for m in item.messages], item.add_generation_prompt
        try:
            want, _mask = render_conversation(messages, ref, add_generation_prompt=gen)
        except ChatFormatError:
            msg.skipped += 1  # not a conversation the chat format can represent
            return
        has_special = any(sp in str(m.get("content", "")) for m in messages for sp in specials)
        if not has_special:
            msg.n += 1
        body = {"model": model, "messages": messages, "add_generation_prompt": gen}
        got = server.request("/tokenize", body)["tokens"]
        if has_special:
            inj_chat["n"] += 1
            if got != want:
                inj_chat["hit"] += 1
                if not inj_chat["first"]:
                    inj_chat["first"] = (
                        f"chat {item.id}: {len(control(got))} control ids vs {len(control(want))} intended"
                    )
            return
        msg.compare_ids(item, got, want, label=f"chat {item.id}", against="render_conversation")

    run_items(msg, budget, chats_sent, one_chat)
    rows.append(msg.row("chat renders"))

    # -- the injection finding (prompt and messages)
    hits = inj_prompt["hit"] + inj_chat["hit"]
    where = (
        f"{inj_prompt['hit']} of {inj_prompt['n']} probes with special strings (default /tokenize "
        f"prompt) and {inj_chat['hit']} of {inj_chat['n']} chats with special strings in content "
        f"became control tokens"
    )
    if hits:
        first = inj_prompt["first"] or inj_chat["first"]
        rows.append(Row("served.injection", BACKEND, "warn", f"{where}; first: {first}", FIX_INJECTION))
    elif inj_prompt["n"] + inj_chat["n"]:
        rows.append(Row("served.injection", BACKEND, "pass", where, ""))
    else:
        rows.append(Row("served.injection", BACKEND, "skip", "no probe or chat holds a special string", ""))

    # -- /detokenize of the reference's trusted and untrusted ids
    say(f"served: /detokenize over {len(items)} probes")
    det = tally("served.detokenize", FIX_DETOKENIZE)

    def one_detok(item: Item) -> None:
        text = item.text
        try:
            text.encode("utf-8")
            variants = {
                "trusted": ref.encode(text, allowed_special="all"),
                "untrusted": ref.encode(text),
            }
        except UnicodeEncodeError:
            det.skipped += 1
            return
        det.n += 1
        seen: list[list[int]] = []
        for kind, ids in variants.items():
            if not ids or ids in seen:
                continue
            seen.append(ids)
            got = server.request("/detokenize", {"model": model, "tokens": ids})["prompt"]
            if got != text:
                pos = first_difference(got, text)
                det.fail(
                    item,
                    f"probe {item.id} ({kind} ids) at char {pos}: "
                    f"server {excerpt(got[max(0, pos - 5) : pos + 10])} "
                    f"vs {excerpt(text[max(0, pos - 5) : pos + 10])}",
                )
                return

    run_items(det, budget, items, one_detok)
    rows.append(det.row())

    # -- eos: does generation stop at <|eos|> / <|end|> and only there? (last: it runs the model)
    say("served: eos through /v1/completions")
    rows.append(eos_row(server, ref))
    return rows


def eos_row(server: Server, ref: StackTokenizer) -> Row:
    """Force one token with logit_bias and see whether the served generation config stops on it."""
    ids = ref.special_to_id
    stop = [t for t in ("<|eos|>", "<|end|>") if t in ids]
    go = [t for t in ("<|pad|>", "<|assistant|>") if t in ids]
    prompt, _ = render_conversation([{"role": "user", "content": "Hi"}], ref, add_generation_prompt=True)
    wrong = []
    for name in stop + go:
        body = {
            "model": server.model,
            "prompt": prompt,
            "max_tokens": 3,
            "temperature": 0,
            "logit_bias": {str(ids[name]): 100},
            "skip_special_tokens": False,
        }
        try:
            out = server.request("/v1/completions", body, timeout=120)
        except (HttpError, *UNREACHABLE) as exc:
            return Row(
                "served.eos", BACKEND, "fail", f"generation failed while forcing {name}: {exc}", FIX_EOS
            )
        choice = out["choices"][0]
        stopped = choice.get("finish_reason") == "stop" and out["usage"]["completion_tokens"] == 1
        if stopped != (name in stop):
            wrong.append(
                f"{name} ({ids[name]}) {'stops' if stopped else 'does not stop'} generation "
                f"(finish_reason={choice.get('finish_reason')}, {out['usage']['completion_tokens']} tokens)"
            )
    if wrong:
        return Row("served.eos", BACKEND, "fail", "; ".join(wrong), FIX_EOS)
    return Row(
        "served.eos",
        BACKEND,
        "pass",
        f"generation stops at {' and '.join(stop)}, not at {' or '.join(go)}",
        "",
    )


def shutdown_row(server: Server) -> Row:
    n = len(server.tree)
    how = "SIGKILL was needed" if server.killed else "SIGTERM"
    if server.stray:
        return Row(
            "served.shutdown",
            BACKEND,
            "fail",
            f"{len(server.stray)} process(es) still running after stop: pids {server.stray}",
            f"kill them (kill -9 {' '.join(map(str, server.stray))}); report the vLLM version",
        )
    return Row(
        "served.shutdown",
        BACKEND,
        "pass",
        f"{n} server process(es) gone {server.stop_seconds or 0:.1f}s after {how}; none left",
        "",
    )
