"""The design of context: the ``administration`` factor and item orders.

How the items of a condition are asked is a factor: ``administration``
(:data:`xlikert.core.dims.ADMINISTRATION_DIM`) with the levels ``isolated`` (one prompt per item,
the paper's context isolation; the default without the factor) and
``sequential`` (one conversation per condition, the model's own earlier answers in
it; :mod:`xlikert.collect.context`). Under sequential administration the order in
which the items are asked is a factor too (kind ``item_order``): each level an
order of the items (:func:`item_orders`), given to the collection as the prompts'
``item_position`` (:data:`ITEM_POSITION`, dims ``(<factor>, item)``). An item
order changes no prompt under isolated administration, so it is refused there.

Examples
--------
>>> item_orders(["a", "b", "c"], ["as_listed", "rotation1"])
{'as_listed': [0, 1, 2], 'rotation1': [1, 2, 0]}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import DesignError

__all__ = ["ADMINISTRATIONS", "ITEM_POSITION", "conversation", "item_orders"]

#: Its levels.
ADMINISTRATIONS = ("isolated", "sequential")
#: The prompts variable that gives the order of an item-order factor's levels.
ITEM_POSITION = "item_position"


def item_orders(items: Sequence[str], levels: Sequence[Any]) -> dict[str, list[int]]:
    """Item orders by name: each level's order of the items (indices into ``items``).

    Parameters
    ----------
    items : sequence of str
        The item ids, as listed.
    levels : sequence
        Each a name: ``"as_listed"``, ``"reversed"``, ``"rotation<k>"`` (the list
        started at its k-th item, ``rotation0`` as listed), ``"latin_square"``
        (expands to the rows ``latin_square1 ..`` of a Williams design: every item
        at every position once and, for an even number of items, every item right
        after every other once; for an odd number two squares, 2K rows); or a
        ``(name, [item ids])`` pair: a named permutation.

    Returns
    -------
    dict
        Level name -> the item indices in the order asked.

    Raises
    ------
    DesignError
        An unknown name, a permutation that is not one of the items, or a repeated level.

    Examples
    --------
    >>> item_orders(["a", "b", "c"], ["as_listed", "reversed", "rotation1", ("mine", ["b", "a", "c"])])
    {'as_listed': [0, 1, 2], 'reversed': [2, 1, 0], 'rotation1': [1, 2, 0], 'mine': [1, 0, 2]}
    >>> item_orders(["a", "b", "c", "d"], ["latin_square"])["latin_square2"]
    [1, 2, 0, 3]
    """
    items = [str(i) for i in items]
    K = len(items)
    out: dict[str, list[int]] = {}

    def put(name: str, order: list[int]) -> None:
        if name in out:
            raise DesignError(f"item order {name!r} is given twice")
        out[name] = order

    for level in levels:
        if isinstance(level, tuple | list) and len(level) == 2 and not isinstance(level[1], str):
            name, ids = str(level[0]), [str(i) for i in level[1]]
            if sorted(ids) != sorted(items):
                raise DesignError(
                    f"item order {name!r}: {ids} is not a permutation of the items {items}"
                )
            put(name, [items.index(i) for i in ids])
        elif level == "as_listed":
            put("as_listed", list(range(K)))
        elif level == "reversed":
            put("reversed", list(range(K))[::-1])
        elif level == "latin_square":
            for r, row in enumerate(_williams(K)):
                put(f"latin_square{r + 1}", row)
        elif isinstance(level, str) and level.startswith("rotation") and level[8:].isdigit():
            k = int(level[8:]) % K
            put(level, [(k + i) % K for i in range(K)])
        else:
            raise DesignError(
                f"unknown item order {level!r}: use 'as_listed', 'reversed', 'rotation<k>', "
                "'latin_square' or a named permutation [name, [item ids]]"
            )
    return out


def _williams(K: int) -> list[list[int]]:
    """The rows of a Williams design on ``K`` treatments (2K rows for odd ``K``)."""
    first, lo, hi = [0], 1, K - 1
    while len(first) < K:
        first.append(lo)
        lo += 1
        if len(first) < K:
            first.append(hi)
            hi -= 1
    rows = [[(v + r) % K for v in first] for r in range(K)]
    return rows + [row[::-1] for row in rows] if K % 2 else rows


def conversation(
    prompts: Any, history: Sequence[int | str], condition: dict[str, Any] | None = None
) -> tuple[str, list[tuple[str, str]]]:
    """The messages sequential administration sends after an answer history.

    Parameters
    ----------
    prompts : xr.Dataset
        A prompts Dataset (:meth:`~xlikert.design.Experiment.build_prompts`).
    history : sequence of int or str
        The earlier answers, in the order asked: scores, or the names of non-substantive
        options (``"Don't know"``) where the items offer them. Each is written with its
        item's own answer label where the items have their own (a questionnaire).
    condition : dict, optional
        One level of every factor but ``item`` (default: the first of each).

    Returns
    -------
    item : str
        The item asked after the history.
    messages : list of (role, content)
        ``system`` (when there is one), then each earlier item as ``user`` and its
        answer label as ``assistant``, then the item asked as ``user``: what each
        model's chat template renders (with the generation prompt).

    Raises
    ------
    DesignError
        A score off the scale (or an answer its item does not offer), a history as long
        as the battery, or a condition that does not name one level of every factor.

    Examples
    --------
    >>> import xarray as xr
    >>> ds = xr.Dataset({"user": ("item", ["Tea?", "Coffee?"]), "system": "Rate 1-3."},
    ...                 coords={"item": ["a", "b"]}, attrs={"scale_min": 1, "scale_max": 3})
    >>> conversation(ds, [3])
    ('b', [('system', 'Rate 1-3.'), ('user', 'Tea?'), ('assistant', '3'), ('user', 'Coffee?')])
    """
    import numpy as np

    factors = [d for d in prompts["user"].dims if d != "item"]
    condition = dict(condition or {})
    unknown = sorted(set(condition) - set(factors))
    if unknown:
        raise DesignError(f"no factor(s) {unknown}; the factors are {factors}")
    for d in factors:
        condition.setdefault(d, prompts[d].values[0])
    one = prompts.sel(condition)
    ids = [str(i) for i in one["item"].values]
    order = np.argsort(one[ITEM_POSITION].values) if ITEM_POSITION in one else np.arange(len(ids))
    scores = (
        [int(y) for y in prompts["score"].values]
        if "score" in prompts.coords
        else list(range(int(prompts.attrs["scale_min"]), int(prompts.attrs["scale_max"]) + 1))
    )
    options = [str(o) for o in prompts["option"].values] if "option" in prompts.coords else []
    history = [y if isinstance(y, str) and not y.lstrip("-").isdigit() else int(y)
               for y in history]  # fmt: skip
    bad = [y for y in history if y not in scores and y not in options]
    if bad:
        raise DesignError(
            f"history {history}: {bad} not on the scale {scores}"
            + (f" nor among the options {options}" if options else "")
        )
    if len(history) >= len(ids):
        raise DesignError(
            f"history {history}: a conversation of {len(ids)} items has at most "
            f"{len(ids) - 1} earlier answers"
        )
    system = str(one["system"].values.ravel()[0]) if "system" in one else ""
    user = one["user"].values
    msgs = [("system", system)] if system else []
    for k, y in enumerate(history):
        msgs += [("user", str(user[order[k]])), ("assistant", _answer_label(one, ids[order[k]], y))]
    asked = int(order[len(history)])
    return ids[asked], [*msgs, ("user", str(user[asked]))]


def _answer_label(one: Any, item: str, answer: int | str) -> str:
    """The label an item's answer is written with: its own where the prompts carry them
    (``answer_label``, ``option_label``), else the score's digits."""
    var = "answer_label" if isinstance(answer, int) else "option_label"
    if var not in one:
        if isinstance(answer, int):
            return str(answer)
        raise DesignError(f"item {item!r} offers no option {answer!r}")
    lab = one[var]
    at = {"score" if isinstance(answer, int) else "option": answer}
    if "item" in lab.dims:
        at["item"] = item
    text = str(lab.sel(at).item())
    if not text:
        raise DesignError(f"item {item!r} does not offer the answer {answer!r}")
    return text
