"""FLOP accounting shared by the throughput benchmarks (collection, GPU, sampling).

Not part of the ``xlikert`` package; the scripts import it as a sibling module.

Counting convention (decoder-only transformer, one token at position ``c`` with
``c`` earlier tokens in its context):

* matmuls: 2 FLOPs per weight of the attention projections and the MLP of every
  layer (2 x parameters touched per token);
* attention: ``QK^T`` and ``AV`` over the ``c + 1`` keys up to and including the
  token itself, ``4 x heads x head_dim x (c + 1)`` per layer (causal count: a kernel
  that also computes the masked scores does more than is counted);
* lm_head: ``2 x hidden x vocab`` per position whose logits are computed.

Norms, rotary embeddings, activations and the softmax are not counted.

*Executed* FLOPs are what a forward pass computed, read from the shapes of every
call of the model (:class:`FlopCounter`: padding, recomputed prefixes and the
lm_head rows of every kept position included). *Useful* FLOPs are the least an
exact collection needs (:func:`useful_flops`): the prefix shared by a group of
prompts once, every other prompt token once, the lm_head only where the answer
rule reads logits.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from typing import Any


def shape(cfg: Any) -> dict[str, int]:
    """The sizes of a transformers decoder config that the FLOP count needs."""
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return {
        "hidden": cfg.hidden_size,
        "layers": cfg.num_hidden_layers,
        "heads": heads,
        "kv_heads": getattr(cfg, "num_key_value_heads", None) or heads,
        "head_dim": head_dim,
        "intermediate": cfg.intermediate_size,
        "vocab": cfg.vocab_size,
    }


def body_params(cfg: Any) -> int:
    """Weights one token touches in the decoder layers (attention projections + MLP)."""
    s = shape(cfg)
    h, hd = s["hidden"], s["head_dim"]
    proj = h * s["heads"] * hd + 2 * h * s["kv_heads"] * hd + s["heads"] * hd * h
    mlp = 3 * h * s["intermediate"]
    return s["layers"] * (proj + mlp)


def lm_head_flops(cfg: Any) -> float:
    """FLOPs of one row of logits."""
    return 2.0 * cfg.hidden_size * cfg.vocab_size


def span_flops(cfg: Any, start: int, stop: int) -> float:
    """Decoder-body FLOPs of the tokens at positions ``start .. stop - 1`` of one row."""
    if stop <= start:
        return 0.0
    s = shape(cfg)
    n = stop - start
    keys = (start + 1 + stop) * n / 2  # sum of (c + 1) for c in [start, stop)
    return 2.0 * body_params(cfg) * n + 4.0 * s["layers"] * s["heads"] * s["head_dim"] * keys


def shared_prefix(rows: Sequence[Sequence[int]]) -> int:
    """Length of the token prefix every row shares, leaving each row at least one token."""
    if not rows:
        return 0
    n = min(map(len, rows)) - 1
    p = 0
    while p < n and all(r[p] == rows[0][p] for r in rows):
        p += 1
    return p


def useful_flops(
    cfg: Any, groups: Sequence[Sequence[Sequence[int]]], extra_tokens: int = 0, rows: int = 1
) -> float:
    """The least FLOPs exact collection needs for ``groups`` of encoded prompts.

    Each group (the prompts sharing a system prompt) runs its shared prefix once,
    then every prompt's own tokens, ``extra_tokens`` appended tokens (the bare
    space of the split-space rule) and ``rows`` lm_head rows per prompt.
    """
    total = 0.0
    for enc in groups:
        p = shared_prefix(enc)
        total += span_flops(cfg, 0, p)
        for e in enc:
            total += span_flops(cfg, p, len(e) + extra_tokens) + rows * lm_head_flops(cfg)
    return total


def full_pass_flops(cfg: Any, encoded: Sequence[Sequence[int]]) -> float:
    """FLOPs of one uncached pass per prompt with logits at every position (the plain loop)."""
    return sum(span_flops(cfg, 0, len(e)) + len(e) * lm_head_flops(cfg) for e in encoded)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):  # rows of different lengths
        if x != y:
            break
        n += 1
    return n


def block_cache_hits(encoded: Sequence[Sequence[int]], block: int) -> list[int]:
    """Prompt tokens a block prefix cache (vLLM's) serves, prompts sent one after another.

    Prompt ``i`` reuses the longest prefix it shares with any earlier prompt, rounded
    down to whole blocks of ``block`` tokens and leaving its last token to compute
    (the engine needs that token's logits). A projection of what the engine would
    cache, not a measurement: prompts scheduled in the same step cannot hit each
    other, so an engine may cache less.

    >>> block_cache_hits([[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 9]], block=2)
    [0, 4, 2]
    """
    hits = []
    for i, row in enumerate(encoded):
        shared = max((_common_prefix(row, e) for e in encoded[:i]), default=0)
        hits.append(min(shared, len(row) - 1) // block * block)
    return hits


def request_flops(cfg: Any, requests: Sequence[Sequence[int]]) -> float:
    """Executed FLOPs of engine requests given as ``(prompt tokens, cached tokens)``:
    every uncached prompt token and one lm_head row each (one sequence per request)."""
    return sum(span_flops(cfg, cached, total) + lm_head_flops(cfg) for total, cached in requests)


def block_cache_flops(cfg: Any, encoded: Sequence[Sequence[int]], block: int) -> float:
    """Executed FLOPs of one request per prompt under a block prefix cache of ``block``
    tokens (:func:`block_cache_hits`, :func:`request_flops`)."""
    hits = block_cache_hits(encoded, block)
    return request_flops(cfg, [(len(e), h) for e, h in zip(encoded, hits, strict=True)])


def cache_keyword(model: Any) -> str:
    """The keyword a transformers model's forward takes its KV cache by: ``cache``, or
    ``past_key_values`` (its older name) where the forward has no ``cache``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


class FlopCounter:
    """Counts the FLOPs every forward call of a transformers causal LM executes.

    A forward pre-hook reads each call's ``input_ids`` shape ``(B, L)``, the cached
    length of ``cache`` (or of its older name, ``past_key_values``) and
    ``logits_to_keep`` (all ``L`` positions when absent or 0):
    ``B x span_flops(past, past + L) + B x kept x lm_head``. Padding counts (it is executed).

    Examples
    --------
    >>> with FlopCounter(model) as fc:  # doctest: +SKIP
    ...     model(ids)
    >>> fc.flops, fc.calls, fc.tokens  # doctest: +SKIP
    """

    def __init__(self, model: Any):
        self.model = model
        self.cfg = model.config
        self.flops = 0.0
        self.calls = 0
        self.tokens = 0
        self._handle = None

    def _hook(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        emb = kwargs.get("inputs_embeds")
        b, n = (ids.shape[0], ids.shape[1]) if ids is not None else emb.shape[:2]
        past = kwargs.get("cache", kwargs.get("past_key_values"))
        start = int(past.get_seq_length()) if past is not None else 0
        keep = kwargs.get("logits_to_keep", 0)
        kept = n if not isinstance(keep, int) or keep == 0 else min(keep, n)
        self.flops += b * (span_flops(self.cfg, start, start + n) + kept * lm_head_flops(self.cfg))
        self.calls += 1
        self.tokens += b * n

    def reset(self) -> None:
        self.flops, self.calls, self.tokens = 0.0, 0, 0

    def __enter__(self) -> FlopCounter:
        self.reset()
        self._handle = self.model.register_forward_pre_hook(self._hook, with_kwargs=True)
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()
        self._handle = None


def matmul_rate(
    device: str, dtype: Any, m: int, k: int, n: int, seconds: float = 1.5
) -> dict[str, Any]:
    """Sustained GEMM rate (FLOP/s) of an ``(m, k) x (k, n)`` product in ``dtype``.

    Three warm-up products, then as many as fit in ``seconds`` (synchronised on CUDA).
    """
    import torch

    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    for _ in range(3):
        a @ b
    sync()
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        reps += 1
        if reps % 8 == 0:
            sync()
    sync()
    rate = 2.0 * m * k * n * reps / (time.perf_counter() - t0)
    return {"flops_per_s": rate, "shape": [m, k, n], "dtype": str(dtype).replace("torch.", ""),
            "device": str(device), "threads": torch.get_num_threads()}  # fmt: skip


def matmul_probe(
    device: str, dtype: Any, m: int, k: int, n: int, seconds: float
) -> Callable[[], float]:
    """A probe for :class:`_common.ProbedRuns`: each call measures :func:`matmul_rate` now."""

    def probe() -> float:
        return matmul_rate(device, dtype, m, k, n, seconds=seconds)["flops_per_s"]

    return probe
