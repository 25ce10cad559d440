"""Real re-saves: the shipped directory after a user's ``save_pretrained`` (issue #14 item 8).

A user loads ``tokenizer/stack100m-32768-hf`` with ``AutoTokenizer`` and saves it
with the transformers they have -- by hand, or through ``Trainer``/TRL's
``save_model``, which writes the same tokenizer files (measured: TRL 1.16 on
transformers 5.24, byte-identical to ``save_pretrained``). The re-save is made
here, at test time, by the installed transformers; nox runs this file under
4.57.x and 5.x. Measured on 4.57.6 and 5.24.0:

- 4.57 writes the inline chat template to ``chat_template.jinja`` only, adds
  ``extra_special_tokens: {}``, rewrites ``special_tokens_map.json`` and the
  merges as pairs. Behaviour is identical in both majors: the gate passes.
- 5.x writes ``tokenizer_class: TokenizersBackend`` and a list-valued
  ``extra_special_tokens`` (4.57 cannot load either), drops ``add_bos_token``,
  ``added_tokens_decoder``, the inline template and ``special_tokens_map.json``,
  and adds a ``TemplateProcessing`` post-processor with no special tokens (adds
  nothing). Behaviour is identical in 5.x; 4.57 cannot load it. The gate fails
  exactly ``config.loads_in_4x`` and its fix is to copy the exported files back.

Each major's save is also recorded (:func:`saved_by`) and checked against the
real save in that major, so each session also gates the *other* major's
re-save. Out of scope: model weights (TRL's trainer saves none of the tokenizer
differently), and the hub (nothing is downloaded).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import need
from .helpers import (
    CHATS,
    PROBES,
    SHIPPED_HF,
    TRUSTED,
    GateData,
    build_checkpoint,
    edit_json,
    failing,
    gate_data,
    resave,
    run_gate,
)

pytestmark = pytest.mark.transformers  # runs under transformers 4.57.x and 5.x

transformers = need("transformers", "hf")
MAJOR = int(transformers.__version__.split(".")[0])
BACKENDS = "reference,tokenizers,transformers-reload"
LOADS_IN_4X = "config.loads_in_4x[files]"
COPY_BACK = "copy the exported tokenizer files back"
EXPORTED = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")
#: what 5.x writes as tokenizer.json's post_processor when add_bos/eos_token are false: adds no id
EMPTY_TEMPLATE = {
    "type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {},
}


# ------------------------------------------------------------------ re-saves
def _dump(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


def saved_by(major: int, src: Path, dest: Path) -> Path:
    """The re-save of ``src`` as transformers ``major`` writes it (recorded on 4.57.6 / 5.24.0)."""
    dest.mkdir()
    cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    tj = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    tj["model"]["merges"] = [m.split(" ") for m in tj["model"]["merges"]]
    shutil.copy(src / "chat_template.jinja", dest / "chat_template.jinja")
    del cfg["chat_template"]  # both majors keep the template in chat_template.jinja only
    if major >= 5:
        for key in ("add_bos_token", "add_eos_token", "added_tokens_decoder"):
            del cfg[key]
        cfg["extra_special_tokens"] = cfg.pop("additional_special_tokens")
        cfg.update(
            tokenizer_class="TokenizersBackend", backend="tokenizers", is_local=True, local_files_only=False
        )
        tj["post_processor"] = EMPTY_TEMPLATE
    else:
        cfg["extra_special_tokens"] = {}
        smap = json.loads((src / "special_tokens_map.json").read_text(encoding="utf-8"))
        smap["additional_special_tokens"] = [t["content"] for t in smap["additional_special_tokens"]]
        for key in ("bos_token", "eos_token", "pad_token"):
            smap[key].pop("special")
        _dump(dest / "special_tokens_map.json", smap)
    _dump(dest / "tokenizer_config.json", cfg)
    (dest / "tokenizer.json").write_text(json.dumps(tj, indent=2, ensure_ascii=False), encoding="utf-8")
    return dest


def checkpoint(hf: Path) -> Path:
    """A checkpoint around re-saved tokenizer files: GGUF, .tiktoken and model configs beside them."""
    return build_checkpoint(hf, source=None, exports="inside", model_config=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> GateData:
    d = tmp_path_factory.mktemp("resave-data")
    return gate_data(d, texts=PROBES, trusted=TRUSTED, prefix="r-", category="resave")


@pytest.fixture(scope="module")
def resaved(tmp_path_factory) -> Path:
    return resave(tmp_path_factory.mktemp("resave") / "hf")


def run(directory: Path, data: GateData, name: str) -> tuple[int, dict]:
    done = run_gate(directory, data=data, backends=BACKENDS, report=data.report(name))
    return done.code, done.report


def _json(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------ what is written
def test_recorded_save_is_what_this_transformers_writes(resaved, tmp_path) -> None:
    """The premise of every test below; if it fails, transformers changed what it saves: re-measure."""
    recorded = saved_by(MAJOR, SHIPPED_HF, tmp_path / "recorded")
    assert sorted(p.name for p in resaved.iterdir()) == sorted(p.name for p in recorded.iterdir())
    for name in ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if (recorded / name).is_file():
            got, want = _json(resaved / name), _json(recorded / name)
            if name == "tokenizer.json":
                got = {k: v for k, v in got.items() if k != "model"} | {
                    "model": got["model"] == want["model"]
                }
                want = {k: v for k, v in want.items() if k != "model"} | {"model": True}
            assert got == want, f"transformers {transformers.__version__} writes another {name}"
    assert (resaved / "chat_template.jinja").read_bytes() == (SHIPPED_HF / "chat_template.jinja").read_bytes()


def test_resave_keeps_the_fingerprint_and_the_serving_settings(resaved) -> None:
    cfg = _json(resaved / "tokenizer_config.json")
    shipped = _json(SHIPPED_HF / "tokenizer_config.json")
    for key in (
        "stacktok_fingerprint",
        "clean_up_tokenization_spaces",
        "model_max_length",
        "bos_token",
        "pad_token",
    ):
        assert cfg[key] == shipped[key], key


# ------------------------------------------------------------------ behaviour
def _behaviour(directory: Path) -> dict:
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(directory))
    out: dict = {
        "len": len(tok),
        "ids": (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id),
        "all_special_ids": sorted(tok.all_special_ids),
        "settings": (tok.model_max_length, tok.clean_up_tokenization_spaces, tok.padding_side),
        "pad": tok(["a", "hello world again"], padding=True)["input_ids"],
    }
    raw = Tokenizer.from_file(str(directory / "tokenizer.json"))
    for text in PROBES + TRUSTED:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        out[text] = (
            tok(text)["input_ids"],
            ids,
            tok(text, split_special_tokens=True)["input_ids"],
            tok.decode(ids),
            tok.decode(ids, skip_special_tokens=True),
            raw.encode(text).ids,
            raw.encode(text, add_special_tokens=False).ids,
            raw.encode("a b", text).ids,
        )
    for chat in CHATS:
        rendered = tok.apply_chat_template(
            chat["messages"],
            add_generation_prompt=chat["add_generation_prompt"],
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        out[chat["id"]] = (rendered["input_ids"], rendered["assistant_masks"])
    return out


def test_resave_behaves_like_the_export(resaved) -> None:
    """Every difference the re-save makes is in form only: ids, decode, chat ids and masks are equal."""
    assert _behaviour(resaved) == _behaviour(SHIPPED_HF)


# ------------------------------------------------------------------ the gate
def test_gate_on_this_majors_resave(resaved, data, tmp_path) -> None:
    """5.x: exactly config.loads_in_4x fails, fixed by copying the exported files back; 4.57: passes."""
    ckpt = checkpoint(Path(shutil.copytree(resaved, tmp_path / "ckpt")))
    code, report = run(ckpt, data, f"resave-{MAJOR}")
    rows = failing(report)
    if MAJOR >= 5:
        assert code == 1 and set(rows) == {LOADS_IN_4X}, sorted(rows)
        assert COPY_BACK in rows[LOADS_IN_4X]["fix"], rows[LOADS_IN_4X]["fix"]
    else:
        assert code == 0 and not rows, sorted(rows)


def test_gate_on_the_other_majors_resave(data, tmp_path) -> None:
    """Each session also gates the recorded re-save of the other major, loaded by this one."""
    other = 4 if MAJOR >= 5 else 5
    ckpt = checkpoint(saved_by(other, SHIPPED_HF, tmp_path / "ckpt"))
    code, report = run(ckpt, data, f"other-{other}")
    rows = failing(report)
    if other == 4:  # 5.x loads the 4.57 re-save and it behaves identically
        assert code == 0 and not rows, sorted(rows)
        return
    # 4.57 cannot load the 5.x re-save: a real finding, reported as rows, never a traceback
    assert code == 1 and LOADS_IN_4X in rows, sorted(rows)
    assert COPY_BACK in rows[LOADS_IN_4X]["fix"]
    others = {k: r for k, r in rows.items() if k != LOADS_IN_4X}
    assert others and all(r["backend"] == "transformers-reload" for r in others.values()), sorted(rows)
    assert any("TokenizersBackend" in r["message"] for r in others.values()), others


def test_copying_the_exported_files_back_fixes_the_5x_resave(data, tmp_path) -> None:
    """The fix the row names works: the 5.x re-save plus the exported files passes in either major."""
    ckpt = checkpoint(saved_by(5, SHIPPED_HF, tmp_path / "ckpt"))
    for name in EXPORTED:
        shutil.copy(SHIPPED_HF / name, ckpt / name)
    code, report = run(ckpt, data, f"copied-back-{MAJOR}")
    assert code == 0 and not failing(report), sorted(failing(report))


def test_class_name_alone_does_not_make_the_5x_resave_load_in_4x(data, tmp_path) -> None:
    """4.57 also refuses list extra_special_tokens (AttributeError, reported as a protobuf ImportError)."""
    ckpt = checkpoint(saved_by(5, SHIPPED_HF, tmp_path / "ckpt"))
    edit_json(ckpt / "tokenizer_config.json", set={"tokenizer_class": "PreTrainedTokenizerFast"})
    if MAJOR < 5:
        from transformers import AutoTokenizer

        with pytest.raises(Exception):  # noqa: B017 -- 4.57 raises ImportError wrapping AttributeError
            AutoTokenizer.from_pretrained(str(ckpt))
    code, report = run(ckpt, data, f"class-only-{MAJOR}")
    assert code == 1 and LOADS_IN_4X in failing(report), sorted(failing(report))


def test_5x_resave_without_tokenizer_class_is_not_passed(data, tmp_path) -> None:
    """No tokenizer_class and no add_bos_token (a 5.x re-save "fixed" by deleting the class).

    4.57 then picks LlamaTokenizerFast from config.json: ``tok(text)`` prepends <|bos|> (double BOS
    behind the template, vLLM PR#16976) and its default ``<unk>`` becomes id 32768, outside the
    embedding. 5.x behaves like the export. The gate must not pass this directory in either major.
    """
    ckpt = checkpoint(saved_by(5, SHIPPED_HF, tmp_path / "ckpt"))

    def drop_class(cfg: dict) -> None:
        del cfg["tokenizer_class"]
        cfg["additional_special_tokens"] = cfg.pop("extra_special_tokens")

    edit_json(ckpt / "tokenizer_config.json", drop_class, sort_keys=True)
    code, report = run(ckpt, data, f"no-class-{MAJOR}")
    assert code == 1, "a directory that makes transformers 4.57 add BOS passed the gate"
