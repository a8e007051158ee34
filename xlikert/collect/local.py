"""Transformers backend: exact next-token PMFs, one forward pass per (condition, item).

Protocol (paper §3 "Constraint", DESIGN.md §5):

* the prompt's token ids come from :class:`~xlikert.collect.templates.PromptTemplate`
  (chat template with the generation prompt, or the plain format for base models);
* left padding with explicit position ids; only the last positions' logits;
* every answer spelling's context (the prompt, or the prompt + a bare space token,
  or + the first tokens of a multi-token answer) is one teacher-forced row, so one
  pass reads every answer (:class:`~xlikert.collect.tokens.AnswerSequences`);
* the logits go to the shared numpy rules of :mod:`xlikert.constraint`:
  log-softmax over the FULL vocabulary in float64, the temperature/top-p rule, the
  token -> scale sum;
* the system-prompt prefix shared by a group of prompts is run once and its KV
  cache reused for every item (checked against an uncached pass at run time);
* out of memory, the batch is halved and retried, down to one prompt.

Reasoning mode (an entry with ``reasoning = {...}``, :mod:`xlikert.collect.reasoning`):
the M traces of a prompt are sampled in one batch with a KV cache, each from its
own seeded stream (:data:`TRACE_SAMPLER`), then each closed trace is read as
above.

torch and transformers are imported inside functions: importing this module is cheap.
"""

from __future__ import annotations

import copy
import gc
import inspect
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..constraint import next_token_readout
from ..errors import CollectionError
from .device_readout import next_token_readout_torch
from .inprocess import (
    ENTRY_KEYS,
    InProcessModel,
    check_dtype,
    model_provenance,
    resolve_dtype,
)
from .protocol import CollectOptions, check_entry_keys
from .reasoning import check_reasoning, sample_tokens
from .templates import PromptTemplate
from .tokens import AnswerSequences, ValidTokens, answer_rule
from .zoo import check_source, model_folder

__all__ = [
    "LoadedModel",
    "LocalModel",
    "Scorer",
    "check",
    "load_model",
    "open",
    "read_logits",
    "wrap_model",
]


# ---------------------------------------------------------------------------- protocol
#: The keys of a transformers model entry (:func:`load_model`).
KEYS = ENTRY_KEYS | {"device", "device_map"}


def check(spec: dict[str, Any], options: CollectOptions) -> dict[str, Any]:
    """Validate a transformers model entry before anything runs (no heavy imports).

    Keys other than :data:`KEYS` are refused
    (:func:`~xlikert.collect.protocol.check_entry_keys`). A ``reasoning`` table
    is checked and completed with its defaults
    (:func:`~xlikert.collect.reasoning.check_reasoning`), so it enters the run's
    fingerprint as it will run.
    """
    check_entry_keys(spec, KEYS, "transformers")
    check_dtype(spec.get("dtype"), f"model {spec['name']!r}")
    check_source(str(spec["source"]), str(spec["name"]), spec.get("gguf_file"))
    out = dict(spec)
    reasoning = check_reasoning(spec)
    if reasoning is not None:
        out["reasoning"] = reasoning
    return out


def open(spec: dict[str, Any], options: CollectOptions, probe=None) -> LocalModel:
    """Load a model entry into a :class:`LocalModel` (in reasoning mode with ``reasoning``)."""
    lm = load_model(
        spec,
        options.scale,
        device=options.device,
        dtype=options.dtype,
        device_map=options.device_map,
        trust_remote_code=options.trust_remote_code,
        split_space=options.split_space,
    )
    return LocalModel(lm, options, check_reasoning(spec))


# ---------------------------------------------------------------------------- loading
def _is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError | MemoryError):
        return True
    msg = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in msg or "can't allocate memory" in msg
    )


def _torch_dtype(dtype: str | None, device: str, where: str = "transformers"):
    """The torch dtype (:func:`~xlikert.collect.inprocess.resolve_dtype`): ``auto`` is
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


@dataclass
class LoadedModel:
    """A transformers model ready to score prompts, with its answer rule and provenance."""

    name: str
    model: Any
    tokenizer: Any
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
        (:data:`~xlikert.collect.tokens.SPACED_ANSWER_RULE`). Off: the paper's
        one-token rule, where such answers are constraint failures.

    Examples
    --------
    >>> lm = load_model("smollm2-135m-instruct", range(1, 8))  # doctest: +SKIP
    >>> lm.prompt_format  # doctest: +SKIP
    'chat'
    """
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

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
        folder, prov = model_folder(spec)
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
            tokenizer = AutoTokenizer.from_pretrained(
                folder, trust_remote_code=trc, revision=spec.get("revision")
            )
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
    )  # fmt: skip
    lm.provenance["load_seconds"] = round(time.perf_counter() - t0, 2)
    return lm


def wrap_model(
    name: str,
    model: Any,
    tokenizer: Any,
    scale: Sequence[int],
    *,
    prompt_format: str | None = None,
    split_space: bool = True,
    provenance: dict[str, Any] | None = None,
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
    valid, answers, rule = answer_rule(tokenizer, scale, split_space=split_space)
    n_vocab = model.get_output_embeddings().weight.shape[0]
    if max(answers.need) >= n_vocab:
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
def read_logits(
    logits: np.ndarray, answers: AnswerSequences, options: CollectOptions
) -> dict[str, np.ndarray]:
    """Item PMFs, decoding grid and top-k from full-vocabulary logits at every answer context.

    Parameters
    ----------
    logits : np.ndarray
        ``(B, len(answers.contexts), V)`` logits after each prompt followed by
        each context.
    answers
        The answer rule.
    options
        ``top_k``, ``temperatures``, ``top_ps``.

    Returns
    -------
    dict
        ``pmf``, ``valid_mass``, ``decoding_pmf``, ``decoding_valid_mass`` (see
        :meth:`~xlikert.collect.tokens.AnswerSequences.readout`), ``topk_id`` and
        ``topk_logprob`` (``(B, k)``, of the next token after the prompt).
    """
    need = np.asarray(answers.need)
    # one prompt at a time: the full-vocabulary temporaries stay small
    rows = [
        next_token_readout(z, need, options.temperatures, options.top_ps, options.top_k)
        for z in logits
    ]
    raw, grid, topk_id, topk_logprob = (np.stack(a) for a in zip(*rows, strict=True))
    out = answers.readout(raw, np.moveaxis(grid, 1, 3))
    out.update(topk_id=topk_id, topk_logprob=topk_logprob)
    return out


class Scorer:
    """Runs batches of token rows through a :class:`LoadedModel` with a cached prefix."""

    def __init__(self, lm: LoadedModel, *, prefix_cache: bool = True):
        self.lm = lm
        self._wants_cache = prefix_cache
        self._last_prefix: tuple[tuple[int, ...], Any] | None = None
        params = inspect.signature(lm.model.forward).parameters
        self._keep = "logits_to_keep" in params

    @property
    def prefix_cache(self) -> bool:
        """Whether cached passes are used: asked for, and not turned off by a check of
        this loaded model (the checks are properties of the weights, device and dtype:
        made once per LoadedModel and path, :attr:`LoadedModel.cache_checked`)."""
        return self._wants_cache and self.lm.cache_ok

    @property
    def input_device(self):
        return self.lm.model.get_input_embeddings().weight.device

    def prefix_state(self, prefix: list[int]):
        """Run ``prefix`` once; returns its KV cache (or None when caching is off/empty).

        The last prefix's cache is kept: consecutive units with the same shared prefix
        (the same system prompt) reuse it instead of recomputing it. Callers copy it
        before extending it.
        """
        import torch

        if not self.prefix_cache or not prefix:
            return None
        key = tuple(prefix)
        if self._last_prefix is not None and self._last_prefix[0] == key:
            return self._last_prefix[1]
        ids = torch.tensor([prefix], device=self.input_device)
        with torch.inference_mode():
            out = self.lm.model(input_ids=ids, use_cache=True, **self._kw())
        self._last_prefix = (key, out.past_key_values)
        return out.past_key_values

    @property
    def pad_id(self) -> int:
        """The id fed where a row has no token (hidden by the attention mask)."""
        pad = self.lm.tokenizer.pad_token_id
        return 0 if pad is None else pad

    def left_pad(self, rows: list[list[int]]):
        """``(ids, attention)`` tensors ``(len(rows), longest)`` on the model's device,
        each row right-aligned behind padding (attention 0 there)."""
        import torch

        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        att = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, width - len(r) :] = torch.tensor(r)
            att[i, width - len(r) :] = 1
        return ids.to(self.input_device), att.to(self.input_device)

    def _kw(self, keep: int = 1) -> dict:
        return {"logits_to_keep": keep} if self._keep else {}

    def forward(self, prefix: list[int], cache, suffixes: list[list[int]]):
        """Last-position logits ``(B, V)`` of ``prefix + suffix`` for each suffix."""
        return self.forward_rows(prefix, cache, suffixes, keep=1)[:, -1, :]

    def forward_rows(self, prefix: list[int], cache, suffixes: list[list[int]], keep: int = 1):
        """Logits ``(B, keep, V)`` at the last ``keep`` positions of ``prefix + suffix``.

        Rows are left padded, so position ``-j`` is the j-th last token of every row.
        """
        import torch

        dev = self.input_device
        B = len(suffixes)
        if cache is not None:
            with torch.inference_mode():
                past = copy.deepcopy(cache)
                if B > 1:
                    past.batch_repeat_interleave(B)
            P = len(prefix)
            seen = torch.ones((B, P), dtype=torch.long, device=dev)
            return self.forward_on_cache(
                past, seen, torch.full((B,), P, device=dev), suffixes, keep
            )
        ids, att = self.left_pad(suffixes)
        if prefix:
            pre = torch.tensor(prefix, device=dev).expand(B, -1)
            ids = torch.cat([pre, ids], 1)
            att = torch.cat([torch.ones_like(pre), att], 1)
        with torch.inference_mode():
            out = self.lm.model(
                input_ids=ids,
                attention_mask=att,
                position_ids=(att.cumsum(-1) - 1).clamp(min=0),
                use_cache=False,
                **self._kw(keep),
            )
        return out.logits[:, -keep:, :]

    def forward_on_cache(self, past, seen, n_real, rows: list[list[int]], keep: int = 1):
        """Logits ``(B, keep, V)`` at the last ``keep`` positions of ``rows`` run on a KV cache.

        ``past`` holds ``B`` rows (it is extended in place), ``seen`` ``(B, C)`` is the
        attention mask over its ``C`` positions and ``n_real`` ``(B,)`` the number of
        real tokens in each of its rows: the position of that row's next token. The rows
        are left padded and masked (:meth:`left_pad`).
        """
        import torch

        ids, att = self.left_pad(rows)
        with torch.inference_mode():
            out = self.lm.model(
                input_ids=ids,
                attention_mask=torch.cat([seen, att], 1),
                position_ids=n_real[:, None] + (att.cumsum(-1) - 1).clamp(min=0),
                past_key_values=past,
                use_cache=True,
                **self._kw(keep),
            )
        return out.logits[:, -keep:, :]

    def needs_check(self, path: str) -> bool:
        """Whether a cached pass on ``path`` (``"prefix"`` or ``"trace read"``) is
        still to be checked against an uncached one on this loaded model."""
        return self.prefix_cache and path not in self.lm.cache_checked

    def check_prefix_cache(
        self, prefix, cached_logits, suffix, atol: float = 1e-4, path: str = "prefix"
    ) -> float:
        """Compare one row's logits from a cached pass on ``path`` with an uncached
        pass of ``prefix + suffix``.

        Disables caching for the loaded model (with a warning) when any probability
        differs by more than ``atol``. Returns the max absolute difference.
        """
        import torch

        a = torch.softmax(cached_logits.double(), -1)
        b = torch.softmax(self.forward(prefix, None, [suffix])[0].double(), -1)
        diff = float((a - b).abs().max())
        if diff > atol:
            warnings.warn(
                f"model {self.lm.name!r}: cached ({path}) and uncached probabilities differ "
                f"by {diff:.2e}; caching disabled for this model",
                stacklevel=2,
            )
            self.lm.cache_ok = False
        self.lm.cache_checked.add(path)
        # A statement, not the value: the value depends on which prompt was checked first,
        # and a resumed run must write the same file as an uninterrupted one.
        self.lm.provenance["prefix_cache"] = (
            f"on; checked against an uncached pass (max |dp| <= {atol:g})"
            if self.prefix_cache
            else f"off; cached and uncached passes differed by more than {atol:g}"
        )
        return diff


# ---------------------------------------------------------------------------- the model
#: What the transformers backend does, recorded per model (``collection_protocol``).
READOUT = (
    "one forward pass per (condition, item): xlikert's token ids of the prompt, one "
    "teacher-forced row per answer context (a bare space token, the first tokens of a "
    "multi-token answer), the system prompt's KV cache shared by the items (checked against "
    "an uncached pass); log-softmax of the logits over the full vocabulary in float64 "
    "(xlikert.constraint.next_token_readout); the decoding grid by xlikert's tie rule on the "
    "full vocabulary"
)

#: How the transformers backend samples a trace; stored in the model's provenance.
TRACE_SAMPLER = (
    "transformers backend: the M traces of a prompt in one batch with a KV cache (a finished "
    "trace stays in it, fed padding hidden by the attention mask, and the answer after it is "
    "read on that cache); each draws from its own numpy PCG64 stream seeded with trace_seed("
    "seed, prompt text, index): u ~ U[0, 1), token = inverse CDF of nucleus_logprobs(logits, "
    "temperature, top_p) over the full vocabulary in float64 (DECODING_TIE_RULE)"
)


def _empty_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class LocalModel(InProcessModel):
    """A :class:`~xlikert.collect.protocol.Model` running a transformers model in process.

    Each call to :meth:`score` runs one unit: the prompts' shared prefix once
    (KV cache), then length-sorted batches of teacher-forced rows, one per answer
    context leaf; out of memory, the batch size halves (down to one prompt). The
    outline of a unit and the provenance are the in-process backends' common
    :class:`~xlikert.collect.inprocess.InProcessModel`.
    """

    TRACE_SAMPLER = TRACE_SAMPLER

    def __init__(
        self,
        lm: LoadedModel,
        options: CollectOptions,
        reasoning: dict[str, Any] | None = None,
    ):
        self.lm = lm
        self.name = lm.name
        self.options = options
        #: The checked ``reasoning`` table (None: the answer is read right after the prompt).
        self._start_reasoning(
            reasoning, lm.tokenizer, lm.model.config, getattr(lm.model, "generation_config", None)
        )
        self.scorer = Scorer(lm, prefix_cache=options.prefix_cache)
        bs = options.batch_size
        # CPU: 16 prompts per batch beat 8 on Qwen2.5-0.5B (51% against 48% of the
        # useful-FLOP bound, benchmarks/bench_collect.py, 2 cores); wider batches pad more
        self.batch_size = (
            (64 if str(lm.device).startswith("cuda") else 16) if bs == "auto" else int(bs)
        )
        self.initial_batch_size = self.batch_size
        self.backoffs = 0
        self._use_answers(lm.valid, lm.answers)
        if options.answer_labels is not None:  # the loaded model's rule reads the digits
            labels, self.options = options.answer_labels, options.replace(answer_labels=None)
            self.relabel(labels)

    def _use_answers(self, valid: ValidTokens, answers: AnswerSequences) -> None:
        """Read with this answer rule: its teacher-forced leaves and where each context is."""
        n_vocab = self.lm.model.get_output_embeddings().weight.shape[0]
        if max(answers.need) >= n_vocab:
            raise CollectionError(f"model {self.name!r}: answer token ids exceed the vocabulary")
        self._valid, self._answers = valid, answers
        self.leaves = [list(leaf) for leaf in answers.leaves]
        self.keep = max(len(leaf) for leaf in self.leaves) + 1
        # context -> (leaf row, kept position) holding the logits after prompt + context
        self.where = []
        for c in answers.contexts:
            li = next(i for i, leaf in enumerate(self.leaves) if tuple(leaf[: len(c)]) == c)
            self.where.append((li, self.keep - 1 - len(self.leaves[li]) + len(c)))

    def __repr__(self) -> str:
        return f"<LocalModel {self.lm!r} batch_size={self.batch_size}>"

    # the loaded model's parts, as the common base reads them
    @property
    def tokenizer(self):
        return self.lm.tokenizer

    @property
    def template(self) -> PromptTemplate:
        return self.lm.template

    @property
    def valid(self) -> ValidTokens:
        return self._valid

    @property
    def answers(self) -> AnswerSequences:
        return self._answers

    def _read_prompts(self, texts: list[str], encoded: list[list[int]]) -> dict[str, np.ndarray]:
        """The unit's shared prefix (same system prompt; >= 1 suffix token kept) once on
        the KV cache, then :meth:`_read` of every prompt."""
        n = min(len(e) for e in encoded) - 1
        P = 0
        while n > P and all(e[P] == encoded[0][P] for e in encoded):
            P += 1
        prefix = encoded[0][:P]
        try:
            cache = self.scorer.prefix_state(prefix)
        except Exception as exc:
            if not _is_oom(exc):
                raise
            raise self._oom(f"shared prefix of {P} tokens") from exc
        return self._read(prefix, cache, [e[P:] for e in encoded])

    def _read(self, prefix: list[int], cache, suffixes: list[list[int]]) -> dict[str, np.ndarray]:
        """:func:`read_logits` of ``prefix + suffix`` for every suffix, in batches.

        Sorted by length (fewer pads) and split into equal batches; the order and
        the split are fixed, so a resumed run batches exactly as an uninterrupted
        one. Out of memory, the batch size halves (down to one suffix).
        """
        order = sorted(range(len(suffixes)), key=lambda r: (len(suffixes[r]), r))
        L = len(self.leaves)
        res: dict[str, np.ndarray] = {}
        a = 0
        while a < len(order):
            bs = max(1, self.batch_size // L)  # one teacher-forced row per (suffix, leaf)
            left = len(order) - a
            nb = -(-left // bs)
            rows = order[a : a + -(-left // nb)]
            batch = [suffixes[r] + leaf for r in rows for leaf in self.leaves]
            try:
                logits = self.scorer.forward_rows(prefix, cache, batch, keep=self.keep)
                if cache is not None and self.scorer.needs_check("prefix"):
                    self.scorer.check_prefix_cache(prefix, logits[0, -1], batch[0])
                    if not self.scorer.prefix_cache:
                        cache = None
                        continue  # recompute this batch without the cache
                out = self._readout(logits, len(rows))
            except Exception as exc:
                if not _is_oom(exc):
                    raise
                if len(rows) == 1:
                    raise self._oom(f"{len(prefix) + len(suffixes[rows[0]])} tokens") from exc
                self.batch_size = max(1, self.batch_size // 2)  # prompts, not rows
                self.backoffs += 1
                _empty_cache()
                continue
            for key, val in out.items():
                if key not in res:
                    res[key] = np.zeros((len(suffixes), *val.shape[1:]), dtype=val.dtype)
                res[key][rows] = val
            a += len(rows)
        return res

    # ------------------------------------------------------------------ reasoning mode
    def _sample_and_read(self, texts, encoded, seeds, closing):
        """Per prompt: its M traces sampled in one batch (:meth:`_sample`), then the
        answer after each closed trace read on the sampling's KV cache
        (:meth:`_read_after_traces`), or afresh when prefix caching is off."""
        cfg = self.reasoning
        for ids, ss in zip(encoded, seeds, strict=True):
            try:
                traces, ends, state = self._sample(ids, ss)
                out = None
                if self.scorer.prefix_cache:
                    out = self._read_after_traces(ids, state, traces, ends, closing)
                if out is None:  # prefix caching off: every trace teacher-forced afresh
                    closed = [t + closing[e == "marker"] for t, e in zip(traces, ends, strict=True)]
                    out = self._read(ids, None, closed)
            except Exception as exc:
                if not _is_oom(exc):
                    raise
                raise self._oom(
                    f"{cfg['traces']} traces of up to {cfg['max_new_tokens']} tokens"
                ) from exc
            yield traces, ends, out

    def _sample(self, ids: list[int], seeds: list[int]):
        """Sample one trace per seed after the prompt ``ids``, all in one batch.

        Each trace draws its tokens from its own stream (``numpy`` PCG64 seeded
        with its seed) by :func:`~xlikert.collect.reasoning.sample_tokens` at the
        entry's temperature and top-p. A trace ends when the model writes the
        end marker (``"marker"``, the marker kept in the trace), an end-of-turn
        token (``"eos"``, the token dropped) or reaches ``max_new_tokens``
        (``"length"``). A finished trace stays in the batch, fed a padding token
        that the attention mask hides, so that its KV cache is there to read the
        answer after it (:meth:`_read_after_traces`). Returns the traces' token
        ids, how each ended, and the batch's state: the KV cache, the attention
        mask over it and the number of real tokens of each row.
        """
        import torch

        cfg = self.reasoning
        model, dev = self.lm.model, self.scorer.input_device
        M = len(seeds)
        pad = self.scorer.pad_id
        rngs = [np.random.Generator(np.random.PCG64(s)) for s in seeds]
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([ids], device=dev), use_cache=True,
                        **self.scorer._kw())  # fmt: skip
            past = out.past_key_values
            if M > 1:
                past.batch_repeat_interleave(M)
            logits = np.repeat(out.logits[:, -1].float().cpu().numpy(), M, axis=0)
            mask = torch.ones((M, len(ids)), dtype=torch.long, device=dev)
            n_real = np.full(M, len(ids))
            gen: list[list[int]] = [[] for _ in range(M)]
            ends: list[str | None] = [None] * M
            for step in range(cfg["max_new_tokens"]):
                active = [r for r in range(M) if ends[r] is None]
                u = np.array([rngs[r].random() for r in active])
                drawn = sample_tokens(logits[active], u, cfg["temperature"], cfg["top_p"])
                for r, t in zip(active, drawn.tolist(), strict=True):
                    if t in self.stop_ids:
                        ends[r] = "eos"
                        continue
                    gen[r].append(t)
                    if self._wrote_marker(gen[r]):
                        ends[r] = "marker"
                live = [ends[r] is None for r in range(M)]
                if not any(live):
                    break
                if step == cfg["max_new_tokens"] - 1:
                    for r in range(M):
                        if live[r]:
                            ends[r] = "length"
                    break
                nxt = torch.tensor([[gen[r][-1] if live[r] else pad] for r in range(M)],
                                   device=dev)  # fmt: skip
                mask = torch.cat(
                    [mask, torch.tensor(live, device=dev, dtype=mask.dtype)[:, None]], 1
                )
                out = model(input_ids=nxt, attention_mask=mask,
                            position_ids=torch.tensor(n_real, device=dev)[:, None],
                            past_key_values=past, use_cache=True, **self.scorer._kw())  # fmt: skip
                n_real += np.asarray(live)
                past = out.past_key_values
                logits = out.logits[:, -1].float().cpu().numpy()
        return gen, ends, (past, mask, n_real)

    def _read_after_traces(self, ids, state, traces, ends, closing) -> dict[str, np.ndarray] | None:
        """:func:`read_logits` after every closed trace, on the KV cache of its sampling.

        The tokens of a trace are in the cache already (all but a last sampled
        token that was never fed); only that token, the closing text and the
        answer's teacher-forced leaves are run, one row per (trace, leaf), left
        padded and masked like :meth:`Scorer.forward_rows`. The first read of a
        model is checked against an uncached pass of the whole text
        (:meth:`Scorer.check_prefix_cache`); None when that check turned caching off.
        """
        import torch

        past, mask, n_real = state
        dev = self.scorer.input_device
        L = len(self.leaves)
        # never fed: the last token of a trace that ended on the marker or the length
        fresh = [t[-1:] if e != "eos" else [] for t, e in zip(traces, ends, strict=True)]
        rows = [f + closing[e == "marker"] + leaf
                for f, e in zip(fresh, ends, strict=True) for leaf in self.leaves]  # fmt: skip
        if L > 1:
            past.batch_repeat_interleave(L)
        logits = self.scorer.forward_on_cache(
            past, mask.repeat_interleave(L, 0), torch.tensor(np.repeat(n_real, L), device=dev),
            rows, keep=self.keep,
        )  # fmt: skip
        if self.scorer.needs_check("trace read"):
            whole = traces[0][: len(traces[0]) - len(fresh[0])] + rows[0]
            self.scorer.check_prefix_cache(ids, logits[0, -1], whole, path="trace read")
            if not self.scorer.prefix_cache:
                return None
        return self._readout(logits, len(traces))

    @property
    def readout_on_device(self) -> bool:
        """Whether the readout runs where the logits are (every device but the CPU).

        There the rules run in float64 torch on the device
        (:func:`~xlikert.collect.device_readout.next_token_readout_torch`) and only
        the answer tokens' numbers reach the host; on the CPU, in float64 numpy
        (:func:`read_logits`). The two agree to rounding (tests compare them).
        """
        return not str(self.lm.device).startswith("cpu")

    def _readout(self, logits, n: int) -> dict[str, np.ndarray]:
        """:func:`read_logits` of ``n`` contexts from ``(n * L, keep, V)`` logits: one
        row per (context, teacher-forced leaf), the leaves' positions in ``self.where``."""
        if self.readout_on_device:
            import torch

            z = logits.reshape(n, len(self.leaves), self.keep, logits.shape[-1])
            z = torch.stack([z[:, li, pos] for li, pos in self.where], dim=1)
            o = self.options
            raw, grid, topk_id, topk_lp = next_token_readout_torch(
                z, np.asarray(self.answers.need), o.temperatures, o.top_ps, o.top_k
            )
            out = self.answers.readout(raw, np.moveaxis(grid, 1, 3))
            out.update(topk_id=topk_id, topk_logprob=topk_lp)
            return out
        z = logits.float().cpu().numpy().reshape(n, len(self.leaves), self.keep, -1)
        z = np.stack([z[:, li, pos] for li, pos in self.where], axis=1)
        return read_logits(z, self.answers, self.options)

    def _wrote_marker(self, ids: list[int]) -> bool:
        marker = self.format.marker
        tail = self.lm.tokenizer.decode(ids[-(len(marker) + 1) :], skip_special_tokens=False)
        return tail.endswith(marker)

    def _oom(self, what: str) -> CollectionError:
        return CollectionError(
            f"model {self.name!r} runs out of memory even on a batch of 1 prompt ({what}); "
            "use a smaller dtype, device_map='auto', or a bigger device"
        )

    def _provenance(self) -> dict[str, Any]:
        return self.lm.provenance

    def provenance(self) -> dict[str, Any]:
        info = super().provenance()
        if self.readout_on_device:
            info["readout"] = "on the model's device, float64 torch (device_readout)"
        info["batch_size"] = self.initial_batch_size
        info["oom_backoffs"] = self.backoffs
        return info

    def close(self) -> None:
        """Drop this handle's references to the weights, so their memory can go back
        before the next model loads (a caller holding the :class:`LoadedModel` keeps it)."""
        self.lm = self.scorer = None
        gc.collect()
        _empty_cache()
