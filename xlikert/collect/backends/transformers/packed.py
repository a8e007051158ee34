"""The label walk's nodes read as one packed tree a round, on one growing KV cache.

A walk (:func:`~xlikert.collect.answers.walk.walk_labels`) reads nodes of a token trie
below one prompt, a round at a time, each node's parent read before it.
:class:`PackedUnitReader` reads the walks of several prompts together
(:func:`~xlikert.collect.answers.walk.run_walks`) on one one-row KV cache: the prompts'
shared prefix, then every token position a round has run, in the order run (each
prompt's own tokens, its nodes' tokens). A round runs the tokens it adds (a prompt's own
tokens the first time; each node's last token and any prefix of it not yet run) as one
row on that cache, with a tree attention mask: a token sees the shared prefix, its
ancestors' positions and itself, at the position it has in its own sequence (its
depth). So no KV is copied or padded per node or prompt, and the logits are taken at the
read nodes' positions alone.
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

__all__ = ["PackedUnitReader", "packable"]


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


class PackedUnitReader:
    """The walks of a unit's prompts read together: each round one packed row on one
    growing cache, the shared prefix, each prompt's own tokens and its nodes as branches
    of one tree (:func:`~xlikert.collect.answers.walk.run_walks`; a
    :class:`~xlikert.collect.answers.walk.UnitNodeReader`).

    Parameters
    ----------
    scorer
        The model's :class:`~xlikert.collect.backends.transformers.scorer.Scorer`.
    prompts
        The prompts' token ids.
    shared
        A one-row cache whose first ``n`` positions are the prompts' common ``[:n]`` (the
        unit's shared prefix, copied, not extended), and ``n``; ``(None, 0)``: none.
    """

    def __init__(self, scorer: Scorer, prompts: Sequence[Sequence[int]], shared: tuple[Any, int]):
        self.scorer, self.prompts = scorer, [list(p) for p in prompts]
        cache, n = shared
        n = min(n, min(len(p) for p in self.prompts) - 1) if cache is not None else 0
        if n > 0:
            self.cache = copy.deepcopy(cache)
            extra = self.cache.get_seq_length() - n
            if extra > 0:  # the prefix is a whole prompt: its last token is run here
                self.cache.crop(-extra)
        else:
            self.cache = scorer.new_cache()
        self.n = n
        self.anc: list[list[int]] = [list(range(i + 1)) for i in range(n)]
        self.pos: dict[tuple[int, tuple[int, ...]], int] = {}
        self.packed = True
        #: Token positions run and passes.
        self.tokens_run = 0
        self.passes = 0

    def __len__(self) -> int:
        return len(self.prompts)

    def __call__(
        self, asks: Sequence[tuple[int, Sequence[tuple[int, ...]], Sequence[bool]]]
    ) -> list[np.ndarray]:
        """Per ask ``(prompt, nodes, keep)``: ``(len(nodes), V)`` float32 logits after the
        prompt and each node, all read in one pass."""
        wanted = [(i, [tuple(n) for n in nodes]) for i, nodes, _ in asks]
        if not self.packed:
            return [self._uncached(i, nodes) for i, nodes in wanted]
        ids, parents, rows = self._schedule(wanted)
        logits = self._run(ids, parents, rows)
        if self.scorer.needs_check("packed"):
            i, nodes = wanted[0]
            k = max(range(len(nodes)), key=lambda j: len(nodes[j]))
            full = self.prompts[i] + list(nodes[k])
            self.scorer.check_prefix_cache(full[:-1], logits[k], full[-1:], path="packed")
            if not self.scorer.prefix_cache:  # differs: every node in full from now on
                self.packed = False
                return [self._uncached(i, nodes) for i, nodes in wanted]
        out = logits.float().cpu().numpy()
        cuts = np.cumsum([len(nodes) for _, nodes in wanted])[:-1]
        return np.split(out, cuts)

    def _schedule(
        self, asks: list[tuple[int, list[tuple[int, ...]]]]
    ) -> tuple[list[int], list[int], list[int]]:
        """The tokens this pass adds (each with its parent's cache position, -1 for none)
        and where each asked node's logits are among them: a prompt's own tokens not yet
        run (below the shared prefix), then each node's prefixes not yet run, in order; a
        node whose position was run without its logits is run again."""
        base = len(self.anc)
        ids: list[int] = []
        parents: list[int] = []
        new: dict[tuple[int, tuple[int, ...]], int] = {}

        def add(token: int, parent: int) -> int:
            ids.append(token)
            parents.append(parent)
            return base + len(ids) - 1

        rows = []
        for i, nodes in asks:
            if (i, ()) not in self.pos:
                at = self.n - 1
                for t in self.prompts[i][self.n :]:
                    at = add(t, at)
                self.pos[(i, ())] = new[(i, ())] = at
            for node in nodes:
                for k in range(1, len(node) + 1):
                    if (i, node[:k]) not in self.pos:
                        at = add(node[k - 1], self.pos[(i, node[: k - 1])])
                        self.pos[(i, node[:k])] = new[(i, node[:k])] = at
                if (i, node) not in new:  # its position was run before, its logits not kept
                    at = self.pos[(i, node)]
                    tok = node[-1] if node else self.prompts[i][-1]
                    new[(i, node)] = add(tok, self.anc[at][-2] if len(self.anc[at]) > 1 else -1)
                rows.append(new[(i, node)] - base)
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

    def _uncached(self, i: int, nodes: Sequence[tuple[int, ...]]) -> np.ndarray:
        """Every node's logits from an uncached pass of prompt ``i`` and its tokens."""
        rows = [self.prompts[i] + list(n) for n in nodes]
        out = [self.scorer.forward([], None, [r])[0] for r in rows]
        return np.stack([o.float().cpu().numpy() for o in out])
