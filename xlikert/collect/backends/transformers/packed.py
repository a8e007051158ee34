"""The label walk's nodes read as one packed tree a round, on one growing KV cache.

A walk (:func:`~xlikert.collect.answers.walk.walk_labels`) reads nodes of a token trie
below one prompt, a round at a time, each node's parent read before it.
:class:`PackedNodeReader` keeps one one-row KV cache per prompt: the prompt, then every
token position a round has run, in the order run. A round runs the tokens it adds (each
node's last token; any prefix of it not yet run before it) as one row on that cache, with
a tree attention mask: a token sees the prompt, its ancestors' positions and itself, at
the position it has in its own sequence (the prompt's length plus its depth). So no KV is
copied or padded per node, and the logits are taken at the read nodes' positions alone.
The first packed read of a loaded model is checked against an uncached pass of the same
tokens (:meth:`Scorer.check_prefix_cache`, path ``"packed"``); where it differs, or the
model's cache is not plain full attention under SDPA or eager attention, the reader
reads every node in full, uncached.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from .scorer import Scorer

__all__ = ["PackedNodeReader", "packable"]


def packable(scorer: Scorer, cache: Any) -> bool:
    """Whether nodes may be read packed on ``scorer``: a prefix cache the model passed
    (:attr:`Scorer.prefix_cache`), plain full attention (every layer a ``DynamicLayer``)
    and an attention that takes a 4D mask as given (SDPA or eager)."""
    layers = getattr(cache, "layers", None) or ()
    plain = bool(layers) and all(type(x).__name__ == "DynamicLayer" for x in layers)
    return bool(scorer.prefix_cache) and plain and _attention(scorer) in ("sdpa", "eager")


def _attention(scorer: Scorer) -> str | None:
    """The model's attention implementation (transformers' config), None where unsaid."""
    return getattr(scorer.lm.model.config, "_attn_implementation", None)


class PackedNodeReader:
    """A walk's :class:`~xlikert.collect.answers.walk.NodeReader` after one prompt, each
    round one packed row on the prompt's growing cache.

    Parameters
    ----------
    scorer
        The model's :class:`~xlikert.collect.backends.transformers.scorer.Scorer`.
    prompt
        The prompt's token ids.
    shared
        A one-row cache whose first ``n`` positions are ``prompt[:n]`` (the unit's shared
        prefix, copied, not extended), and ``n``; ``(None, 0)``: none.
    """

    def __init__(self, scorer: Scorer, prompt: Sequence[int], shared: tuple[Any, int]):
        self.scorer, self.prompt = scorer, list(prompt)
        cache, n = shared
        n = min(n, len(self.prompt) - 1) if cache is not None else 0
        if n > 0:
            self.cache = copy.deepcopy(cache)
            extra = self.cache.get_seq_length() - n
            if extra > 0:  # the prefix is the whole prompt: its last token is run here
                self.cache.crop(-extra)
        else:
            self.cache = scorer.new_cache()
        self.anc: list[list[int]] = [list(range(i + 1)) for i in range(n)]
        self.pos: dict[tuple[int, ...], int] = {}
        self.packed = True
        #: Token positions run and passes.
        self.tokens_run = 0
        self.passes = 0

    def __call__(self, nodes: Sequence[tuple[int, ...]], keep: Sequence[bool]) -> np.ndarray:
        """``(len(nodes), V)`` float32 logits after the prompt and each node."""
        if not self.packed:
            return self._uncached(nodes)
        ids, parents, rows = self._schedule([tuple(n) for n in nodes])
        logits = self._run(ids, parents, rows)
        if self.scorer.needs_check("packed"):
            i = max(range(len(nodes)), key=lambda k: len(nodes[k]))
            full = self.prompt + list(nodes[i])
            self.scorer.check_prefix_cache(full[:-1], logits[i], full[-1:], path="packed")
            if not self.scorer.prefix_cache:  # differs: every node in full from now on
                self.packed = False
                return self._uncached(nodes)
        return logits.float().cpu().numpy()

    def _schedule(self, nodes: list[tuple[int, ...]]) -> tuple[list[int], list[int], list[int]]:
        """The tokens this pass adds (each with its parent's cache position, -1 for the
        prompt's first token) and where each node's logits are among them: the prompt's
        tokens not yet run, then each node's prefixes not yet run, in order; a node whose
        position was run without its logits is run again."""
        base = len(self.anc)
        ids: list[int] = []
        parents: list[int] = []
        new: dict[tuple[int, ...], int] = {}

        def add(token: int, parent: int) -> int:
            ids.append(token)
            parents.append(parent)
            return base + len(ids) - 1

        if () not in self.pos:
            for t in self.prompt[base:]:
                at = add(t, base + len(ids) - 1)
            self.pos[()] = new[()] = at
        rows = []
        for node in nodes:
            for k in range(1, len(node) + 1):
                if node[:k] not in self.pos:
                    self.pos[node[:k]] = new[node[:k]] = add(node[k - 1], self.pos[node[: k - 1]])
            if node not in new:  # its position was run before, its logits not kept
                at = self.pos[node]
                tok = node[-1] if node else self.prompt[-1]
                new[node] = add(tok, self.anc[at][-2] if len(self.anc[at]) > 1 else -1)
            rows.append(new[node] - base)
        return ids, parents, rows

    def _run(self, ids: list[int], parents: list[int], rows: list[int]) -> Any:
        """Run the scheduled tokens on the cache; the logits ``(len(rows), V)``."""
        import torch

        base, q = len(self.anc), len(ids)
        for i, p in enumerate(parents):
            self.anc.append([*(self.anc[p] if p >= 0 else []), base + i])
        dev = self.scorer.input_device
        mask = torch.zeros((1, 1, q, base + q), dtype=torch.bool)
        for i in range(q):
            mask[0, 0, i, self.anc[base + i]] = True
        pos = torch.tensor([[len(a) - 1 for a in self.anc[base:]]])
        if _attention(self.scorer) != "sdpa":  # eager: an additive float mask
            dtype = self.scorer.lm.model.dtype
            mask = torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)
        keep = torch.tensor(rows, device=dev)
        out = self.scorer.run(
            self.cache, keep=keep, input_ids=torch.tensor([ids], device=dev),
            attention_mask=mask.to(dev), position_ids=pos.to(dev),
        )  # fmt: skip  # the lm_head at the read nodes' positions alone
        self.tokens_run += q
        self.passes += 1
        return out.logits[0] if self.scorer.keeps_positions else out.logits[0, keep, :]

    def _uncached(self, nodes: Sequence[tuple[int, ...]]) -> np.ndarray:
        """Every node's logits from an uncached pass of the prompt and its tokens."""
        rows = [self.prompt + list(n) for n in nodes]
        out = [self.scorer.forward([], None, [r])[0] for r in rows]
        return np.stack([o.float().cpu().numpy() for o in out])
