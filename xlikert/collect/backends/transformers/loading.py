"""Loading a transformers model for collection: weights, tokenizer, answer rule, provenance.

:func:`load_model` loads a model entry (a built-in offline name, a Hugging Face id,
a local folder or a GGUF file) and :func:`wrap_model` wraps a model already in
memory; both give a :class:`LoadedModel`. torch and transformers are imported
inside the functions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ....core.errors import CollectionError
from ...answers.numerals import rule_scripts
from ...answers.sequences import AnswerSequences
from ...answers.spellings import answer_rule
from ...answers.tokens import ValidTokens
from ...foreign import Tokenizer, TorchModule
from ...options import CollectOptions
from ...templates import PromptTemplate
from ..inprocess import ModelFiles, model_provenance, resolve_dtype

__all__ = ["READOUT", "LoadedModel", "load_dtype", "load_model", "wrap_model"]

#: What the transformers backend does, recorded per model (``collection_protocol``).
READOUT = (
    "one forward pass per (condition, item): xlikert's token ids of the prompt, one "
    "teacher-forced row per answer context (a bare space token, the first tokens of a "
    "multi-token answer), the system prompt's KV cache shared by the items (checked against "
    "an uncached pass); log-softmax of the logits over the full vocabulary in float64 "
    "(xlikert.kernels.readout.next_token_readout); the decoding grid by xlikert's tie rule on the "
    "full vocabulary"
)


def _torch_dtype(dtype: str | None, device: str, where: str = "transformers"):
    """The torch dtype (:func:`~xlikert.collect.backends.inprocess.resolve_dtype`): ``auto`` is
    float32 without a GPU, bfloat16 (else float16) on CUDA."""
    import torch

    gpu = device.startswith("cuda") and torch.cuda.is_available()
    on_gpu = "bfloat16" if gpu and torch.cuda.is_bf16_supported() else "float16"
    return getattr(torch, resolve_dtype(dtype, gpu=gpu, on_gpu_auto=on_gpu, where=where))


def _default_device(device: str | None) -> str:
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise CollectionError(
            f"unknown device {device!r}; use 'cpu', 'cuda', 'cuda:1', 'mps' or 'auto' ({exc})"
        ) from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise CollectionError(f"device {device!r} requested but CUDA is not available")
    return device


def load_dtype(spec: dict[str, Any], options: CollectOptions) -> str:
    """The dtype a model entry's weights load in (:func:`load_model`'s rule), without loading.

    The entry's ``dtype`` and ``device``, else the run's options'; ``auto`` resolved
    for that device.
    """
    device = _default_device(spec.get("device", options.device))
    dtype = _torch_dtype(spec.get("dtype", options.dtype), device, f"model {spec['name']!r}")
    return str(dtype).replace("torch.", "")


@dataclass
class LoadedModel:
    """A transformers model ready to score prompts, with its answer rule and provenance."""

    name: str
    model: Any
    tokenizer: Tokenizer
    template: PromptTemplate
    valid: ValidTokens
    answers: AnswerSequences
    provenance: dict[str, Any] = field(default_factory=dict)
    #: Cached passes checked against an uncached one on this loaded model (weights,
    #: device, dtype), once each: ``"prefix"`` (a shared prompt prefix) and
    #: ``"trace read"`` (the answer read on a trace's sampling cache).
    cache_checked: set[str] = field(default_factory=set, repr=False)
    #: False once a check found a cached pass that differs: caching is off for the model.
    cache_ok: bool = True

    @property
    def device(self):
        return self.model.device

    @property
    def prompt_format(self) -> str:
        return self.template.format

    def __repr__(self) -> str:
        return (
            f"<LoadedModel {self.name!r} source={self.provenance.get('source')!r} "
            f"format={self.prompt_format} valid_tokens={len(self.valid.ids)} "
            f"answer_spellings={len(self.answers.sequences)} "
            f"device={self.provenance.get('device')} dtype={self.provenance.get('dtype')}>"
        )

    def render(
        self, system: str, user: str, *, thinking: bool = False, reasoning: bool = False
    ) -> str:
        """The exact text sent to the model for one (system, user) pair
        (:meth:`PromptTemplate.render <xlikert.collect.templates.PromptTemplate.render>`)."""
        return self.template.render(system, user, thinking=thinking, reasoning=reasoning)

    def encode(self, text: str) -> list[int]:
        """Token ids of a rendered prompt (no duplicated BOS)."""
        return self.template.encode(text)


def load_model(
    spec: dict[str, Any] | str,
    scale: Sequence[int],
    *,
    device: str | None = None,
    dtype: str | None = None,
    device_map: str | None = None,
    trust_remote_code: bool = False,
    split_space: bool = True,
    files: ModelFiles | None = None,
    numerals: str = "any",
) -> LoadedModel:
    """Load a model for collection.

    Parameters
    ----------
    spec
        A built-in zoo name, a Hugging Face id, a local directory or ``.gguf`` file,
        or a dict with ``name``, ``source`` and optional ``revision``, ``dtype``,
        ``device``, ``device_map``, ``gguf_file``, ``trust_remote_code``,
        ``prompt_format`` (``"chat"``/``"plain"``).
    scale
        Scale values whose valid tokens are looked up.
    device, dtype, device_map
        Defaults for keys missing from ``spec``; ``dtype="auto"`` is float32 on
        CPU and bf16 (else fp16) on CUDA; the softmax is always float64.
    trust_remote_code
        Off unless asked.
    split_space
        Also count answers whose leading space is a token of its own (``"▁"``
        then ``"5"``), exactly, in the same forward pass
        (:data:`~xlikert.collect.answers.spellings.SPACED_ANSWER_RULE`). Off: the paper's
        one-token rule, where such answers are constraint failures.
    files
        What ``spec`` resolves to, resolved already in this run (the checked weights,
        the tokenizer: :class:`~xlikert.collect.backends.inprocess.ModelFiles`); None: resolved here.

    Examples
    --------
    >>> lm = load_model("smollm2-135m-instruct", range(1, 8))  # doctest: +SKIP
    >>> lm.prompt_format  # doctest: +SKIP
    'chat'
    """
    import transformers
    from transformers import AutoModelForCausalLM

    spec = {"name": spec, "source": spec} if isinstance(spec, str) else dict(spec)
    source = str(spec.get("source") or spec.get("name"))
    name = str(spec.get("name") or source)
    device = _default_device(spec.get("device", device))
    dev_map = spec.get("device_map", device_map)
    torch_dtype = _torch_dtype(spec.get("dtype", dtype), device, f"model {name!r}")
    trc = bool(spec.get("trust_remote_code", trust_remote_code))
    t0 = time.perf_counter()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    try:
        files = files or ModelFiles.resolve(spec, trc)
        folder, prov = files.folder, dict(files.provenance)
        kwargs: dict[str, Any] = {"dtype": torch_dtype, "trust_remote_code": trc}
        if spec.get("revision"):
            kwargs["revision"] = spec["revision"]
        if dev_map:
            import importlib.util

            if importlib.util.find_spec("accelerate") is None:
                raise CollectionError(
                    f"model {name!r}: device_map={dev_map!r} needs the 'accelerate' package "
                    "(pip install accelerate)"
                )
            kwargs["device_map"] = dev_map
        try:
            model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
            tokenizer = files.tokenizer()
        except OSError as exc:
            raise CollectionError(f"cannot load model {name!r} from {source!r}: {exc}") from exc
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    if not prov.get("revision"):
        prov["revision"] = str(getattr(model.config, "_commit_hash", None) or "")
    if not dev_map:
        model.to(device)
    prov = {"source": source, **prov, "dtype": str(torch_dtype).replace("torch.", ""),
            "device": str((dev_map and f"device_map={dev_map}") or model.device)}  # fmt: skip
    lm = wrap_model(
        name, model, tokenizer, scale,
        prompt_format=spec.get("prompt_format"), split_space=split_space, provenance=prov,
        numerals=numerals,
    )  # fmt: skip
    lm.provenance["load_seconds"] = round(time.perf_counter() - t0, 2)
    return lm


def wrap_model(
    name: str,
    model: TorchModule,
    tokenizer: Tokenizer,
    scale: Sequence[int],
    *,
    prompt_format: str | None = None,
    split_space: bool = True,
    provenance: dict[str, Any] | None = None,
    numerals: str = "any",
) -> LoadedModel:
    """A :class:`LoadedModel` around a transformers model already in memory.

    What :func:`load_model` does once the weights are loaded: the prompt
    template, the answer rule (checked against the model's vocabulary) and the
    provenance. A caller that builds a model itself (random weights for a
    benchmark, a model it already holds) passes it through here and hands the
    result to :class:`LocalModel`, e.g. through ``collect(loader=...)``.

    Parameters
    ----------
    name
        The model's name (messages, provenance).
    model, tokenizer
        A transformers causal LM (on its device) and its tokenizer.
    scale
        Scale values whose valid tokens are looked up.
    prompt_format
        ``"chat"``, ``"plain"`` or None (chat when the tokenizer has a template).
    split_space
        As in :func:`load_model`.
    provenance
        Entries recorded first (``source``, ``revision``, ``sha256``, ...); ``dtype``
        and ``device`` default to the model's.
    """
    import torch
    import transformers

    model.eval()
    template = PromptTemplate(tokenizer, name, prompt_format)
    valid, answers, rule = answer_rule(
        tokenizer, scale, split_space=split_space, scripts=rule_scripts(numerals, None)
    )
    n_vocab = model.get_output_embeddings().weight.shape[0]
    if max((*answers.need, *(answers.pooled or ()))) >= n_vocab:
        raise CollectionError(f"model {name!r}: valid token ids exceed the model's vocabulary")
    given = dict(provenance or {})
    source = str(given.pop("source", name))
    dtype = str(given.pop("dtype", str(model.dtype).replace("torch.", "")))
    device = str(given.pop("device", model.device))
    prov = model_provenance(
        source,
        given,
        backend="transformers",
        tokenizer=tokenizer,
        tokenizer_fallback=str(getattr(tokenizer, "name_or_path", "")),
        dtype=dtype,
        template=template,
        answers=rule,
        collection_protocol=READOUT,
    )
    prov.update(
        device=device,
        architecture=type(model).__name__,
        transformers=transformers.__version__,
        torch=torch.__version__,
    )
    return LoadedModel(name, model, tokenizer, template, valid, answers, prov)


# ---------------------------------------------------------------------------- reading
