"""Every order of a scale's points as a format factor's levels (``permute`` of a format).

:func:`option_orders` makes every cyclic rotation or every permutation of the ranks
``1 .. n``, up to a cap; :func:`permuted_formats` shows a base format in each of them,
one level per order, named by :func:`~xlikert.design.formats.order_name`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from ..core.errors import FormatError
from .formats import DEFAULT_MAX_LEVELS, PERMUTE, ResponseFormat, order_name

__all__ = ["option_orders", "permuted_formats"]


def option_orders(
    n_points: int, permute: str, max_levels: int = DEFAULT_MAX_LEVELS
) -> list[tuple[int, ...]]:
    """Every cyclic rotation, or every permutation, of the ranks ``1 .. n_points``.

    Parameters
    ----------
    n_points
        The number of points of the scale.
    permute
        ``"rotations"`` (``n_points`` orders, the ascending one first) or ``"all"``
        (``n_points!`` orders, in lexicographic order).
    max_levels
        The most orders to make.

    Returns
    -------
    list of tuple of int
        The orders, each the ranks of the points as shown.

    Raises
    ------
    FormatError
        An unknown ``permute``, or more orders than ``max_levels``, naming the count.

    Examples
    --------
    >>> option_orders(3, "rotations")
    [(1, 2, 3), (2, 3, 1), (3, 1, 2)]
    >>> len(option_orders(5, "all"))
    120
    """
    if permute not in PERMUTE:
        raise FormatError(f"permute must be one of {PERMUTE}, got {permute!r}")
    count = n_points if permute == "rotations" else math.factorial(n_points)
    if count > max_levels:
        raise FormatError(
            f"permute = {permute!r} on {n_points} points makes {count} levels, above the cap "
            f"max_levels = {max_levels}: raise max_levels (each level is a forward pass per "
            "condition and item) or permute fewer orders"
        )
    ranks = tuple(range(1, n_points + 1))
    if permute == "rotations":
        return [ranks[k:] + ranks[:k] for k in range(n_points)]
    return list(itertools.permutations(ranks))


def permuted_formats(
    base: ResponseFormat, n_points: int, permute: str, max_levels: int = DEFAULT_MAX_LEVELS
) -> dict[str, ResponseFormat]:
    """The format ``base`` shown in every order :func:`option_orders` makes.

    Parameters
    ----------
    base
        The format whose points are permuted (its labels keep their places).
    n_points
        The number of points of the scale.
    permute
        ``"rotations"`` or ``"all"``.
    max_levels
        The most levels to make.

    Returns
    -------
    dict of str to ResponseFormat
        Level label (:func:`~xlikert.design.formats.order_name`) -> format, in the order of :func:`option_orders`.

    Raises
    ------
    FormatError
        As :func:`option_orders`.

    Examples
    --------
    >>> from xlikert.design.formats import builtin_format
    >>> fmts = permuted_formats(builtin_format("labelled"), 3, "all")
    >>> [f.labels_by_score(1, 3)[1] for f in fmts.values()]
    ['1', '1', '2', '3', '2', '3']
    """
    out = {}
    for order in option_orders(n_points, permute, max_levels):
        name = order_name(order)
        what = f"{base.name} with the points shown in the order {name}"
        out[name] = replace(base, name=name, order=order, description=what)
    return out
