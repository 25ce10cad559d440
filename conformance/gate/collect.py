"""The gate's rows, in report order: static checks, the vocabulary surface, the backends, served.

:func:`collect_rows` runs the static checks (``conformance.static``), the surface id by id
(``conformance.static.surface``), every selected backend over the probes and chats
(``conformance.checks.runner``) with the static warnings judged by behaviour
(``conformance.gate.behaviour``), and -- only with ``--serve-vllm`` -- the served path.

Out of scope: checking inputs (``conformance.gate.plan``), the verdict
(``conformance.core.rows.exit_code``), rendering (``conformance.report``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from conformance.checks.causes import explain
from conformance.checks.runner import BackendResult, result_rows, run_suite
from conformance.core.expect import is_ours
from conformance.core.rows import Row, skip
from conformance.gate.behaviour import behaviour_proof
from conformance.plan import Plan
from conformance.static import run_static
from conformance.static.surface import surface_rows

Say = Callable[[str], None]


def served_rows(plan: Plan, *, say: Say) -> list[Row]:
    """Opt-in: start vLLM's OpenAI server on 127.0.0.1 over DIR's tokenizer (conformance.served)."""
    if plan.exports.hf_dir is None:
        return [skip("served", "no tokenizer.json to serve", backend="vllm-server")]
    from conformance.served import check_served

    say("served path: tiny random-weight Llama + vLLM OpenAI server on 127.0.0.1")
    fx = plan.fixtures
    # a template that ran out of its budget in the reference render is never sent to the server
    chats = [] if fx.refused_template else fx.chats
    return check_served(
        plan.exports.hf_dir, plan.ref, fx.probes, chats, progress=say, divergences=fx.divergences
    )


def collect_rows(
    plan: Plan, *, backends: Sequence[str], workers: int, serve_vllm: bool, say: Say
) -> tuple[list[Row], list[BackendResult]]:
    """Every row of a gate run, and the backends' results (for their versions and timings)."""
    files = plan.files
    rows: list[Row] = []

    def static() -> None:  # in this process while the backends' workers run (checks/forked.py)
        say("static checks")
        rows.extend(files.skip_rows() if files is not None else [])
        rows.extend(run_static(plan.exports, plan.ref, files=files, probes=plan.fixtures.probes))
        rows.extend(surface_rows(plan.exports, plan.ref, files=files))

    say(
        f"conformance: {len(plan.fixtures.probes)} probes, {len(plan.fixtures.chats)} chats, "
        f"backends {','.join(backends)}"
    )
    results, stale, _ = run_suite(
        plan.exports, plan.fixtures, backends, progress=say, workers=workers, meanwhile=static
    )
    suite = result_rows(results, stale=stale, imported=not is_ours(plan.ref))
    rows = explain(
        behaviour_proof(rows, suite) + suite, versions={r.name: r.version for r in results if r.version}
    )
    if serve_vllm:
        rows += served_rows(plan, say=say)
    return rows, results
