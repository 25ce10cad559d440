"""The gate's JSON report schema: valid draft 2020-12, versioned, shipped, and not vacuous.

Every gate report a test produces is validated against it by the shared runner
(``tests.helpers.gate.check_report``); here: the schema itself is a valid draft 2020-12 schema,
its ``schema_version`` equals ``conformance.report.json.SCHEMA_VERSION``, its bytes equal the
ones recorded for that version (so a schema change without a version bump fails), it ships in
the wheel, it rejects what a report must never be, and a real report carries the new fields
(stacktok version, run time, resolved inputs, every file's sha256).

Out of scope: the Hub inputs (tests/test_hub.py), what the rows mean (tests/test_gate.py).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.metadata
import re

import jsonschema
import pytest
import tomllib

from conformance.report.json import SCHEMA_VERSION, run_metadata, schema
from tests.helpers import ROOT, SHIPPED, build_checkpoint, run_gate
from tests.helpers.gate import check_report

SCHEMA_FILE = ROOT / "conformance" / "report" / "schema.json"

#: sha256 of schema.json at each schema_version. Changed the schema? Bump SCHEMA_VERSION
#: (conformance/report/json.py) and the ``schema_version`` const in schema.json, then add a line.
RECORDED = {
    1: "786d206b6024c063dc79b36092a35b00d60666ad1874273506cba283c10c684a",
}


def test_schema_is_valid_draft_2020_12_and_names_its_version() -> None:
    doc = schema()
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(doc)
    assert doc["properties"]["schema_version"] == {
        "description": "The version of this schema the report follows.",
        "const": SCHEMA_VERSION,
    }


def test_schema_changes_only_with_a_version_bump() -> None:
    digest = hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest()
    assert sorted(RECORDED) == list(range(1, SCHEMA_VERSION + 1)), "record every schema_version's sha256"
    assert digest == RECORDED[SCHEMA_VERSION], (
        f"conformance/report/schema.json changed (sha256 {digest}) but schema_version is still "
        f"{SCHEMA_VERSION}: bump SCHEMA_VERSION and the schema's const, and record the new sha256 here"
    )


def test_schema_ships_in_the_wheel() -> None:
    """Read through importlib.resources (as an installed stacktok does), and listed as package data."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = data["tool"]["setuptools"]["package-data"].get("conformance.report", [])
    assert "schema.json" in listed, (
        'add `"conformance.report" = ["schema.json"]` to [tool.setuptools.package-data]'
    )
    assert schema() == __import__("json").loads(SCHEMA_FILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def report(tmp_path_factory, gate_files) -> dict:
    """A real gate report on a fresh checkpoint (the runner has validated it already)."""
    ckpt = build_checkpoint(tmp_path_factory.mktemp("schema") / "ckpt")
    run = run_gate(
        ckpt,
        "--artifact",
        str(SHIPPED),
        data=gate_files,
        backends="reference,tiktoken,tokenizers",
        report=True,
    )
    assert run.code == 0, run.stderr
    return run.report


def test_a_real_report_names_version_time_inputs_and_every_file(report) -> None:
    assert report["schema_version"] == SCHEMA_VERSION
    assert report["stacktok_version"] == importlib.metadata.version("stacktok")
    assert report["run"]["seconds"] > 0 and report["run"]["started"].endswith("Z")
    assert report["inputs"]["kind"] == "directory" and report["inputs"]["directory"] == report["directory"]
    by_name = {f["path"].rsplit("/", 1)[-1]: f for f in report["files"]}
    assert by_name[SHIPPED.name]["sha256"] == hashlib.sha256(SHIPPED.read_bytes()).hexdigest()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        path = f"{report['directory']}/{name}"
        raw = open(path, "rb").read()
        assert by_name[name] == {
            "path": path,
            "role": "checkpoint",
            "sha256": hashlib.sha256(raw).hexdigest(),
            "size": len(raw),
            "note": None,
        }


def _broken(report: dict, edit) -> dict:
    doc = copy.deepcopy(report)
    edit(doc)
    return doc


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda d: d.pop("schema_version"), "(top)"),
        (lambda d: d.update(schema_version=2), "schema_version"),
        (lambda d: d.update(extra_key=1), "(top)"),
        (lambda d: d["files"][0].update(sha256="abc"), "files/0/sha256"),
        (lambda d: d["checks"][0].update(status="ok"), "checks/0/status"),
        (lambda d: d["inputs"].update(kind="hub", revision="main", commit="0" * 40), "inputs/repo"),
        (lambda d: d["run"].update(started="yesterday"), "run/started"),
        (lambda d: d.update(exit_code=2), "exit_code"),
    ],
    ids=[
        "no-version",
        "wrong-version",
        "unknown-key",
        "bad-digest",
        "bad-status",
        "hub-without-repo",
        "bad-time",
        "usage-exit",
    ],
)
def test_schema_rejects_what_a_report_must_never_be(report, edit, where) -> None:
    with pytest.raises(pytest.fail.Exception, match=re.escape(f"report: {where}: ")):
        check_report(_broken(report, edit))
    check_report(report)  # the original still passes


def test_source_date_epoch_pins_the_run_metadata(monkeypatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764633600")
    assert run_metadata(started=5.0, seconds=1.5) == {"started": "2025-12-02T00:00:00Z", "seconds": None}
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert run_metadata(started=0.0, seconds=1.23456) == {"started": "1970-01-01T00:00:00Z", "seconds": 1.235}
