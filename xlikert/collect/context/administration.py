"""Sequential administration in a collection run: the conversations of a prompts Dataset.

A prompts Dataset asks for sequential administration with a factor named
``administration`` (:data:`ADMINISTRATION_DIM`) whose levels are ``isolated``
(one prompt per item, the default when there is no such factor) and
``sequential`` (one conversation per condition). The items of a sequential
condition are asked in the order of the item dim, or, with an item-order factor,
in the order each of its levels gives: the prompts' ``item_position`` variable
(dims ``(<item-order factor>, item)``, each level a permutation of
``0 .. K-1``; :func:`item_orders` builds the usual designs). An item-order factor
changes no prompt under isolated administration, so it is refused there.

:class:`Conversations` finds the batteries (the flat cells of each sequential
condition, in the order asked); the runner makes each one unit of work
(:mod:`xlikert.collect.run.session`), read by :func:`score_battery` into the per-unit
record with :data:`~xlikert.core.schema.CONTEXT_VARIABLES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from ...core.dims import ADMINISTRATION_DIM
from ...core.errors import CollectionError
from ...core.schema import SEQUENTIAL_MAX_PASSES_ATTR, SEQUENTIAL_TOL_ATTR, variable_table
from ...design.item_order import ADMINISTRATIONS, ITEM_POSITION, item_orders
from ...kernels.history_tree import decoding_marginals, item_marginals, pairwise_joints
from ..options import CollectOptions
from ..progress import CellProgressFn
from ..protocol import Model
from ..record import UnitResult
from .sequential import Battery, administer

__all__ = [
    "ADMINISTRATIONS",
    "ADMINISTRATION_DIM",
    "ITEM_POSITION",
    "Conversations",
    "context_attrs",
    "item_orders",
    "score_battery",
]


@dataclass
class Conversations:
    """The sequential conditions of a run's cells (flat, in the order of ``user``'s values).

    Attributes
    ----------
    batteries : list of list of int
        The flat cells of each sequential condition, in the order its items are asked.
    where : dict
        Flat cell -> (battery index, position) for every sequentially administered cell.
    order_dim : str or None
        The item-order factor, if any.
    """

    batteries: list[list[int]]
    where: dict[int, tuple[int, int]]
    order_dim: str | None = None

    @classmethod
    def of(cls, prompts: xr.Dataset, user: xr.DataArray) -> Conversations | None:
        """The conversations of a prompts Dataset (None: every cell is isolated).

        Raises
        ------
        CollectionError
            Unknown administration levels; an ``item_position`` that is not a
            permutation per level or on other dims; an item-order factor where any
            cell is administered in isolation (it would change no prompt).
        """
        order_dim, position = _item_position(prompts, user)
        if ADMINISTRATION_DIM not in user.dims:
            if order_dim is not None:
                raise _isolated_order(order_dim)
            return None
        levels = [str(v) for v in user[ADMINISTRATION_DIM].values]
        bad = [v for v in levels if v not in ADMINISTRATIONS]
        if bad:
            raise CollectionError(
                f"factor {ADMINISTRATION_DIM!r}: unknown level(s) {bad}; its levels are "
                f"{list(ADMINISTRATIONS)}"
            )
        if order_dim is not None and "isolated" in levels:
            raise _isolated_order(order_dim)
        if "sequential" not in levels:
            return None
        K = user.sizes["item"]
        index = xr.DataArray(np.arange(user.size).reshape(user.shape), dims=user.dims)
        seq = index.isel({ADMINISTRATION_DIM: levels.index("sequential")})
        others = [d for d in seq.dims if d != "item"]
        flat_cells = seq.transpose(*others, "item").values.reshape(-1, K)
        flat_pos = None
        if position is not None:
            bare = xr.DataArray(position.values, dims=position.dims)
            flat_pos = bare.broadcast_like(seq).transpose(*others, "item").values.reshape(-1, K)
        batteries: list[list[int]] = []
        where: dict[int, tuple[int, int]] = {}
        for c, row in enumerate(flat_cells):
            order = np.arange(row.size) if flat_pos is None else np.argsort(flat_pos[c])
            battery = [int(row[k]) for k in order]
            for p, j in enumerate(battery):
                where[j] = (len(batteries), p)
            batteries.append(battery)
        return cls(batteries, where, order_dim)

    def battery_of(self, cell: int) -> list[int] | None:
        """The battery of a sequentially administered cell (None: isolated)."""
        got = self.where.get(int(cell))
        return None if got is None else self.batteries[got[0]]


def _isolated_order(order_dim: str) -> CollectionError:
    return CollectionError(
        f"item-order factor {order_dim!r}: under isolated administration every item has its "
        "own prompt, so the order of the items changes no prompt; give it only with "
        f"{ADMINISTRATION_DIM} = ['sequential'] (or drop the factor)"
    )


def _item_position(
    prompts: xr.Dataset, user: xr.DataArray
) -> tuple[str | None, xr.DataArray | None]:
    """The item-order factor and its positions (``item_position``), checked."""
    if ITEM_POSITION not in prompts:
        return None, None
    pos = prompts[ITEM_POSITION]
    dims = [d for d in pos.dims if d != "item"]
    if "item" not in pos.dims or len(dims) != 1 or dims[0] not in user.dims:
        raise CollectionError(
            f"prompts {ITEM_POSITION!r} must have dims (<item-order factor>, 'item') with the "
            f"factor a dim of the prompts; got {pos.dims}"
        )
    K = user.sizes["item"]
    values = pos.transpose(dims[0], "item").values
    for level, row in zip(pos[dims[0]].values, values, strict=True):
        if sorted(int(v) for v in row) != list(range(K)):
            raise CollectionError(
                f"item-order factor {dims[0]!r}, level {str(level)!r}: the positions "
                f"{[int(v) for v in row]} are not a permutation of 0..{K - 1}"
            )
    return str(dims[0]), pos.astype(np.int64)


def score_battery(
    model: Model,
    prompts: Sequence[tuple[str, str]],
    items: Sequence[str],
    replies: Sequence[str],
    scale: Sequence[int],
    sizes: Mapping[str, int],
    *,
    tol: float,
    max_passes: int,
    n_items: int,
    item_index: Sequence[int],
    answers: Sequence[tuple[str, ...] | None] | None = None,
    options: Sequence[str] = (),
    progress: CellProgressFn | None = None,
) -> UnitResult:
    """Read one conversation (:func:`~.sequential.administer`) into a unit record.

    Parameters
    ----------
    model
        A model that reads conversations exactly.
    prompts
        ``(system, user)`` of each cell of the battery, in the order asked (one
        system prompt).
    items
        Their item ids.
    replies, scale
        The answer label of each score, and the scores.
    sizes
        The run's per-cell sizes (``score``, ``option``, ``rank``, ``temperature``, ``top_p``).
    tol, max_passes
        As :func:`~.sequential.administer` takes them.
    n_items
        The items of the file (``other_item``).
    item_index
        The index on the file's ``item`` dim of each cell of the battery.
    answers
        Each cell's own answer labels (:func:`~xlikert.collect.run.labels.cell_labels`: one per
        score, then one per option of ``options``; None: the digits, no option), or None
        (every item answers on ``replies``). Where the items' labels differ or some item
        offers an option, each item is read over its own answers
        (:attr:`~.sequential.Battery.answers`).
    options
        The run's non-substantive options (the file's ``option`` axis).
    progress
        Told the conversation's passes, bound, unread mass and time as it is read
        (:func:`~.sequential.administer`).

    Returns
    -------
    UnitResult
        The cells in the order asked: the mixture PMFs (``pmf``, ``valid_mass``,
        ``nonsubstantive_mass``, ``decoding_*``), ``prompt_text`` the conversation of the
        most probable history read, and :data:`~xlikert.core.schema.CONTEXT_VARIABLES`.
    """
    systems = {s for s, _ in prompts}
    if len(systems) > 1:
        raise CollectionError(
            "sequential administration sends one system prompt per conversation; the items "
            f"{list(items)} of one condition have {len(systems)} different ones"
        )
    own = _own_answers(answers, scale, options)
    battery = Battery(
        prompts[0][0], tuple(u for _, u in prompts),
        tuple(str(y) for y in scale) if own else tuple(replies), tuple(items), tuple(scale),
        tuple(options) if own else (), own,
    )  # fmt: skip
    res = administer(
        model, battery, tol=tol, max_passes=max_passes, session=None, progress=progress
    )
    tree, K, S, n_opt = res.tree, len(items), len(battery.scores), len(battery.options)
    marg, joints = item_marginals(tree), pairwise_joints(tree)
    prob = _probability(tree)
    by_item = [np.flatnonzero(tree.read & (tree.item == j)) for j in range(K)]
    H = max(len(n) for n in by_item)  # the first item's one history is always read
    r = UnitResult.empty(K, sizes)
    table = variable_table(context=True, nonsubstantive=sizes.get("option", 0) > 0)
    full = {**sizes, "history": H, "other_item": n_items, "other_score": len(scale)}
    for k in ("context_joint", "context_joint_error", "history_answers", "history_probability",
              "history_pmf", "history_valid_mass", "history_nonsubstantive_mass"):  # fmt: skip
        if k in table:
            r.data[k] = table[k].full((K, *(full[d] for d in table[k].dims)))
    r.data["pmf"] = marg["pmf"]
    r.data["valid_mass"] = marg["valid_mass"]
    if n_opt:
        r.data["nonsubstantive_mass"] = marg["nonsubstantive_mass"]
    r.data["context_error"] = np.maximum(marg["error"], marg["valid_mass_error"])
    r.data["context_unexplored"] = marg["unexplored"]
    r.data["context_position"] = np.arange(K, dtype=np.int64)
    r.data["context_passes"] = np.full(K, res.passes, dtype=np.int64)
    r.data["context_tol_met"] = np.full(K, int(res.tol_met), dtype=np.int64)
    where = np.asarray(item_index, dtype=np.int64)
    # the substantive answers' cells (with options, the rest of the mass is on them)
    r.data["context_joint"][:, where] = joints["joint"][..., :S, :S]
    r.data["context_joint_error"][:, where] = joints["error"]
    _decoding(r, tree, res.decoding_grid, sizes)
    paths = tree.paths
    said = [str(y) for y in scale] + list(battery.options)
    for j, nodes in enumerate(by_item):
        n = len(nodes)
        if n == 0:  # every history of this item pruned: its mass is in context_unexplored
            continue
        r.data["history_pmf"][j, :n] = tree.pmf[nodes]
        r.data["history_valid_mass"][j, :n] = tree.valid_mass[nodes]
        if tree.nonsubstantive_mass is not None:
            r.data["history_nonsubstantive_mass"][j, :n] = tree.nonsubstantive_mass[nodes]
        r.data["history_probability"][j, :n] = prob[nodes]
        r.data["history_answers"][j, :n] = [",".join(said[a] for a in paths[m, :j]) for m in nodes]
        best = nodes[int(np.argmax(prob[nodes]))]
        r.data["prompt_text"][j] = res.conversation(model, [int(a) for a in paths[best, :j]])
    return r


def _own_answers(
    answers: Sequence[tuple[str, ...] | None] | None, scale: Sequence[int], options: Sequence[str]
) -> tuple[tuple[str, ...], ...]:
    """Each item's own answer labels, or ``()`` where they all answer on one set of labels
    without options (the battery's ``replies``)."""
    if answers is None:
        return ()
    plain = (*(str(y) for y in scale), *([""] * len(options)))
    rows = tuple(plain if row is None else tuple(str(x) for x in row) for row in answers)
    if len(set(rows)) == 1 and not any(rows[0][len(scale) :]):
        return ()
    return rows


def _probability(tree) -> np.ndarray:
    from ...kernels.history_tree import answer_pmf, history_probability

    q = answer_pmf(tree.pmf, tree.valid_mass, tree.nonsubstantive_mass, tree.answer_error)
    return history_probability(tree.parent, tree.answer, tree.item, q)


def _decoding(r: UnitResult, tree, grid, sizes: Mapping[str, int]) -> None:
    """The decoding grid's mixtures, where the backend read it."""
    temps, _ = grid
    if tree.decoding_pmf is None or not temps or sizes.get("temperature", 0) == 0:
        return
    dec = decoding_marginals(tree)
    r.data["decoding_pmf"] = np.moveaxis(dec["pmf"], 2, 0)  # (K, T, P, S)
    r.data["decoding_valid_mass"] = np.moveaxis(dec["valid_mass"], 2, 0)
    err = np.moveaxis(np.maximum(dec["error"], dec["valid_mass_error"]), 2, 0)
    # a setting under which no answer is valid has no PMF (NaN) and nothing to bound
    err = np.where(np.isnan(err), 0.0, err).max(axis=(1, 2))
    r.data["context_error"] = np.maximum(r.data["context_error"], err)


def context_attrs(options: CollectOptions) -> dict[str, Any]:
    """The attrs of a results file with sequentially administered cells: the rules (what
    the model saw, how failures enter, the certified bound, how the tree is read) and
    the reading's ``tol`` and ``max_passes``."""
    from ...kernels.history_tree import CERTIFIED_BOUND_RULE, HISTORY_RULE, READING_BOUND_RULE
    from .sequential import CONVERSATION_RULE, EXPANSION_RULE

    return {
        "conversation_rule": CONVERSATION_RULE,
        "history_rule": HISTORY_RULE,
        "certified_bound_rule": CERTIFIED_BOUND_RULE,
        "reading_bound_rule": READING_BOUND_RULE,
        "expansion_rule": EXPANSION_RULE,
        SEQUENTIAL_TOL_ATTR: float(options.tol),
        SEQUENTIAL_MAX_PASSES_ATTR: int(options.max_passes),
    }
