"""Human responses in: survey respondents' answer distributions as xlikert PMFs.

A human PMF is a Dataset on the model's axes (design notes, section 1)::

    pmf        (*groups, item, score)   share of the answering respondents per score
    n          (*groups, item)          respondents who answered (the multinomial size)
    n_missing  (*groups, item)          respondents of the group who did not answer
    n_eff      (*groups, item)          with survey weights: Kish's effective sample size
    weight     (*groups, item)          with survey weights: the sum of the weights

Each group attribute (party, education band, ...) is a dim with the attribute's
levels, so a human PMF broadcasts against a model PMF whose persona factors have
the same names and levels (:mod:`xlikert.analysis.alignment`).

* :func:`human_pmf` -- from a tidy table, one row per respondent;
* :func:`human_pmf_from_counts` -- from respondent counts ``(*groups, item, score)``;
* :func:`human_marginal` -- pool groups (the population, or one attribute's subgroups);
* :func:`human_vs_llm` -- published human samples (:func:`xlikert.datasets.human_baseline`)
  beside each model's composite score.

Nothing is dropped silently: a missing answer (NaN, or a code listed in
``missing``) is counted in ``n_missing``; a code outside the scale, a
respondent without a group attribute, a bad weight, or a group with no
respondents is a :class:`~xlikert.core.errors.DesignError` naming the column and the value.

Examples
--------
>>> import pandas as pd, xlikert as xl
>>> table = pd.DataFrame({"party": ["D", "D", "R", "R", "R"],
...                       "q1": [1, 2, 3, 3, None]})
>>> h = xl.human_pmf(table, ["q1"], scale=(1, 3), by=["party"])
>>> h.pmf.sel(item="q1").values.tolist()
[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]
>>> h.n.values.ravel().tolist(), h.n_missing.values.ravel().tolist()
([2, 2], [0, 1])
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .._version import __version__
from ..core.dims import HUMAN_VARIABLES, check_factor_name, factor_dims, preferred_factor
from ..core.errors import DesignError, InputTypeError
from ..core.io import encode_attrs, read_attrs
from ..core.validate import check_score_axis
from .cost import composite_moments, mixture_moments
from .nonsubstantive import nonsubstantive_variables, pool_nonsubstantive

__all__ = [
    "HUMAN_VARIABLES",
    "human_composite",
    "human_marginal",
    "human_pmf",
    "human_pmf_from_counts",
    "human_vs_llm",
    "mixture_weights",
]


def _levels(column: pd.Series) -> list[Any]:
    if isinstance(column.dtype, pd.CategoricalDtype):
        return list(column.cat.categories)
    return sorted(column.dropna().unique().tolist(), key=lambda v: (str(type(v)), v))


def _check_table(
    table: pd.DataFrame, columns: Sequence[str], groups: Sequence[str], weights: str | None
) -> pd.Series:
    if not isinstance(table, pd.DataFrame):
        raise InputTypeError(
            f"expected a pandas DataFrame of respondents, got {type(table).__name__}"
        )
    for col in [*columns, *groups, *([weights] if weights else [])]:
        if col not in table.columns:
            raise DesignError(
                f"column {col!r} is not in the respondents table; columns: {list(table.columns)}"
            )
    for g in groups:
        check_factor_name(g, where=f"group column {g!r}")
        bad = table[g].isna()
        if bool(bad.any()):
            rows = table.index[bad].tolist()
            raise DesignError(
                f"group column {g!r} has no value for {int(bad.sum())} respondent(s) "
                f"(rows {rows[:5]}{' ...' if len(rows) > 5 else ''}); give them a level or drop them"
            )
    if weights is None:
        return pd.Series(1.0, index=table.index)
    w = pd.to_numeric(table[weights], errors="coerce")
    bad = ~np.isfinite(w) | (w <= 0)
    if bool(bad.any()):
        raise DesignError(
            f"weights column {weights!r} must hold positive numbers; "
            f"row {_plain(table.index[bad][0])!r} has {_plain(table[weights][bad].iloc[0])!r}"
        )
    return w.astype(float)


def _answers(
    column: pd.Series,
    name: str,
    scores: np.ndarray,
    missing: Sequence[Any],
    options: Mapping[str, Sequence[Any]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score index per respondent (-1 where missing or non-substantive), the missing mask
    and the non-substantive option index (-1 where none); bad codes raise."""
    option = np.full(len(column), -1)
    for i, codes in enumerate(options.values()):
        option[column.isin(list(codes)).to_numpy()] = i
    values = column.where(~column.isin(list(missing)) & (option < 0), np.nan)
    numeric = pd.to_numeric(values, errors="coerce")
    not_number = numeric.isna() & values.notna()
    off = numeric.notna() & ~numeric.isin(scores)
    bad = not_number | off
    if bool(bad.any()):
        codes = pd.unique(column[bad])
        raise DesignError(
            f"column {name!r} holds {int(bad.sum())} answer(s) outside the scale "
            f"{int(scores[0])}..{int(scores[-1])}: value(s) {codes[:5].tolist()} "
            f"(first at row {column.index[bad][0]!r}); declare non-answer codes with "
            "missing=[...] to count them as missing (or nonsubstantive={...} as an answer "
            "that is not an opinion)"
        )
    miss = numeric.isna().to_numpy() & (option < 0)
    idx = np.where(miss | (option >= 0), -1, numeric.fillna(scores[0]).to_numpy().astype(np.int64))
    return idx, miss, option


def _item_map(items: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    if isinstance(items, str):
        items = [items]
    mapping = dict(items) if isinstance(items, Mapping) else {c: c for c in items}
    if not mapping:
        raise DesignError("no items: pass the answer columns, e.g. items=['selfLR', 'ClinLR']")
    return {str(c): str(i) for c, i in mapping.items()}


def _from_instrument(
    instrument: Any, items: dict[str, str], scale: Any, nonsubstantive: Any, missing: Sequence[Any]
) -> tuple[Any, Any]:
    """What an instrument says of its items when the caller did not: each item's own scale
    (where some item has one) and the codes of the non-substantive options its items
    offer (option label -> {item: [code]}; options without a code are not in survey data,
    and a code the caller counts as missing stays missing)."""
    if instrument is None or not set(items.values()) <= set(instrument.item_ids):
        return scale, nonsubstantive  # no instrument, or an item it lacks: said later
    scales = {i: instrument.scale_of(i) for i in items.values()}
    if scale is None and any(instrument.item(i).scale is not None for i in scales):
        scale = {i: (sc.min, sc.max) for i, sc in scales.items()}
    if nonsubstantive is None:
        codes: dict[str, dict[str, list[int]]] = {}
        for i, sc in scales.items():
            for opt in sc.nonsubstantive:
                if opt.code is not None and opt.code not in missing:
                    codes.setdefault(opt.label, {})[i] = [opt.code]
        nonsubstantive = codes or None
    return scale, nonsubstantive


def _item_scales(
    scale: tuple[int, int] | Mapping[str, tuple[int, int]] | None,
    instrument: Any,
    items: dict[str, str],
) -> dict[str, np.ndarray]:
    """Each item's own scale points (a mapping item id -> (min, max)), else the one scale."""
    if not isinstance(scale, Mapping):
        scores = _scale_and_items(scale, instrument, items)
        return {item: scores for item in items.values()}
    unknown = sorted(set(map(str, scale)) - set(items.values()))
    missing = [item for item in items.values() if item not in set(map(str, scale))]
    if unknown or missing:
        raise DesignError(
            f"scale per item: no scale for items {missing}; scales for unknown items {unknown}"
        )
    spec = {str(k): v for k, v in scale.items()}
    return {item: _scale_and_items(spec[item], instrument, items) for item in items.values()}


def _scale_and_items(
    scale: tuple[int, int] | None, instrument: Any, items: dict[str, str]
) -> np.ndarray:
    if instrument is not None:
        known = list(instrument.item_ids)
        for col, item in items.items():
            if item not in known:
                raise DesignError(
                    f"column {col!r} is item {item!r}, which instrument "
                    f"{instrument.name!r} does not have; its items: {known}"
                )
        scale = scale or instrument.scale
    if scale is None:
        raise DesignError("give the scale, e.g. scale=(1, 7), or the instrument")
    lo, hi = (int(v) for v in scale)
    if hi <= lo:
        raise DesignError(f"scale must be (min, max) with min < max, got {scale!r}")
    return np.arange(lo, hi + 1)


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
    item_of = _item_map(items)
    scale, nonsubstantive = _from_instrument(instrument, item_of, scale, nonsubstantive, missing)
    own = _item_scales(scale, instrument, item_of)
    scores = np.arange(
        min(int(v[0]) for v in own.values()), max(int(v[-1]) for v in own.values()) + 1
    )
    codes_in = _nonsubstantive_codes(nonsubstantive, missing, list(item_of.values()))
    options = next(iter(codes_in.values()))  # the option names, in order
    groups = [by] if isinstance(by, str) else list(by)
    w = _check_table(table, list(item_of), groups, weights)
    levels = [_levels(table[g]) for g in groups]
    codes = [
        pd.Categorical(table[g], categories=lv).codes for g, lv in zip(groups, levels, strict=True)
    ]
    shape = tuple(len(lv) for lv in levels)
    cell = np.ravel_multi_index(codes, shape) if groups else np.zeros(len(table), dtype=np.int64)
    n_cells, k, n_items = int(np.prod(shape)), scores.size, len(item_of)
    respondents = np.bincount(cell, minlength=n_cells)
    _check_groups(respondents.reshape(shape), groups, levels, "no respondents")
    out = {v: np.zeros((n_cells, n_items)) for v in ("n", "n_missing", "weight", "w2", "w2_all")}
    total = np.zeros((n_cells, n_items, k))
    ns = {v: np.zeros((n_cells, n_items, len(options))) for v in ("count", "weight")}
    for j, (col, item) in enumerate(item_of.items()):
        idx, miss, option = _answers(table[col], col, own[item], missing, codes_in[item])
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
        _check_groups(out["n"][:, j].reshape(shape), groups, levels, f"no answer to item {item!r}")
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
        "human_missing_codes": [_plain(v) for v in missing],
        "human_n_respondents": len(table),
        "human_items": item_of,
    }
    if options:
        attrs["human_nonsubstantive_codes"] = {
            o: {i: [_plain(v) for v in codes_in[i][o]] for i in item_of.values() if codes_in[i][o]}
            for o in options
        }
    return _finish(ds, scores, attrs, "human_pmf from a table of respondents")


def _codes(c: Any) -> list[Any]:
    return [c] if isinstance(c, str | int | float) else list(c)


def _nonsubstantive_codes(
    nonsubstantive: Mapping[str, Any] | None, missing: Sequence[Any], items: Sequence[str]
) -> dict[str, dict[str, list[Any]]]:
    """Item id -> option name -> its codes there (every option, in order; no codes: the item
    does not offer it). A code may mean one thing only in an item."""
    if not nonsubstantive:
        return {item: {} for item in items}
    if not isinstance(nonsubstantive, Mapping):
        raise DesignError(
            'nonsubstantive must map each option to its codes, e.g. {"Don\'t know": [8]}'
        )
    out: dict[str, dict[str, list[Any]]] = {item: {} for item in items}
    for option, codes in nonsubstantive.items():
        by_item = codes if isinstance(codes, Mapping) else dict.fromkeys(items, codes)
        unknown = sorted(str(i) for i in by_item if str(i) not in out)
        if unknown:
            raise DesignError(
                f"nonsubstantive option {option!r} names item(s) {unknown} that are not among "
                f"the items {list(items)}"
            )
        for item in items:
            out[item][str(option)] = _codes(by_item[item]) if item in by_item else []
    for item, options in out.items():
        seen: dict[Any, str] = {m: "missing" for m in missing}
        for option, codes in options.items():
            for c in codes:
                if c in seen:
                    raise DesignError(
                        f"code {_plain(c)!r} means both {seen[c]!r} and {option!r} in item "
                        f"{item!r}; give it one meaning"
                    )
                seen[c] = option
    return out


def _check_counts(counts: xr.DataArray, dim: Hashable) -> None:
    """Counts are non-negative integers; the message names the cell."""
    values = np.asarray(counts.values, dtype=np.float64)
    bad = ~np.isfinite(values) | (values < 0) | (values != np.round(values))
    if bad.any():
        from ..core.validate import describe_cells

        raise DesignError(
            "counts must be non-negative integers; bad count at "
            f"{describe_cells(counts.copy(data=bad).any(dim))}"
        )


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _check_groups(
    counts: np.ndarray, groups: Sequence[str], levels: Sequence[Sequence[Any]], what: str
) -> None:
    empty = np.argwhere(counts == 0)
    if empty.size == 0:
        return
    cells = [
        ", ".join(f"{g}={levels[d][i]!r}" for d, (g, i) in enumerate(zip(groups, row, strict=True)))
        or "(all respondents)"
        for row in empty[:5]
    ]
    more = f" and {len(empty) - 5} more" if len(empty) > 5 else ""
    raise DesignError(
        f"group {'; '.join(cells)}{more} has {what}: its PMF is undefined; "
        "merge it with another level or leave its respondents out"
    )


def _finish(ds: xr.Dataset, scores: np.ndarray, attrs: dict[str, Any], how: str) -> xr.Dataset:
    ds["pmf"].attrs["long_name"] = "human answer PMF (share of the answering respondents)"
    ds["n"].attrs["long_name"] = "respondents who answered"
    if "n_missing" in ds:
        ds["n_missing"].attrs["long_name"] = (
            "respondents who did not answer (NaN or a missing code)"
        )
    if "n_eff" in ds:
        ds["n_eff"].attrs["long_name"] = "Kish effective sample size (sum w)^2 / sum w^2"
        ds["weight"].attrs["long_name"] = "sum of the survey weights of the answering respondents"
    attrs.update(
        scale_min=int(scores[0]),
        scale_max=int(scores[-1]),
        history=f"xlikert {__version__}: {how}",
    )
    ds.attrs = attrs
    return encode_attrs(ds)


def human_pmf_from_counts(
    counts: xr.DataArray,
    *,
    nonsubstantive: xr.DataArray | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """Human PMF from respondent counts ``(*groups, item, score)`` (unweighted).

    Parameters
    ----------
    counts : xr.DataArray
        The number of respondents of each group (every dim but ``item_dim`` and
        ``score_dim``) who gave each answer to each item.
    nonsubstantive : xr.DataArray, keyword-only
        Respondents who gave each non-substantive answer ("Don't know"),
        ``(*groups, item, option)``: counted apart from the scale (as
        :func:`human_pmf`'s ``nonsubstantive=``).
    item_dim, score_dim : keyword-only
        Names of the item and score dims.

    Returns
    -------
    xr.Dataset
        ``pmf`` (the counts divided by their total) and ``n`` (the respondents
        of each group and item), with the attrs of :func:`human_pmf`; with
        ``nonsubstantive``, also ``n_nonsubstantive``, ``nonsubstantive_rate``
        and ``n_answered``.

    Raises
    ------
    InputTypeError
        ``counts`` is not a DataArray.
    DesignError
        Negative, non-finite or non-integer counts (naming the cell), no item
        dim, a group dim with a name xlikert reserves, or a group with no
        respondents for an item.
    InvalidPMFError
        A malformed score axis.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> c = xr.DataArray([[3, 1, 0]], dims=("item", "score"),
    ...                  coords={"item": ["q"], "score": [1, 2, 3]})
    >>> h = xl.human_pmf_from_counts(c)
    >>> h.pmf.values.tolist(), h.n.values.tolist()
    ([[0.75, 0.25, 0.0]], [4])
    """
    if not isinstance(counts, xr.DataArray):
        raise InputTypeError(f"expected a DataArray of counts, got {type(counts).__name__}")
    scores = check_score_axis(counts, score_dim)
    if item_dim not in counts.dims:
        raise DesignError(f"counts have no item dim {item_dim!r}; dims {tuple(counts.dims)}")
    groups = [d for d in counts.dims if d not in (item_dim, score_dim)]
    for g in groups:
        check_factor_name(g, where=f"group dim {g!r}")
    _check_counts(counts, score_dim)
    if nonsubstantive is not None:
        _check_counts(nonsubstantive, "option")
    n = counts.sum(score_dim)
    if bool((n == 0).any()):
        from ..core.validate import describe_cells

        raise DesignError(
            f"group with no respondents at {describe_cells(n == 0)}: its PMF is undefined; "
            "merge it with another level or leave it out"
        )
    ds = xr.Dataset({"pmf": counts.astype(np.float64) / n, "n": n.astype(np.int64)})
    ds = ds.transpose(*groups, item_dim, score_dim)
    if nonsubstantive is not None:
        ds = ds.assign(nonsubstantive_variables(nonsubstantive, None, ds["n"], None, None))
    attrs = {"human_groups": groups, "human_weighted": False, "human_weights_column": ""}
    return _finish(ds, scores, attrs, "human_pmf_from_counts")


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
    item_of = _item_map(items)
    scores = _scale_and_items(scale, instrument, item_of)
    groups = [by] if isinstance(by, str) else list(by)
    _check_table(table, list(item_of), groups, weights)
    total = pd.Series(0.0, index=table.index)
    for col in item_of:
        idx, miss, _ = _answers(table[col], col, scores, missing, {})
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


def mixture_weights(human: xr.Dataset) -> xr.DataArray:
    """Weights of a human group in a mixture: ``weight`` (sum of survey weights), else ``n``.

    Examples
    --------
    >>> import pandas as pd, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"g": ["a", "b", "b"], "q": [1, 2, 2]}), ["q"],
    ...                  scale=(1, 2), by=["g"])
    >>> from xlikert.analysis.human import mixture_weights
    >>> mixture_weights(h).values.ravel().tolist()
    [1, 2]
    """
    return human["weight"] if "weight" in human else human["n"]


def human_marginal(
    human: xr.Dataset,
    *,
    dim: Hashable | Sequence[Hashable] | None = None,
    item_dim: Hashable = "item",
) -> xr.Dataset:
    """Pool the human groups along ``dim`` (default: every group, the population).

    The pooled PMF is the mixture of the group PMFs weighted by their
    respondents (or their survey weights), which is the PMF of the pooled
    respondents; ``n`` and ``n_missing`` add up, and ``n_eff`` pools as
    ``(sum W)^2 / sum (W^2 / n_eff)``; non-substantive answers pool alike
    (:func:`xlikert.analysis.nonsubstantive.pool_nonsubstantive`).

    Parameters
    ----------
    human : xr.Dataset
        A human PMF Dataset (:func:`human_pmf`).
    dim : keyword-only
        The group dim(s) to pool over; the
        other group dims are kept. Default: every group dim.
    item_dim : keyword-only
        Name of the item dim.

    Returns
    -------
    xr.Dataset
        The pooled human PMF Dataset, with the group dims not in ``dim``.

    Raises
    ------
    InputTypeError
        ``human`` is not a human PMF Dataset.
    DesignError
        A dim of ``dim`` that is not a group dim.

    Examples
    --------
    >>> import pandas as pd, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"g": ["a", "b", "b"], "q": [1, 2, 2]}), ["q"],
    ...                  scale=(1, 2), by=["g"])
    >>> m = xl.human_marginal(h)
    >>> m.pmf.values.tolist(), m.n.values.tolist()
    ([[0.3333333333333333, 0.6666666666666666]], [3])
    """
    if not isinstance(human, xr.Dataset) or "pmf" not in human or "n" not in human:
        raise InputTypeError("expected a human PMF Dataset with 'pmf' and 'n' (xl.human_pmf)")
    attrs = read_attrs(human)
    groups = [d for d in human["n"].dims if d != item_dim]
    dims = groups if dim is None else [dim] if isinstance(dim, str) else list(dim)
    for d in dims:
        if d not in groups:
            raise DesignError(f"{d!r} is not a group dim of the human PMF; its groups: {groups}")
    w = mixture_weights(human)
    out = {"pmf": (human["pmf"] * w).sum(dims) / w.sum(dims), "n": human["n"].sum(dims)}
    for v in ("n_missing", "weight"):
        if v in human:
            out[v] = human[v].sum(dims)
    if "n_eff" in human:
        pooled = (human["weight"] ** 2 / human["n_eff"]).sum(dims)
        out["n_eff"] = human["weight"].sum(dims) ** 2 / pooled
    out.update(pool_nonsubstantive(human, dims))
    ds = xr.Dataset(out)
    attrs["human_groups"] = [g for g in attrs.get("human_groups", []) if g not in dims]
    attrs["history"] = f"{attrs.get('history', '')}\nxlikert {__version__}: pooled over {dims}"
    ds.attrs = attrs
    return encode_attrs(ds)


def human_vs_llm(
    pmf: xr.DataArray,
    baseline: pd.DataFrame,
    by: Hashable | None = None,
    condition: Mapping[Hashable, object] | None = None,
) -> pd.DataFrame:
    """Human samples vs each level of ``by`` (composite E and SD) at ``condition``.

    The LLM composite is the uniform mixture over every factor not in
    ``condition`` and not ``by`` (exact moments,
    :func:`xlikert.analysis.cost.mixture_moments`).

    Parameters
    ----------
    pmf
        Item PMFs ``(*factors, item, score)``.
    baseline
        :func:`xlikert.datasets.human_baseline` output.
    by
        Factor whose levels are compared (default :data:`xlikert.core.dims.MODEL_DIM` if
        present, else the first factor).
    condition
        Selection, e.g. ``{"target": "USA"}`` (the paper's comparison: the baseline's
        respondents are its ``country``).

    Returns
    -------
    pandas.DataFrame
        Columns ``group`` (Human / LLM), ``label``, ``mean``, ``sd``; LLM rows
        sorted by mean, descending.

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2, "target": ["USA", "China"]})
    >>> t = human_vs_llm(pmf, xl.datasets.human_baseline(), condition={"target": "USA"})
    >>> t.group.value_counts().to_dict()
    {'Human': 6, 'LLM': 2}
    """
    sel = pmf.sel(dict(condition)) if condition else pmf
    mom = composite_moments(sel)
    by = preferred_factor(factor_dims(mom["mean"], item_dim=None, score_dim=None), by)
    other = [d for d in mom["mean"].dims if d != by]
    mix = mixture_moments(mom["mean"], mom["var"], other)
    llm = pd.DataFrame(
        {
            "group": "LLM",
            "label": [str(v) for v in mix[by].values] if by in mix.dims else ["LLM"],
            "mean": np.atleast_1d(mix["mean"].values),
            "sd": np.sqrt(np.atleast_1d(mix["var"].values)),
        }
    ).sort_values("mean", ascending=False)
    human = pd.DataFrame(
        {
            "group": "Human",
            "label": baseline["sample"],
            "mean": baseline["mean"],
            "sd": baseline["sd"],
        }
    )
    return pd.concat([human, llm], ignore_index=True)
