"""The history tree of a questionnaire: items with their own answers and options, exactly.

A toy conversation model with known masses after every history: each item offers its own
points (part of the score axis) and its own non-substantive options, and leaves some mass
to failure. Plain enumeration (itertools over every history of the answers each item
offers, no tree) is the oracle: the tree read completely equals it to round-off; pruned
trees lie within their certified bounds, for the PMFs, the valid and non-substantive
masses and the pairwise joints over every answer.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pytest

from xlikert.collect.context import Battery, administer, full_joint
from xlikert.collect.options import CollectOptions
from xlikert.kernels.history_tree import answer_pmf

S, OPTIONS = 5, ("Don't know", "Refused")
A = S + len(OPTIONS)
#: The answers each item offers (score indices, then S + option): a 0..4 item with both
#: options, a 1..3 item with "Don't know", a nominal 0..2 item without options.
OFFERED = ((0, 1, 2, 3, 4, 5, 6), (1, 2, 3, 5), (0, 1, 2))


@dataclass
class Toy:
    seed: int = 0
    sharpness: float = 2.0
    name: str = "toy"
    mode: str = "exact"
    options: CollectOptions = field(
        default_factory=lambda: CollectOptions(scale=range(S), nonsubstantive=OPTIONS)
    )
    relabelled: list = field(default_factory=list)

    def __post_init__(self):
        rng = np.random.default_rng(self.seed)
        K = len(OFFERED)
        self.base = self.sharpness * rng.normal(size=(K, A))
        self.table = self.sharpness * rng.normal(size=(K, K, A, A))
        self.fail = rng.uniform(0.05, 0.4, size=(K, A))

    def masses(self, j: int, h) -> np.ndarray:
        """The raw mass of each answer of item j after h (0 where not offered)."""
        z = self.base[j].copy()
        for i, a in enumerate(h):
            z += self.table[i, j, a]
        mask = np.isin(np.arange(A), OFFERED[j])
        e = np.where(mask, np.exp(z - z[mask].max()), 0.0)
        return (1 - self.fail[j, h[-1] if h else 0]) * e / e.sum()

    # the protocol
    def conversation(self, system, turns, user):
        h = [int(a.split(":")[1]) for _, a in turns]  # labels "<item>:<answer index>"
        return "", [1000 + len(turns), *h]

    def context_reader(self, session):
        return Reader(self)

    def relabel(self, labels):
        self.relabelled.append(labels)
        self.options = self.options.replace(answer_labels=labels)

    def score(self, prompts):  # pragma: no cover - not used
        raise NotImplementedError

    def provenance(self):  # pragma: no cover - not used
        return {}

    def close(self):  # pragma: no cover - not used
        pass


class Reader:
    def __init__(self, model: Toy):
        self.model = model

    def read(self, contexts, keep=None):
        rows = [self.model.masses(ids[0] - 1000, list(ids[1:])) for ids in contexts]
        m = np.array(rows)
        vm = m[:, :S].sum(-1)
        ns = m[:, S:].copy()
        for b, ids in enumerate(contexts):  # NaN: an option the item does not offer
            ns[b, [o for o in range(len(OPTIONS)) if S + o not in OFFERED[ids[0] - 1000]]] = np.nan
        with np.errstate(invalid="ignore"):  # no point at all: no PMF (NaN)
            pmf = m[:, :S] / vm[:, None]
        return {"pmf": pmf, "valid_mass": vm, "nonsubstantive_mass": ns}

    def close(self):
        pass


def battery() -> Battery:
    answers = tuple(
        tuple(f"{j}:{a}" if a in offered else "" for a in range(A))
        for j, offered in enumerate(OFFERED)
    )
    return Battery("sys", ("q0", "q1", "q2"), tuple(str(y) for y in range(S)),
                   scores=tuple(range(S)), options=OPTIONS, answers=answers)  # fmt: skip


def brute_force(model: Toy) -> dict[str, np.ndarray]:
    """Every history of the answers offered, by itertools; marginals, masses and joints."""
    K = len(OFFERED)
    pmf, vm, ns = np.zeros((K, S)), np.zeros(K), np.zeros((K, len(OPTIONS)))
    joint = np.zeros((K, K, A, A))
    full = np.zeros([A] * K)
    for j in range(K):
        for h in itertools.product(*OFFERED[:j]):
            p = 1.0
            for i in range(j):
                m = model.masses(i, list(h[:i]))
                p *= m[h[i]] / m.sum()
            m = model.masses(j, list(h))
            pmf[j] += p * m[:S] / m[:S].sum()
            vm[j] += p * m[:S].sum()
            ns[j] += p * m[S:]
            q = m / m.sum()
            for i in range(j):
                joint[i, j, h[i]] += p * q
            joint[j, j] += np.diag(p * q)
            if j == K - 1:
                full[h] = p * q
    for i, j in itertools.combinations(range(K), 2):
        joint[j, i] = joint[i, j].T
    for j in range(K):  # options not offered: NaN, as stored
        ns[j, [o for o in range(len(OPTIONS)) if S + o not in OFFERED[j]]] = np.nan
    return {"pmf": pmf, "valid_mass": vm, "nonsubstantive_mass": ns, "joint": joint, "full": full}


def test_the_whole_tree_equals_the_enumeration():
    model = Toy(seed=1)
    exact = brute_force(model)
    res = administer(model, battery())
    assert res.tol_met and res.passes == res.tree.size == 1 + 7 + 7 * 4
    m, j = res.marginals(), res.joints()
    for k in ("pmf", "valid_mass", "nonsubstantive_mass"):
        np.testing.assert_allclose(m[k], exact[k], atol=1e-13, rtol=0, err_msg=k)
    np.testing.assert_allclose(j["joint"], exact["joint"], atol=1e-13, rtol=0)
    np.testing.assert_allclose(full_joint(res.tree), exact["full"], atol=1e-13, rtol=0)
    assert (m["error"] == 0).all() and (m["valid_mass_error"] == 0).all()
    # each item read with its own labels, the model's own set back after
    assert set(model.relabelled[:-1]) == set(battery().answers)
    assert model.relabelled[-1] is None and model.options.answer_labels is None
    # every answer's history continues: "Don't know" and "Refused" are branches
    assert {int(a) for a in res.tree.answer[res.tree.item == 1]} == set(OFFERED[0])


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("tol", [0.2, 0.05, 1e-2, 1e-3])
def test_pruned_trees_lie_within_their_bounds(tol, batch):
    model = Toy(seed=3, sharpness=2.5)
    exact = brute_force(model)
    res = administer(model, battery(), tol=tol, batch=batch)
    m, j = res.marginals(), res.joints()
    assert res.tol_met and (m["error"] <= tol).all() and (m["valid_mass_error"] <= tol).all()
    assert (np.abs(m["pmf"] - exact["pmf"]) <= m["error"][:, None] + 1e-14).all()
    assert (np.abs(m["valid_mass"] - exact["valid_mass"]) <= m["valid_mass_error"] + 1e-14).all()
    ns, truth = m["nonsubstantive_mass"], exact["nonsubstantive_mass"]
    np.testing.assert_array_equal(np.isnan(ns), np.isnan(truth))
    gap = np.nan_to_num(np.abs(ns - truth))
    assert (gap <= m["valid_mass_error"][:, None] + 1e-14).all()
    lower, upper = m["nonsubstantive_mass_lower"], m["nonsubstantive_mass_upper"]
    assert (np.isnan(truth) | ((lower <= truth + 1e-14) & (truth <= upper + 1e-14))).all()
    assert (np.abs(j["joint"] - exact["joint"]) <= j["error"][..., None, None] + 1e-14).all()
    if tol >= 0.05:
        assert res.passes < 1 + 7 + 28


def test_answer_pmf_branches_on_points_and_options():
    pmf = np.array([[0.25, 0.75], [0.5, 0.5]])
    q = answer_pmf(pmf, np.array([0.8, 0.5]), np.array([[0.1, np.nan], [np.nan, np.nan]]))
    np.testing.assert_allclose(q, [[0.2 / 0.9, 0.6 / 0.9, 0.1 / 0.9, 0], [0.5, 0.5, 0, 0]])
    # only options given: no PMF over the points, the history continues through them
    q = answer_pmf(np.array([[np.nan, np.nan]]), np.array([0.0]), np.array([[0.3, 0.1]]))
    np.testing.assert_allclose(q, [[0, 0, 0.75, 0.25]])


def test_a_history_with_only_non_substantive_answers_is_named():
    class Unsure(Toy):
        def masses(self, j, h):
            m = super().masses(j, h)
            if j == 1 and h == [5]:  # after "Don't know", only "Don't know" again
                m[:S] = 0.0
            return m

    from xlikert.core.errors import CollectionError

    with pytest.raises(
        CollectionError, match=r"'1' after the answers \(0: '0:5'\).*only non-substantive"
    ):
        administer(Unsure(seed=2), Battery("sys", ("q0", "q1", "q2"), tuple("01234"),
                                           ("0", "1", "2"), tuple(range(S)), OPTIONS,
                                           battery().answers))  # fmt: skip


class BoundedReader(Reader):
    """Each history's answers read within a width ``eps`` (as the labels' walk leaves them):
    every offered answer's mass read short by a pseudo-random part, the parts summing to at
    most ``eps``; the PMF's lower ends ``lo_y / (lo_y + lo_rest + eps)``."""

    def __init__(self, model: Toy, eps: float):
        super().__init__(model)
        self.eps = eps

    def read(self, contexts, keep=None):
        out = super().read(contexts, keep)
        rng = np.random.default_rng(len(contexts))
        ns = np.nan_to_num(out["nonsubstantive_mass"])
        m = np.concatenate([out["pmf"] * out["valid_mass"][:, None], ns], 1)
        lo = m - self.eps * m / m.sum(1, keepdims=True) * rng.uniform(0, 1, m.shape)
        points = lo[:, :S]
        vm = points.sum(1)
        rest = vm[:, None] - points + self.eps
        return {
            "pmf": points / vm[:, None], "valid_mass": vm,
            "nonsubstantive_mass": np.where(np.isnan(out["nonsubstantive_mass"]), np.nan, lo[:, S:]),
            "pmf_lower": points / (points + rest), "answer_error": np.full(len(contexts), self.eps),
        }  # fmt: skip


@pytest.mark.parametrize("eps", [1e-3, 3e-2])
def test_histories_read_within_a_bound_keep_the_tree_certified(eps):
    """READING_BOUND_RULE: each history's reading an interval (items with options included),
    the exact interview lies within the stored bounds, which survive the Dataset."""
    from xlikert.collect.context import history_tree, item_marginals, sequential_dataset

    model = Toy(seed=3)
    exact = brute_force(model)
    model.context_reader = lambda session: BoundedReader(model, eps)  # type: ignore[method-assign]
    with pytest.warns(RuntimeWarning, match="answer_tol"):
        res = administer(model, battery())
    assert not res.tol_met and res.tree.answer_error is not None
    m, j = res.marginals(), res.joints()
    assert (m["error"] > 0).all() and m["error"].max() < 50 * eps
    tiny = 1e-12
    assert (m["pmf_lower"] <= exact["pmf"] + tiny).all()
    assert (exact["pmf"] <= m["pmf_upper"] + tiny).all()
    assert (np.abs(m["pmf"] - exact["pmf"]) <= m["error"][:, None] + tiny).all()
    assert (m["valid_mass_lower"] <= exact["valid_mass"] + tiny).all()
    assert (exact["valid_mass"] <= m["valid_mass_upper"] + tiny).all()
    assert (np.abs(m["valid_mass"] - exact["valid_mass"]) <= m["valid_mass_error"] + tiny).all()
    ns, lo, hi = (
        exact["nonsubstantive_mass"],
        m["nonsubstantive_mass_lower"],
        m["nonsubstantive_mass_upper"],
    )
    on = ~np.isnan(ns)
    assert (lo[on] <= ns[on] + tiny).all() and (ns[on] <= hi[on] + tiny).all()
    assert (np.abs(j["joint"] - exact["joint"]) <= j["error"][..., None, None] + tiny).all()
    with pytest.raises(Exception, match="within a bound"):
        full_joint(res.tree)
    back = history_tree(sequential_dataset(res))
    np.testing.assert_allclose(item_marginals(back)["error"], m["error"], rtol=1e-12)
