"""Section "Elicitation": the first-token reading against what the model would write.

Only for results with the ``elicitation`` factor (:mod:`xlikert.design.elicitation`)
and its level ``first_token``. The table is :func:`xlikert.elicitation_validity`, one row
per model and condition: how often the greedy reply writes the first-token mode, how
often it writes no answer, the total variation to the own-words PMF with its certified
bound, and the own-words "no answer" mass.
"""

from __future__ import annotations

from typing import Any

import xarray as xr

from ...analysis.elicitation import elicitation_validity
from ...core.dims import preferred_factor
from ...core.schema import ELICITATION_SETTING_ATTRS
from ...design.elicitation import ELICITATION_DIM
from ..inputs import ReportInputs, unanswered_note
from ..page import Section
from ..tables import markdown_code as md_code
from ..tables import markdown_escape as md

__all__ = ["elicitation_section"]


def elicitation_section(inputs: ReportInputs) -> Section | None:
    """The validity table; ``None`` without an elicitation factor with ``first_token``."""
    ds = inputs.ds
    if ELICITATION_DIM not in ds["pmf"].dims:
        return None
    levels = [str(v) for v in ds[ELICITATION_DIM].values]
    if "first_token" not in levels:
        return None
    s = Section("Elicitation")
    attrs = ds.attrs
    s.text(
        f"The factor {md_code(ELICITATION_DIM)} reads each cell as "
        + ", ".join(md_code(v) for v in levels)
        + ". A reply's answer is its first valid answer token (the rule is "
        "`answer_parse_rule` in the file's attributes); a reply without one is a refusal, or "
        "a reply that ends or reaches its cap without a code." + _settings(attrs, levels)
    )
    if "own_words" in levels and "elicitation_tol_met" in ds:
        _own_words_budget(s, ds)
    note = unanswered_note(ds)
    if note:
        s.text(note)
    validity = elicitation_validity(ds)
    rows = list(validity["greedy_agreement"].dims)
    first = preferred_factor(rows)  # the model factor first (the report's rows)
    order = [first, *(d for d in rows if d != first)] if first is not None else None
    table = validity.to_dataframe(dim_order=order)
    table = table.dropna(axis=1, how="all")
    s.table(
        table,
        inputs.out,
        "elicitation_validity",
        "Validity of the first-token reading per model and condition (means over items): "
        "greedy agreement with the first-token mode, greedy no-answer share, TV to the "
        "own-words PMF and its certified bound, own-words no-answer mass.",
        digits=3,
    )
    return s


def _settings(attrs: dict, levels: list[str]) -> str:
    """The settings of the levels read, from the file's attributes (empty where absent)."""
    parts = []
    setting: dict[str, Any] = {k: attrs.get(a) for k, a in ELICITATION_SETTING_ATTRS.items()}
    if "prefix" in levels and setting["answer_prefix"] is not None:
        parts.append(f"`prefix` opens the reply with {md_code(setting['answer_prefix'])}")
    cap = setting["reply_tokens"]
    if cap is not None and ("greedy" in levels or "own_words" in levels):
        parts.append(f"replies have at most {int(cap)} tokens")
    if "own_words" in levels and setting["own_words_temperature"] is not None:
        parts.append(
            f"`own_words` is the first answer of a reply sampled at temperature "
            f"{float(setting['own_words_temperature']):g} and top-p "
            f"{float(setting['own_words_top_p']):g}, an exact mixture over the reply's "
            f"prefixes certified to {float(setting['own_words_tol']):g} within "
            f"{int(setting['own_words_max_passes'])} forward passes per cell"
        )
    return (" Settings: " + "; ".join(parts) + ".") if parts else ""


def _own_words_budget(s: Section, ds: xr.Dataset) -> None:
    """Say where the own-words reading spent its budget before meeting ``tol``."""
    o = ds.sel({ELICITATION_DIM: "own_words"})
    met = o["elicitation_tol_met"]
    short = int((met == 0).sum())
    if not short:
        s.text(
            "Every own-words cell met its certified error; its bound is the column "
            "`own_words_tv_bound` (the total variation moves by at most the PMF's bound)."
        )
        return
    by = preferred_factor([d for d in met.dims if d != "item"])
    where = ""
    if by is not None:
        per = (met == 0).sum([d for d in met.dims if d != by])
        n = met.size // met.sizes[by]
        where = (
            " ("
            + ", ".join(
                f"{md(str(v))}: {int(k)} of {n}"
                for v, k in zip(met[by].values, per.values, strict=True)
            )
            + ")"
        )
    worst = float(o["elicitation_error"].max())
    s.text(
        f"**{short} of {int(met.size)} own-words cells did not meet the asked error**{where} "
        f"within their budget of forward passes: their stored bound is the one reached (up "
        f"to {worst:.3g}), and `own_words_tv_bound` carries it. In those cells the "
        "own-words PMF and its TV are what the prefixes read so far give, and the "
        '"no answer" mass is a lower bound: the prefixes not read may still end without '
        "an answer. A larger `own_words_max_passes`, or a shorter reply cap, tightens it."
    )
