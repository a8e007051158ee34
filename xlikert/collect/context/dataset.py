"""A conversation's results as an xarray Dataset, and back; a battery from a prompts Dataset.

:func:`sequential_dataset` turns a :class:`~xlikert.collect.context.sequential.SequentialResult`
into the Dataset of one condition: the items' PMFs (``pmf``, ``valid_mass`` and their
certified bounds), the pairwise joints (``joint``), and the history tree itself
(dim ``history``: every history read keeps its PMF and valid mass), with the rules
in ``attrs``. :func:`xlikert.kernels.history_tree.history_tree` reads the tree back from it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ...core.errors import CollectionError
from ...kernels.history_tree import (
    CERTIFIED_BOUND_RULE,
    HISTORY_RULE,
    READING_BOUND_RULE,
    TREE_OPTION_VARIABLE,
    TREE_READING_VARIABLE,
    TREE_VARIABLES,
    decoding_marginals,
    item_marginals,
    pairwise_joints,
)
from .sequential import CONVERSATION_RULE, EXPANSION_RULE, Battery, SequentialResult

__all__ = ["battery_from_prompts", "sequential_dataset"]


def battery_from_prompts(
    prompts: xr.Dataset, replies: Sequence[str] | None = None, scores: Sequence[int] | None = None
) -> Battery:
    """The battery of one condition of a prompts Dataset (``system`` and ``user`` per item).

    Parameters
    ----------
    prompts : xr.Dataset
        One condition: ``user`` with the single dim ``item``, ``system`` the same for
        every item (a conversation has one system prompt).
    replies : sequence of str, optional
        The reply of each score (the answer labels); default the prompts' own
        (``answer_label``, ``option_label``: a questionnaire's items with their own
        answers and non-substantive options, :attr:`Battery.answers`), else the scale's
        digits.
    scores : sequence of int, optional
        The scale; default the prompts' ``score`` axis of ``answer_label``, else
        ``scale_min .. scale_max`` of ``prompts.attrs``.

    Raises
    ------
    CollectionError
        Other dims than ``item``, or system prompts that differ between items.

    Examples
    --------
    >>> ds = xr.Dataset({"user": ("item", ["Tea?", "Coffee?"]), "system": "Rate 1-3."},
    ...                 coords={"item": ["a", "b"]}, attrs={"scale_min": 1, "scale_max": 3})
    >>> battery_from_prompts(ds)
    Battery(system='Rate 1-3.', questions=('Tea?', 'Coffee?'), replies=('1', '2', '3'), items=('a', 'b'), scores=(1, 2, 3), options=(), answers=())
    """
    user = prompts["user"]
    if user.dims != ("item",):
        raise CollectionError(
            f"a battery is one condition: user prompts with the single dim 'item', got {user.dims}"
        )
    system = prompts["system"].broadcast_like(user) if "system" in prompts else None
    texts = [""] * user.size if system is None else [str(s) for s in system.values]
    ids = [str(i) for i in user["item"].values]
    if len(set(texts)) > 1:
        other = next(i for i, t in enumerate(texts) if t != texts[0])
        raise CollectionError(
            "sequential administration sends one system prompt per conversation; items "
            f"{ids[0]!r} and {ids[other]!r} have different ones"
        )
    if replies is None and "answer_label" in prompts:
        return _own_battery(prompts, texts[0], ids, scores)
    if scores is None:
        scores = range(int(prompts.attrs["scale_min"]), int(prompts.attrs["scale_max"]) + 1)
    scores = [int(y) for y in scores]
    return Battery(
        texts[0],
        tuple(str(u) for u in user.values),
        tuple(replies or (str(y) for y in scores)),
        tuple(ids),
        tuple(scores),
    )


def _own_battery(
    prompts: xr.Dataset, system: str, ids: list[str], scores: Sequence[int] | None
) -> Battery:
    """The battery of prompts that carry their answer labels (own answers, options)."""
    lab = prompts["answer_label"]
    opt = prompts.get("option_label")
    for var, last in ((lab, "score"), (opt, "option")):
        if var is not None and not set(var.dims) <= {"item", last}:
            raise CollectionError(
                f"a battery is one condition: prompts {var.name!r} on the dims ('item', "
                f"{last!r}), got {var.dims}"
            )
    axis = [int(y) for y in lab["score"].values]
    if scores is not None and [int(y) for y in scores] != axis:
        raise CollectionError(f"scores {list(scores)} are not the prompts' score axis {axis}")
    user = prompts["user"]
    rows = np.asarray(lab.astype(str).broadcast_like(user).transpose("item", "score").values)
    options: tuple[str, ...] = ()
    if opt is not None:
        options = tuple(str(o) for o in opt["option"].values)
        extra = opt.astype(str).broadcast_like(user).transpose("item", "option").values
        rows = np.concatenate([rows, np.asarray(extra)], axis=1)
    answers = tuple(tuple(str(x) for x in row) for row in rows)
    questions = tuple(str(u) for u in user.values)
    if len(set(answers)) == 1 and not any(answers[0][len(axis) :]):
        return Battery(system, questions, answers[0][: len(axis)], tuple(ids), tuple(axis))
    return Battery(system, questions, tuple(str(y) for y in axis), tuple(ids), tuple(axis),
                   options, answers)  # fmt: skip


def sequential_dataset(
    result: SequentialResult, item_coords: Mapping[str, Sequence[Any]] | None = None
) -> xr.Dataset:
    """The Dataset of one conversation: item PMFs, pairwise joints and the history tree.

    Variables: ``pmf (item, score)``, ``valid_mass (item)``, their certified bounds
    ``pmf_lower``, ``pmf_upper``, ``valid_mass_lower``, ``valid_mass_upper``, the
    certified ``error (item)`` and ``unexplored (item)`` (the history mass not read,
    ``U_j``); ``joint (item, other_item, score, other_score)`` with ``joint_error``;
    with a decoding grid, ``decoding_pmf`` and ``decoding_valid_mass``; and the tree:
    ``history_parent``, ``history_item``, ``history_answer`` (answer index: a score's,
    or the number of scores + an option's; -1 at the root), ``history_read``,
    ``history_pmf (history, score)``, ``history_valid_mass``. Where items offer
    non-substantive options (dim ``option``): ``nonsubstantive_mass (item, option)`` with
    its bounds and ``history_nonsubstantive_mass (history, option)``; the joint holds the
    cells of the substantive answers.
    ``item_coords`` (e.g. ``reverse_keyed``, ``subscale``) are set on ``item``.

    Examples
    --------
    >>> ds = sequential_dataset(administer(model, battery))  # doctest: +SKIP
    >>> ds.joint.sel(item="1", other_item="2").sum("other_score")  # doctest: +SKIP
    """
    b, tree = result.battery, result.tree
    m = item_marginals(tree)
    items = list(b.items)
    coords: dict[str, Any] = {
        "item": items,
        "other_item": items,
        "score": list(b.scores),
        "other_score": list(b.scores),
        "history": np.arange(tree.size),
    }
    data = _marginal_variables(m, pairwise_joints(tree), len(b.scores))
    for var, attr in TREE_VARIABLES.items():
        val = getattr(tree, attr)
        data[var] = (("history", "score") if val.ndim == 2 else ("history",), val)
    if tree.nonsubstantive_mass is not None:
        coords["option"] = list(b.options)
        for k in ("nonsubstantive_mass", "nonsubstantive_mass_lower", "nonsubstantive_mass_upper"):
            data[k] = (("item", "option"), m[k])
        data[TREE_OPTION_VARIABLE] = (("history", "option"), tree.nonsubstantive_mass)
    if tree.answer_error is not None:
        data[TREE_READING_VARIABLE] = (("history",), tree.answer_error)
    temps, tops = result.decoding_grid
    if tree.decoding_pmf is not None and tree.decoding_valid_mass is not None and temps:
        coords.update(temperature=list(temps), top_p=list(tops))
        data.update(_decoding_variables(tree))
    for name, values in (item_coords or {}).items():
        coords[name] = ("item", list(values))
    ds = xr.Dataset(data, coords=coords)
    if "decoding_pmf" in ds:
        ds["decoding_pmf"] = ds["decoding_pmf"].transpose("item", "temperature", "top_p", "score")
        for v in ("decoding_valid_mass", "decoding_error"):
            ds[v] = ds[v].transpose("item", "temperature", "top_p")
    ds.attrs = _conversation_attrs(result)
    return ds


def _marginal_variables(
    m: dict[str, np.ndarray], j: dict[str, np.ndarray], n_scores: int
) -> dict[str, tuple[tuple[str, ...], Any]]:
    """The item PMFs and valid masses with their certified bounds, the error and the
    unexplored mass per item (``m``: :func:`item_marginals`), and the pairwise joints of
    the substantive answers (``j``: :func:`pairwise_joints`)."""
    item_score, item = ("item", "score"), ("item",)
    return {
        "pmf": (item_score, m["pmf"]),
        "valid_mass": (item, m["valid_mass"]),
        "pmf_lower": (item_score, m["pmf_lower"]),
        "pmf_upper": (item_score, m["pmf_upper"]),
        "valid_mass_lower": (item, m["valid_mass_lower"]),
        "valid_mass_upper": (item, m["valid_mass_upper"]),
        "error": (item, np.maximum(m["error"], m["valid_mass_error"])),
        "unexplored": (item, m["unexplored"]),
        "joint": (
            ("item", "other_item", "score", "other_score"),
            j["joint"][..., :n_scores, :n_scores],
        ),
        "joint_error": (("item", "other_item"), j["error"]),
    }


def _decoding_variables(tree: Any) -> dict[str, tuple[tuple[str, ...], Any]]:
    """The item PMFs under each decoding setting, on dims (temperature, top_p, item)."""
    dec = decoding_marginals(tree)
    dims = ("temperature", "top_p", "item")
    return {
        "decoding_pmf": ((*dims, "score"), dec["pmf"]),
        "decoding_valid_mass": (dims, dec["valid_mass"]),
        "decoding_error": (dims, np.maximum(dec["error"], dec["valid_mass_error"])),
    }


def _conversation_attrs(result: SequentialResult) -> dict[str, Any]:
    """The attrs of one conversation's Dataset: what was asked, the rules, the reading."""
    b, tree = result.battery, result.tree
    return {
        "administration": "sequential",
        "system": b.system,
        "replies": list(b.replies),
        **(
            {"item_answers": json.dumps(dict(zip(b.items, b.answers, strict=True)))}
            if b.answers
            else {}
        ),
        "conversation_rule": CONVERSATION_RULE,
        "history_rule": HISTORY_RULE,
        "certified_bound_rule": CERTIFIED_BOUND_RULE,
        **({"reading_bound_rule": READING_BOUND_RULE} if tree.answer_error is not None else {}),
        "expansion_rule": EXPANSION_RULE,
        "tol": result.tol,
        "max_passes": result.max_passes,
        "passes": result.passes,
        "tol_met": "true" if result.tol_met else "false",
        "exact": "true" if tree.complete else "false",
    }
