"""vLLM: its tokenizer layer, its chat renderer and its v1 incremental detokenizer, on the CPU.

No model runs. The adapter builds what a vLLM server builds before any
forward pass -- ``ModelConfig`` -> ``VllmConfig`` -> ``renderer_from_config``
(an ``HfRenderer`` over the tokenizer that ``vllm.tokenizers.get_tokenizer``
loads) -- and calls the same methods the ``/tokenize``, ``/detokenize`` and
chat routes call:

- trusted encode: ``renderer.tokenize_prompt(TextPrompt, TokenizeParams(
  max_total_tokens=None, max_output_tokens=0, add_special_tokens=False))``,
  i.e. ``/tokenize`` with ``add_special_tokens=false``; special strings parse.
- default encode: the same with ``add_special_tokens=True`` (``/tokenize``'s
  default). It parses special strings: *unsafe*.
- safe encode: vLLM 0.33 has **no** safe path. ``/tokenize`` no longer takes
  ``split_special_tokens`` (PR#11691's field is gone) and the renderer drops
  unknown tokenization kwargs with a warning. The safe path therefore calls the
  HF tokenizer object vLLM loaded (``renderer.get_tokenizer()``, vLLM's cached,
  pooled wrapper) with ``add_special_tokens=False, split_special_tokens=True``:
  that is what code holding a vLLM tokenizer can do, not what a request can.
  :data:`SAFE_PATH` records this so the report can say so.
- decode: ``renderer.tokenize_prompt(TokensPrompt, ...needs_detokenization=True)``
  (``/detokenize``): vLLM returns *text*, so ``decode_bytes`` is its UTF-8.
  Exact for complete characters; a partial character comes back as U+FFFD
  (``decode_exact = False``: the suite compares single tokens after the same
  lossy replacement).
- chat: ``renderer.render_messages`` (vLLM's message parsing, content-format
  detection and ``safe_apply_chat_template``) then ``tokenize_prompt`` -- the
  ids ``/tokenize`` returns for ``messages``. vLLM has no loss mask. The mask is
  taken from the transformers tokenizer vLLM wraps, through vLLM's own
  ``safe_apply_chat_template`` with ``return_dict=True,
  return_assistant_tokens_mask=True`` on the conversation vLLM parsed; the
  adapter raises if those ids differ from the renderer's (:data:`MASK_SOURCE`).
- stream: ``IncrementalDetokenizer.from_new_request`` (``FastIncrementalDetokenizer``
  over ``tokenizers.decoders.DecodeStream`` for this tokenizer) fed one token
  per ``update`` call, ``skip_special_tokens=False`` so specials stream as text
  like ``decode_bytes``; one delta per token, then the ``finished=True`` flush.

vLLM needs a model config beside the tokenizer files. ``load`` stages a
temporary directory with symlinks to the export's files plus a ``config.json``
for a 1-layer Llama of the artifact's vocabulary (no weights are read). It sets
``VLLM_TARGET_DEVICE=cpu`` (the PyPI wheel is a CUDA build; without it vLLM
cannot infer a device on a CPU-only machine) and ``HF_HUB_OFFLINE=1`` unless
already set, before vLLM is imported.

Install on a CPU-only machine: ``conformance/INSTALL-heavy.md`` (vLLM's
own dependency pins pull a CUDA torch and ~9 GB; the recipe avoids that).

Out of scope: generation, sampling, stop strings, ``skip_special_tokens=True``
streaming (what vLLM serves by default) -- specials would vanish from the text.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from conformance.backends import READS
from conformance.backends._base import BaseBackend
from conformance.core.protocol import BackendMissing, Capability, ChatShapeUnsupported, ExportAbsent

INSTALL_HINT = (
    "run `nox -s conformance -- --vllm VERSION`, or follow the CPU recipe in conformance/INSTALL-heavy.md"
)
#: How the untrusted-text path is reached (vLLM's request API has none).
SAFE_PATH = "hf-tokenizer-held-by-vllm: tok(text, add_special_tokens=False, split_special_tokens=True)"
#: Where the chat loss mask comes from (vLLM computes none).
MASK_SOURCE = "transformers via vllm.renderers.hf.safe_apply_chat_template(return_assistant_tokens_mask=True)"

_VOCAB_FALLBACK = 32768


def _hf_dir(export_dir: object) -> Path:
    """Accept a directory path or a ``conformance.core.layout.Exports``."""
    hf = getattr(export_dir, "hf_dir", export_dir)
    if hf is None:
        raise ExportAbsent("no tokenizer.json in the export directory: vLLM loads the HF export")
    hf = Path(hf)
    if not (hf / "tokenizer.json").is_file():
        raise ExportAbsent(f"{hf} has no tokenizer.json: vLLM loads the HF export directory")
    return hf


def _stage(hf_dir: Path) -> Path:
    """A model directory vLLM accepts: the export's files plus a tiny model config."""
    stage = Path(tempfile.mkdtemp(prefix="stacktok-vllm-"))
    atexit.register(shutil.rmtree, stage, True)
    for f in hf_dir.iterdir():
        if f.is_file() and f.name != "config.json":
            (stage / f.name).symlink_to(f.resolve())
    cfg = json.loads((hf_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    vocab = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    ids = [
        *vocab.get("model", {}).get("vocab", {}).values(),
        *map(int, cfg.get("added_tokens_decoder", {})),
    ]
    n_vocab = max(ids) + 1 if ids else _VOCAB_FALLBACK
    added = {v["content"]: int(k) for k, v in cfg.get("added_tokens_decoder", {}).items()}
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": n_vocab,
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 131072,
        "bos_token_id": added.get(cfg.get("bos_token")),
        "eos_token_id": added.get(cfg.get("eos_token")),
        "pad_token_id": added.get(cfg.get("pad_token")),
        "torch_dtype": "float32",
    }
    (stage / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return stage


class VllmBackend(BaseBackend):
    name = "vllm"
    reads = READS[name]
    decode_exact = False
    capabilities = frozenset(Capability)  # every check; see the module docstring for how
    safe_path = SAFE_PATH
    mask_source = MASK_SOURCE

    def __init__(self, renderer, *, version: str, mods: dict) -> None:
        self.renderer = renderer
        self.tok = renderer.get_tokenizer()
        # long probes are deliberate; the gate checks model_max_length itself
        warned = getattr(self.tok, "deprecation_warnings", None)
        if isinstance(warned, dict):
            warned["sequence-length-is-longer-than-the-specified-maximum"] = True
        self.version = version
        self._m = mods
        self._ids = itertools.count(1)

    # ------------------------------------------------------------------ encode
    def _tok_params(self, **kw):
        return self._m["TokenizeParams"](max_total_tokens=None, max_output_tokens=0, **kw)

    def _tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        prompt = self._m["TextPrompt"](prompt=text)
        out = self.renderer.tokenize_prompt(prompt, self._tok_params(add_special_tokens=add_special_tokens))
        return list(out["prompt_token_ids"])

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        if allow_special:
            return self._tokenize(text, add_special_tokens=False)
        out = self.tok(text, add_special_tokens=False, split_special_tokens=True)
        return list(out["input_ids"])

    def default_encode(self, text: str) -> list[int]:
        return self._tokenize(text, add_special_tokens=True)

    # ------------------------------------------------------------------ decode
    def decode_text(self, ids: Sequence[int]) -> str:
        prompt = self._m["TokensPrompt"](prompt_token_ids=[int(i) for i in ids])
        out = self.renderer.tokenize_prompt(prompt, self._tok_params(needs_detokenization=True))
        return out["prompt"]

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self.decode_text(ids).encode("utf-8")

    # ------------------------------------------------------------------ chat
    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[list[int], list[int]]:
        if tools is not None:  # counted not applicable, never a failure, until run in `nox -s heavy`
            raise ChatShapeUnsupported("the vLLM adapter does not pass tool definitions to the renderer yet")
        kwargs = {
            **dict(template_kwargs or {}),
            "add_generation_prompt": add_generation_prompt,
            "continue_final_message": False,
        }
        params = self._m["ChatParams"](
            chat_template=None,
            chat_template_content_format="auto",
            chat_template_kwargs=dict(kwargs),
        )
        conversation, prompt = self.renderer.render_messages([dict(m) for m in messages], params)
        ids = list(
            self.renderer.tokenize_prompt(prompt, self._tok_params(add_special_tokens=False))[
                "prompt_token_ids"
            ]
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = self._m["safe_apply_chat_template"](
                self.renderer.model_config,
                self.tok,
                conversation,
                chat_template=None,
                tokenize=True,
                return_dict=True,
                return_assistant_tokens_mask=True,
                **kwargs,
            )
        if list(out["input_ids"]) != ids:
            raise RuntimeError("vLLM's rendered chat ids and the mask render's ids differ; mask unusable")
        return ids, [int(b) for b in out["assistant_masks"]]

    # ------------------------------------------------------------------ stream
    def stream(self, ids: Sequence[int]) -> list[str]:
        params = self._m["SamplingParams"](skip_special_tokens=False, max_tokens=max(1, len(ids)))
        request = self._m["EngineCoreRequest"](
            request_id=f"stacktok-stream-{next(self._ids)}",
            prompt_token_ids=[],
            mm_features=None,
            sampling_params=params,
            pooling_params=None,
            arrival_time=time.time(),
            lora_request=None,
            cache_salt=None,
            data_parallel_rank=None,
        )
        det = self._m["IncrementalDetokenizer"].from_new_request(self.tok, request)
        pieces = []
        for i in ids:
            det.update([int(i)], False)
            pieces.append(det.get_next_output_text(False, True))
        pieces.append(det.get_next_output_text(True, True))
        return pieces

    @property
    def detokenizer_class(self) -> str:
        """Which incremental detokenizer vLLM picks for this tokenizer."""
        return (
            "FastIncrementalDetokenizer" if self._m["uses_fast"](self.tok) else "SlowIncrementalDetokenizer"
        )


def load(export_dir: object, artifact: Path | None = None) -> VllmBackend:
    """vLLM's renderer over ``export_dir`` (a directory or ``Exports``); ``artifact`` is unused."""
    hf_dir = _hf_dir(export_dir)
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import vllm
        from vllm.config import ModelConfig, VllmConfig
        from vllm.inputs import TextPrompt, TokensPrompt
        from vllm.renderers import ChatParams, TokenizeParams, renderer_from_config
        from vllm.renderers.hf import safe_apply_chat_template
        from vllm.sampling_params import SamplingParams
        from vllm.v1.engine import EngineCoreRequest
        from vllm.v1.engine.detokenizer import IncrementalDetokenizer, uses_fast_detokenizer
    except ImportError as exc:
        raise BackendMissing(f"vllm cannot be imported ({exc}); {INSTALL_HINT}") from None
    stage = _stage(hf_dir)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model_config = ModelConfig(model=str(stage), tokenizer=str(stage))
            renderer = renderer_from_config(VllmConfig(model_config=model_config))
    except ImportError as exc:
        raise BackendMissing(
            f"vllm {vllm.__version__} is missing a dependency ({exc}); {INSTALL_HINT}"
        ) from None
    except Exception as exc:  # noqa: BLE001 -- any failure to build the renderer means "cannot load"
        raise BackendMissing(
            f"vllm {vllm.__version__} cannot build its renderer on this machine "
            f"({type(exc).__name__}: {exc}); {INSTALL_HINT}"
        ) from None
    mods = {
        "TextPrompt": TextPrompt,
        "TokensPrompt": TokensPrompt,
        "ChatParams": ChatParams,
        "TokenizeParams": TokenizeParams,
        "safe_apply_chat_template": safe_apply_chat_template,
        "SamplingParams": SamplingParams,
        "EngineCoreRequest": EngineCoreRequest,
        "IncrementalDetokenizer": IncrementalDetokenizer,
        "uses_fast": uses_fast_detokenizer,
    }
    backend = VllmBackend(renderer, version=vllm.__version__, mods=mods)
    atexit.register(_shutdown, renderer)
    return backend


def _shutdown(renderer) -> None:
    try:
        renderer.shutdown()
    except Exception:  # noqa: BLE001 -- best effort at interpreter exit
        pass
