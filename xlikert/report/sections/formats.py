"""Section "Response format": the format main effect and its interactions.

Only for results whose design has a factor of kind ``format`` (the results
hold ``answer_label (<format factor>, score)``, :mod:`xlikert.design.formats`).
The effects are those of the distributional ANOVA (:func:`xlikert.decompose`)
of the composite, read off the summary table every section shares; each term
with the format factor gets one sentence saying how much of the variation of
the mean composite over the conditions it explains.
"""

from __future__ import annotations

from collections.abc import Hashable

import xarray as xr

from ...analysis import construct
from ..inputs import ReportInputs
from ..page import Section
from ..tables import markdown_code as md_code
from ..tables import markdown_escape as md

__all__ = ["format_factor", "format_section"]


def format_factor(ds: xr.Dataset) -> Hashable | None:
    """The format factor of a results Dataset (the non-score dim of ``answer_label``), or None."""
    if "answer_label" not in ds:
        return None
    dims = [d for d in ds["answer_label"].dims if d != "score"]
    return dims[0] if len(dims) == 1 and dims[0] in ds["pmf"].dims else None


def format_section(inputs: ReportInputs) -> Section | None:
    """The format main effect and the interactions with it; ``None`` without a format factor."""
    fmt = format_factor(inputs.ds)
    if fmt is None or fmt not in inputs.varying:
        return None
    s = Section("Response format")
    labels = inputs.ds["answer_label"]
    scores = [int(y) for y in labels["score"].values]
    shown = "; ".join(
        f"{md(lv)}: "
        + " ".join(
            f"{md(x)}→{y}" for x, y in zip(labels.sel({fmt: lv}).values, scores, strict=True)
        )
        for lv in labels[fmt].values
    )
    s.text(
        f"The factor {md_code(fmt)} varies how the scale is shown and which labels answer it. Each "
        "level's answer labels are mapped onto the same scores (label→score: "
        f"{shown}), so every level's PMF is on one score axis and the distributional ANOVA "
        "separates the format's effect from the other factors' like any factor's."
    )
    effects = inputs.effects
    terms = [t for t in dict.fromkeys(effects["term"]) if fmt in str(t).split(":")]
    table = effects[effects["term"].isin(terms)]
    shares = construct.variance_shares(effects)
    sentences = []
    for t in terms:
        rows = shares[shares["term"] == t]
        part = table[table["term"] == t]
        name = md(" × ".join(str(t).split(":")))
        what = "main effect" if t == fmt else "interaction"
        per = (
            ", ".join(
                f"{p:.0%} ({md(b)})" for p, b in zip(rows["share"], rows["subscale"], strict=True)
            )
            if "subscale" in rows.columns
            else f"{float(rows['share'].iloc[0]):.0%}"
        )
        sentences.append(
            f"The {name} {what} explains {per} of the variance of the mean composite score "
            f"over the conditions (its effects on E range from {part['E'].min():+.2f} to "
            f"{part['E'].max():+.2f} points; mean dPD {part['dPD'].mean():.3f})."
        )
    total = shares[shares["term"].isin(terms)]
    if "subscale" not in total.columns and len(terms) > 1:
        sentences.append(
            f"In all, the terms with the format explain {float(total['share'].sum()):.0%}."
        )
    sentences.append(
        "The reliability section treats each format level as a population of its own (a way "
        "of measuring, not a respondent)."
    )
    s.text(" ".join(sentences))
    s.table(
        table.reset_index(drop=True),
        inputs.out,
        "format_effects",
        f"The effects with the format factor '{fmt}': E, SD, SNR and dPD of each level "
        "(composite-score units, as in the effects table above).",
        index=False,
    )
    return s
