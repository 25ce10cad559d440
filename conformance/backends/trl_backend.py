"""TRL: what ``SFTTrainer`` turns one conversation into, with ``assistant_only_loss=True``.

Only the chat check applies (capabilities ``{CHAT}``): TRL does not encode or
decode text itself -- it calls the transformers tokenizer -- so encode/decode
raise ``NotImplementedError`` and are not declared.

How, without training: ``load`` builds a real ``SFTTrainer`` once over a
random 1-layer ``LlamaForCausalLM`` (hidden size 16, the export's vocabulary;
nothing is downloaded) and the export loaded with ``AutoTokenizer``, with
``SFTConfig(assistant_only_loss=True, max_length=None, packing=False)``.
``chat`` then passes a one-row ``datasets.Dataset`` ``{"messages": [...]}``
through ``SFTTrainer._prepare_dataset`` -- TRL's own pipeline: ChatML
conversion, ``apply_chat_template(return_assistant_tokens_mask=True)`` over
the template's ``{% generation %}`` markers, and the ``labels`` build. TRL
1.16 drops the ``assistant_masks`` column once it has folded it into
``labels`` (-100 outside the loss), so the mask returned is
``[label != -100 for label in labels]`` -- lossless, since no token id is -100.

``add_generation_prompt=True`` is passed the way TRL datasets pass template
arguments: a ``chat_template_kwargs`` column. ``max_length=None`` because
SFTConfig's default (1024) would truncate long chats.

Behaviour the suite sees as-is (never fixed here):

- a conversation with no assistant turn has no token in the loss, and TRL
  raises ``RuntimeError("...at least one example has no assistant tokens...")``;
- content holding a special string (``<|assistant|>``) becomes the control
  token: the template is a string (transformers#29279);
- pad == eos would mask EOS out of the loss (TRL#1623); the stacktok export has
  a distinct ``<|pad|>``, and ``load`` checks that TRL kept it.

Install: ``pip install torch==2.13.0 && pip install trl datasets`` (see
``conformance/INSTALL-heavy.md``; torch first, or pip takes a CUDA build).

Out of scope: packing, padding-free batches, prompt-completion datasets and
the collator (it only pads what ``_prepare_dataset`` produced).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from conformance.backends import READS
from conformance.backends._base import BaseBackend
from conformance.core.protocol import BackendMissing, Capability, ChatShapeUnsupported, ExportAbsent

INSTALL_HINT = (
    "pip install torch==2.13.0 && pip install trl datasets "
    "(torch first: the CPU wheel on disk; see conformance/INSTALL-heavy.md)"
)


def _hf_dir(export_dir: object) -> Path:
    """Accept a directory path or a ``conformance.core.layout.Exports``."""
    hf = getattr(export_dir, "hf_dir", export_dir)
    if hf is None or not (Path(hf) / "tokenizer.json").is_file():
        raise ExportAbsent("no tokenizer.json in the export directory: TRL loads the HF export")
    return Path(hf)


class TrlBackend(BaseBackend):
    name = "trl"
    reads = READS[name]
    capabilities = frozenset({Capability.CHAT})
    #: TRL raises "no assistant tokens" for an example with no assistant turn under
    #: assistant_only_loss; such chats are not applicable, not failures.
    chat_requires_assistant = True
    mask_source = "SFTTrainer._prepare_dataset labels (-100 = not in the loss)"

    def __init__(self, trainer, tokenizer, args, datasets_mod, *, version: str) -> None:
        self.trainer = trainer
        self.tokenizer = tokenizer
        self.args = args
        self._datasets = datasets_mod
        self.version = version

    def prepare(self, messages: Sequence[Mapping[str, str]], *, add_generation_prompt: bool) -> dict:
        """The row ``SFTTrainer`` would train on: ``input_ids`` and ``labels``."""
        row: dict = {"messages": [{"role": m["role"], "content": m["content"]} for m in messages]}
        if add_generation_prompt:
            row["chat_template_kwargs"] = {"add_generation_prompt": True}
        ds = self._datasets.Dataset.from_list([row])
        logging_mod = self._datasets.utils.logging
        bars = logging_mod.is_progress_bar_enabled()
        logging_mod.disable_progress_bar()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = self.trainer._prepare_dataset(ds, self.tokenizer, self.args, False, None, "stacktok")
        finally:
            if bars:
                logging_mod.enable_progress_bar()
        return out[0]

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[list[int], list[int]]:
        if tools is not None or template_kwargs:
            raise ChatShapeUnsupported("the TRL adapter passes no tools or template keyword arguments")
        row = self.prepare(messages, add_generation_prompt=add_generation_prompt)
        ids = [int(i) for i in row["input_ids"]]
        mask = [0 if label == -100 else 1 for label in row["labels"]]
        return ids, mask


def load(export_dir: object, artifact: Path | None = None) -> TrlBackend:
    """An ``SFTTrainer`` over a tiny random model and the export; ``artifact`` is unused."""
    hf_dir = _hf_dir(export_dir)
    # The one command that installs each top-level package the import may miss:
    install = {
        "trl": INSTALL_HINT,
        "torch": "pip install torch==2.13.0 (the CPU wheel; see conformance/INSTALL-heavy.md)",
        "datasets": "pip install datasets",
        "transformers": "pip install 'stacktok[hf]'",
    }
    try:
        import importlib

        importlib.import_module("trl")  # first, so a missing TRL is named as such
        import datasets
        import torch  # noqa: F401 -- TRL needs it; a clear message if it is absent
        import transformers
        import trl
        from trl import SFTConfig, SFTTrainer
    except ModuleNotFoundError as exc:
        top = (exc.name or "trl").split(".")[0]
        needed = "" if top == "trl" else " (TRL needs it)"
        raise BackendMissing(
            f"{top} is not installed{needed}; install: {install.get(top, f'pip install {top}')}"
        ) from None
    except ImportError as exc:
        raise BackendMissing(f"trl cannot be imported ({exc}); {INSTALL_HINT}") from None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = transformers.AutoTokenizer.from_pretrained(str(hf_dir), trust_remote_code=False)
        if tok.pad_token_id is None or tok.pad_token_id == tok.eos_token_id:
            raise BackendMissing(
                "the export has no pad token distinct from eos: TRL would mask EOS out of the loss (TRL#1623)"
            )
        config = transformers.LlamaConfig(
            vocab_size=len(tok),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=131072,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        model = transformers.LlamaForCausalLM(config)
        out_dir = tempfile.mkdtemp(prefix="stacktok-trl-")
        atexit.register(shutil.rmtree, out_dir, True)
        args = SFTConfig(
            output_dir=out_dir,
            assistant_only_loss=True,
            max_length=None,
            packing=False,
            report_to="none",
            use_cpu=True,
            dataset_num_proc=None,
            shuffle_dataset=False,
        )
        seed = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        train = datasets.Dataset.from_list([{"messages": seed}])
        bars = datasets.utils.logging.is_progress_bar_enabled()
        datasets.utils.logging.disable_progress_bar()
        try:
            trainer = SFTTrainer(model=model, args=args, train_dataset=train, processing_class=tok)
        finally:
            if bars:
                datasets.utils.logging.enable_progress_bar()
    if trainer._tokenizer.pad_token_id == trainer._tokenizer.eos_token_id:
        raise BackendMissing("TRL set pad == eos; EOS would leave the loss (TRL#1623)")
    return TrlBackend(trainer, tok, args, datasets, version=trl.__version__)
