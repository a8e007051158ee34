"""An independent reading of answer probabilities: plain transformers on stored token ids.

:class:`Reader` runs the prompt's token ids (as a results file stores them,
:func:`xlikert.collect.read_sequence`) through a model once, then answer spellings on its
key-value cache, cropped back after each; :meth:`Reader.tree` walks every spelling's
prefixes once (a trie: one token per node). :func:`one_token` reads labels by the
one-token rule with an optional space token first, written here without xlikert's readout.
"""

from __future__ import annotations

import numpy as np


class Reader:
    """Next-token probabilities after the prompt followed by token sequences: the prompt
    through the model once, each sequence on its key-value cache (cropped back after)."""

    def __init__(self, model, ids):
        import torch
        from transformers import DynamicCache

        self.model = model
        self.cache = DynamicCache(config=model.config)  # filled in place (forward's `cache`)
        with torch.no_grad():
            out = model(torch.tensor([list(ids)]), cache=self.cache, use_cache=True)
        self.first = torch.softmax(out.logits[0, -1].double(), -1).numpy()

    def _run(self, seq) -> np.ndarray:
        """``(len(seq), V)`` after each token of ``seq`` on the cache, which keeps them."""
        import torch

        with torch.no_grad():
            out = self.model(torch.tensor([list(seq)]), cache=self.cache, use_cache=True)
        return torch.softmax(out.logits[0].double(), -1).numpy()

    def after(self, seq) -> np.ndarray:
        """``(len(seq) + 1, V)``: the next token after each prefix of ``seq``."""
        if not seq:
            return self.first[None]
        rest = self._run(seq)
        self.cache.crop(-len(seq))
        return np.concatenate([self.first[None], rest])

    def tree(self, seqs) -> dict[tuple, np.ndarray]:
        """The next token after every prefix of ``seqs`` (the empty one included), by a walk
        of their trie: each node's token runs once on its parent's cache."""
        trie: dict = {}
        for seq in seqs:
            node = trie
            for t in seq:
                node = node.setdefault(t, {})
        out: dict[tuple, np.ndarray] = {(): self.first}
        stack = [((), trie, False)]
        while stack:
            path, node, entered = stack.pop()
            if entered:  # leaving the node: its token off the cache
                self.cache.crop(-1)
                continue
            if path:
                out[path] = self._run(path[-1:])[0]
                stack.append((path, node, True))
            stack.extend(((*path, t), child, False) for t, child in node.items())
        return out


def one_token(reader, vocab, labels: dict) -> dict:
    """P(label): a token spelling it (one leading space allowed), or a bare space, then it."""
    space = next(i for i, t in vocab.items() if t == " ")
    p0, p1 = reader.after([space])
    return {
        k: sum(p0[i] for i, t in vocab.items() if t in (x, " " + x))
        + p0[space] * sum(p1[i] for i, t in vocab.items() if t == x)
        for k, x in labels.items()
    }
