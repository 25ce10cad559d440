"""The change report: a planted regression is named and fails; the committed rows are the matrix.

The planted regression is real: the shipped export runs through the real tokenizers
adapter, once as is (accepted as the committed state with ``--update``) and once with the
adapter patched to add one id to every encode of text holding "def " -- a stand-in for a
release that changed tokenization. (ASCII on purpose: a change confined to one non-ASCII
code point's encoding would be read as Unicode-table drift and covered by the backend's
``unicode_tables`` declaration.) Out of scope: installing versions (``test_versions.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance import __main__ as conformance_main
from conformance.backends import tokenizers_backend
from conformance.matrix import changes
from conformance.report import support_matrix

from .conftest import ROOT, need


def run_row(path: Path) -> int:
    return conformance_main.main(["--quiet", "--backends", "reference,tokenizers", "--matrix", str(path)])


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A baseline accepted from an unpatched run of the tokenizers row."""
    need("tokenizers", "hf")
    d = tmp_path_factory.mktemp("baseline")
    rows = d / "tokenizers-latest.jsonl"
    assert run_row(rows) == 0
    assert changes.main([str(rows), "--baseline", str(d / "support_matrix.jsonl"), "--update"]) == 0
    return d / "support_matrix.jsonl"


def test_an_unchanged_row_reports_no_change_and_exits_0(committed: Path, tmp_path: Path, capsys) -> None:
    rows = tmp_path / "tokenizers-latest.jsonl"
    assert run_row(rows) == 0
    capsys.readouterr()
    assert changes.main([str(rows), "--baseline", str(committed)]) == 0
    out = capsys.readouterr().out
    assert ": conforms -- conforms" in out
    assert "newly failing" not in out and "versions:" not in out


def test_a_planted_regression_is_named_with_its_first_probe_and_exits_1(
    committed: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    original = tokenizers_backend.TokenizersBackend.encode

    def changed(self, text: str, *, allow_special: bool) -> list[int]:
        ids = original(self, text, allow_special=allow_special)
        return [*ids, 32] if "def " in text else ids

    monkeypatch.setattr(tokenizers_backend.TokenizersBackend, "encode", changed)
    rows = tmp_path / "tokenizers-latest.jsonl"
    assert run_row(rows) == 1
    row = json.loads(rows.read_text().splitlines()[-1])
    probe = row["first_failure"]["encode"]
    capsys.readouterr()
    assert changes.main([str(rows), "--baseline", str(committed)]) == 1
    out = capsys.readouterr().out
    assert "tokenizers 0.23" in out and "REGRESSION" in out
    assert f"newly failing: encode (first differing probe {probe})" in out
    assert "needs a declaration in fixtures/divergences.jsonl or a fix: encode" in out
    texts = {
        json.loads(line)["id"]: json.loads(line)["text"]
        for line in (ROOT / "fixtures" / "probes.jsonl").open()
    }
    assert "def " in texts[probe]  # the first differing probe is one the patch changed


def _row(**kw) -> dict:
    base = {"backend": "tiktoken", "version": "0.14.0", "result": "conforms", "slot": "tiktoken-latest"}
    base.update(checks={"encode": {"pass": 5, "fail": 0, "declared": 0}}, default="raises", stale=[], env={})
    return {**base, **kw}


def test_default_stale_newly_passing_and_versions_are_each_named() -> None:
    base = _row(
        result="diverges", checks={"encode": {"pass": 4, "fail": 1, "declared": 0}}, env={"regex": "1"}
    )
    new = _row(version="0.15.0", default="unsafe", stale=["tiktoken-x"], env={"regex": "2"})
    text, code = changes.report([new], [base], defaults={"tiktoken": "raises"})
    assert code == 1  # a stale declaration is not conformance
    assert "newly passing: encode" in text
    assert "no-flags default changed: raises -> unsafe" in text
    assert "stale declarations (remove or narrow in fixtures/divergences.jsonl): tiktoken-x" in text
    assert "versions: regex 1 -> 2" in text


def test_a_new_version_is_compared_with_the_latest_slot_and_update_replaces_slots() -> None:
    old = _row()
    pinned = _row(version="0.5.2", slot="tiktoken-0.5.2")
    new = _row(version="0.15.0", slot="tiktoken-0.15.0")
    assert changes.counterpart(new, [pinned, old]) is old
    assert changes.counterpart(_row(version="0.5.2", slot="tiktoken-0.5.2"), [old, pinned]) is pinned
    newer = _row(version="0.15.0")
    assert changes.merge([pinned, old], [newer]) == [pinned, newer]


def test_an_unreadable_rows_file_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text("{not json\n")
    assert changes.main([str(bad), "--baseline", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:1: not JSON" in err


def test_the_committed_rows_render_the_committed_matrix_and_readme() -> None:
    rows = changes.load_rows(changes.BASELINE)
    assert {r["backend"] for r in rows} >= {
        "tokenizers",
        "tiktoken",
        "transformers",
        "llama.cpp",
        "vllm",
        "trl",
    }
    assert all(
        r["env"].get("python") and r["env"].get(r["backend"].split("-")[0], r["version"]) for r in rows
    )
    table = changes.render(rows, changes.load_floors())
    assert table.startswith(support_matrix(rows))
    assert (ROOT / "conformance" / "SUPPORT_MATRIX.md").read_text(encoding="utf-8") == table
    assert f"<!-- support-matrix -->\n{table}<!-- /support-matrix -->" in (ROOT / "README.md").read_text()
