"""A Llama-3.1-8B-Instruct-shaped checkpoint, built the way docs/import.md tells a user to gate one.

The tokenizer is the llama-bpe vocabulary (Llama 3, 128,256 ids) that llama-cpp-python's sdist
ships (``vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf``): :func:`export_llama_bpe` runs
``stacktok import`` on it (the artifact ``A.json`` the gate judges against) and ``stacktok export``
(``NAME-hf/``, ``NAME.gguf``, ``NAME.tiktoken``), through the real entry point. :func:`llama31`
copies those exports and configures them as Meta ships Llama-3.1-8B-Instruct:

- the chat template Meta ships (the sdist's ``models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja``),
  inline in ``tokenizer_config.json`` as Meta's repository has it, and in the GGUF's
  ``tokenizer.chat_template`` as ``convert_hf_to_gguf.py`` copies it;
- ``tokenizer_config.json``: ``bos_token`` ``<|begin_of_text|>``, ``eos_token`` ``<|eot_id|>``,
  ``clean_up_tokenization_spaces: true``, ``model_max_length`` 131072, ``PreTrainedTokenizerFast``,
  the export's ``added_tokens_decoder``, no ``add_bos_token`` key; ``special_tokens_map.json`` with
  the same bos/eos;
- ``generation_config.json`` and ``config.json`` as Meta's (eos ``[128001, 128008, 128009]``, bos
  128000, ``vocab_size`` 128256);
- ``tokenizer.json`` as exported: its post-processor adds ``<|begin_of_text|>`` to every encode, as
  Meta's does (the source adds BOS), so ``tokenizer(apply_chat_template(chat, tokenize=False))``
  starts with two BOS exactly as it does on Meta's own files.

Edits model what users and publishers change: :func:`saved_by_transformers_5` (what 5.25's
``save_pretrained`` writes: ``tokenizer_class: TokenizersBackend``, ``chat_template.jinja``, merges as
pairs, no ``special_tokens_map.json``), :func:`only_template_adds_bos` (the safe BOS layout), and
the traps: :func:`template_doubles_bos`, :func:`template_drops_eot` (template edits, applied to the
GGUF's copy too) and :func:`eos_without_eot`.

The vocabulary has Llama 3's names: 128008 is ``<|reserved_special_token_4|>`` where Llama 3.1 says
``<|eom_id|>`` (only its ipython tool mode writes it); the ids are the same.

Out of scope: running the gate (:mod:`tests.helpers.gate`); other publishers' checkpoints.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import llama_vocab
from .gguf_edit import rewrite_gguf
from .json_edit import edit_json

NAME = "llama31"
VOCAB = "llama-bpe"
TEMPLATE = "meta-llama-Llama-3.1-8B-Instruct"
BOS, EOS, EOM, EOT = 128000, 128001, 128008, 128009
TOKENIZER_CONFIG = {
    "bos_token": "<|begin_of_text|>",
    "clean_up_tokenization_spaces": True,
    "eos_token": "<|eot_id|>",
    "model_input_names": ["input_ids", "attention_mask"],
    "model_max_length": 131072,
    "tokenizer_class": "PreTrainedTokenizerFast",
}
GENERATION_CONFIG = {
    "bos_token_id": BOS,
    "do_sample": True,
    "eos_token_id": [EOS, EOM, EOT],
    "temperature": 0.6,
    "top_p": 0.9,
    "transformers_version": "4.42.3",
}
MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": BOS,
    "eos_token_id": [EOS, EOM, EOT],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.42.3",
    "use_cache": True,
    "vocab_size": 128256,
}
#: Meta's per-message line of the template; :func:`template_drops_eot` keeps ``<|eot_id|>`` after
#: every turn but the assistant's
MESSAGE_LINE = (
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim"
    " + '<|eot_id|>' }}"
)

Edit = Callable[[Path], None]


@dataclass(frozen=True)
class Exports:
    """``stacktok import`` + ``stacktok export`` of the sdist's llama-bpe vocabulary, and the template."""

    artifact: Path  # A.json
    out: Path  # the export folder: NAME-hf/, NAME.gguf, NAME.tiktoken
    template: str = field(repr=False)  # Meta's chat template, as the sdist ships it


@dataclass(frozen=True)
class RealCheckpoint:
    """A configured copy of the exports: gate ``directory`` with ``--artifact artifact``."""

    artifact: Path
    directory: Path  # NAME-hf, with NAME.gguf and NAME.tiktoken beside it
    template: str = field(repr=False)  # the template it ships (HF and GGUF)


def _stacktok(*argv: str) -> None:
    import stacktok_cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = stacktok_cli.main(list(argv))
    if code != 0:
        raise RuntimeError(f"stacktok {' '.join(argv)} exited {code}: {out.getvalue()[-2000:]}")


def export_llama_bpe(root: Path, sdist: Path) -> Exports:
    """Import the sdist's llama-bpe GGUF and export it under ``root`` (~10 s; build once per module)."""
    models = llama_vocab.extract_models(sdist, _fresh(root / "vocab"))
    artifact = root / f"{NAME}.json"
    _stacktok("import", str(models / f"ggml-vocab-{VOCAB}.gguf"), "--out", str(artifact))
    _stacktok("export", "--artifact", str(artifact), "--out", str(root / "exports"))
    template = llama_vocab.template(sdist, TEMPLATE)
    with_template = root / "with-template.gguf"  # what convert_hf_to_gguf.py writes: the template too
    rewrite_gguf(root / "exports" / f"{NAME}.gguf", with_template, _set_template(template))
    with_template.replace(root / "exports" / f"{NAME}.gguf")
    return Exports(artifact, root / "exports", template)


def llama31(
    dest: Path,
    exports: Exports,
    *,
    template_edit: Callable[[str], str] | None = None,
    gguf_template_edit: Callable[[str], str] | None = None,
    edits: Iterable[Edit] = (),
) -> RealCheckpoint:
    """A copy of ``exports`` under ``dest`` configured as Meta ships Llama-3.1-8B-Instruct (module
    docstring), its template changed by ``template_edit`` (HF and GGUF) and the GGUF's copy by
    ``gguf_template_edit`` too, then each of ``edits``."""
    shutil.copytree(exports.out, dest)
    hf = dest / f"{NAME}-hf"
    template = template_edit(exports.template) if template_edit else exports.template
    if template_edit is not None or gguf_template_edit is not None:
        gguf_path = dest / f"{NAME}.gguf"
        in_gguf = gguf_template_edit(template) if gguf_template_edit else template
        rewrite_gguf(exports.out / f"{NAME}.gguf", gguf_path, _set_template(in_gguf))
    edit_json(hf / "tokenizer_config.json", lambda c: _as_meta(c, template))
    _write_json(hf / "special_tokens_map.json", _special_tokens_map())
    _write_json(hf / "generation_config.json", GENERATION_CONFIG)
    _write_json(hf / "config.json", MODEL_CONFIG)
    for edit in edits:
        edit(hf)
    return RealCheckpoint(exports.artifact, hf, template)


def _as_meta(cfg: dict, template: str) -> None:
    decoder = cfg["added_tokens_decoder"]
    cfg.clear()
    cfg.update({"added_tokens_decoder": decoder, **TOKENIZER_CONFIG, "chat_template": template})


def _special_tokens_map() -> dict:
    def token(text: str) -> dict:
        return {"content": text, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}

    return {"bos_token": token("<|begin_of_text|>"), "eos_token": token("<|eot_id|>")}


def _set_template(template: str) -> Callable[[dict], None]:
    def edit(values: dict) -> None:
        values["tokenizer.chat_template"] = template

    return edit


def _write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


# ------------------------------------------------------------------ what publishers and users change
def saved_by_transformers_5(hf: Path) -> None:
    """What transformers 5.25's ``save_pretrained`` writes for this directory (measured): a short
    ``tokenizer_config.json`` naming ``TokenizersBackend``, the template in ``chat_template.jinja``,
    merges as ``[a, b]`` pairs, no ``special_tokens_map.json``."""
    cfg = json.loads((hf / "tokenizer_config.json").read_text(encoding="utf-8"))
    (hf / "chat_template.jinja").write_text(cfg["chat_template"], encoding="utf-8")
    saved = {k: v for k, v in TOKENIZER_CONFIG.items() if k != "tokenizer_class"}
    _write_json(
        hf / "tokenizer_config.json",
        {"backend": "tokenizers", **saved, "tokenizer_class": "TokenizersBackend"},
    )
    (hf / "special_tokens_map.json").unlink()
    edit_json(
        hf / "tokenizer.json",
        lambda t: t["model"].update(merges=[m.split(" ") for m in t["model"]["merges"]]),
    )


def only_template_adds_bos(hf: Path) -> None:
    """The safe BOS layout: the tokenizer adds nothing (``add_bos_token`` false for transformers 5.x,
    no post-processor for 4.57), so only the template's ``{{ bos_token }}`` starts a chat."""
    edit_json(hf / "tokenizer_config.json", set={"add_bos_token": False})
    edit_json(hf / "tokenizer.json", set={"post_processor": None})


def eos_without_eot(hf: Path) -> None:
    """Trap: ``generation_config.json`` stops at end of text but not at ``<|eot_id|>``, the id the
    template ends every assistant turn with (Llama-3-8B-Instruct's first release; llama.cpp#6772)."""
    edit_json(hf / "generation_config.json", set={"eos_token_id": [EOS, EOM]})


def template_doubles_bos(template: str) -> str:
    """Trap: a fine-tuner's template that writes ``{{ bos_token }}`` before Meta's, which writes it too."""
    return "{{- bos_token }}\n" + template


def template_drops_eot(template: str) -> str:
    """Trap: the template closes every turn with ``<|eot_id|>`` except the assistant's."""
    if MESSAGE_LINE not in template:
        raise ValueError(f"{TEMPLATE}.jinja no longer has the line {MESSAGE_LINE!r}")
    kept = MESSAGE_LINE.replace(" + '<|eot_id|>' }}", " }}") + (
        "{%- if message['role'] != 'assistant' %}{{- '<|eot_id|>' }}{%- endif %}"
    )
    return template.replace(MESSAGE_LINE, kept)


def gguf_knowledge_date(template: str) -> str:
    """Trap: the GGUF carries an older revision of the template (another knowledge date in every
    system header), as a GGUF converted before the publisher updated the template does."""
    return _replace_once(
        template, "Cutting Knowledge Date: December 2023", "Cutting Knowledge Date: December 2022"
    )


def gguf_tool_call_arguments(template: str) -> str:
    """Trap: the GGUF's template writes a tool call's arguments under ``"arguments"`` where the
    Hugging Face one writes ``"parameters"``: only conversations with tool calls differ."""
    return _replace_once(template, "{{- '\"parameters\": ' }}", "{{- '\"arguments\": ' }}")


def jinja_differs_from_inline(hf: Path) -> None:
    """Trap: ``chat_template.jinja`` (what transformers renders) is another template than
    ``tokenizer_config.json``'s ``chat_template`` (what tools reading the config render)."""
    cfg = json.loads((hf / "tokenizer_config.json").read_text(encoding="utf-8"))
    (hf / "chat_template.jinja").write_text(gguf_knowledge_date(cfg["chat_template"]), encoding="utf-8")


def _replace_once(template: str, old: str, new: str) -> str:
    if template.count(old) != 1:
        raise ValueError(f"{TEMPLATE}.jinja no longer has exactly one {old!r}")
    return template.replace(old, new)


def template_marks_generation(template: str) -> str:
    """A training variant of Meta's template (as TRL's ``*_training.jinja`` are): each assistant
    turn's content and ``<|eot_id|>`` wrapped in ``{% generation %}``, the rest unchanged."""
    assistant = (
        "{%- if message['role'] == 'assistant' %}"
        "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
        "{%- generation %}{{- message['content'] | trim + '<|eot_id|>' }}{%- endgeneration %}"
        "{%- else %}" + MESSAGE_LINE + "{%- endif %}"
    )
    return _replace_once(template, MESSAGE_LINE, assistant)
