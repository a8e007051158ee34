"""A toy conversation model with known answer PMFs after every history, and brute force.

:class:`ToyModel` implements :class:`~xlikert.collect.protocol.ConversationModel`
without a network: the "token ids" of a conversation are ``[1000 + j, *h]`` (the
item asked and the answers before it), and its reader returns

    pmf_j(. | h) = softmax(base[j] + carry * sum_i table[i, j, h_i])

so ``carry = 0`` is a model that ignores context. :func:`brute_force` enumerates
every history with itertools (no tree), the oracle of the tree's numbers.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from xlikert.collect.options import CollectOptions


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@dataclass
class ToyModel:
    n_items: int
    n_scores: int
    seed: int = 0
    carry: float = 1.0
    sharpness: float = 2.0
    name: str = "toy"
    mode: str = "exact"
    options: CollectOptions = field(default=None)
    reads: list = field(default_factory=list)

    def __post_init__(self):
        rng = np.random.default_rng(self.seed)
        K, S = self.n_items, self.n_scores
        self.base = self.sharpness * rng.normal(size=(K, S))
        self.table = self.sharpness * rng.normal(size=(K, K, S, S))
        self.valid = rng.uniform(0.3, 0.9, size=(K, S))
        if self.options is None:
            self.options = CollectOptions(scale=range(1, self.n_scores + 1))

    # the oracle's own numbers
    def conditional(self, j: int, history) -> tuple[np.ndarray, float]:
        z = self.base[j].copy()
        for i, a in enumerate(history):
            z = z + self.carry * self.table[i, j, a]
        vm = float(self.valid[j, history[-1]]) if history else float(self.valid[j, 0])
        return softmax(z), vm

    # the protocol
    def conversation(self, system, turns, user):
        j = len(turns)
        h = [int(a) - 1 for _, a in turns]  # replies are the digits 1..S
        return f"{system}|{turns}|{user}", [1000 + j, *h]

    def context_reader(self, session):
        return _Reader(self)

    def score(self, prompts):  # pragma: no cover - not used
        raise NotImplementedError

    def relabel(self, labels):  # pragma: no cover - not used
        raise NotImplementedError

    def provenance(self):  # pragma: no cover - not used
        return {}

    def close(self):  # pragma: no cover - not used
        pass


class _Reader:
    def __init__(self, model: ToyModel):
        self.model = model
        self.closed = False

    def read(self, contexts, keep=None):
        m = self.model
        pmfs, vms = [], []
        for ids in contexts:
            m.reads.append(tuple(ids))
            pmf, vm = m.conditional(ids[0] - 1000, list(ids[1:]))
            pmfs.append(pmf)
            vms.append(vm)
        return {"pmf": np.array(pmfs), "valid_mass": np.array(vms)}

    def close(self):
        self.closed = True


def brute_force(model: ToyModel) -> dict[str, np.ndarray]:
    """Marginals, valid masses, pairwise joints and the whole joint, by plain enumeration."""
    K, S = model.n_items, model.n_scores
    full = np.zeros([S] * K)
    valid = np.zeros(K)
    for ys in itertools.product(range(S), repeat=K):
        p = 1.0
        for j in range(K):
            pmf, _ = model.conditional(j, list(ys[:j]))
            p *= pmf[ys[j]]
        full[ys] = p
    for j in range(K):  # E[valid_mass_j(h)] over the histories of length j
        for h in itertools.product(range(S), repeat=j):
            ph = float(full[h].sum()) if j else 1.0
            valid[j] += ph * model.conditional(j, list(h))[1]
    marg = np.stack([full.sum(axis=tuple(a for a in range(K) if a != j)) for j in range(K)])
    joint = np.zeros((K, K, S, S))
    for i in range(K):
        for j in range(K):
            if i == j:
                joint[i, j] = np.diag(marg[i])
            else:
                keep = tuple(a for a in range(K) if a not in (i, j))
                pair = full.sum(axis=keep)
                joint[i, j] = pair if i < j else pair.T
    return {"pmf": marg, "valid_mass": valid, "joint": joint, "full": full}
