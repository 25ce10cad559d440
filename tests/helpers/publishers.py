"""Checkpoints shaped as other publishers ship them, on the sdist's vocabularies and templates.

Each :class:`Publisher` names a llama.cpp vocabulary of the llama-cpp-python sdist
(``models/ggml-vocab-NAME.gguf``), the publisher's chat template from ``models/templates/`` (or
none: a base model), and the configs as the publisher's repository has them (token strings,
``generation_config.json`` eos lists, ``config.json`` ids and an embedding larger than the
vocabulary, as Qwen pads it). :func:`export_vocab` runs ``stacktok import`` and ``stacktok export``
once per vocabulary (the template goes into the GGUF as ``convert_hf_to_gguf.py`` copies it);
:func:`build` copies an export and writes the configs.

Configs are the publishers' as of their release pages (Qwen2.5-7B-Instruct, Qwen3-0.6B,
Llama-3.1-8B base); keys that only concern weights are left out.

Out of scope: Llama-3.1-Instruct (:mod:`tests.helpers.real_checkpoint`, with its traps); vocabularies
the sdist does not ship (DeepSeek-R1-Distill's renamed Llama-3 specials).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import llama_vocab
from .gguf_edit import rewrite_gguf
from .json_edit import edit_json
from .real_checkpoint import _stacktok


@dataclass(frozen=True)
class Publisher:
    name: str
    vocab: str
    template: str | None  # a models/templates/ name; None for a base model
    tokenizer_config: dict[str, Any]
    generation_config: dict[str, Any]
    model_config: dict[str, Any] = field(default_factory=dict)


_QWEN_CONFIG = {
    "add_bos_token": False,
    "add_prefix_space": False,
    "bos_token": None,
    "clean_up_tokenization_spaces": False,
    "eos_token": "<|im_end|>",
    "errors": "replace",
    "model_max_length": 131072,
    "pad_token": "<|endoftext|>",
    "split_special_tokens": False,
    "tokenizer_class": "Qwen2Tokenizer",
    "unk_token": None,
}

PUBLISHERS = {
    "qwen25-instruct": Publisher(
        "qwen25-instruct",
        "qwen2",
        "Qwen-Qwen2.5-7B-Instruct",
        _QWEN_CONFIG,
        {
            "bos_token_id": 151643,
            "pad_token_id": 151643,
            "do_sample": True,
            "eos_token_id": [151645, 151643],
            "repetition_penalty": 1.05,
            "temperature": 0.7,
            "top_p": 0.8,
            "top_k": 20,
            "transformers_version": "4.37.0",
        },
        {
            "architectures": ["Qwen2ForCausalLM"],
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "model_type": "qwen2",
            "vocab_size": 152064,
        },
    ),
    "qwen3": Publisher(
        "qwen3",
        "qwen2",
        "Qwen-Qwen3-0.6B",
        {**_QWEN_CONFIG, "model_max_length": 131072},
        {
            "bos_token_id": 151643,
            "do_sample": True,
            "eos_token_id": [151645, 151643],
            "pad_token_id": 151643,
            "temperature": 0.6,
            "top_k": 20,
            "top_p": 0.95,
            "transformers_version": "4.51.0",
        },
        {
            "architectures": ["Qwen3ForCausalLM"],
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "model_type": "qwen3",
            "vocab_size": 151936,
        },
    ),
    "llama31-base": Publisher(
        "llama31-base",
        "llama-bpe",
        None,
        {
            "bos_token": "<|begin_of_text|>",
            "clean_up_tokenization_spaces": True,
            "eos_token": "<|end_of_text|>",
            "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": 131072,
            "tokenizer_class": "PreTrainedTokenizerFast",
        },
        {
            "bos_token_id": 128000,
            "do_sample": True,
            "eos_token_id": 128001,
            "temperature": 0.6,
            "top_p": 0.9,
            "transformers_version": "4.43.0.dev0",
        },
        {
            "architectures": ["LlamaForCausalLM"],
            "bos_token_id": 128000,
            "eos_token_id": 128001,
            "model_type": "llama",
            "vocab_size": 128256,
        },
    ),
}


@dataclass(frozen=True)
class Export:
    artifact: Path
    out: Path  # NAME-hf/, NAME.gguf, NAME.tiktoken


def export_vocab(root: Path, sdist: Path, vocab: str, template: str | None) -> Export:
    """``stacktok import`` of ``ggml-vocab-VOCAB.gguf`` carrying ``template`` (by name; none for a
    base model) as a converted checkpoint's GGUF does, and ``stacktok export`` of it: the artifact
    holds the publisher's template, as one imported from the publisher's own files does."""
    models = root / "vocab"
    models.mkdir(parents=True, exist_ok=True)
    llama_vocab.extract_models(sdist, models)
    name = vocab.replace("-", "")
    source = root / f"{name}-source.gguf"
    text = llama_vocab.template(sdist, template) if template is not None else None
    rewrite_gguf(models / f"ggml-vocab-{vocab}.gguf", source, _template_edit(text))
    artifact = root / f"{name}.json"
    _stacktok("import", str(source), "--out", str(artifact))
    out = root / "exports"
    try:
        _stacktok("export", "--artifact", str(artifact), "--out", str(out))
    except RuntimeError as exc:
        if "gguf export" not in str(exc):
            raise
        # the exporter refuses a GGUF llama.cpp would load differently (qwen2's ordinary "</s>"):
        # the GGUF is then llama.cpp's own converter's, as the sdist ships it (with the template)
        _stacktok(
            "export", "--artifact", str(artifact), "--out", str(out), "--format", "hf", "--format", "tiktoken"
        )
        shutil.copyfile(source, out / f"{name}.gguf")
    return Export(artifact, out)


def _template_edit(text: str | None):
    def edit(values: dict) -> None:
        values.pop("tokenizer.chat_template", None)
        if text is not None:
            values["tokenizer.chat_template"] = text

    return edit


def build(dest: Path, export: Export, publisher: Publisher, sdist: Path) -> Path:
    """A copy of ``export`` under ``dest`` with ``publisher``'s configs; returns the HF directory."""
    shutil.copytree(export.out, dest)
    hf = next(dest.glob("*-hf"))
    template = llama_vocab.template(sdist, publisher.template) if publisher.template else None

    def configure(cfg: dict) -> None:
        decoder = cfg["added_tokens_decoder"]
        cfg.clear()
        cfg.update({"added_tokens_decoder": decoder, **publisher.tokenizer_config})
        if template is not None:
            cfg["chat_template"] = template

    edit_json(hf / "tokenizer_config.json", configure)
    # the publishers' repositories keep the template inline only (no chat_template.jinja)
    (hf / "chat_template.jinja").unlink(missing_ok=True)
    (hf / "special_tokens_map.json").unlink(missing_ok=True)
    for file, value in (
        ("generation_config.json", publisher.generation_config),
        ("config.json", publisher.model_config),
    ):
        (hf / file).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    return hf
