"""Human PMFs and composites from a tidy survey table, one row per respondent."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr

from ...core.io import encode_attrs, read_attrs
from ..nonsubstantive import nonsubstantive_variables
from .inputs import (
    check_groups,
    check_survey_table,
    finish_pmf,
    from_instrument,
    group_levels,
    item_map,
    item_scales,
    nonsubstantive_codes,
    plain_value,
    read_answers,
    scale_and_items,
)
from .labels import resolve_labels

__all__ = ["human_composite", "human_pmf"]


def human_pmf(
    table: pd.DataFrame,
    items: Sequence[str] | Mapping[str, str],
    *,
    scale: tuple[int, int] | Mapping[str, tuple[int, int]] | None = None,
    instrument: Any = None,
    by: Sequence[str] = (),
    weights: str | None = None,
    missing: Sequence[Any] = (),
    nonsubstantive: Mapping[str, Sequence[Any] | Mapping[str, Sequence[Any]]] | None = None,
    labels: Mapping[Any, Any] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """Human PMF ``(*groups, item, score)`` from a table with one row per respondent.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per respondent: the answer columns, the group attribute
        columns and optionally a weights column.
    items : sequence of str or mapping of str to str
        The answer columns (their names are the item ids), or a mapping
        column -> item id.
    scale, instrument : keyword-only
        The scale ``(min, max)``, or each item's own, a mapping item id ->
        ``(min, max)`` (then ``score`` is the union of the items' points and the
        item coordinates ``score_min``, ``score_max`` record each item's support,
        as in a results file); or an instrument
        (:func:`xlikert.design.load_instrument`): its scale, or each item's own
        where some item has one, and every item must be one of its items.
    by : keyword-only
        The group attribute columns; each
        becomes a dim with its levels (the categories of a categorical column,
        else the sorted values). Every combination of levels must have
        respondents.
    weights : keyword-only
        A column of survey weights (positive). Then ``pmf`` is the weighted
        share, and ``n_eff`` (Kish: ``(sum w)^2 / sum w^2``) and ``weight``
        (``sum w``) are kept beside ``n``; the standard errors of
        :mod:`xlikert.analysis.alignment` use ``n_eff``.
    missing : keyword-only
        Codes that mean "no answer" (e.g. ``[8, 9]`` for don't know / refused);
        they and NaN are counted in ``n_missing``. Any other code outside the
        scale raises.
    nonsubstantive : keyword-only
        Answers that are not opinions, counted apart from the missing ones and
        from the scale: a mapping option name -> its codes, e.g.
        ``{"Don't know": [8], "Refused": [9]}`` (the option names of the results
        file's ``option`` dim), offered by every item; or option name -> a mapping
        item id -> its codes there, offered by those items only, e.g.
        ``{"Don't know": {"selfLR": [8], "ClinLR": [8]}}``. Adds
        ``n_nonsubstantive``, ``nonsubstantive_rate`` (the share of the
        respondents who answered, substantively or not; NaN where the item does
        not offer the option, as in a results file), ``n_answered`` (and
        ``nonsubstantive_weight`` when weighted) on an ``option`` dim
        (:mod:`xlikert.analysis.nonsubstantive`). Default with an instrument: the
        options its items offer that have a code, at those items.
    labels : keyword-only
        The labels of the items' points, for answers given as text: one mapping
        code -> label for every item, or item id -> such a mapping. Default with an
        instrument: its anchors of each item. A text answer is matched to the labels
        (and to the non-substantive options' names) case-insensitively and without
        surrounding spaces; a text that is none of them raises, named with its count.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.

    Returns
    -------
    xr.Dataset
        ``pmf``, ``n``, ``n_missing`` (and ``n_eff``, ``weight`` when
        weighted); attrs (JSON text, read with ``ds.likert.attrs``):
        ``human_groups``, ``human_weighted``, ``human_weights_column``,
        ``human_missing_codes``, ``human_n_respondents``, ``scale_min``,
        ``scale_max``, ``history``.

    Raises
    ------
    DesignError
        A column that is not in the table, an answer outside the scale (naming
        the column and the values), a respondent without a group level, a
        weight that is not positive, an item the instrument does not have, a code
        both missing and non-substantive, or a group (or an item within a group)
        with no answering respondent.

    Examples
    --------
    >>> import pandas as pd, xlikert as xl
    >>> t = pd.DataFrame({"q": [1, 1, 2], "w": [1.0, 1.0, 2.0]})
    >>> h = xl.human_pmf(t, ["q"], scale=(1, 2), weights="w")
    >>> h.pmf.values.tolist(), float(h.n_eff[0]), h.likert.attrs["human_weighted"]
    ([[0.5, 0.5]], 2.6666666666666665, True)
    >>> xl.human_pmf(t.assign(q=[1, 5, 2]), ["q"], scale=(1, 2))
    Traceback (most recent call last):
    ...
    xlikert.core.errors.DesignError: column 'q' holds 1 answer(s) outside the scale 1..2: value(s) [5] (first at row 1); declare non-answer codes with missing=[...] to count them as missing (or nonsubstantive={...} as an answer that is not an opinion)
    >>> t = pd.DataFrame({"q": [1, 2, 8, None]})
    >>> h = xl.human_pmf(t, ["q"], scale=(1, 2), nonsubstantive={"Don't know": [8]})
    >>> h.pmf.values.tolist(), int(h.n_missing[0]), h.nonsubstantive_rate.values.tolist()
    ([[0.5, 0.5]], 1, [[0.3333333333333333]])
    >>> t = pd.DataFrame({"q": ["Yes", " no", "YES", "Don't know"]})
    >>> h = xl.human_pmf(t, ["q"], scale=(0, 1), labels={0: "no", 1: "yes"},
    ...                  nonsubstantive={"Don't know": [8]})
    >>> h.pmf.values.tolist(), h.n_nonsubstantive.values.tolist()
    ([[0.3333333333333333, 0.6666666666666666]], [[1]])
    """
    item_of = item_map(items)
    scale, nonsubstantive = from_instrument(instrument, item_of, scale, nonsubstantive, missing)
    own = item_scales(scale, instrument, item_of)
    scores = np.arange(
        min(int(v[0]) for v in own.values()), max(int(v[-1]) for v in own.values()) + 1
    )
    codes_in = nonsubstantive_codes(nonsubstantive, missing, list(item_of.values()))
    options = list(next(iter(codes_in.values())))  # the option names, in order
    said = resolve_labels(labels, instrument, list(item_of.values()))
    groups = [by] if isinstance(by, str) else list(by)
    w = check_survey_table(table, list(item_of), groups, weights).to_numpy(dtype=np.float64)
    levels = [group_levels(table[g]) for g in groups]
    codes = [
        pd.Categorical(table[g], categories=lv).codes for g, lv in zip(groups, levels, strict=True)
    ]
    shape = tuple(len(lv) for lv in levels)
    cell = np.ravel_multi_index(codes, shape) if groups else np.zeros(len(table), dtype=np.int64)
    check_groups(
        np.bincount(cell, minlength=int(np.prod(shape))).reshape(shape),
        groups,
        levels,
        "no respondents",
    )
    tallies = []
    for col, item in item_of.items():
        idx, miss, option = read_answers(
            table[col], col, own[item], missing, codes_in[item], said[item]
        )
        index = np.where(idx >= 0, idx - scores[0], -1)
        tally = _tally_numpy(
            cell,
            index,
            miss,
            option,
            w,
            n_cells=int(np.prod(shape)),
            n_scores=scores.size,
            n_options=len(options),
        )
        check_groups(tally["n"].reshape(shape), groups, levels, f"no answer to item {item!r}")
        tallies.append(tally)
    sums = {v: np.stack([t[v] for t in tallies], axis=1) for v in tallies[0]}
    coords: dict[Hashable, Any] = {g: lv for g, lv in zip(groups, levels, strict=True)}
    coords.update({item_dim: list(item_of.values()), score_dim: scores})
    ds = _pmf_dataset(sums, shape, (*groups, item_dim), score_dim, coords, weights is not None)
    if isinstance(scale, Mapping):
        ds = ds.assign_coords(
            score_min=(item_dim, [int(own[i][0]) for i in item_of.values()]),
            score_max=(item_dim, [int(own[i][-1]) for i in item_of.values()]),
        )
    if options:
        ds = _with_options(ds, sums, shape, item_dim, codes_in, options, weights is not None)
    attrs = _human_attrs(groups, weights, missing, len(table), item_of, codes_in, options)
    return finish_pmf(ds, scores, attrs, "human_pmf from a table of respondents")


def _tally_numpy(
    cell: npt.NDArray[np.int64],
    index: npt.NDArray[np.int64],
    missing: npt.NDArray[np.bool_],
    option: npt.NDArray[np.int64],
    weights: npt.NDArray[np.float64],
    *,
    n_cells: int,
    n_scores: int,
    n_options: int,
) -> dict[str, npt.NDArray[np.float64]]:
    """One item's answers tallied per group cell (the numpy core of :func:`human_pmf`).

    Parameters
    ----------
    cell : np.ndarray of int
        ``(n,)``: each respondent's group cell, ``0..n_cells-1``.
    index : np.ndarray of int
        ``(n,)``: the position of each respondent's point on the score axis, -1 where
        the answer is missing or non-substantive.
    missing : np.ndarray of bool
        ``(n,)``: no answer.
    option : np.ndarray of int
        ``(n,)``: the non-substantive option answered, -1 where none.
    weights : np.ndarray of float
        ``(n,)``: the survey weights (ones when unweighted).
    n_cells, n_scores, n_options : int, keyword-only
        The number of group cells, score points and non-substantive options.

    Returns
    -------
    dict of str to np.ndarray
        ``total (n_cells, n_scores)``: the summed weights of each point;
        ``n``, ``n_missing``, ``weight``, ``w2`` (of the substantive answers), ``w2_all``
        (of every answer) ``(n_cells,)``; ``ns_count``, ``ns_weight``
        ``(n_cells, n_options)``.

    Examples
    --------
    >>> import numpy as np
    >>> out = _tally_numpy(np.array([0, 0, 1, 1]), np.array([0, 1, 1, -1]),
    ...                   np.array([False, False, False, True]), np.array([-1, -1, -1, -1]),
    ...                   np.ones(4), n_cells=2, n_scores=2, n_options=0)
    >>> out["total"].tolist(), out["n"].tolist(), out["n_missing"].tolist()
    ([[1.0, 1.0], [0.0, 1.0]], [2.0, 1.0], [0.0, 1.0])
    """
    ok = ~missing & (option < 0)
    flat = cell[ok] * n_scores + index[ok]
    w = weights
    out = {
        "total": _bins(flat, w[ok], n_cells * n_scores).reshape(n_cells, n_scores),
        "n": _bins(cell[ok], None, n_cells),
        "n_missing": _bins(cell[missing], None, n_cells),
        "weight": _bins(cell[ok], w[ok], n_cells),
        "w2": _bins(cell[ok], w[ok] ** 2, n_cells),
        "w2_all": _bins(cell[~missing], w[~missing] ** 2, n_cells),
    }
    on = option >= 0
    pos = cell[on] * n_options + option[on]
    out["ns_count"] = _bins(pos, None, n_cells * n_options).reshape(n_cells, -1)
    out["ns_weight"] = _bins(pos, w[on], n_cells * n_options).reshape(n_cells, -1)
    return out


def _bins(
    x: npt.NDArray[np.int64], weights: npt.NDArray[np.float64] | None, n: int
) -> npt.NDArray[np.float64]:
    """``np.bincount`` as float64: the counts, or the summed weights, of ``0..n-1``."""
    return np.asarray(np.bincount(x, weights=weights, minlength=n), dtype=np.float64)


def _pmf_dataset(
    sums: dict[str, npt.NDArray[np.float64]],
    shape: tuple[int, ...],
    dims: tuple[Hashable, ...],
    score_dim: Hashable,
    coords: dict[Hashable, Any],
    weighted: bool,
) -> xr.Dataset:
    """``pmf``, ``n``, ``n_missing`` (and ``n_eff``, ``weight``) from the tallies."""
    n_items, k = sums["total"].shape[1:]
    pmf = sums["total"] / sums["weight"][..., None]
    data: dict[Hashable, Any] = {
        "pmf": ((*dims, score_dim), pmf.reshape(*shape, n_items, k)),
        "n": (dims, sums["n"].reshape(*shape, -1).astype(np.int64)),
        "n_missing": (dims, sums["n_missing"].reshape(*shape, -1).astype(np.int64)),
    }
    if weighted:
        data["n_eff"] = (dims, (sums["weight"] ** 2 / sums["w2"]).reshape(*shape, -1))
        data["weight"] = (dims, sums["weight"].reshape(*shape, -1))
    return xr.Dataset(data, coords=coords)


def _with_options(
    ds: xr.Dataset,
    sums: dict[str, npt.NDArray[np.float64]],
    shape: tuple[int, ...],
    item_dim: Hashable,
    codes_in: dict[str, dict[str, list[Any]]],
    options: list[str],
    weighted: bool,
) -> xr.Dataset:
    """The non-substantive variables on an ``option`` dim."""
    part = (*ds["n"].dims, "option")
    n_items = sums["total"].shape[1]
    as_da = {
        v: xr.DataArray(sums[key].reshape(*shape, n_items, -1), dims=part)
        for v, key in {"count": "ns_count", "weight": "ns_weight", "w2": "w2_all"}.items()
    }
    offered = xr.DataArray(
        [[bool(codes_in[i][o]) for o in options] for i in map(str, ds[item_dim].values)],
        dims=(item_dim, "option"),
    )
    variables = nonsubstantive_variables(
        as_da["count"],
        as_da["weight"] if weighted else None,
        ds["n"],
        ds.get("weight"),
        as_da["w2"].squeeze("option", drop=True),
        offered=offered,
    )
    return ds.assign(variables).assign_coords(option=list(options))


def _human_attrs(
    groups: list[str],
    weights: str | None,
    missing: Sequence[Any],
    n_respondents: int,
    item_of: dict[str, str],
    codes_in: dict[str, dict[str, list[Any]]],
    options: list[str],
) -> dict[str, Any]:
    """The provenance attrs of a human PMF Dataset."""
    attrs: dict[str, Any] = {
        "human_groups": groups,
        "human_weighted": weights is not None,
        "human_weights_column": weights or "",
        "human_missing_codes": [plain_value(v) for v in missing],
        "human_n_respondents": n_respondents,
        "human_items": item_of,
    }
    if options:
        attrs["human_nonsubstantive_codes"] = {
            o: {
                i: [plain_value(v) for v in codes_in[i][o]]
                for i in item_of.values()
                if codes_in[i][o]
            }
            for o in options
        }
    return attrs


def human_composite(
    table: pd.DataFrame,
    items: Sequence[str],
    *,
    scale: tuple[int, int] | None = None,
    instrument: Any = None,
    by: Sequence[str] = (),
    weights: str | None = None,
    missing: Sequence[Any] = (),
    labels: Mapping[Any, Any] | None = None,
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """Human PMF of the composite score (the sum of ``items``), with dims ``(*by, score)``.

    The score axis runs from ``K * min`` to ``K * max`` for ``K`` items. The
    respondents' own sums (their items are not independent, so this is not
    the convolution of the item PMFs). Respondents who did not answer every
    item are counted in ``n_missing``. Reflect reverse-keyed columns first.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per respondent: the answer columns, the group attribute
        columns and optionally a weights column.
    items : sequence of str
        The answer columns summed into the composite.
    scale, instrument : keyword-only
        The scale of each item ``(min, max)``, or an instrument whose scale it is
        (as :func:`human_pmf`).
    by : keyword-only
        The group attribute columns.
    weights : keyword-only
        A column of survey weights (positive), as :func:`human_pmf`.
    missing : keyword-only
        Codes that mean "no answer"; such a respondent is counted in ``n_missing``.
    labels : keyword-only
        The labels of the items' points, for answers given as text (as :func:`human_pmf`).
    score_dim : keyword-only
        Name of the score dim.

    Returns
    -------
    xr.Dataset
        ``pmf`` with dims ``(*by, score_dim)``, ``n``, ``n_missing`` (and
        ``n_eff``, ``weight`` when weighted); attrs as :func:`human_pmf`'s, plus
        ``human_composite``.

    Raises
    ------
    DesignError
        As :func:`human_pmf`: a column not in the table, an answer outside the
        scale, a weight that is not positive, a group with no respondents.

    Examples
    --------
    >>> import pandas as pd, xlikert as xl
    >>> t = pd.DataFrame({"a": [1, 2, 2], "b": [1, 2, None]})
    >>> h = xl.human_composite(t, ["a", "b"], scale=(1, 2))
    >>> h.pmf.score.values.tolist(), h.pmf.values.tolist(), int(h.n), int(h.n_missing)
    ([2, 3, 4], [0.5, 0.0, 0.5], 2, 1)
    """
    item_of = item_map(items)
    scores = scale_and_items(scale, instrument, item_of)
    groups = [by] if isinstance(by, str) else list(by)
    check_survey_table(table, list(item_of), groups, weights)
    said = resolve_labels(labels, instrument, list(item_of.values()))
    total = pd.Series(0.0, index=table.index)
    for col, item in item_of.items():
        idx, miss, _ = read_answers(table[col], col, scores, missing, {}, said[item])
        total = total + np.where(miss, np.nan, idx)
    k = len(item_of)
    composite = pd.DataFrame({"_composite": total}, index=table.index)
    wide = pd.concat([table[[*groups, *([weights] if weights else [])]], composite], axis=1)
    out = human_pmf(
        wide,
        {"_composite": "composite"},
        scale=(k * int(scores[0]), k * int(scores[-1])),
        by=groups,
        weights=weights,
        item_dim="_item",
        score_dim=score_dim,
    )
    out = out.squeeze("_item", drop=True)
    attrs = read_attrs(out)
    attrs["human_items"] = item_of
    attrs["human_composite"] = True
    attrs["history"] += f" (composite of {k} items, the respondents' own sums)"
    out.attrs = attrs
    encoded: xr.Dataset = encode_attrs(out)
    return encoded
