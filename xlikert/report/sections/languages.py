"""Section "Languages": how the answers move between the languages of the instrument.

Only for results whose design has a factor of kind ``language`` (the prompts'
attrs name it: ``language_factor``, written by
:meth:`xlikert.design.Experiment.build_prompts`). Each item's PMF per language is
its mixture over every other factor (:func:`xlikert.grand_mixture`'s uniform
mean); the items whose PMF moves most between two languages (the largest
Wasserstein-1 distance, in scale points) are listed first: an item whose answers
move while the others stay is measured non-invariantly across the translations.
The composite per language is the composite PMF's mean (:func:`xlikert.composite`),
mixed over the other factors, beside the language's mean valid mass and where its
translation comes from (the instrument's ``[translations.<tag>] source``).
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import xarray as xr

from ...analysis.construct import composite
from ...core.schema import INSTRUMENT_LANGUAGES_ATTR, LANGUAGE_FACTOR_ATTR
from ..inputs import ReportInputs
from ..page import Section
from ..tables import markdown_code as md_code
from ..tables import markdown_escape as md

__all__ = ["language_factor", "languages_section"]


def language_factor(ds) -> str | None:
    """The language factor of a results Dataset (attrs ``language_factor``), or None."""
    name = ds.attrs.get(LANGUAGE_FACTOR_ATTR)
    return str(name) if name and name in ds["pmf"].dims else None


def _w1(a: np.ndarray, b: np.ndarray) -> float:
    """Wasserstein-1 distance of two PMFs on consecutive integer scores."""
    return float(np.abs(np.cumsum(a) - np.cumsum(b)).sum())


def languages_section(inputs: ReportInputs) -> Section | None:
    """Items that move most between languages, and the composite per language."""
    lang = language_factor(inputs.ds)
    if lang is None or lang not in inputs.varying:
        return None
    s = Section("Languages")
    pmf = inputs.ds["pmf"]
    others = [d for d in inputs.factors if d != lang]
    per = pmf.mean(others) if others else pmf  # (language, item, score)
    levels = [str(x) for x in per[lang].values]
    table = _item_moves(per, lang, levels)
    by_lang = _per_language(inputs, pmf, lang, others)
    top = table.iloc[0]
    moves = (
        "an item that moves while the others stay is measured non-invariantly across the "
        "translations"
        if len(table) > 1
        else "with one item, a move between languages cannot be told apart from a change "
        "of the attitude itself (non-invariance shows as items that move apart)"
    )
    s.text(
        f"The factor {md_code(lang)} administers the same instrument in {len(levels)} "
        f"languages ({', '.join(md(x) for x in levels)}; where each translation comes from: "
        "the table of the composite per language below). Each item's PMF per language is "
        f"mixed over the other factors. The item whose answers move most between two "
        f"languages is item {md(top['item'])} (Wasserstein-1 distance {top['W1']:.2f} scale "
        f"points, {md(top['between'])}); {moves}. The effects of the language term (E, dPD) "
        f"are in the effects table above, under {md_code(lang)}."
    )
    s.table(table, inputs.out, "language_items",
            "Each item's largest move between two languages (Wasserstein-1 distance of its "
            "PMFs, in scale points) and its mean per language, largest first.",
            index=False)  # fmt: skip
    s.table(by_lang, inputs.out, "language_composite",
            "Per language: the composite's mean (composite-score units; reverse-keyed items "
            "reflected, per subscale where the instrument has subscales), the mean valid mass "
            "(the share of the answers read as a point of the scale) and where the "
            "translation comes from.", index=False)  # fmt: skip
    return s


def _item_moves(per: xr.DataArray, lang: str, levels: list[str]) -> pd.DataFrame:
    """Each item's largest move between two languages (W1) and its mean per language,
    largest first (``per``: ``(language, item, score)``)."""
    sub = per["subscale"] if "subscale" in per.coords else None
    with_sub = sub is not None and any(str(v) for v in sub.values)
    rows = []
    for item in per["item"].values:
        x = per.sel(item=item).transpose(lang, "score").values
        pairs = [(_w1(x[i], x[j]), levels[i], levels[j])
                 for i, j in itertools.combinations(range(len(levels)), 2)]  # fmt: skip
        d, a, b = max(pairs)
        means = (x * per["score"].values).sum(-1)
        row = {"item": str(item)}
        if with_sub and sub is not None:
            row["subscale"] = str(sub.sel(item=item).values)
        rows.append({**row, "W1": d, "between": f"{a} – {b}",
                     **{f"E[{lv}]": m for lv, m in zip(levels, means, strict=True)}})  # fmt: skip
    return pd.DataFrame(rows).sort_values("W1", ascending=False).reset_index(drop=True)


def _per_language(inputs: ReportInputs, pmf: xr.DataArray, lang: str, others: list) -> pd.DataFrame:
    """One row per language: the composite's mean (one column per subscale, if any; none
    where the instrument defines no composite), the valid mass, the translation's source."""
    if inputs.no_composite:
        by_lang = pd.DataFrame(index=pd.Index([str(v) for v in pmf[lang].values], name=lang))
        return _provenance(inputs, by_lang, lang)
    comp = composite(pmf)
    comp = comp.mean(others) if others else comp
    mean = (comp * comp["score"]).sum("score")
    parts = [d for d in mean.dims if d != lang]
    by_lang = pd.DataFrame(index=pd.Index([str(v) for v in mean[lang].values], name=lang))
    if parts:
        flat = mean.stack(_part=parts).transpose(lang, "_part")
        for j, key in enumerate(flat["_part"].values):
            name = "/".join(map(str, key)) if isinstance(key, tuple) else str(key)
            by_lang[f"E[{name}]"] = flat.values[:, j]
    else:
        by_lang["E"] = mean.transpose(lang).values
    return _provenance(inputs, by_lang, lang)


def _provenance(inputs: ReportInputs, by_lang: pd.DataFrame, lang: str) -> pd.DataFrame:
    """``by_lang`` with each language's mean valid mass and its translation's source."""
    if "valid_mass" in inputs.ds:  # how much of each language's answers the rule reads
        vm = inputs.ds["valid_mass"]
        vm = vm.mean([d for d in vm.dims if d != lang])
        by_lang["valid mass"] = [float(vm.sel({lang: lv})) for lv in by_lang.index]
    provenance = json.loads(inputs.ds.attrs.get(INSTRUMENT_LANGUAGES_ATTR, "{}"))
    by_lang["translation"] = [provenance.get(lv, "not recorded") for lv in by_lang.index]
    return by_lang.reset_index()
