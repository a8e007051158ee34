"""The checks and readings of survey tables, scales and codes that the human PMFs share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..._version import __version__
from ...core.dims import check_factor_name
from ...core.errors import DesignError, InputTypeError
from ...core.io import encode_attrs
from .labels import text_answers

__all__ = [
    "check_groups",
    "check_survey_table",
    "finish_pmf",
    "from_instrument",
    "group_levels",
    "item_map",
    "item_scales",
    "nonsubstantive_codes",
    "plain_value",
    "read_answers",
    "scale_and_items",
]


def group_levels(column: pd.Series) -> list[Any]:
    if isinstance(column.dtype, pd.CategoricalDtype):
        return list(column.cat.categories)
    return sorted(column.dropna().unique().tolist(), key=lambda v: (str(type(v)), v))


def check_survey_table(
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
            f"row {plain_value(table.index[bad][0])!r} has {plain_value(table[weights][bad].iloc[0])!r}"
        )
    return w.astype(float)


def read_answers(
    column: pd.Series,
    name: str,
    scores: np.ndarray,
    missing: Sequence[Any],
    nonsubstantive_codes: Mapping[str, Sequence[Any]],
    labels: Mapping[int, str] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score index per respondent (-1 where missing or non-substantive), the missing mask
    and the non-substantive option index (-1 where none; ``nonsubstantive_codes``: each
    option's label -> its codes in ``column``); bad codes raise. Answers given as text are
    read as the points' ``labels`` and the options' names (their first code); an unknown
    text raises, named with its count."""
    texts: dict[Any, str] = {c[0]: o for o, c in nonsubstantive_codes.items() if c}
    texts.update(labels or {})
    keep = [c for codes in nonsubstantive_codes.values() for c in codes] + list(missing)
    column = text_answers(column, name, texts, keep)
    option = np.full(len(column), -1)
    for i, codes in enumerate(nonsubstantive_codes.values()):
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


def item_map(items: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    if isinstance(items, str):
        items = [items]
    mapping = dict(items) if isinstance(items, Mapping) else {c: c for c in items}
    if not mapping:
        raise DesignError("no items: pass the answer columns, e.g. items=['selfLR', 'ClinLR']")
    return {str(c): str(i) for c, i in mapping.items()}


def from_instrument(
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
                    codes.setdefault(opt.name, {})[i] = [opt.code]
        nonsubstantive = codes or None
    return scale, nonsubstantive


def item_scales(
    scale: tuple[int, int] | Mapping[str, tuple[int, int]] | None,
    instrument: Any,
    items: dict[str, str],
) -> dict[str, np.ndarray]:
    """Each item's own scale points (a mapping item id -> (min, max)), else the one scale."""
    if not isinstance(scale, Mapping):
        scores = scale_and_items(scale, instrument, items)
        return {item: scores for item in items.values()}
    unknown = sorted(set(map(str, scale)) - set(items.values()))
    missing = [item for item in items.values() if item not in set(map(str, scale))]
    if unknown or missing:
        raise DesignError(
            f"scale per item: no scale for items {missing}; scales for unknown items {unknown}"
        )
    spec = {str(k): v for k, v in scale.items()}
    return {item: scale_and_items(spec[item], instrument, items) for item in items.values()}


def scale_and_items(
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


def _codes(c: Any) -> list[Any]:
    return [c] if isinstance(c, str | int | float) else list(c)


def nonsubstantive_codes(
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
                        f"code {plain_value(c)!r} means both {seen[c]!r} and {option!r} in item "
                        f"{item!r}; give it one meaning"
                    )
                seen[c] = option
    return out


def plain_value(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def check_groups(
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


def finish_pmf(ds: xr.Dataset, scores: np.ndarray, attrs: dict[str, Any], how: str) -> xr.Dataset:
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
