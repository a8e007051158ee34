"""Section "The cost of generative sampling": SE, sign flips and decoding bias of a sampler.

Computed analytically from the exact PMFs (:mod:`xlikert.analysis.sampling`), no simulation.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import xarray as xr

from ... import plot
from ...analysis import sampling
from ...core.dims import SUBSCALE_DIM
from ..inputs import ReportInputs
from ..page import Section
from ..tables import markdown_escape as md
from .per_subscale import views

__all__ = ["FLIP_BUDGETS", "SE_BUDGETS", "sampling_cost_section"]

#: Sample sizes N per condition of the standard-error table and figure.
SE_BUDGETS = (10, 100, 1000, 1_000_000)
#: Sample sizes N per condition of the sign-flip table.
FLIP_BUDGETS = (10, 100, 1000)


def sampling_cost_section(inputs: ReportInputs) -> Section | None:
    """What a study sampling N answers per condition would have paid (for the composite:
    ``None`` where the instrument defines none, :attr:`~..inputs.ReportInputs.no_composite`)."""
    if inputs.no_composite:
        return None
    s = Section("The cost of generative sampling")
    s.text(
        "What a study that sampled N answers per condition would have paid, computed "
        "analytically from the exact PMFs (no simulation): SE = SD(S)/√N per condition; sign "
        "flips of every factorial parameter under the normal approximation with exact mean "
        "and variance."
    )
    if inputs.nominal:
        s.text(inputs.nominal_note("the composite's sampling cost"))
    se = sampling.standard_error(inputs.pmf, n=SE_BUDGETS)
    _standard_error_parts(s, inputs, se)
    _sign_flip_parts(s, inputs, per_subscale=SUBSCALE_DIM in se.dims)
    if "decoding_pmf" in inputs.ds:
        _decoding_bias_parts(s, inputs)
    else:
        s.text(
            "No `decoding_pmf` (temperature × top-p grid) in the results: decoding bias "
            "is not reported. Collect with a decoding grid to add it."
        )
    return s


def _standard_error_parts(s: Section, inputs: ReportInputs, se: xr.DataArray) -> None:
    """The SE table (sorted by Consensus), and per subscale the SE figure and its correlation."""
    by, cns = inputs.by, inputs.consensus
    per_sub = " and subscale" if SUBSCALE_DIM in se.dims else ""
    s.table(
        sampling.sampling_se_table(inputs.pmf, n=SE_BUDGETS, by=by, consensus=cns),
        inputs.out,
        "sampling_se",
        f"SE of the N-sample composite estimator, mean over the conditions "
        f"of each {by}{per_sub}, sorted by Consensus.",
        digits=3,
    )
    for tag, label, se_s in views(se):
        s.figure(
            partial(plot.standard_error, se_s, by=by),
            inputs.out,
            f"sampling_se{tag}",
            f"{label}Standard error of the sampling estimator vs N.",
        )
        r = sampling.correlation(cns, se_s.sel(n=SE_BUDGETS[0]))
        if np.isfinite(r["r"]):
            s.text(
                f"{md(label)}Correlation of SE with Consensus across the {r['n']} conditions: "
                f"r = {r['r']:.2f} (p = {r['p']:.2g})."
            )


def _sign_flip_parts(s: Section, inputs: ReportInputs, *, per_subscale: bool) -> None:
    """Mean sign-flip probability by exact effect size and budget (table and figure)."""
    flips = sampling.flip_probability(inputs.pmf, n=FLIP_BUDGETS)
    if flips.empty:
        s.text("No factor varies, so there is no factorial parameter whose sign could flip.")
        return
    s.table(
        sampling.flip_table(flips),
        inputs.out,
        "flip_by_effect_size",
        "Mean sign-flip probability by exact |E| and budget N"
        + (" (the parameters of every subscale)." if per_subscale else "."),
        digits=3,
    )
    s.figure(
        lambda: plot.flip_probability(flips),
        inputs.out,
        "flip_probability",
        "Sign-flip probability vs exact effect size.",
    )


def _decoding_bias_parts(s: Section, inputs: ReportInputs) -> None:
    """Bias of the expected composite over the temperature x top-p grid (``decoding_pmf``)."""
    by, cns = inputs.by, inputs.consensus
    bias = sampling.decoding_bias(inputs.ordered)
    tab, st = sampling.decoding_bias_table(bias, by=by, consensus=cns)
    s.table(
        tab,
        inputs.out,
        "decoding_bias",
        "Decoding bias of the expected composite over the temperature × top-p grid.",
    )
    for tag, label, bias_s in views(bias):
        s.figure(
            partial(plot.decoding_bias, bias_s, by=by, consensus=cns),
            inputs.out,
            f"decoding_bias{tag}",
            f"{label}Decoding bias vs temperature and top-p.",
        )
    if bias.attrs.get("n_undefined"):
        s.text(
            f"{bias.attrs['n_undefined']} of {bias.size} (condition, temperature, top-p) "
            "settings keep no valid token in the nucleus for some item: a sampler would "
            "never return a valid composite there, so their bias is undefined and left out."
        )
    if bias.attrs.get("n_unmeasured"):
        s.text(
            f"{bias.attrs['n_unmeasured']} of {bias.size} settings were not measured (a "
            "server that returns only the top-k log-probabilities) and are left out."
        )
    if np.isfinite(st.get("r", np.nan)):
        s.text(
            f"Correlation of mean |bias| with Consensus across the {st['n']} conditions: "
            f"r = {st['r']:.2f} (p = {st['p']:.2g})."
        )
