"""The answer-history tree of one conversation, and what it gives: exact or certified PMFs.

A conversation asks items ``0 .. K-1`` in turn. A *history* ``h`` is the answers
to the items before one; the tree holds one node per history read: its item ``j``
(the length of ``h``), its parent (``h`` less its last answer), that last answer
(an *answer index*: a score index ``0 .. S-1``, or ``S + o`` for the non-substantive
option ``o`` of an item that offers it) and, once read ("expanded"), the item's PMF
given ``h`` (renormalised over its substantive answers), its valid mass and, where
items offer non-substantive options ("Don't know"), each option's mass. The history
distribution continues through the answers given (:data:`HISTORY_RULE`)::

    P(root) = 1,    P(h + a) = P(h) * q_j(a | h),

with ``q_j(. | h)`` the answer distribution of item ``j`` after ``h``
(:func:`answer_pmf`: its points' and options' masses renormalised over them; the
item's PMF itself where it offers no option).

and the PMF of item ``j`` is the mixture ``sum_h P(h) pmf_j(. | h)`` over the
histories of length ``j``. Where some were not read (pruned, or below a node
not read), their total probability ``U_j`` bounds the error, and the value
returned is certified (:data:`CERTIFIED_BOUND_RULE`).

Everything here is plain numpy on the tree's arrays; a PMF array may carry
leading dims (the decoding grid: one history distribution per setting).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import CollectionError

__all__ = [
    "CERTIFIED_BOUND_RULE",
    "HISTORY_RULE",
    "MAX_JOINT_CELLS",
    "READING_BOUND_RULE",
    "TREE_OPTION_VARIABLE",
    "TREE_READING_VARIABLE",
    "TREE_VARIABLES",
    "HistoryTree",
    "answer_pmf",
    "certified_fill",
    "decoding_marginals",
    "full_joint",
    "history_probability",
    "history_tree",
    "item_marginals",
    "pairwise_joints",
]

#: How the history distribution treats failures; stored with every sequential result.
HISTORY_RULE = (
    "histories continue through valid answers: P(h + a) = P(h) pmf_j(a | h), with pmf_j(. | h) "
    "the item's PMF after history h renormalised over the valid answers (a failed answer "
    "starts no history, as pmf is renormalised in isolation); the PMF of item j is "
    "sum_h P(h) pmf_j(. | h) and its valid_mass sum_h P(h) valid_mass_j(h) over the histories "
    "of the items before it; every history read keeps its own pmf and valid_mass (its failure "
    "mass is 1 - valid_mass). An item that offers non-substantive options (its own options: "
    "'Don't know', 'Refused') branches on each of its own answers, points and options alike: "
    "P(h + a) = P(h) q_j(a | h) with q_j(a | h) = mass_j(a | h) / (valid_mass_j(h) + sum_o "
    "nonsubstantive_mass_j(o | h)) over the answers it offers (a failed answer starts no "
    "history), and its nonsubstantive_mass is sum_h P(h) nonsubstantive_mass_j(. | h)"
)

#: The certified bound of a pruned tree; stored with every sequential result.
CERTIFIED_BOUND_RULE = (
    "U_j = the total probability of the histories of length j not read (pruned at or before "
    "item j); known(y) = sum over the histories read of P(h) pmf_j(y | h); the exact PMF lies "
    "in [known(y), known(y) + U_j] for every score y; the value returned is known + U_j f with "
    "f = known / sum(known) (uniform when nothing was read), so |returned - exact| <= error_j "
    "= U_j max_y max(f(y), 1 - f(y)) <= U_j. The same holds for valid_mass (with the "
    "non-substantive masses and the failure mass, one PMF per history) and for every cell "
    "of the pairwise joint of items i < j (with U_j). U_j = 0: exact (floating-point round-off "
    "only)"
)

#: How a history whose answers were read within a bound (word labels read by the labels'
#: walk to ``answer_tol``) enters the tree; stored with every sequential result.
READING_BOUND_RULE = (
    "a history h whose answer reading is certified within eps_h > 0 (the labels' walk) keeps "
    "certified lower ends: pmf_lo (each point's PMF lower end), the masses read (valid, each "
    "option) and the failure mass 1 - valid - options - eps_h (clipped at 0); its branches "
    "take q_lo(a | h) = mass_lo(a) / (valid_lo + options_lo + eps_h) (the item's pmf_lo where "
    "it offers no option), so P_lo(h + a) = P_lo(h) q_lo(a | h) <= P(h + a); what the lower "
    "ends leave (1 - sum pmf_lo, 1 - sum q_lo, the lower ends' deficit of the valid/option/"
    "failure PMF) times P_lo(h) is added to U_j of its own item (pmf, valid mass) and of every "
    "later item (its branches), so the exact values stay in [known, known + U_j]; a bound "
    "never smaller than the one reached"
)

#: The tree's variable holding each history's reading width (dim ``history``), where some
#: history was read within a bound (:attr:`HistoryTree.answer_error`).
TREE_READING_VARIABLE = "history_answer_error"

#: The history tree's variables (dim ``history``) and the tree attribute each holds.
TREE_VARIABLES = {
    "history_parent": "parent",
    "history_item": "item",
    "history_answer": "answer",
    "history_read": "read",
    "history_pmf": "pmf",
    "history_valid_mass": "valid_mass",
}
#: The tree's variable where items offer non-substantive options (dims ``history, option``).
TREE_OPTION_VARIABLE = "history_nonsubstantive_mass"

#: Largest number of cells :func:`full_joint` builds (``n_scores ** n_items``).
MAX_JOINT_CELLS = 1 << 24


@dataclass
class HistoryTree:
    """The nodes of one conversation's history tree (parents before children).

    Attributes
    ----------
    n_items, n_scores : int
        Items of the conversation (``K``) and scale points (``S``: the union of the
        items' points when they have their own).
    parent : np.ndarray
        ``(N,)`` index of each node's parent, -1 for the root (the empty history).
    item : np.ndarray
        ``(N,)`` the item each node asks (the length of its history).
    answer : np.ndarray
        ``(N,)`` the answer index of the last answer of its history (-1 for the root): a
        score index, or ``S + o`` for the non-substantive option ``o``.
    read : np.ndarray
        ``(N,)`` bool: the node was expanded (one forward pass).
    pmf : np.ndarray
        ``(N, S)`` the item's PMF given the history (NaN where not read).
    valid_mass : np.ndarray
        ``(N,)`` its valid mass (NaN where not read).
    decoding_pmf, decoding_valid_mass : np.ndarray or None
        ``(N, T, P, S)`` and ``(N, T, P)``: the same under each decoding setting.
    nonsubstantive_mass : np.ndarray or None
        ``(N, O)`` the mass of each non-substantive option given the history, NaN where
        the item does not offer it (or the node was not read); None: no item offers one.
    decoding_nonsubstantive_mass : np.ndarray or None
        ``(N, T, P, O)``: the same under each decoding setting.
    answer_error : np.ndarray or None
        ``(N,)`` the certified width of each read node's own answer reading (the labels'
        walk, :mod:`xlikert.collect.answers.walk`; NaN where not read): where it is above 0
        the node's ``pmf``, masses and ``decoding_*`` are certified lower ends, and the
        true mass of its answers (points and options) exceeds theirs by at most it
        (:data:`READING_BOUND_RULE`). None: every reading exact.
    """

    n_items: int
    n_scores: int
    parent: np.ndarray
    item: np.ndarray
    answer: np.ndarray
    read: np.ndarray
    pmf: np.ndarray
    valid_mass: np.ndarray
    decoding_pmf: np.ndarray | None = None
    decoding_valid_mass: np.ndarray | None = None
    nonsubstantive_mass: np.ndarray | None = None
    decoding_nonsubstantive_mass: np.ndarray | None = None
    answer_error: np.ndarray | None = None

    @property
    def n_options(self) -> int:
        """Non-substantive options of the answer axis (``O``; 0: none)."""
        return 0 if self.nonsubstantive_mass is None else int(self.nonsubstantive_mass.shape[-1])

    @property
    def n_answers(self) -> int:
        """Answers a history branches on: ``S`` points, then ``O`` options."""
        return self.n_scores + self.n_options

    @property
    def size(self) -> int:
        """Number of nodes (histories created)."""
        return int(self.parent.size)

    @property
    def paths(self) -> np.ndarray:
        """``(N, K)`` the answers of each history (score indices), -1 past its end."""
        return _history_paths(self.parent, self.answer, self.item, self.n_items)

    @property
    def complete(self) -> bool:
        """Whether every history with positive probability was read (the tree is exact)."""
        return bool(self.read.all())


def _history_paths(
    parent: np.ndarray, answer: np.ndarray, item: np.ndarray, n_items: int
) -> np.ndarray:
    """The answers of each history, item by item (``(N, K)``, -1 past its end).

    Examples
    --------
    >>> _history_paths(np.array([-1, 0, 0, 1]), np.array([-1, 2, 0, 1]), np.array([0, 1, 1, 2]),
    ...               3).tolist()
    [[-1, -1, -1], [2, -1, -1], [0, -1, -1], [2, 1, -1]]
    """
    parent, answer, item = (np.asarray(a, dtype=np.int64) for a in (parent, answer, item))
    paths = np.full((parent.size, n_items), -1, dtype=np.int64)
    for j in range(1, n_items):
        sel = np.flatnonzero(item == j)
        paths[sel] = paths[parent[sel]]
        paths[sel, j - 1] = answer[sel]
    return paths


def history_probability(
    parent: np.ndarray, answer: np.ndarray, item: np.ndarray, pmf: np.ndarray
) -> np.ndarray:
    """``P(h)`` of every node: the product of its answers' PMFs along the history.

    Parameters
    ----------
    parent, answer, item : np.ndarray
        ``(N,)`` the tree (:class:`HistoryTree`); a node of item ``j`` has its
        parent at item ``j - 1``.
    pmf : np.ndarray
        ``(..., N, S)`` each node's PMF (read nodes; others are not used).

    Returns
    -------
    np.ndarray
        ``(..., N)``.

    Examples
    --------
    >>> pmf = np.array([[0.25, 0.75], [0.5, 0.5], [np.nan, np.nan]])
    >>> history_probability(np.array([-1, 0, 0]), np.array([-1, 0, 1]), np.array([0, 1, 1]),
    ...                     pmf).tolist()
    [1.0, 0.25, 0.75]
    """
    pmf = np.asarray(pmf, dtype=np.float64)
    item = np.asarray(item, dtype=np.int64)
    prob = np.ones(pmf.shape[:-1])
    for j in range(1, int(item.max(initial=0)) + 1):
        sel = np.flatnonzero(item == j)
        up = parent[sel]
        prob[..., sel] = prob[..., up] * pmf[..., up, answer[sel]]
    return prob


def answer_pmf(
    pmf: np.ndarray,
    valid_mass: np.ndarray,
    nonsubstantive_mass: np.ndarray | None = None,
    answer_error: np.ndarray | None = None,
) -> np.ndarray:
    """The answer distribution ``q(. | h)`` a history branches on, ``(..., N, S + O)``.

    Where a node's item offers no option (``nonsubstantive_mass`` None, or all NaN in its
    row) it is the item's PMF itself (zero on the options); else the points' masses
    (``valid_mass * pmf``) and the offered options' masses, renormalised over them
    (:data:`HISTORY_RULE`).

    Parameters
    ----------
    pmf : np.ndarray
        ``(..., N, S)`` each node's PMF over its substantive answers.
    valid_mass : np.ndarray
        ``(..., N)`` its substantive (valid) mass.
    nonsubstantive_mass : np.ndarray, optional
        ``(..., N, O)`` each option's mass, NaN where not offered.
    answer_error : np.ndarray, optional
        ``(N,)`` each node's reading width (:attr:`HistoryTree.answer_error`): where above
        0 the values are lower ends and so is the result (its denominator raised by it,
        :data:`READING_BOUND_RULE`).

    Returns
    -------
    np.ndarray

    Examples
    --------
    >>> q = answer_pmf(np.array([[0.5, 0.5]]), np.array([0.6]), np.array([[0.2, np.nan]]))
    >>> q.round(12).tolist()
    [[0.375, 0.375, 0.25, 0.0]]
    >>> answer_pmf(np.array([[0.5, 0.5]]), np.array([0.6])).tolist()
    [[0.5, 0.5]]
    """
    pmf = np.asarray(pmf, dtype=np.float64)
    if nonsubstantive_mass is None:
        return pmf
    ns = np.asarray(nonsubstantive_mass, dtype=np.float64)
    vm = np.asarray(valid_mass, dtype=np.float64)[..., None]
    offers = np.isfinite(ns).any(-1, keepdims=True)
    options = np.nan_to_num(ns, nan=0.0)
    eps = 0.0 if answer_error is None else np.nan_to_num(np.asarray(answer_error, np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        total = vm + options.sum(-1, keepdims=True) + np.asarray(eps)[..., None]
        points = np.where(vm > 0, vm * pmf, 0.0)  # only options given: no PMF, a branch
        mixed = np.concatenate([points, options], -1) / total
    plain = np.concatenate([pmf, np.zeros_like(options)], -1)
    return np.where(offers, mixed, plain)


def certified_fill(known: np.ndarray, unexplored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The certified value and error from the part read and the mass not read.

    ``known (..., S)`` is a sub-PMF (the histories read), ``unexplored (...)`` the
    mass of the histories not read. Returns ``known + U f`` with
    ``f = known / sum(known)`` (uniform where nothing was read) and the error bound
    ``U max_y max(f_y, 1 - f_y)`` (:data:`CERTIFIED_BOUND_RULE`).

    Examples
    --------
    >>> value, error = certified_fill(np.array([0.3, 0.6]), np.array(0.1))
    >>> value.round(12).tolist(), round(float(error), 12)
    ([0.333333333333, 0.666666666667], 0.066666666667)
    """
    known = np.asarray(known, dtype=np.float64)
    u = np.asarray(unexplored, dtype=np.float64)[..., None]
    total = known.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(total > 0, known / total, 1.0 / known.shape[-1])
    error = (u * np.maximum(f, 1.0 - f)).max(-1)
    return known + u * f, error


def _unexplored(tree: HistoryTree, prob: np.ndarray) -> np.ndarray:
    """``(..., K)``: the probability of the histories of each item not read: the nodes not
    read at that item or before it."""
    waiting = ~tree.read
    out = np.zeros((*prob.shape[:-1], tree.n_items))
    for j in range(tree.n_items):
        sel = waiting & (tree.item == j)
        out[..., j] = prob[..., sel].sum(-1)
    return np.cumsum(out, axis=-1)


def item_marginals(
    tree: HistoryTree,
    pmf: np.ndarray | None = None,
    valid_mass: np.ndarray | None = None,
    nonsubstantive_mass: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The PMF and valid mass of every item over its histories, with certified bounds.

    Parameters
    ----------
    tree
        The history tree.
    pmf, valid_mass : np.ndarray, optional
        ``(..., N, S)`` and ``(..., N)`` per-node values (default the tree's own; the
        decoding grid's give one history distribution per setting).
    nonsubstantive_mass : np.ndarray, optional
        ``(..., N, O)`` per-node option masses; default the tree's own when ``pmf`` is
        not given (else none).

    Returns
    -------
    dict
        ``pmf (..., K, S)``, ``valid_mass (..., K)``, ``pmf_lower``, ``pmf_upper``,
        ``valid_mass_lower``, ``valid_mass_upper``, ``error (..., K)`` (bound on
        ``|pmf - exact|``), ``valid_mass_error`` and ``unexplored (..., K)`` (``U_j``).
        Where items offer options, also ``nonsubstantive_mass (..., K, O)`` (NaN where
        the item does not offer the option), ``nonsubstantive_mass_lower``,
        ``nonsubstantive_mass_upper``; ``valid_mass_error`` then bounds them too.

    Examples
    --------
    >>> tree = HistoryTree(2, 2, np.array([-1, 0, 0]), np.array([0, 1, 1]), np.array([-1, 0, 1]),
    ...     np.array([True, True, True]), np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]]),
    ...     np.ones(3))
    >>> item_marginals(tree)["pmf"].tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    own = pmf is None
    pmf = tree.pmf if own else np.asarray(pmf, dtype=np.float64)
    vm = tree.valid_mass if valid_mass is None else np.asarray(valid_mass, dtype=np.float64)
    ns = tree.nonsubstantive_mass if own else nonsubstantive_mass
    q = answer_pmf(pmf, vm, ns, tree.answer_error)
    prob = history_probability(tree.parent, tree.answer, tree.item, q)
    u = _unexplored(tree, prob)
    lead = pmf.shape[:-2]
    ns_arr = np.full((*pmf.shape[:-1], 0), np.nan) if ns is None else np.asarray(ns, np.float64)
    n_opt = int(ns_arr.shape[-1])
    options = np.nan_to_num(ns_arr, nan=0.0)
    slack = _reading_slack(tree, prob, pmf, q, vm, options)
    known = np.zeros((*lead, tree.n_items, tree.n_scores))
    known_v = np.zeros((*lead, tree.n_items, 2 + n_opt))  # valid, each option, failed
    offered = np.zeros((tree.n_items, n_opt), dtype=bool)
    for j in range(tree.n_items):
        sel = tree.read & (tree.item == j)
        known[..., j, :] = (prob[..., sel, None] * pmf[..., sel, :]).sum(-2)
        known_v[..., j, 0] = (prob[..., sel] * vm[..., sel]).sum(-1)
        known_v[..., j, -1] = (prob[..., sel] * slack["failed"][..., sel]).sum(-1)
        if n_opt:
            known_v[..., j, 1:-1] = (prob[..., sel, None] * options[..., sel, :]).sum(-2)
            offered[j] = np.isfinite(ns_arr[..., sel, :]).any(axis=(*range(len(lead)), -2))
    u_pmf, u_valid = u + slack["pmf"], u + slack["valid"]
    value, error = certified_fill(known, u_pmf)
    # the valid (and non-substantive) mass: the mean over the histories read, one PMF of
    # (valid, options..., failed) per history
    v_value, v_error = certified_fill(known_v, u_valid)
    known_v = known_v[..., :-1]
    out = {
        "pmf": value,
        "valid_mass": v_value[..., 0],
        "pmf_lower": known,
        "pmf_upper": known + u_pmf[..., None],
        "valid_mass_lower": known_v[..., 0],
        "valid_mass_upper": known_v[..., 0] + u_valid,
        "error": error,
        "valid_mass_error": v_error,
        "unexplored": u,
    }
    if n_opt:
        hide = np.where(offered, 0.0, np.nan)
        out["nonsubstantive_mass"] = v_value[..., 1 : 1 + n_opt] + hide
        out["nonsubstantive_mass_lower"] = known_v[..., 1:] + hide
        out["nonsubstantive_mass_upper"] = known_v[..., 1:] + u_valid[..., None] + hide
    return out


def _reading_slack(
    tree: HistoryTree, prob: np.ndarray, pmf: np.ndarray, q: np.ndarray, vm: np.ndarray,
    options: np.ndarray,
) -> dict[str, np.ndarray]:  # fmt: skip
    """What the histories read within a bound add to ``U_j`` (:data:`READING_BOUND_RULE`):
    ``pmf`` and ``valid`` ``(..., K)``, and ``failed (..., N)``: each node's failure mass
    (its lower end where its reading is bounded). Exact readings add nothing."""
    K, N = tree.n_items, tree.size
    lead = prob.shape[:-1]
    eps = np.zeros(N) if tree.answer_error is None else np.nan_to_num(tree.answer_error)
    bounded = tree.read & (eps > 0)
    rest = vm + options.sum(-1)
    failed = np.where(bounded, np.maximum(1.0 - rest - eps, 0.0), np.nansum(pmf, -1) - rest)
    out = {"pmf": np.zeros((*lead, K)), "valid": np.zeros((*lead, K)), "failed": failed}
    if not bounded.any():
        return out
    own_p = np.where(bounded, prob * np.maximum(1.0 - np.nansum(pmf, -1), 0.0), 0.0)
    own_v = np.where(bounded, prob * np.maximum(1.0 - rest - failed, 0.0), 0.0)
    # the branches of the nodes of the items before j lack their mass for item j
    branch = _branch_slack(tree, prob, q)
    for j in range(K):
        later = branch[..., j - 1] if j else 0.0
        out["pmf"][..., j] = own_p[..., tree.item == j].sum(-1) + later
        out["valid"][..., j] = own_v[..., tree.item == j].sum(-1) + later
    return out


def decoding_marginals(tree: HistoryTree) -> dict[str, np.ndarray]:
    """:func:`item_marginals` under each setting of the decoding grid the tree holds.

    Returns
    -------
    dict
        The keys of :func:`item_marginals`, on ``(T, P, K, ...)``: temperature, top-p,
        item (the tree's ``decoding_pmf`` is ``(N, T, P, S)``, a node first).

    Raises
    ------
    ValueError
        A tree read without the decoding grid.
    """
    if tree.decoding_pmf is None or tree.decoding_valid_mass is None:
        raise ValueError("the history tree holds no decoding grid (read without one)")
    ns = tree.decoding_nonsubstantive_mass
    return item_marginals(
        tree,
        np.moveaxis(tree.decoding_pmf, 0, 2),  # (T, P, N, S)
        np.moveaxis(tree.decoding_valid_mass, 0, 2),
        None if ns is None else np.moveaxis(ns, 0, 2),  # (T, P, N, O)
    )


def pairwise_joints(tree: HistoryTree, pmf: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The joint PMF of every pair of items in the conversation, with certified bounds.

    ``joint[i, j, a, b] = P(Y_i = a, Y_j = b)``; for ``i < j`` it is
    ``sum_h P(h) 1[h_i = a] q_j(b | h)`` over the histories of length ``j``
    (certified with ``U_j`` where some were not read, :func:`certified_fill`);
    ``joint[j, i]`` is its transpose and ``joint[i, i]`` the diagonal of item
    ``i``'s marginal. ``a`` and ``b`` run over the answers (:func:`answer_pmf`): the
    ``S`` points, then the ``O`` options where items offer them (where none does,
    ``q_j`` is the item's PMF and the joint is over the scores).

    Returns
    -------
    dict
        ``joint (..., K, K, A, A)`` (``A = S + O``), ``error (..., K, K)`` (bound on every cell's
        ``|joint - exact|``), ``unexplored (..., K, K)``.

    Examples
    --------
    >>> tree = HistoryTree(2, 2, np.array([-1, 0, 0]), np.array([0, 1, 1]), np.array([-1, 0, 1]),
    ...     np.array([True, True, True]), np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]]),
    ...     np.ones(3))
    >>> pairwise_joints(tree)["joint"][0, 1].tolist()  # the second answer repeats the first
    [[0.5, 0.0], [0.0, 0.5]]
    """
    if pmf is None:
        pmf = answer_pmf(tree.pmf, tree.valid_mass, tree.nonsubstantive_mass, tree.answer_error)
    pmf = np.asarray(pmf, dtype=np.float64)
    prob = history_probability(tree.parent, tree.answer, tree.item, pmf)
    u = _unexplored(tree, prob) + _branch_slack(tree, prob, pmf)
    K, S = tree.n_items, pmf.shape[-1]
    lead = pmf.shape[:-2]
    joint = np.zeros((*lead, K, K, S, S))
    error = np.zeros((*lead, K, K))
    paths = tree.paths
    eye = np.eye(S)
    for j in range(K):
        sel = tree.read & (tree.item == j)
        w = prob[..., sel, None] * pmf[..., sel, :]  # (..., n, S)
        diag, err = certified_fill(w.sum(-2), u[..., j])  # item j's answer marginal
        joint[..., j, j, :, :] = diag[..., :, None] * eye
        error[..., j, j] = err
        for i in range(j):
            onehot = eye[paths[sel, i]]  # (n, S)
            known = np.einsum("na,...nb->...ab", onehot, w)
            flat, err = certified_fill(known.reshape(*lead, S * S), u[..., j])
            joint[..., i, j, :, :] = flat.reshape(*lead, S, S)
            joint[..., j, i, :, :] = np.swapaxes(joint[..., i, j, :, :], -1, -2)
            error[..., i, j] = error[..., j, i] = err
    unexplored = np.maximum(u[..., :, None], u[..., None, :])
    return {"joint": joint, "error": error, "unexplored": unexplored}


def _branch_slack(tree: HistoryTree, prob: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``(..., K)``: the mass the branches of the histories read within a bound lack, up to
    and including each item (:data:`READING_BOUND_RULE`; 0 where every reading is exact)."""
    out = np.zeros((*prob.shape[:-1], tree.n_items))
    if tree.answer_error is None:
        return out
    bounded = tree.read & (np.nan_to_num(tree.answer_error) > 0)
    gap = np.where(bounded, prob * np.maximum(1.0 - np.nansum(q, -1), 0.0), 0.0)
    for j in range(tree.n_items):
        out[..., j] = gap[..., tree.item <= j].sum(-1)
    return out


def full_joint(tree: HistoryTree, pmf: np.ndarray | None = None) -> np.ndarray:
    """The joint PMF of all ``K`` answers of a completely read tree, ``(..., S, ..., S)``.

    ``P(y_0, .., y_{K-1}) = P(h = y_0 .. y_{K-2}) q_{K-1}(y_{K-1} | h)``, over the
    answers (:func:`answer_pmf`: the ``S`` points, then the ``O`` options where items
    offer them; ``(..., A, ..., A)``).

    Raises
    ------
    CollectionError
        The tree was pruned (some history was not read), or the joint has more than
        :data:`MAX_JOINT_CELLS` cells.

    Examples
    --------
    >>> tree = HistoryTree(2, 2, np.array([-1, 0, 0]), np.array([0, 1, 1]), np.array([-1, 0, 1]),
    ...     np.array([True, True, True]), np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]]),
    ...     np.ones(3))
    >>> full_joint(tree).tolist()
    [[0.5, 0.0], [0.0, 0.5]]
    """
    K, S = tree.n_items, tree.n_answers
    if tree.answer_error is not None and (np.nan_to_num(tree.answer_error) > 0).any():
        raise CollectionError(
            f"the joint of all {K} answers needs every history read exactly; some histories' "
            "answers were read within a bound (word labels read by the labels' walk to "
            "answer_tol > 0): use the pairwise joints (certified) or answer_tol = 0"
        )
    if not tree.complete:
        raise CollectionError(
            f"the joint of all {K} answers needs every history read; this tree was pruned "
            f"({int((~tree.read).sum())} of {tree.size} histories not read): use the pairwise "
            "joints (certified) or administer with tol=0 and a larger max_passes"
        )
    if S**K > MAX_JOINT_CELLS:
        raise CollectionError(
            f"the joint of all {K} answers on {S} scale points has {S**K} cells, more than "
            f"{MAX_JOINT_CELLS}: use the pairwise joints"
        )
    if pmf is None:
        pmf = answer_pmf(tree.pmf, tree.valid_mass, tree.nonsubstantive_mass)
    pmf = np.asarray(pmf, dtype=np.float64)
    prob = history_probability(tree.parent, tree.answer, tree.item, pmf)
    lead = pmf.shape[:-2]
    out = np.zeros((*lead, S ** (K - 1), S))
    sel = np.flatnonzero(tree.item == K - 1)
    digits = tree.paths[sel, : K - 1]
    flat = (digits * S ** np.arange(K - 2, -1, -1)).sum(-1) if K > 1 else np.zeros(1, np.int64)
    out[..., flat, :] = prob[..., sel, None] * pmf[..., sel, :]
    return out.reshape(*lead, *([S] * K))


def history_tree(ds: Any) -> HistoryTree:
    """The history tree stored in a sequential Dataset.

    ``ds`` is an ``xarray.Dataset`` holding :data:`TREE_VARIABLES` (dim ``history``), as
    :func:`xlikert.collect.context.sequential_dataset` writes it; only its arrays are read.

    Raises
    ------
    CollectionError
        A Dataset without the tree's variables.
    """
    missing = [v for v in TREE_VARIABLES if v not in ds]
    if missing:
        raise CollectionError(
            f"no history tree in this Dataset (missing {missing}): it is not the result of "
            "sequential administration"
        )
    arrays = {attr: np.asarray(ds[var].values) for var, attr in TREE_VARIABLES.items()}
    ns = None
    if TREE_OPTION_VARIABLE in ds:
        ns = np.asarray(ds[TREE_OPTION_VARIABLE].transpose("history", "option").values)
    eps = None
    if TREE_READING_VARIABLE in ds:
        eps = np.asarray(ds[TREE_READING_VARIABLE].values, dtype=np.float64)
    return HistoryTree(
        ds.sizes["item"],
        ds.sizes["score"],
        arrays["parent"].astype(np.int64),
        arrays["item"].astype(np.int64),
        arrays["answer"].astype(np.int64),
        arrays["read"].astype(bool),
        arrays["pmf"].astype(np.float64),
        arrays["valid_mass"].astype(np.float64),
        nonsubstantive_mass=None if ns is None else ns.astype(np.float64),
        answer_error=eps,
    )
