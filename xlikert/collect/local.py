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

torch and transformers are imported inside functions: importing this module is cheap.
"""

from __future__ import annotations

import copy
import gc
import inspect
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..constraint import log_softmax, nucleus_logprobs
from ..errors import CollectionError
from .protocol import CollectOptions
from .schema import UnitResult
from .templates import PromptTemplate
from .tokens import AnswerSequences, ValidTokens, answer_rule
from .zoo import check_source, model_folder

__all__ = ["LoadedModel", "LocalModel", "Scorer", "check", "load_model", "open", "read_logits"]


# ---------------------------------------------------------------------------- protocol
def check(spec: dict[str, Any], options: CollectOptions) -> dict[str, Any]:
    """Validate a transformers model entry before anything runs (no heavy imports)."""
    check_source(str(spec["source"]), str(spec["name"]), spec.get("gguf_file"))
    return dict(spec)


def open(spec: dict[str, Any], options: CollectOptions, probe=None) -> LocalModel:
    """Load a model entry into a :class:`LocalModel`."""
    lm = load_model(
        spec,
        options.scale,
        device=options.device,
        dtype=options.dtype,
        device_map=options.device_map,
        trust_remote_code=options.trust_remote_code,
        split_space=options.split_space,
    )
    return LocalModel(lm, options)


# ---------------------------------------------------------------------------- loading
def _is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError | MemoryError):
        return True
    msg = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in msg or "can't allocate memory" in msg
    )


def _torch_dtype(dtype: str | None, device: str):
    import torch

    if dtype in (None, "auto"):
        if device.startswith("cuda") and torch.cuda.is_available():
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in table:
        raise CollectionError(f"unknown dtype {dtype!r}; choose one of {sorted(table)} or 'auto'")
    return table[dtype]


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

    def render(self, system: str, user: str) -> str:
        """The exact text sent to the model for one (system, user) pair."""
        return self.template.render(system, user)

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
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = {"name": spec, "source": spec} if isinstance(spec, str) else dict(spec)
    source = str(spec.get("source") or spec.get("name"))
    name = str(spec.get("name") or source)
    device = _default_device(spec.get("device", device))
    dev_map = spec.get("device_map", device_map)
    torch_dtype = _torch_dtype(spec.get("dtype", dtype), device)
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
    model.eval()
    template = PromptTemplate(tokenizer, name, spec.get("prompt_format"))
    valid, answers, rule = answer_rule(tokenizer, scale, split_space=split_space)
    n_vocab = model.get_output_embeddings().weight.shape[0]
    if max(answers.need) >= n_vocab:
        raise CollectionError(f"model {name!r}: valid token ids exceed the model's vocabulary")
    prov = {"source": source, **prov}
    prov.update(
        backend="transformers",
        tokenizer=f"{type(tokenizer).__name__}:"
        + str(prov.pop("tokenizer_name", None) or getattr(tokenizer, "name_or_path", "")),
        dtype=str(torch_dtype).replace("torch.", ""),
        device=str((dev_map and f"device_map={dev_map}") or model.device),
        prompt_format=template.format,
        prompt_template=template.description,
        architecture=type(model).__name__,
        transformers=transformers.__version__,
        torch=torch.__version__,
        answers=rule,
        load_seconds=round(time.perf_counter() - t0, 2),
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
    B, C, V = logits.shape
    T, P = len(options.temperatures), len(options.top_ps)
    k = min(options.top_k, V)
    raw = np.empty((B, C, need.size))
    grid = np.empty((B, C, T, P, need.size))
    topk_id = np.empty((B, k), dtype=np.int64)
    topk_logprob = np.empty((B, k))
    for b in range(B):  # one prompt at a time: the full-vocabulary temporaries stay small
        logp = log_softmax(logits[b])
        raw[b] = logp[:, need]
        grid[b] = nucleus_logprobs(logits[b], need, options.temperatures, options.top_ps)
        first = logp[0]  # context () is the prompt itself
        part = np.argpartition(-first, k - 1)[:k]
        topk_id[b] = part[np.argsort(-first[part], kind="stable")]
        topk_logprob[b] = first[topk_id[b]]
    out = answers.readout(raw, np.moveaxis(grid, 1, 3))
    out.update(topk_id=topk_id, topk_logprob=topk_logprob)
    return out


class Scorer:
    """Runs batches of token rows through a :class:`LoadedModel` with a cached prefix."""

    def __init__(self, lm: LoadedModel, *, prefix_cache: bool = True):
        self.lm = lm
        self.prefix_cache = prefix_cache
        self.checked = False
        params = inspect.signature(lm.model.forward).parameters
        self._keep = "logits_to_keep" in params

    @property
    def input_device(self):
        return self.lm.model.get_input_embeddings().weight.device

    def prefix_state(self, prefix: list[int]):
        """Run ``prefix`` once; returns its KV cache (or None when caching is off/empty)."""
        import torch

        if not self.prefix_cache or not prefix:
            return None
        ids = torch.tensor([prefix], device=self.input_device)
        with torch.inference_mode():
            out = self.lm.model(input_ids=ids, use_cache=True, **self._kw())
        return out.past_key_values

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
        L = max(len(s) for s in suffixes)
        pad = self.lm.tokenizer.pad_token_id
        pad = 0 if pad is None else pad
        ids = torch.full((B, L), pad, dtype=torch.long)
        att = torch.zeros((B, L), dtype=torch.long)
        for r, s in enumerate(suffixes):
            ids[r, L - len(s) :] = torch.tensor(s)
            att[r, L - len(s) :] = 1
        ids, att = ids.to(dev), att.to(dev)
        with torch.inference_mode():
            if cache is not None:
                P = len(prefix)
                pos = P + (att.cumsum(-1) - 1).clamp(min=0)
                full_att = torch.cat([torch.ones((B, P), dtype=att.dtype, device=dev), att], 1)
                past = copy.deepcopy(cache)
                if B > 1:
                    past.batch_repeat_interleave(B)
                out = self.lm.model(
                    input_ids=ids,
                    attention_mask=full_att,
                    position_ids=pos,
                    past_key_values=past,
                    use_cache=True,
                    **self._kw(keep),
                )
            else:
                if prefix:
                    pre = torch.tensor(prefix, device=dev).expand(B, -1)
                    ids = torch.cat([pre, ids], 1)
                    att = torch.cat([torch.ones_like(pre), att], 1)
                pos = (att.cumsum(-1) - 1).clamp(min=0)
                out = self.lm.model(
                    input_ids=ids,
                    attention_mask=att,
                    position_ids=pos,
                    use_cache=False,
                    **self._kw(keep),
                )
        return out.logits[:, -keep:, :]

    def check_prefix_cache(self, prefix, cached_logits, suffix, atol: float = 1e-4) -> float:
        """Compare one row's cached-prefix logits with an uncached pass.

        Disables caching (with a warning) when any probability differs by more than
        ``atol``. Returns the max absolute difference.
        """
        import torch

        a = torch.softmax(cached_logits.double(), -1)
        b = torch.softmax(self.forward(prefix, None, [suffix])[0].double(), -1)
        diff = float((a - b).abs().max())
        if diff > atol:
            warnings.warn(
                f"model {self.lm.name!r}: prefix-cached and uncached probabilities differ by "
                f"{diff:.2e}; prefix caching disabled for this model",
                stacklevel=2,
            )
            self.prefix_cache = False
        # A statement, not the value: the value depends on which prompt was checked first,
        # and a resumed run must write the same file as an uninterrupted one.
        self.lm.provenance["prefix_cache"] = (
            f"on; checked against an uncached pass (max |dp| <= {atol:g})"
            if self.prefix_cache
            else f"off; cached and uncached passes differed by more than {atol:g}"
        )
        self.checked = True
        return diff


# ---------------------------------------------------------------------------- the model
def _empty_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class LocalModel:
    """A :class:`~xlikert.collect.protocol.Model` running a transformers model in process.

    Each call to :meth:`score` runs one unit: the prompts' shared prefix once
    (KV cache), then length-sorted batches of teacher-forced rows, one per answer
    context leaf; out of memory, the batch size halves (down to one prompt).
    """

    mode = "exact"

    def __init__(self, lm: LoadedModel, options: CollectOptions):
        self.lm = lm
        self.name = lm.name
        self.options = options
        self.scorer = Scorer(lm, prefix_cache=options.prefix_cache)
        bs = options.batch_size
        self.batch_size = (
            (64 if str(lm.device).startswith("cuda") else 8) if bs == "auto" else int(bs)
        )
        self.initial_batch_size = self.batch_size
        self.backoffs = 0
        answers = lm.answers
        self.leaves = [list(leaf) for leaf in answers.leaves]
        self.keep = max(len(leaf) for leaf in self.leaves) + 1
        # context -> (leaf row, kept position) holding the logits after prompt + context
        self.where = []
        for c in answers.contexts:
            li = next(i for i, leaf in enumerate(self.leaves) if tuple(leaf[: len(c)]) == c)
            self.where.append((li, self.keep - 1 - len(self.leaves[li]) + len(c)))

    def __repr__(self) -> str:
        return f"<LocalModel {self.lm!r} batch_size={self.batch_size}>"

    def score(self, prompts: Sequence[tuple[str, str]]) -> UnitResult:
        lm, opts = self.lm, self.options
        texts = [lm.render(s, u) for s, u in prompts]
        encoded = [lm.encode(t) for t in texts]
        # Shared prefix of this unit's token ids (same system prompt); keep >= 1 suffix token.
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
        # Sort by length (fewer pads) and split into equal batches; the order and the split
        # are fixed, so a resumed run batches exactly as an uninterrupted one.
        order = sorted(range(len(prompts)), key=lambda r: (len(encoded[r]), r))
        res = UnitResult.empty(len(prompts), opts.sizes)
        L = len(self.leaves)
        # The numpy readout of a batch (float64 over the full vocabulary, the bulk of it
        # in sort/exp/cumsum loops that release the GIL) runs in a worker thread while the
        # next batch's forward pass runs: the same functions on the same logits, so the
        # same numbers, with the readout's time hidden behind the forward pass.
        pending = None  # (rows, future) of the batch whose readout is running
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="xlikert-readout") as pool:
            a = 0
            while a < len(order):
                bs = max(1, self.batch_size // L)  # one teacher-forced row per (prompt, leaf)
                left = len(order) - a
                nb = -(-left // bs)
                rows = order[a : a + -(-left // nb)]
                suffixes = [encoded[r][P:] + leaf for r in rows for leaf in self.leaves]
                try:
                    logits = self.scorer.forward_rows(prefix, cache, suffixes, keep=self.keep)
                    if cache is not None and not self.scorer.checked:
                        self.scorer.check_prefix_cache(prefix, logits[0, -1], suffixes[0])
                        if not self.scorer.prefix_cache:
                            cache = None
                            continue  # recompute this batch without the cache
                    z = logits.float().cpu().numpy().reshape(len(rows), L, self.keep, -1)
                    z = np.stack([z[:, li, pos] for li, pos in self.where], axis=1)
                except Exception as exc:
                    if not _is_oom(exc):
                        raise
                    if len(rows) == 1:
                        raise self._oom(f"{max(len(encoded[r]) for r in rows)} tokens") from exc
                    self.batch_size = max(1, self.batch_size // 2)  # prompts, not rows
                    self.backoffs += 1
                    _empty_cache()
                    continue
                if pending is not None:
                    self._store(res, *pending)
                pending = (rows, pool.submit(read_logits, z, lm.answers, opts))
                a += len(rows)
            if pending is not None:
                self._store(res, *pending)
        res.data["prompt"][:] = texts
        return res

    def _store(self, res: UnitResult, rows: list[int], readout) -> None:
        """Write one batch's readout (a future of :func:`read_logits`) into ``res``."""
        try:
            out = readout.result()
        except Exception as exc:
            if not _is_oom(exc):
                raise
            raise self._oom(f"the readout of {len(rows)} prompts") from exc
        for key in ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass"):
            res.data[key][rows] = out[key]
        k = out["topk_id"].shape[1]  # fewer than top_k only for a tiny vocabulary
        res.data["topk_logprob"][rows, :k] = out["topk_logprob"]
        tok = self.lm.tokenizer
        res.data["topk_token"][rows, :k] = [
            [tok.convert_ids_to_tokens(int(i)) or "" for i in row] for row in out["topk_id"]
        ]

    def _oom(self, what: str) -> CollectionError:
        return CollectionError(
            f"model {self.name!r} runs out of memory even on a batch of 1 prompt ({what}); "
            "use a smaller dtype, device_map='auto', or a bigger device"
        )

    def provenance(self) -> dict[str, Any]:
        info = {k: v for k, v in self.lm.provenance.items() if k != "load_seconds"}
        if self.lm.template.system_merged:
            info["system_merged_into_user"] = "true"
        info["valid_tokens"] = self.lm.valid.as_records()
        if not self.lm.answers.is_one_token:
            info["answer_spellings"] = self.lm.answers.as_records()
        info["batch_size"] = self.initial_batch_size
        info["oom_backoffs"] = self.backoffs
        return info

    def close(self) -> None:
        """Drop this handle's references to the weights, so their memory can go back
        before the next model loads (a caller holding the :class:`LoadedModel` keeps it)."""
        self.lm = self.scorer = None
        gc.collect()
        _empty_cache()
