"""Running token rows through a loaded transformers model: the prefix cache, batches, OOM.

:class:`Scorer` runs batches of teacher-forced rows with the system prompt's KV
cache shared (checked against an uncached pass), and :func:`read_logits` hands the
last positions' logits to the shared readout rules (:mod:`xlikert.kernels.readout`).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ....kernels.readout import next_token_readout
from ...answers.sequences import AnswerSequences
from ...foreign import KVCache, ModelOutput
from ...options import CollectOptions
from .loading import LoadedModel

__all__ = [
    "Scorer",
    "context_readout",
    "empty_cache",
    "finish_readout",
    "in_batches",
    "is_oom",
    "output_cache",
    "read_logits",
]


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is torch running out of memory (CUDA or host)."""
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError | MemoryError):
        return True
    msg = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in msg or "can't allocate memory" in msg
    )


def empty_cache() -> None:
    """Return the CUDA caching allocator's free blocks (nothing without CUDA)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def in_batches(
    n: int,
    size: Callable[[int], int],
    step: Callable[[list[int]], bool | None],
    halve: Callable[[], None],
    too_big: Callable[[list[int]], Exception],
) -> None:
    """Run ``step`` over the rows ``0..n-1`` in batches, halving them out of memory.

    Parameters
    ----------
    n : int
        The number of rows.
    size : callable
        ``size(left)``: the rows of the next batch when ``left`` rows are left (read
        again after every halving).
    step : callable
        ``step(rows)`` runs a batch; returning False runs the same batch again (a check
        that changed how it must be run).
    halve : callable
        Called when a batch of more than one row runs out of memory, before it is run
        again (it halves what ``size`` gives).
    too_big : callable
        ``too_big(rows)``: the error raised when one row alone runs out of memory.

    Examples
    --------
    >>> seen, cap = [], [4]
    >>> def step(rows):
    ...     if len(rows) > 2:
    ...         raise MemoryError
    ...     seen.append(rows)
    >>> in_batches(5, lambda left: min(cap[0], left), step,
    ...            lambda: cap.__setitem__(0, cap[0] // 2), lambda rows: ValueError(rows))
    >>> seen
    [[0, 1], [2, 3], [4]]
    """
    a = 0
    while a < n:
        rows = list(range(a, a + size(n - a)))
        try:
            again = step(rows) is False
        except Exception as exc:
            if not is_oom(exc):
                raise
            if len(rows) == 1:
                raise too_big(rows) from exc
            halve()
            empty_cache()
            continue
        if not again:
            a += len(rows)


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
        :meth:`~xlikert.collect.answers.sequences.AnswerSequences.readout`), ``topk_id`` and
        ``topk_logprob`` (``(B, k)``, of the next token after the prompt).
    """
    return finish_readout(answers, *context_readout(logits, answers, options))


def context_readout(
    logits: np.ndarray, answers: AnswerSequences, options: CollectOptions
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(raw, grid, topk_id, topk_logprob)`` of ``(B, C, V)`` logits after some of the
    answer contexts, in float64 numpy (:func:`~xlikert.kernels.readout.next_token_readout`
    per prompt: the full-vocabulary temporaries stay small); the top-k list is of each
    prompt's first context."""
    need = np.asarray(answers.need)
    rows = [
        next_token_readout(
            z, need, options.temperatures, options.top_ps, options.top_k, answers.pooled
        )
        for z in logits
    ]
    return tuple(np.stack(a) for a in zip(*rows, strict=True))  # type: ignore[return-value]


def finish_readout(
    answers: AnswerSequences, raw: np.ndarray, grid: np.ndarray, topk_id, topk_logprob
) -> dict[str, np.ndarray]:
    """Item PMFs and decoding grid from every context's ``raw`` ``(B, C, K)`` and ``grid``
    ``(B, C, T, P, K)`` (:meth:`~xlikert.collect.answers.sequences.AnswerSequences.readout`), the
    top-k list beside them."""
    out = answers.readout(raw, np.moveaxis(grid, 1, 3))
    out.update(topk_id=topk_id, topk_logprob=topk_logprob)
    return out


def output_cache(out: ModelOutput) -> KVCache:
    """The KV cache a forward pass returned: the output's ``cache`` field (transformers
    renamed it from ``past_key_values``, whose reading now logs a deprecation notice);
    ``past_key_values`` only on a release or a remote-code model without the new field."""
    names = {f.name for f in dataclasses.fields(out)} if dataclasses.is_dataclass(out) else set()
    return out.cache if "cache" in names else out.past_key_values


class Scorer:
    """Runs batches of token rows through a :class:`LoadedModel` with a cached prefix."""

    def __init__(self, lm: LoadedModel, *, prefix_cache: bool = True):
        self.lm = lm
        self._wants_cache = prefix_cache
        self._last_prefix: tuple[tuple[int, ...], Any] | None = None
        params = inspect.signature(lm.model.forward).parameters
        self._keep = "logits_to_keep" in params
        # transformers renamed the KV cache argument of forward ``past_key_values`` ->
        # ``cache`` (the old name warns, to be removed in 5.40); older releases and
        # remote-code models take only the old name
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

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
        cache = self.new_cache()
        self.run(cache, input_ids=torch.tensor([prefix], device=self.input_device))
        self._last_prefix = (key, cache)
        return cache

    def new_cache(self):
        """An empty KV cache for the model: transformers' ``DynamicCache`` laid out from its
        config (sliding-window layers where the model has them), as the model makes one."""
        from transformers import DynamicCache

        return DynamicCache(config=self.lm.model.config)

    def run(self, cache=None, keep: Any = 1, **inputs):
        """One forward pass of the model on ``inputs`` (``input_ids``, ``attention_mask``,
        ``position_ids``), logits kept at the last ``keep`` positions (an int; 0: all) or
        at the positions ``keep`` (a 1-D tensor: the logits ``(batch, len(keep), V)``, where
        the model takes ``logits_to_keep``; else every position's, :attr:`keeps_positions`).

        With ``cache`` (from :meth:`new_cache`) the inputs continue the tokens in it and
        it is extended in place; without, the pass keeps no cache.
        """
        import torch

        kw = {self._cache_arg: cache} if cache is not None else {}
        with torch.inference_mode():
            return self.lm.model(
                **inputs, **kw, use_cache=cache is not None, **self.keep_kwargs(keep)
            )

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

    def keep_kwargs(self, keep: Any = 1) -> dict[str, Any]:
        """The forward call's argument that computes the logits of the last ``keep``
        positions only, or of the positions ``keep`` (a 1-D tensor) only
        (``logits_to_keep``, where the model takes it; else none)."""
        return {"logits_to_keep": keep} if self._keep else {}

    @property
    def keeps_positions(self) -> bool:
        """Whether :meth:`run` computes the logits at the positions it is given alone (the
        model takes ``logits_to_keep``); else it returns every position's."""
        return self._keep

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
        out = self.run(
            None, keep, input_ids=ids, attention_mask=att,
            position_ids=(att.cumsum(-1) - 1).clamp(min=0),
        )  # fmt: skip
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
        out = self.run(
            past, keep, input_ids=ids, attention_mask=torch.cat([seen, att], 1),
            position_ids=n_real[:, None] + (att.cumsum(-1) - 1).clamp(min=0),
        )  # fmt: skip
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
