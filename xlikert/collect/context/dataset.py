"""A conversation's results as an xarray Dataset, and back; a battery from a prompts Dataset.

:func:`sequential_dataset` turns a :class:`~xlikert.collect.context.sequential.SequentialResult`
into the Dataset of one condition: the items' PMFs (``pmf``, ``valid_mass`` and their
certified bounds), the pairwise joints (``joint``), and the history tree itself
(dim ``history``: every history read keeps its PMF and valid mass), with the rules
in ``attrs``. :func:`xlikert.kernels.history_tree.history_tree` reads the tree back from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ...core.errors import CollectionError
from ...kernels.history_tree import (
    CERTIFIED_BOUND_RULE,
    HISTORY_RULE,
    TREE_VARIABLES,
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
        The reply of each score (the answer labels); default the scale's digits.
    scores : sequence of int, optional
        The scale; default ``scale_min .. scale_max`` of ``prompts.attrs``.

    Raises
    ------
    CollectionError
        Other dims than ``item``, or system prompts that differ between items.

    Examples
    --------
    >>> ds = xr.Dataset({"user": ("item", ["Tea?", "Coffee?"]), "system": "Rate 1-3."},
    ...                 coords={"item": ["a", "b"]}, attrs={"scale_min": 1, "scale_max": 3})
    >>> battery_from_prompts(ds)
    Battery(system='Rate 1-3.', questions=('Tea?', 'Coffee?'), replies=('1', '2', '3'), items=('a', 'b'), scores=(1, 2, 3))
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


def sequential_dataset(
    result: SequentialResult, item_coords: Mapping[str, Sequence[Any]] | None = None
) -> xr.Dataset:
    """The Dataset of one conversation: item PMFs, pairwise joints and the history tree.

    Variables: ``pmf (item, score)``, ``valid_mass (item)``, their certified bounds
    ``pmf_lower``, ``pmf_upper``, ``valid_mass_lower``, ``valid_mass_upper``, the
    certified ``error (item)`` and ``unexplored (item)`` (the history mass not read,
    ``U_j``); ``joint (item, other_item, score, other_score)`` with ``joint_error``;
    with a decoding grid, ``decoding_pmf`` and ``decoding_valid_mass``; and the tree:
    ``history_parent``, ``history_item``, ``history_answer`` (score index, -1 at the
    root), ``history_read``, ``history_pmf (history, score)``, ``history_valid_mass``.
    ``item_coords`` (e.g. ``reverse_keyed``, ``subscale``) are set on ``item``.

    Examples
    --------
    >>> ds = sequential_dataset(administer(model, battery))  # doctest: +SKIP
    >>> ds.joint.sel(item="1", other_item="2").sum("other_score")  # doctest: +SKIP
    """
    b, tree = result.battery, result.tree
    m, j = item_marginals(tree), pairwise_joints(tree)
    items = list(b.items)
    coords = {
        "item": items,
        "other_item": items,
        "score": list(b.scores),
        "other_score": list(b.scores),
        "history": np.arange(tree.size),
    }
    ITEM_SCORE, ITEM = ("item", "score"), ("item",)
    data = {
        "pmf": (ITEM_SCORE, m["pmf"]),
        "valid_mass": (ITEM, m["valid_mass"]),
        "pmf_lower": (ITEM_SCORE, m["pmf_lower"]),
        "pmf_upper": (ITEM_SCORE, m["pmf_upper"]),
        "valid_mass_lower": (ITEM, m["valid_mass_lower"]),
        "valid_mass_upper": (ITEM, m["valid_mass_upper"]),
        "error": (ITEM, np.maximum(m["error"], m["valid_mass_error"])),
        "unexplored": (ITEM, m["unexplored"]),
        "joint": (("item", "other_item", "score", "other_score"), j["joint"]),
        "joint_error": (("item", "other_item"), j["error"]),
    }
    for var, attr in TREE_VARIABLES.items():
        val = getattr(tree, attr)
        data[var] = (("history", "score") if val.ndim == 2 else ("history",), val)
    temps, tops = result.decoding_grid
    if tree.decoding_pmf is not None and temps:
        coords.update(temperature=list(temps), top_p=list(tops))
        dec = item_marginals(
            tree,
            np.moveaxis(tree.decoding_pmf, 0, 2),  # (T, P, N, S)
            np.moveaxis(tree.decoding_valid_mass, 0, 2),
        )
        dims = ("temperature", "top_p", "item")
        data["decoding_pmf"] = ((*dims, "score"), dec["pmf"])
        data["decoding_valid_mass"] = (dims, dec["valid_mass"])
        data["decoding_error"] = (dims, np.maximum(dec["error"], dec["valid_mass_error"]))
    for name, values in (item_coords or {}).items():
        coords[name] = ("item", list(values))
    ds = xr.Dataset(data, coords=coords)
    if "decoding_pmf" in ds:
        ds["decoding_pmf"] = ds["decoding_pmf"].transpose("item", "temperature", "top_p", "score")
        for v in ("decoding_valid_mass", "decoding_error"):
            ds[v] = ds[v].transpose("item", "temperature", "top_p")
    ds.attrs = {
        "administration": "sequential",
        "system": b.system,
        "replies": list(b.replies),
        "conversation_rule": CONVERSATION_RULE,
        "history_rule": HISTORY_RULE,
        "certified_bound_rule": CERTIFIED_BOUND_RULE,
        "expansion_rule": EXPANSION_RULE,
        "tol": result.tol,
        "max_passes": result.max_passes,
        "passes": result.passes,
        "tol_met": "true" if result.tol_met else "false",
        "exact": "true" if tree.complete else "false",
    }
    return ds
