"""Template bombs (issue 37, item 2): an untrusted chat template is compiled and rendered under a
time and memory budget, never in the gate's own process without one.

1. the bounded trial (``conformance.core.template.try_template``): each bomb ends within the
   budget with the right outcome; real templates render exactly as in-process (transformers'
   semantics untouched); one child per template text;
2. validation: a template too deeply nested to compile is malformed input (exit 2), a bomb is not;
3. the runner: a backend that renders DIR's template is not asked to once the reference's
   render ran out of its budget (both chat checks *not run*, with the reason);
4. end to end: ``python -m stacktok gate`` on a copy of the shipped directory with a bomb in
   each place a template lives: exit 1 within 60 s under 2 GB, the failing row naming the file
   and the budget, no traceback.

Out of scope: the other hostile inputs (tests/test_hostile.py); ``run_bounded`` itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import conformance.core.template as template_module
from conformance.backends import shared_reference
from conformance.backends.reference import ReferenceBackend
from conformance.checks.compare import Runner
from conformance.checks.results import result_rows
from conformance.core.errors import InputError
from conformance.core.fixtures import Chat, FixtureSet, Probe
from conformance.core.template import (
    SAMPLE_CHATS,
    TEMPLATE_BUDGET,
    render_template,
    sample_messages,
    templates_of,
    try_template,
)
from conformance.validate.files import ReadFile, Validated
from conformance.validate.template import template_refusal, validate_template
from stacktok_export.util.bounded import Budget, MiB

from .helpers import ROOT, SHIPPED, SHIPPED_HF, GateData, build_checkpoint, gate_data, json_edit, replace
from .helpers.hostile import Outcome, run_tree

#: a small budget keeps the unit tests quick (the gate's own is TEMPLATE_BUDGET, 5 s / 1 GiB)
SMALL = Budget(seconds=2.0, memory=256 * MiB)
RANGE_IN_RANGE = "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}{% endfor %}"
MACRO = "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}"
STRING_TIMES = "{{ 'a' * 10**10 }}"
SILENT_LOOPS = (
    "{% for m in messages %}{% for i in range(99999) %}{% for j in range(99999) %}"
    "{% endfor %}{% endfor %}{% endfor %}"
)
BOMBS = {  # name -> (template, what the trial says past "exceeded 2 s / 256 MiB")
    "range-in-range": (RANGE_IN_RANGE, ""),  # out of memory or out of time, whichever first
    "exponential-macro": (MACRO, "still running after 2 s"),
    "string-times-power": (STRING_TIMES, "out of memory"),
    "list-times-int": ("{{ (range(100000) | list) * 100000 }}", "out of memory"),
    "format-width": ("{{ '%0999999999d' % 1 }}", "out of memory"),
    "loops-printing-nothing": (SILENT_LOOPS, "still running after 2 s"),
}
NESTED_PARENS = "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}"
SHIPPED_TEMPLATE = (SHIPPED_HF / "chat_template.jinja").read_text(encoding="utf-8")
#: real templates: each render (or its error) must be what the in-process render gives
REAL = {
    "shipped": SHIPPED_TEMPLATE,
    "chatml-loop-controls": (
        "{% for m in messages %}{% if m['role'] == 'tool_call' %}{% continue %}{% endif %}"
        "<|im_start|>{{ m['role'] }}\n{{ m['content'] | trim }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
    "raises": "{% if messages[0]['role'] != 'system' %}{{ raise_exception('system first') }}{% endif %}ok",
    "reaches-internals": "{{ messages.__class__.__mro__ }}",
    "tojson-and-strftime": "{{ messages | tojson }} {{ strftime_now('%Y') }}",
}


# ---------------------------------------------------------------- 1. the bounded trial
@pytest.mark.parametrize("name", list(BOMBS))
def test_each_bomb_ends_within_its_budget(name: str) -> None:
    source, why = BOMBS[name]
    start = time.monotonic()
    trial = try_template(source, budget=SMALL)
    assert time.monotonic() - start < 15
    assert trial.stopped.startswith("exceeded 2 s / 256 MiB"), trial
    assert why in trial.stopped
    assert trial.failure is None and trial.renders == ()
    line = trial.stopped_line("chat_template.jinja")
    assert line.startswith("chat_template.jinja: ") and "exceeded 2 s / 256 MiB" in line


@pytest.mark.parametrize("name", list(REAL))
def test_real_templates_render_exactly_as_in_process(name: str) -> None:
    trial = try_template(REAL[name])
    assert trial.stopped == "" and trial.failure is None
    assert len(trial.renders) == len(SAMPLE_CHATS)
    for i, got in enumerate(trial.renders):
        try:
            want = render_template(REAL[name], sample_messages(i), add_generation_prompt=SAMPLE_CHATS[i][1])
        except Exception as exc:  # noqa: BLE001 -- the error is what the trial must report
            assert (got.text, got.error_type) == (None, type(exc).__name__)
            assert got.message == str(exc)[:500]
        else:
            assert got.text == want


def test_the_shipped_template_renders_the_trained_format() -> None:
    from stacktok_export.chat.chat import render_text

    trial = try_template(SHIPPED_TEMPLATE)
    assert trial.renders[0].text == render_text(sample_messages(0), add_generation_prompt=False)


def test_one_child_per_template_text(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = template_module.run_bounded

    def counting(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(template_module, "run_bounded", counting)
    source = f"{{# one child per text: {time.time_ns()} #}}{{{{ messages | length }}}}"
    first, second = try_template(source), try_template(source)
    assert first == second and first.renders[0].text == "3"
    assert calls == [source]


def _children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (from ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        fields = stat.rsplit(")", 1)[-1].split()  # after "pid (comm)": state, ppid, ...
        if entry.name.isdigit() and fields[1] == str(pid) and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_trial_does_not_outlive_a_caller_killed_mid_render() -> None:
    """The caller SIGKILLed while its child spins on a macro (CI's job timeout, the OOM killer):
    the child is gone within seconds (RLIMIT_CPU), not spinning on at 100% CPU forever."""
    code = f"from conformance.core.template import try_template; try_template({MACRO!r})"
    caller = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, start_new_session=True)
    deadline = time.monotonic() + 10
    while not (children := _children(caller.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(caller.pid, signal.SIGKILL)
    caller.wait()
    assert children, "the caller forked no child within 10 s"
    deadline = time.monotonic() + 30  # 7 s of CPU time (5 s budget + 2), slower on a busy machine
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [pid for pid in children if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "the orphaned trial was still running 30 s after its caller died"


def test_templates_of_names_every_place_a_template_lives() -> None:
    files = {
        "tokenizer.json": {"model": {}},
        "tokenizer_config.json": {
            "chat_template": [{"name": "default", "template": "a"}, {"name": "x\n", "template": "b"}]
        },
        "chat_template.json": {"chat_template": "c"},
        "chat_template.jinja": "d",
        "additional_chat_templates/to\nol.jinja": "e",
    }
    assert templates_of(files) == [
        ("tokenizer_config.json chat_template['default']", "a"),
        ("tokenizer_config.json chat_template['x\\n']", "b"),
        ("chat_template.json chat_template", "c"),
        ("chat_template.jinja", "d"),
        ("additional_chat_templates/to\\nol.jinja", "e"),
    ]


# ---------------------------------------------------------------- 2. validation
def test_too_deeply_nested_to_compile_is_malformed_input() -> None:
    start = time.monotonic()
    with pytest.raises(InputError) as info:
        validate_template("DIR/chat_template.jinja", "template", NESTED_PARENS)
    assert time.monotonic() - start < 15
    message = str(info.value)
    assert message.startswith("DIR/chat_template.jinja: template: nested too deeply for Jinja to compile")
    assert "\n" not in message


def test_a_syntax_error_names_the_line() -> None:
    with pytest.raises(InputError, match=r"chat_template line 2: Jinja syntax error: "):
        validate_template("x.json", "chat_template", "ok\n{% if %}")


def test_a_bomb_is_not_malformed_input_and_refuses_the_engines() -> None:
    start = time.monotonic()
    assert validate_template("DIR/chat_template.jinja", "template", STRING_TIMES) is True
    files = Validated(
        directory=Path("DIR"),
        hf={
            "chat_template.jinja": ReadFile(Path("DIR/chat_template.jinja"), b"", STRING_TIMES),
            "tokenizer_config.json": ReadFile(
                Path("DIR/tokenizer_config.json"), b"", {"chat_template": "ok"}
            ),
        },
    )
    reason = template_refusal(files)
    assert time.monotonic() - start < 15
    budget = TEMPLATE_BUDGET.describe()
    assert reason == (
        f"chat_template.jinja exceeded {budget} (out of memory) in the reference render; "
        "no engine was asked to render it"
    )
    fine = Validated(directory=Path("DIR"), hf={"chat_template.jinja": files.hf["tokenizer_config.json"]})
    assert template_refusal(fine) == ""


# ---------------------------------------------------------------- 3. the runner
class _DirTemplateBackend:
    """The reference's chat under a backend that renders DIR's template (it reads tokenizer.json)."""

    def __init__(self, reference: ReferenceBackend) -> None:
        self.inner, self.calls = reference, 0
        self.name, self.version, self.reads = "dir-renderer", "1", "tokenizer.json"
        self.capabilities = reference.capabilities
        self.decode_exact, self.encodes_in_batch = True, False
        self.chat_requires_assistant, self.chat_injection_safe_path = False, None

    def __getattr__(self, attr: str) -> Any:  # encode, decode, stream...: the reference's
        return getattr(self.inner, attr)

    def chat(
        self, messages: Any, *, add_generation_prompt: bool, **shape: Any
    ) -> tuple[list[int], list[int]]:
        self.calls += 1
        return self.inner.chat(messages, add_generation_prompt=add_generation_prompt, **shape)


@pytest.mark.parametrize(
    "refused",
    ["", "chat_template.jinja exceeded 5 s / 1 GiB ...; no engine was asked"],
    ids=["asked", "refused"],
)
def test_the_runner_asks_no_engine_to_render_a_refused_template(refused: str) -> None:
    ref = shared_reference(SHIPPED)
    chat = Chat("c1", ({"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}))
    fixtures = FixtureSet(probes=[Probe("p1", "t", "hello")], chats=[chat], refused_template=refused)
    runner = Runner(ref, fixtures)
    reference = ReferenceBackend(ref)
    dir_renderer = _DirTemplateBackend(reference)
    results = [runner.run(reference), runner.run(dir_renderer)]
    rows = {(r.check, r.backend): r for r in result_rows(results)}
    assert rows["conformance.chat", "reference"].status == "pass"  # the artifact's template: always run
    mine = rows["conformance.chat", "dir-renderer"], rows["conformance.chat_injection", "dir-renderer"]
    if refused:
        assert dir_renderer.calls == 0
        assert [(r.status, r.message) for r in mine] == [("skip", f"not checked: {refused}")] * 2
    else:
        assert dir_renderer.calls == 1 and mine[0].status == "pass"


# ---------------------------------------------------------------- 4. end to end
def _gate(tmp: Path, directory: Path, data: GateData, *, backends: str) -> tuple[Outcome, dict | None]:
    """``python -m stacktok gate DIR`` as a process tree (``tests.helpers.hostile.run_tree``: summed
    RSS, killed 10 s past 60 s), checked for what every run owes: no kill, < 60 s, < 2 GiB, no
    traceback, no process left; returns the outcome and the JSON report (None without one)."""
    out, logs = tmp / "out", tmp / "logs"
    out.mkdir()
    logs.mkdir()
    argv = ["gate", str(directory), "--quiet", "--backends", backends, "--only-user-data"]
    argv += ["--probes", str(data.probes), "--chats", str(data.chats), "--json", str(out / "report.json")]
    run = run_tree(argv, env=os.environ, cwd=ROOT, logs=logs, out=out, seconds=60, peak_mib=2048)
    assert run.killed is None and run.seconds < 60 and run.peak_mib < 2048, run.summary()
    assert "Traceback" not in run.stdout + run.stderr and not run.leftovers, (run.stderr, run.leftovers)
    return run, run.json_report()


def _row(doc: dict, check: str, backend: str = "files") -> dict:
    """The report's row ``check[backend]``."""
    return next(r for r in doc["checks"] if r["check"] == check and r["backend"] == backend)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> GateData:
    """A few user probes and the shared chats: the gate's own fixtures would take longer."""
    return gate_data(tmp_path_factory.mktemp("bomb-data"), texts=["hello world", "x != y"])


def _additional(name: str, source: str) -> Callable[[Path], None]:
    """Write ``DIR/additional_chat_templates/name`` (a named template transformers loads)."""

    def edit(directory: Path) -> None:
        (directory / "additional_chat_templates").mkdir(exist_ok=True)
        (directory / "additional_chat_templates" / name).write_text(source, encoding="utf-8")

    return edit


PLACES = {  # where the bomb goes -> (edits, the label the row names)
    "jinja-range-in-range": ([replace("chat_template.jinja", RANGE_IN_RANGE)], "chat_template.jinja"),
    "jinja-exponential-macro": ([replace("chat_template.jinja", MACRO)], "chat_template.jinja"),
    "jinja-string-times": ([replace("chat_template.jinja", STRING_TIMES)], "chat_template.jinja"),
    "additional-template": (
        [_additional("tool.jinja", STRING_TIMES)],
        "additional_chat_templates/tool.jinja",
    ),
    "named-inline-template": (
        [
            json_edit(
                "tokenizer_config.json",
                set={
                    "chat_template": [
                        {"name": "default", "template": SHIPPED_TEMPLATE},
                        {"name": "rag", "template": MACRO},
                    ]
                },
            )
        ],
        "tokenizer_config.json chat_template['rag']",
    ),
}


@pytest.mark.transformers
@pytest.mark.parametrize("place", list(PLACES))
def test_gate_fails_a_bomb_in_seconds_naming_file_and_budget(
    tmp_path: Path, data: GateData, place: str
) -> None:
    edits, label = PLACES[place]
    ckpt = build_checkpoint(tmp_path / "ckpt", edits=edits)
    run, doc = _gate(tmp_path, ckpt, data, backends="reference,tokenizers,transformers")
    assert run.code == 1, run.stderr
    row = _row(doc, "chat.template_sandboxed")
    assert row["status"] == "fail"
    assert row["message"].startswith(
        f"{label}: compiling it and rendering 3 sample chats exceeded 5 s / 1 GiB"
    )
    assert f"{label}: compiling it" in run.stdout


@pytest.mark.transformers
def test_gate_asks_no_engine_to_render_a_bomb(tmp_path: Path, data: GateData) -> None:
    """transformers-reload renders DIR's template with apply_chat_template: without the refusal it
    would spin on the macro in its worker until killed."""
    ckpt = build_checkpoint(tmp_path / "ckpt", edits=[replace("chat_template.jinja", MACRO)])
    run, doc = _gate(tmp_path, ckpt, data, backends="reference,transformers-reload")
    assert run.code == 1, run.stderr
    for check in ("conformance.chat", "conformance.chat_injection"):
        row = _row(doc, check, "transformers-reload")
        assert row["status"] == "skip"
        assert row["message"] == (
            "not checked: chat_template.jinja exceeded 5 s / 1 GiB (still running after 5 s) in the "
            "reference render; no engine was asked to render it"
        )
    assert _row(doc, "conformance.chat", "reference")["status"] == "pass"
    assert _row(doc, "conformance.encode", "transformers-reload")["status"] == "pass"


def test_gate_refuses_a_template_too_nested_to_compile(tmp_path: Path, data: GateData) -> None:
    ckpt = build_checkpoint(tmp_path / "ckpt", edits=[replace("chat_template.jinja", NESTED_PARENS)])
    run, doc = _gate(tmp_path, ckpt, data, backends="reference,tokenizers")
    assert run.code == 2 and doc is None
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(
        "chat_template.jinja: template: nested too deeply for Jinja to compile (RecursionError: maximum "
        "recursion depth exceeded); flatten the template's nesting; transformers cannot compile it either"
    )
