"""`stacktok audit`: the shipped artifact passes; planted vocabulary faults are flagged.

Faults are real artifact / tokenizer.json files written to tmp_path (no mocks):
an unreachable merge, two ids with the same bytes, a forward reference, a token
that spells a special, tokenizer.json merges out of id order. The shipped run
also pins what the Unicode-table scan must find (llama.cpp's 15.1 tables
split U+1C89, a Unicode 16.0 letter, differently).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from conformance import audit
from stacktok_export import StackTokenizer
from stacktok_export.export.hf import hf_files
from stacktok_export.models.bpe.bpe import SPECIAL_TOKENS

from .helpers import build_checkpoint, edit_json, unreachable_merge

A, B, C = ord("a"), ord("b"), ord("c")


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="stacktok audit")
    audit.add_arguments(p)
    return p.parse_args(list(argv))


def run(tmp_path: Path, *argv: str, name: str = "report.json") -> tuple[int, dict[str, Any]]:
    out = tmp_path / name
    code = audit.main(parse(*argv, "--json", str(out), "--quiet"))
    return code, json.loads(out.read_text())


def finding(report: dict[str, Any], name: str, subject: str = "artifact") -> dict[str, Any]:
    return next(f for f in report["findings"] if f["name"] == name and f["subject"] == subject)


def statuses(report: dict[str, Any], subject: str = "artifact") -> dict[str, str]:
    return {f["name"]: f["status"] for f in report["findings"] if f["subject"] == subject}


def write_artifact(
    path: Path, merges: list[tuple[int, int]], specials: tuple[str, ...] = SPECIAL_TOKENS
) -> Path:
    """An artifact in the real format, built through StackTokenizer (no load-time validation)."""
    tok = StackTokenizer(name=path.stem)
    tok.merges = list(merges)
    tok._index(specials)
    tok.save(path)
    return path


def write_raw_artifact(path: Path, merges: list[list[int]]) -> Path:
    """An artifact JSON written by hand (for merge lists StackTokenizer cannot even index)."""
    doc = {
        "format": "stacktok-bpe-v1",
        "name": path.stem,
        "pattern": StackTokenizer().pattern,
        "merges": merges,
        "special_tokens": list(SPECIAL_TOKENS),
        "vocab_size": 256 + len(merges) + len(SPECIAL_TOKENS),
    }
    path.write_text(json.dumps(doc))
    return path


# ---------------------------------------------------------------- shipped
@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> tuple[int, dict[str, Any], str]:
    """One full audit of the shipped artifact, every default backend scanned."""
    out = tmp_path_factory.mktemp("audit") / "shipped.json"
    code = audit.main(parse("--json", str(out), "--quiet"))
    return code, json.loads(out.read_text()), out.read_text()


def test_shipped_artifact_passes(shipped) -> None:
    code, report, _ = shipped
    assert code == 0 and report["verdict"] == "PASS" and report["exit_code"] == 0
    st = statuses(report)
    assert all(st[n] == "pass" for n in audit.VIOLATIONS), st
    assert st["long_tokens"] == "info" and finding(report, "long_tokens")["details"]["tokens"]
    assert finding(report, "partial_utf8")["details"]["count"] >= 128  # at least the bytes 0x80..0xff
    assert finding(report, "self_reachable")["details"]["checked"] == 32503


def test_shipped_unicode_tables_llama_cpp_u1c89(shipped) -> None:
    _, report, _ = shipped
    tables = finding(report, "unicode_tables", "backends")
    llama = tables["details"]["backends"]["llama.cpp"]
    if llama["status"] == "missing":  # the suite's rule: a missing backend fails, never skips
        pytest.fail(f"llama.cpp is required by this test: {llama['reason']}", pytrace=False)
    assert tables["status"] == "info" and "llama.cpp" in tables["summary"]
    assert llama["status"] == "disagrees" and llama["disagreeing_code_points"] > 0
    hit = [r for r in llama["ranges"] if int(r["first"][2:], 16) <= 0x1C89 <= int(r["last"][2:], 16)]
    assert hit and hit[0]["reference"] == "L" and hit[0]["backend"] == "O", hit
    assert llama["sentinels"]["16.0"] == "O" and "O" not in llama["sentinels"]["15.1"]
    assert llama["apparent_unicode"] == "15.1"
    assert tables["details"]["reference"]["recorded"]["unicode_version"] == "18.0"


def test_shipped_unicode_tables_other_backends_stated(shipped) -> None:
    _, report, _ = shipped
    per = finding(report, "unicode_tables", "backends")["details"]["backends"]
    assert set(per) == {"tiktoken", "tokenizers", "llama.cpp"}
    for name, d in per.items():
        assert d["status"] in ("agrees", "disagrees", "missing"), (name, d)
        if d["status"] == "disagrees":
            assert d["compressed"] and d["example"]["reference_ids"] != d["example"]["backend_ids"]


def test_shipped_json_is_sorted_and_timeless(shipped) -> None:
    _, report, text = shipped
    assert text == json.dumps(report, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
    assert not any(k in text for k in ('"seconds"', '"timestamp"', '"time"'))


def test_human_output_lines(capsys) -> None:
    code = audit.main(parse("--backends", "none", "--quiet"))
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    heads = [line.split()[:2] for line in out[:7]]
    assert heads == [
        ["PASS", "self_reachable"],
        ["PASS", "duplicate_bytes"],
        ["PASS", "merge_order"],
        ["PASS", "specials_unreachable"],
        ["INFO", "long_tokens"],
        ["INFO", "partial_utf8"],
        ["SKIP", "unicode_tables"],
    ]
    assert out[-1].startswith("audit: PASS in ")


# ---------------------------------------------------------------- planted faults
def test_unreachable_merge_hand_made(tmp_path) -> None:
    """(a,b)->256, (b,c)->257, (a,257)->258: "abc" encodes as [256, 99], never 258."""
    path = write_artifact(tmp_path / "unreach.json", [(A, B), (B, C), (A, 257)])
    code, report = run(tmp_path, str(path), "--backends", "none")
    assert code == 1 and report["verdict"] == "FAIL"
    bad = finding(report, "self_reachable")
    assert bad["status"] == "fail"
    assert bad["details"]["unreachable"] == [{"id": 258, "bytes": b"abc".hex(), "encodes_as": [256, C]}]
    assert statuses(report)["duplicate_bytes"] == "pass"


def test_unreachable_merge_appended_to_trained(tmp_path, small_tok) -> None:
    """A merge appended to a trained vocabulary whose bytes earlier merges split differently."""
    merges, new_id = list(small_tok.merges), 256 + len(small_tok.merges)
    left, right = unreachable_merge(small_tok)
    path = write_artifact(tmp_path / "trained.json", merges + [(left, right)], tuple(small_tok.special_to_id))
    code, report = run(tmp_path, str(path), "--backends", "none")
    assert code == 1
    assert [u["id"] for u in finding(report, "self_reachable")["details"]["unreachable"]] == [new_id]


def test_trained_small_vocab_passes(tmp_path, small_tok) -> None:
    path = tmp_path / "small.json"
    small_tok.save(path)
    code, report = run(tmp_path, str(path), "--backends", "none")
    assert code == 0, [f for f in report["findings"] if f["status"] == "fail"]


def test_duplicate_bytes(tmp_path) -> None:
    """(256,c)->258 and (a,257)->259 are both "abc"; exports are not even attempted."""
    path = write_artifact(tmp_path / "dup.json", [(A, B), (B, C), (256, C), (A, 257)])
    code, report = run(tmp_path, str(path))  # default backends: must be skipped, not crash a backend
    assert code == 1
    dup = finding(report, "duplicate_bytes")
    assert dup["status"] == "fail" and dup["details"]["duplicates"] == [
        {"bytes": b"abc".hex(), "ids": [258, 259]}
    ]
    assert finding(report, "unicode_tables", "backends")["status"] == "skip"


def test_forward_reference_is_a_merge_order_violation(tmp_path) -> None:
    path = write_raw_artifact(tmp_path / "fwd.json", [[A, B], [300, C]])
    code, report = run(tmp_path, str(path))
    assert code == 1
    assert statuses(report)["merge_order"] == "fail"
    assert "merge #1" in finding(report, "merge_order")["details"]["problems"][0]
    assert statuses(report)["self_reachable"] == "skip"


def test_token_spelling_a_special(tmp_path) -> None:
    path = write_artifact(tmp_path / "spell.json", [(A, B)], specials=("ab", "<|x|>"))
    code, report = run(tmp_path, str(path), "--backends", "none")
    assert code == 1
    spec = finding(report, "specials_unreachable")
    assert spec["status"] == "fail"
    assert spec["details"]["ordinary_tokens_with_special_text"] == [{"id": 256, "special": "ab"}]
    assert spec["details"]["leaks"] == []  # untrusted encoding still gives the ordinary id
    assert finding(report, "duplicate_bytes")["details"]["duplicates"][0]["ids"] == [256, 257]


def test_long_token_listed(tmp_path) -> None:
    merges = [(A, A)] + [(256 + i, 256 + i) for i in range(5)]  # a*2, a*4, ... a*64
    code, report = run(tmp_path, str(write_artifact(tmp_path / "long.json", merges)), "--backends", "none")
    assert code == 0
    assert finding(report, "long_tokens")["details"]["tokens"] == [{"id": 261, "length": 64}]


# ---------------------------------------------------------------- tokenizer.json directories
def hf_dir(tmp_path: Path, tok: StackTokenizer) -> Path:
    d = tmp_path / "tok-hf"
    d.mkdir()
    for name, data in hf_files(tok).items():
        (d / name).write_bytes(data)
    return d


def test_tokenizer_dir_audits_both(tmp_path, small_tok) -> None:
    d = hf_dir(tmp_path, small_tok)
    code, report = run(tmp_path, str(d), "--backends", "none")
    assert code == 0 and report["directory"] == str(d)
    hf, art = statuses(report, "tokenizer.json"), statuses(report, "artifact")
    assert all(hf[n] == "pass" for n in audit.VIOLATIONS) and all(art[n] == "pass" for n in audit.VIOLATIONS)
    assert finding(report, "self_reachable", "tokenizer.json")["details"]["checked"] == len(small_tok.merges)


def test_tokenizer_dir_shipped_export(tmp_path) -> None:
    d = build_checkpoint(tmp_path / "hf")
    code, report = run(tmp_path, str(d), "--backends", "none")
    assert code == 0
    assert finding(report, "duplicate_bytes", "tokenizer.json")["details"]["checked"] == 32768


def test_tokenizer_dir_merges_out_of_order(tmp_path, small_tok) -> None:
    d = hf_dir(tmp_path, small_tok)

    def swap_first_two(doc: dict) -> None:
        merges = doc["model"]["merges"]
        merges[0], merges[1] = merges[1], merges[0]

    edit_json(d / "tokenizer.json", swap_first_two)
    code, report = run(tmp_path, str(d), "--backends", "none")
    assert code == 1
    assert statuses(report, "tokenizer.json")["merge_order"] == "fail"
    assert statuses(report, "artifact")["merge_order"] == "pass"


def test_tokenizer_dir_unreachable_vocab_entry(tmp_path, small_tok) -> None:
    """A vocab entry with no merge producing it (the rten#453 shape) is unreachable."""
    d = hf_dir(tmp_path, small_tok)
    top = max(t["id"] for t in json.loads((d / "tokenizer.json").read_text())["added_tokens"])
    edit_json(d / "tokenizer.json", set={"model.vocab.zqzq": top + 1})
    code, report = run(tmp_path, str(d), "--backends", "none")
    assert code == 1
    bad = finding(report, "self_reachable", "tokenizer.json")["details"]["unreachable"]
    assert [u["id"] for u in bad] == [top + 1]


# ---------------------------------------------------------------- usage errors, CLI, determinism
@pytest.mark.parametrize("make", ["missing", "no_tokenizer_json", "bad_json", "artifact_twice"])
def test_usage_errors_exit_2(tmp_path, capsys, make) -> None:
    argv = {
        "missing": [str(tmp_path / "nope.json")],
        "no_tokenizer_json": [str(tmp_path)],
        "bad_json": [str(tmp_path / "bad.json")],
        "artifact_twice": [str(tmp_path / "bad.json"), "--artifact", str(tmp_path / "bad.json")],
    }[make]
    (tmp_path / "bad.json").write_text("{not json")
    assert audit.main(parse(*argv, "--quiet")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("stacktok audit: error: ") and "Traceback" not in err[0]


def test_unknown_backend_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        parse("--backends", "tiktoken,nosuch")
    assert exc.value.code == 2


def test_cli_wiring(tmp_path, capsys) -> None:
    from stacktok_cli import main as cli_main

    path = write_artifact(tmp_path / "unreach.json", [(A, B), (B, C), (A, 257)])
    assert cli_main(["audit", str(path), "--backends", "none", "--quiet"]) == 1
    assert "FAIL  self_reachable" in capsys.readouterr().out


def test_json_is_deterministic(tmp_path) -> None:
    path = write_artifact(tmp_path / "dup.json", [(A, B), (B, C), (256, C), (A, 257)])
    run(tmp_path, str(path), "--backends", "none", name="one.json")
    run(tmp_path, str(path), "--backends", "none", name="two.json")
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()


# ---------------------------------------------------------------- scan internals, on real encoders
def test_merge_list_bpe_matches_reference(small_tok) -> None:
    table = small_tok.token_bytes()
    bpe = audit.MergeListBPE(
        {b: b for b in range(256)}, [(a, b, 256 + i) for i, (a, b) in enumerate(small_tok.merges)]
    )
    words = [b"hello", b" return", b"self._index", b"\xc3\xa9t\xc3\xa9", b"    ", *table[256:400]]
    assert all(bpe(w) == small_tok._bpe(w) for w in words)


def test_bisect_finds_planted_code_points(shipped_tok) -> None:
    """A 'backend' that reads two letters as punctuation disagrees exactly there."""
    shape = audit.choose_shape(shipped_tok)
    assert shape.strong
    planted = {0x0430, 0x0437}

    def be(text: str) -> list[int]:
        for cp in planted:
            text = text.replace(f" {chr(cp)}'s", f" {chr(cp)}'").replace(f"{chr(cp)}000", f"{chr(cp)}00")
        return shipped_tok.encode(text)

    cps = list(range(0x0400, 0x0500))
    blocks = [cps[:128], cps[128:]]
    texts = [shape.block(b) for b in blocks]
    leaves = audit.scan_blocks(
        blocks, texts, [shipped_tok.encode(t) for t in texts], shape, shipped_tok.encode, be
    )
    assert [cp for cp, _, _ in leaves] == sorted(planted)


def test_shape_classes_on_reference(shipped_tok) -> None:
    """The reference's own ids fit its own class for letters, digits and punctuation."""
    shape = audit.choose_shape(shipped_tok)
    for ch, cls in (("\u1c89", "L"), ("\u0665", "N"), ("\u2e3a", "O")):
        ids = shipped_tok.encode(shape.text(ch))
        assert audit.reference_class(ch) == cls
        assert cls in audit.backend_class(shipped_tok, shape, ch, ids).split("/")


def test_ranges_and_apparent_version() -> None:
    assert audit._ranges([1, 2, 3, 7, 9, 10]) == [(1, 3), (7, 7), (9, 10)]
    known = {v: "L" for v, _ in audit.SENTINELS}
    assert audit.apparent_version(known) == "18.0"
    assert audit.apparent_version({**known, "16.0": "O", "17.0": "O", "18.0": "O"}) == "15.1"
    assert audit.apparent_version({**known, "15.0": "L/S"}) == "18.0"
