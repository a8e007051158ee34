"""Section "Context and order": sequential administration against isolation, order effects.

Only for results with sequentially administered cells (``context_position >= 0``
somewhere, :data:`~xlikert.core.schema.CONTEXT_VARIABLES`); a file without them gets no
section and writes nothing. It shows the item means and PMFs under isolated and
sequential administration (with an ``administration`` factor of both levels), the
certified bounds of the conversations read, the mean of every item by the position
it was asked at, the order factor's effects from the distributional ANOVA, and
carry-over tables: the mean of each later item given each answer to the item asked
just before it, from the exact (or certified) pairwise joints
(:func:`xlikert.analysis.context.carry_over`).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable

import numpy as np
import pandas as pd
import xarray as xr

from ...analysis.context import carry_over
from ...core.dims import ADMINISTRATION_DIM, MODEL_DIM
from ...core.schema import SEQUENTIAL_MAX_PASSES_ATTR, SEQUENTIAL_TOL_ATTR
from ...design.item_order import ITEM_POSITION
from ..inputs import ReportInputs
from ..page import Section
from ..tables import markdown_code as md_code

__all__ = ["context_section"]


def _sequential_cells(ds: xr.Dataset) -> xr.DataArray | None:
    """Where the results hold sequentially administered cells (bool over the cells), or None."""
    if "context_position" not in ds:
        return None
    seq = ds["context_position"] >= 0
    return seq if bool(seq.any()) else None


def _order_factor(ds: xr.Dataset) -> Hashable | None:
    if ITEM_POSITION not in ds:
        return None
    dims = [d for d in ds[ITEM_POSITION].dims if d != "item"]
    return dims[0] if dims else None


def _mean(pmf: xr.DataArray) -> xr.DataArray:
    """Each item's mean score; NaN for a nominal item (its codes have no order)."""
    mean = (pmf * pmf["score"]).sum("score")
    if "nominal" in pmf.coords:
        mean = mean.where(~pmf["nominal"].astype(bool))
    return mean


def context_section(inputs: ReportInputs) -> Section | None:
    """Isolated vs sequential, positions, order effects, carry-over; ``None`` without any
    sequentially administered cell."""
    ds = inputs.ds
    seq = _sequential_cells(ds)
    if seq is None:
        return None
    s = Section("Context and order")
    tol = float(ds.attrs.get(SEQUENTIAL_TOL_ATTR, 0.0))
    err = ds["context_error"].where(seq)
    met = bool((ds["context_tol_met"].where(seq, 1) == 1).all())
    s.text(
        "In the sequential conditions the items were asked in one conversation: each earlier "
        "item a user turn and the model's answer its reply. Each item's PMF is the exact "
        "mixture over the histories of earlier answers, P(a_j) = Σ_h P(h) p_j(a_j | h); "
        "histories continue through valid answers (every answer renormalised over the valid "
        "ones, as in isolation; an item with its own options branches on each of its own "
        "answers, 'Don't know' included), and every history's failure mass is stored with it. "
        + (
            "Every history of positive probability was read: the sequential PMFs are exact. "
            if float(err.max()) == 0
            else f"Histories were read best first until every item's certified error was at "
            f"most tol = {tol:g} (max_passes {ds.attrs.get(SEQUENTIAL_MAX_PASSES_ATTR)}): the "
            f"largest certified error |returned − exact| is {float(err.max()):.2g}. "
        )
        + (
            ""
            if met
            else "**Some conversations spent their forward-pass budget before "
            "meeting tol: their bound is the one reached (table below).**"
        )
    )
    _bounds_table(s, inputs, seq)
    _isolated_vs_sequential(s, inputs)
    _positions(s, inputs, seq)
    _order_effects(s, inputs)
    _carry_over(s, inputs, seq)
    return s


def _bounds_table(s: Section, inputs: ReportInputs, seq: xr.DataArray) -> None:
    ds = inputs.ds
    cond = [d for d in ds["context_error"].dims if d != "item"]
    frame = xr.Dataset(
        {
            "passes": ds["context_passes"].where(seq).max("item"),
            "tol_met": ds["context_tol_met"].where(seq).min("item"),
            "max_error": ds["context_error"].where(seq).max("item"),
            "max_unexplored": ds["context_unexplored"].where(seq).max("item"),
        }
    ).to_dataframe()
    frame = frame.dropna(subset=["passes"]).reset_index()[[*cond, "passes", "tol_met",
                                                            "max_error", "max_unexplored"]]  # fmt: skip
    frame["passes"] = frame["passes"].astype(int)
    frame["tol_met"] = frame["tol_met"].map({1.0: "yes", 0.0: "no"})
    s.table(
        frame,
        inputs.out,
        "context_bounds",
        "Each conversation: forward passes (histories read), whether tol was met within "
        "max_passes, the largest certified error of its items' PMFs, and the largest "
        "probability of the histories not read.",
        digits=4,
        index=False,
    )


def _isolated_vs_sequential(s: Section, inputs: ReportInputs) -> None:
    ds = inputs.ds
    if ADMINISTRATION_DIM not in ds.dims:
        return
    levels = [str(v) for v in ds[ADMINISTRATION_DIM].values]
    if not {"isolated", "sequential"} <= set(levels):
        return
    iso = ds["pmf"].sel({ADMINISTRATION_DIM: "isolated"}, drop=True)
    seq = ds["pmf"].sel({ADMINISTRATION_DIM: "sequential"}, drop=True)
    other = [d for d in iso.dims if d not in (MODEL_DIM, "item", "score")]
    shift = abs(seq - iso).max("score")
    table = xr.Dataset(
        {
            "E_isolated": _mean(iso).mean(other),
            "E_sequential": _mean(seq).mean(other),
            "max_abs_pmf_difference": shift.max(other),
            "certified_error": ds["context_error"]
            .sel({ADMINISTRATION_DIM: "sequential"}, drop=True)
            .max(other),
        }
    ).to_dataframe()
    table["E_difference"] = table["E_sequential"] - table["E_isolated"]
    table = table.reset_index()
    keep = [c for c in (MODEL_DIM, "item") if c in table.columns]
    table = table[[*keep, "E_isolated", "E_sequential", "E_difference",
                   "max_abs_pmf_difference", "certified_error"]]  # fmt: skip
    big = float(shift.max())
    s.text(
        f"Against isolation, asking the items in one conversation moves an item's PMF by up "
        f"to {big:.3f} (largest |Δ| of one score's probability; the first item asked has "
        f"the isolated prompt and so the isolated PMF). Item means under both "
        f"administrations{' (averaged over ' + ', '.join(map(str, other)) + ')' if other else ''}:"
    )
    s.table(
        table,
        inputs.out,
        "context_isolated_vs_sequential",
        "Mean score of each item under isolated and sequential administration, their "
        "difference (empty for a nominal item: its codes have no order), the largest "
        "difference of one score's probability, and the certified error of the sequential "
        "PMF.",
        digits=3,
        index=False,
    )


def _positions(s: Section, inputs: ReportInputs, seq: xr.DataArray) -> None:
    ds = inputs.ds
    mean = _mean(ds["pmf"]).where(seq)
    frame = pd.DataFrame(
        {
            "item": np.broadcast_to(ds["item"].values, mean.transpose(..., "item").shape).ravel(),
            "position": ds["context_position"].transpose(*mean.dims).values.ravel() + 1,
            "E": mean.values.ravel(),
        }
    ).dropna()
    if frame["position"].nunique() < 2 or frame.groupby("item")["position"].nunique().max() < 2:
        return
    table = frame.pivot_table(index="item", columns="position", values="E", aggfunc="mean")
    table.columns = [f"position {int(c)}" for c in table.columns]
    s.text(
        "The position effect: each item's mean score by the position at which it was asked "
        "(averaged over the other factors), an order factor's levels putting it at different "
        "positions."
    )
    s.table(table, inputs.out, "context_positions", "Mean score of each item by its position "
            "in the conversation (1 = asked first).", digits=3)  # fmt: skip


def _order_effects(s: Section, inputs: ReportInputs) -> None:
    fmt = _order_factor(inputs.ds)
    if fmt is None or fmt not in inputs.varying:
        return
    effects = inputs.effects
    terms = [t for t in dict.fromkeys(effects["term"]) if fmt in str(t).split(":")]
    table = effects[effects["term"].isin(terms)].reset_index(drop=True)
    s.text(
        f"The item-order factor {md_code(fmt)} is a factor like any other: the distributional "
        "ANOVA of the composite gives its main effect and its interactions exactly."
    )
    s.table(
        table,
        inputs.out,
        "context_order_effects",
        f"The effects with the item-order factor '{fmt}': E, SD, SNR and dPD of each level "
        "(composite-score units, as in the effects table).",
        index=False,
    )


def _carry_over_items(one: xr.Dataset) -> list[str]:
    """The items of a conversation whose carry-over table is shown: those that offer no
    non-substantive option and have ordered options."""
    items = [str(i) for i in np.asarray(one["item"].values)]
    drop = set()
    if "nonsubstantive_mass" in one:
        ns = one["nonsubstantive_mass"]
        offered = ns.notnull().any([d for d in ns.dims if d != "item"])
        drop |= {i for i, o in zip(items, np.asarray(offered.values), strict=True) if o}
    if "nominal" in one.coords:
        drop |= {i for i, n in zip(items, np.asarray(one["nominal"].values), strict=True) if n}
    return [i for i in items if i not in drop]


def _carry_over(s: Section, inputs: ReportInputs, seq: xr.DataArray) -> None:
    ds = inputs.ds
    exact = (seq & (ds["context_error"] == 0)).all("item")  # a pruned tree: not shown
    cond_dims = [d for d in exact.dims if d != MODEL_DIM]
    stacked = exact.any(MODEL_DIM) if MODEL_DIM in exact.dims else exact
    if not bool(stacked.any()):
        s.text("No conversation was read exactly (every tree was pruned), so no carry-over "
               "table is shown: the certified joints bound it only loosely.")  # fmt: skip
        return
    flat = int(np.flatnonzero(stacked.transpose(*cond_dims).values.ravel())[0])
    first = dict(zip(cond_dims, np.unravel_index(flat, [ds.sizes[d] for d in cond_dims]),
                     strict=True))  # fmt: skip
    one = ds.isel(first)
    scores = [int(y) for y in ds["score"].values]
    kept = _carry_over_items(one)
    if len(kept) < 2:
        s.text("No carry-over table is shown: it needs two items asked one after the other "
               "that offer no non-substantive option (the stored joint holds only the "
               "substantive answers' cells) and have ordered options (the later item's mean).")  # fmt: skip
        return
    rows = []
    for m in one[MODEL_DIM].values if MODEL_DIM in one.dims else [None]:
        here = one.sel(model=m) if m is not None else one
        p = here["context_position"].values
        if (p < 0).any() or (here["context_error"] > 0).any():
            continue
        table = carry_over(here["context_joint"].sel(item=kept, other_item=kept))
        order = [str(i) for i in np.asarray(here["item"].values)[np.argsort(p)]]
        for a, b in itertools.pairwise(order):
            if a not in kept or b not in kept:
                continue
            given = table.sel(item=a, other_item=b)
            means = (given * given["other_score"]).sum("other_score", min_count=1).values
            rows.append({MODEL_DIM: m, "earlier": a, "later": b,
                         **{f"after {y}": v for y, v in zip(scores, means, strict=True)}})  # fmt: skip
    cond = ", ".join(f"{d}={ds[d].values[int(i)]}" for d, i in first.items())
    if not rows:
        s.text(f"No carry-over table is shown ({cond}): no two items asked one after the "
               "other both offer no non-substantive option and have ordered options.")  # fmt: skip
        return
    s.text(
        "Carry-over: how an answer moves the next item's answer. For each item asked right "
        "after another, the mean of its answer given each answer to the earlier item, "
        f"E[Y_later | Y_earlier = y], from the exact pairwise joint within the conversation "
        f"({cond}); under isolation every row would be the later item's mean."
    )
    frame = pd.DataFrame(rows)
    if frame[MODEL_DIM].isna().all():
        frame = frame.drop(columns=MODEL_DIM)
    s.table(frame, inputs.out, "context_carry_over", "Mean of the later item given each answer "
            f"to the earlier one ({cond}); empty where that answer has probability 0.",
            digits=2, index=False)  # fmt: skip
