"""An independent reading of answer probabilities: plain transformers on stored token ids.

:class:`Reader` runs the prompt's token ids (as a results file stores them,
:func:`xlikert.collect.read_sequence`) through a model once and each answer spelling on a
copy of its key-value cache; :func:`one_token` reads labels by the one-token rule with an
optional space token first, written here without xlikert's readout.
"""

from __future__ import annotations

import copy

import numpy as np


class Reader:
    """Next-token probabilities after the prompt followed by a token sequence: the prompt
    through the model once, each sequence on a copy of its key-value cache."""

    def __init__(self, model, ids):
        import torch
        from transformers import DynamicCache

        self.model = model
        self.cache = DynamicCache(config=model.config)  # filled in place (forward's `cache`)
        with torch.no_grad():
            out = model(torch.tensor([list(ids)]), cache=self.cache, use_cache=True)
        self.first = torch.softmax(out.logits[0, -1].double(), -1).numpy()

    def after(self, seq) -> np.ndarray:
        """``(len(seq) + 1, V)``: the next token after each prefix of ``seq``."""
        import torch

        if not seq:
            return self.first[None]
        with torch.no_grad():
            out = self.model(torch.tensor([list(seq)]), cache=copy.deepcopy(self.cache),
                             use_cache=True)  # fmt: skip
        rest = torch.softmax(out.logits[0].double(), -1).numpy()
        return np.concatenate([self.first[None], rest])


def one_token(reader, vocab, labels: dict) -> dict:
    """P(label): a token spelling it (one leading space allowed), or a bare space, then it."""
    space = next(i for i, t in vocab.items() if t == " ")
    p0, p1 = reader.after([space])
    return {
        k: sum(p0[i] for i, t in vocab.items() if t in (x, " " + x))
        + p0[space] * sum(p1[i] for i, t in vocab.items() if t == x)
        for k, x in labels.items()
    }
