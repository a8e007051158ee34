"""The inputs of the individual scores: each person's answers, checked and decoded, and the
model's distribution over an item's answers (points and non-substantive options).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ...core.errors import DesignError, InputTypeError
from ...core.validate import as_pmf, check_score_axis
from ..constraint import NONSUBSTANTIVE
from ..human.labels import text_answers
from ..support import nominal_items, support_bounds

__all__ = [
    "answer_distribution",
    "answer_layout",
    "check_answer_table",
    "decode_answers",
    "left_out_text",
    "persona_pmf",
    "respondent_answers",
    "respondent_rows",
]


def answer_distribution(
    results: xr.Dataset | xr.DataArray,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> tuple[xr.DataArray, xr.DataArray | None]:
    """The model's exact distribution over each item's answers, failures left out.

    Parameters
    ----------
    results : xr.Dataset or xr.DataArray
        A results Dataset (or its ``pmf``).
    item_dim, score_dim : hashable, keyword-only
        Names of the item and score dims.

    Returns
    -------
    tuple of xr.DataArray
        ``(points, options)``: ``pmf * valid_mass / A`` over ``score_dim`` and
        ``nonsubstantive_mass / A`` over ``option`` (None without non-substantive
        options; then ``points`` is ``pmf``), ``A = valid_mass + sum nonsubstantive_mass``.

    Examples
    --------
    >>> import xarray as xr
    >>> ds = xr.Dataset({"pmf": (("item", "score"), [[0.5, 0.5]]), "valid_mass": ("item", [0.5]),
    ...                  "nonsubstantive_mass": (("item", "option"), [[0.25]])},
    ...                 coords={"item": ["q"], "score": [1, 2], "option": ["Don't know"]})
    >>> points, options = answer_distribution(ds)
    >>> points.values.tolist(), options.values.tolist()
    ([[0.3333333333333333, 0.3333333333333333]], [[0.3333333333333333]])
    """
    pmf = as_pmf(results)
    check_score_axis(pmf, score_dim)
    if not isinstance(results, xr.Dataset) or NONSUBSTANTIVE not in results:
        return pmf, None
    ns = results[NONSUBSTANTIVE]
    answered = results["valid_mass"] + ns.fillna(0.0).sum("option")
    return pmf * results["valid_mass"] / answered, (ns / answered)


def _ids(index: pd.Index) -> np.ndarray:
    return np.asarray([str(v) for v in index], dtype=object)


def check_answer_table(table: Any, what: str) -> pd.DataFrame:
    if not isinstance(table, pd.DataFrame):
        raise InputTypeError(
            f"expected {what} as a pandas DataFrame, one row per respondent indexed by the "
            f"respondent level, got {type(table).__name__}"
        )
    ids = _ids(table.index)
    dup = pd.Index(ids)[pd.Index(ids).duplicated()].unique().tolist()
    if dup:
        raise DesignError(f"{what} has repeated respondent ids {dup[:5]}; one row per respondent")
    return table


def decode_answers(
    table: pd.DataFrame,
    rows: np.ndarray,
    items: Sequence[str],
    scores: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    options: Sequence[str],
    offered: np.ndarray,
    nonsubstantive: Mapping[str, Sequence[Any]] | None,
    missing: Sequence[Any],
    what: str,
    labels: Sequence[Mapping[int, str]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's answer to each item: score-axis index and option index (-1: none).
    Answers given as text are read as the item's point ``labels`` and the options'
    names (case-insensitively, without surrounding spaces); other texts raise."""
    labels = labels if labels is not None else [{} for _ in items]
    absent = [i for i in items if i not in table.columns]
    if absent:
        raise DesignError(
            f"{what} has no column for items {absent}; its columns: {list(map(str, table.columns))}"
        )
    codes = {str(o): list(c) for o, c in (nonsubstantive or {}).items()}
    unknown = sorted(set(codes) - set(options))
    if unknown:
        raise DesignError(
            f"nonsubstantive options {unknown} are not options of the results "
            f"(its 'option' levels: {list(options)})"
        )
    n, n_items = len(rows), len(items)
    point = np.full((n, n_items), -1, dtype=np.int64)
    option = np.full((n, n_items), -1, dtype=np.int64)
    sub = table.iloc[rows]
    for j, item in enumerate(items):
        keep = [c for o in options for c in codes.get(o, [])] + list(missing)
        col = text_answers(sub[item], item, {**labels[j], **{o: o for o in options}}, keep)
        is_opt = np.full(n, -1, dtype=np.int64)
        for k, o in enumerate(options):
            hit = col.isin(codes.get(o, [])).to_numpy() | (col.astype(object) == o).to_numpy()
            is_opt[hit] = k
        miss = col.isna().to_numpy() | col.isin(list(missing)).to_numpy()
        num = pd.to_numeric(col.where((is_opt < 0) & ~miss), errors="coerce").to_numpy(float)
        value_bad = (is_opt < 0) & ~miss & (~np.isfinite(num) | (num % 1 != 0) |
                                           (num < lo[j]) | (num > hi[j]))  # fmt: skip
        opt_bad = np.zeros(n, dtype=bool)
        if options:
            opt_bad = (is_opt >= 0) & ~offered[j, np.maximum(is_opt, 0)]
        bad = value_bad | opt_bad
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            values = pd.unique(col.to_numpy(dtype=object)[bad]).tolist()[:5]
            offer = [o for k, o in enumerate(options) if offered[j, k]]
            raise DesignError(
                f"{what}: {int(bad.sum())} answer(s) to item {item!r} are outside the item's "
                f"scale {int(lo[j])}..{int(hi[j])}"
                + (f" and its options {offer}" if offer else "")
                + f": value(s) {values} (first: respondent {_ids(sub.index)[first]!r}); "
                "declare no-answer codes with missing=[...] (or nonsubstantive={option: codes})"
            )
        ok = (is_opt < 0) & ~miss
        point[ok, j] = np.searchsorted(scores, num[ok].astype(np.int64))
        option[:, j] = np.where(miss, -1, is_opt)
    return point, option


def respondent_rows(table: pd.DataFrame, levels: np.ndarray, what: str) -> np.ndarray:
    """Row positions of ``table`` for each respondent level; a level without a row raises."""
    pos = pd.Index(_ids(table.index)).get_indexer(levels)
    if (pos < 0).any():
        lost = levels[pos < 0].tolist()
        raise DesignError(
            f"{what} has no row for respondents {lost[:5]}{' ...' if len(lost) > 5 else ''} "
            f"({len(lost)} of {len(levels)} respondent levels of the results)"
        )
    result: np.ndarray = pos
    return result


def persona_pmf(
    da: xr.DataArray, table: pd.DataFrame, persona: Sequence[str], respondent_dim: Hashable
) -> tuple[xr.DataArray, dict[str, str]]:
    """Each respondent's group persona: ``da`` read at the row's levels of ``persona``.

    A row whose levels are not all levels of the results (or that has no value) is left
    out: it is read at the first level (to be masked by the caller) and named, with why,
    in the second value (respondent id -> reason). No row with a persona raises.
    """
    ids = _ids(table.index)
    why = np.full(len(table), "", dtype=object)
    sel = {}
    for col in persona:
        if col not in table.columns:
            raise DesignError(f"persona column {col!r} is not in the answers table")
        if col not in da.dims:
            raise DesignError(
                f"the group persona results have no factor {col!r}; their dims: {list(da.dims)}"
            )
        known = [str(v) for v in da[col].values]
        absent = table[col].isna().to_numpy()
        labels = np.where(absent, "", table[col].astype(str).to_numpy())
        unknown = ~absent & ~np.isin(labels, known)
        for i in np.flatnonzero((absent | unknown) & (why == "")):
            why[i] = (
                f"no value in persona column {col!r}"
                if absent[i]
                else f"{col}={labels[i]!r} is not a level of the persona results' {col!r} {known}"
            )
        sel[col] = xr.DataArray(
            np.where(absent | unknown, known[0], labels), dims=(respondent_dim,)
        )
    left_out = {str(ids[i]): str(why[i]) for i in np.flatnonzero(why != "")}
    if len(left_out) == len(table):
        raise DesignError(
            f"no respondent's group is a group persona of the results: {left_out_text(left_out, len(table))}"
        )
    out = da.assign_coords({c: da[c].astype(str) for c in persona}).sel(sel)
    return out.drop_vars(list(persona)).assign_coords({respondent_dim: ids}), left_out


def left_out_text(left_out: Mapping[str, str], n: int) -> str:
    """The respondents left out of a group-persona baseline, grouped by why.

    Examples
    --------
    >>> left_out_text({"r1": "party='R' is not a level", "r3": "party='R' is not a level"}, 6)
    "2 of 6 respondents left out of the group persona baseline: ['r1', 'r3'] (party='R' is not a level)"
    """
    by_why: dict[str, list[str]] = {}
    for who, why in left_out.items():
        by_why.setdefault(why, []).append(who)
    parts = [
        f"{who[:5]}{f' and {len(who) - 5} more' if len(who) > 5 else ''} ({why})"
        for why, who in by_why.items()
    ]
    return (
        f"{len(left_out)} of {n} respondents left out of the group persona baseline: "
        + "; ".join(parts)
    )


def answer_layout(
    results: xr.Dataset | xr.DataArray, item_dim: Hashable, score_dim: Hashable
) -> dict[str, Any]:
    pmf = as_pmf(results)
    scores = check_score_axis(pmf, score_dim)
    items = [str(i) for i in np.atleast_1d(pmf[item_dim].values)]
    lo_da, hi_da = support_bounds(pmf, item_dim=item_dim, score_dim=score_dim)
    lo = np.broadcast_to(np.asarray(lo_da.values), (len(items),)).astype(np.int64)
    hi = np.broadcast_to(np.asarray(hi_da.values), (len(items),)).astype(np.int64)
    nominal = set(nominal_items(pmf, item_dim=item_dim))
    options: list[str] = []
    offered = np.zeros((len(items), 0), dtype=bool)
    if isinstance(results, xr.Dataset) and NONSUBSTANTIVE in results:
        ns = results[NONSUBSTANTIVE]
        options = [str(o) for o in ns["option"].values]
        keep = [d for d in ns.dims if d not in (item_dim, "option")]
        offered = ns.notnull().any(keep).transpose(item_dim, "option").values
    return {
        "scores": scores,
        "items": items,
        "labels": _point_labels(results, items, item_dim, score_dim),
        "lo": lo,
        "hi": hi,
        "ordinal": np.array([i not in nominal for i in items]),
        "options": options,
        "offered": offered,
    }


def _point_labels(
    results: xr.Dataset | xr.DataArray,
    items: Sequence[str],
    item_dim: Hashable,
    score_dim: Hashable,
) -> list[dict[int, str]]:
    """Each item's point labels: the results' ``score_label (item, score)``, else the
    anchors of their ``scale_labels`` attr (every item), else none."""
    if "score_label" in results.coords or (
        isinstance(results, xr.Dataset) and "score_label" in results
    ):
        lab = results["score_label"].transpose(item_dim, score_dim)
        scores = [int(v) for v in lab[score_dim].values]
        return [
            {y: str(t) for y, t in zip(scores, lab.sel({item_dim: i}).values, strict=True) if t}
            for i in items
        ]
    raw = results.attrs.get("scale_labels") or {}
    try:
        given = json.loads(raw) if isinstance(raw, str) else raw
        anchors = {int(k): str(v) for k, v in dict(given).items()}
    except (TypeError, ValueError) as exc:
        raise DesignError(
            f"the results' attr scale_labels is not a JSON object of code -> label: {raw!r}"
        ) from exc
    return [dict(anchors) for _ in items]


def respondent_answers(
    results: xr.Dataset | xr.DataArray,
    answers: pd.DataFrame,
    *,
    nonsubstantive: Mapping[str, Sequence[Any]] | None = None,
    missing: Sequence[Any] = (),
    respondent_dim: Hashable = "respondent",
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.Dataset:
    """Every row's answers, checked against each item's own scale and options in ``results``.

    Parameters
    ----------
    results : xr.Dataset or xr.DataArray
        A results Dataset (or its ``pmf``): the items, their supports and options.
    answers : pandas.DataFrame
        One row per respondent (index: the respondent id), a column per item.
    nonsubstantive, missing : keyword-only
        As in :func:`individual_scores`.
    respondent_dim, item_dim, score_dim : hashable, keyword-only
        Names of the respondent, item and score dims.

    Returns
    -------
    xr.Dataset
        ``answer_score (respondent, item)``: the point answered (NaN where the answer is
        not substantive or missing); ``answer_option``: the non-substantive option
        answered ("" where none).

    Raises
    ------
    DesignError
        An item without a column or an answer outside its scale and options.

    Examples
    --------
    >>> import pandas as pd, xarray as xr
    >>> res = xr.DataArray([[0.5, 0.5]], dims=("item", "score"),
    ...                    coords={"item": ["q"], "score": [1, 2]})
    >>> respondent_answers(res, pd.DataFrame({"q": [2, None]})).answer_score.values.tolist()
    [[2.0], [nan]]
    """
    answers = check_answer_table(answers, "answers")
    lay = answer_layout(results, item_dim, score_dim)
    point, option = decode_answers(
        answers, np.arange(len(answers)), lay["items"], lay["scores"], lay["lo"], lay["hi"],
        lay["options"], lay["offered"], nonsubstantive, missing, "answers", lay["labels"],
    )  # fmt: skip
    score = np.where(point >= 0, lay["scores"][np.maximum(point, 0)], np.nan)
    names = np.asarray(["", *lay["options"]], dtype=object)[option + 1]
    dims = (respondent_dim, item_dim)
    return xr.Dataset(
        {"answer_score": (dims, score), "answer_option": (dims, names.astype(str))},
        coords={respondent_dim: _ids(answers.index), item_dim: lay["items"]},
    )
