"""Human PMFs and composites from a tidy survey table, one row per respondent."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ...core.io import encode_attrs, read_attrs
from ..nonsubstantive import nonsubstantive_variables
from .inputs import (
    check_groups,
    check_table,
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
    """
    item_of = item_map(items)
    scale, nonsubstantive = from_instrument(instrument, item_of, scale, nonsubstantive, missing)
    own = item_scales(scale, instrument, item_of)
    scores = np.arange(
        min(int(v[0]) for v in own.values()), max(int(v[-1]) for v in own.values()) + 1
    )
    codes_in = nonsubstantive_codes(nonsubstantive, missing, list(item_of.values()))
    options = next(iter(codes_in.values()))  # the option names, in order
    groups = [by] if isinstance(by, str) else list(by)
    w = check_table(table, list(item_of), groups, weights)
    levels = [group_levels(table[g]) for g in groups]
    codes = [
        pd.Categorical(table[g], categories=lv).codes for g, lv in zip(groups, levels, strict=True)
    ]
    shape = tuple(len(lv) for lv in levels)
    cell = np.ravel_multi_index(codes, shape) if groups else np.zeros(len(table), dtype=np.int64)
    n_cells, k, n_items = int(np.prod(shape)), scores.size, len(item_of)
    respondents = np.bincount(cell, minlength=n_cells)
    check_groups(respondents.reshape(shape), groups, levels, "no respondents")
    out = {v: np.zeros((n_cells, n_items)) for v in ("n", "n_missing", "weight", "w2", "w2_all")}
    total = np.zeros((n_cells, n_items, k))
    ns = {v: np.zeros((n_cells, n_items, len(options))) for v in ("count", "weight")}
    for j, (col, item) in enumerate(item_of.items()):
        idx, miss, option = read_answers(table[col], col, own[item], missing, codes_in[item])
        ok = ~miss & (option < 0)
        flat = cell[ok] * k + idx[ok] - scores[0]
        total[:, j] = np.bincount(flat, weights=w[ok], minlength=n_cells * k).reshape(n_cells, k)
        out["n"][:, j] = np.bincount(cell[ok], minlength=n_cells)
        out["n_missing"][:, j] = np.bincount(cell[miss], minlength=n_cells)
        out["weight"][:, j] = np.bincount(cell[ok], weights=w[ok], minlength=n_cells)
        out["w2"][:, j] = np.bincount(cell[ok], weights=w[ok] ** 2, minlength=n_cells)
        out["w2_all"][:, j] = np.bincount(cell[~miss], weights=w[~miss] ** 2, minlength=n_cells)
        for i in range(len(options)):
            on = option == i
            ns["count"][:, j, i] = np.bincount(cell[on], minlength=n_cells)
            ns["weight"][:, j, i] = np.bincount(cell[on], weights=w[on], minlength=n_cells)
    for j, item in enumerate(item_of.values()):
        check_groups(out["n"][:, j].reshape(shape), groups, levels, f"no answer to item {item!r}")
    dims = (*groups, item_dim)
    coords = {g: lv for g, lv in zip(groups, levels, strict=True)}
    coords.update({item_dim: list(item_of.values()), score_dim: scores})
    pmf = total / out["weight"][..., None]
    data = {
        "pmf": ((*dims, score_dim), pmf.reshape(*shape, n_items, k)),
        "n": (dims, out["n"].reshape(*shape, -1).astype(np.int64)),
        "n_missing": (dims, out["n_missing"].reshape(*shape, -1).astype(np.int64)),
    }
    if weights is not None:
        data["n_eff"] = (dims, (out["weight"] ** 2 / out["w2"]).reshape(*shape, -1))
        data["weight"] = (dims, out["weight"].reshape(*shape, -1))
    ds = xr.Dataset(data, coords=coords)
    if isinstance(scale, Mapping):
        ds = ds.assign_coords(
            score_min=(item_dim, [int(own[i][0]) for i in item_of.values()]),
            score_max=(item_dim, [int(own[i][-1]) for i in item_of.values()]),
        )
    if options:
        part = (*dims, "option")
        as_da = {
            v: xr.DataArray(a.reshape(*shape, n_items, -1), dims=part)
            for v, a in {**ns, "w2": out["w2_all"][..., None]}.items()
        }
        offered = xr.DataArray(
            [[bool(codes_in[i][o]) for o in options] for i in item_of.values()],
            dims=(item_dim, "option"),
        )
        ds = ds.assign(
            nonsubstantive_variables(
                as_da["count"],
                as_da["weight"] if weights is not None else None,
                ds["n"],
                ds.get("weight"),
                as_da["w2"].squeeze("option", drop=True),
                offered=offered,
            )
        ).assign_coords(option=list(options))
    attrs = {
        "human_groups": groups,
        "human_weighted": weights is not None,
        "human_weights_column": weights or "",
        "human_missing_codes": [plain_value(v) for v in missing],
        "human_n_respondents": len(table),
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
    return finish_pmf(ds, scores, attrs, "human_pmf from a table of respondents")


def human_composite(
    table: pd.DataFrame,
    items: Sequence[str],
    *,
    scale: tuple[int, int] | None = None,
    instrument: Any = None,
    by: Sequence[str] = (),
    weights: str | None = None,
    missing: Sequence[Any] = (),
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
    check_table(table, list(item_of), groups, weights)
    total = pd.Series(0.0, index=table.index)
    for col in item_of:
        idx, miss, _ = read_answers(table[col], col, scores, missing, {})
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
    return encode_attrs(out)
