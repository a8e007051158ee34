"""Figures of the sampling cost (:mod:`xlikert.analysis.sampling`): the SE of the N-sample
estimator, the decoding bias and the sign flips of a sampling study."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

from ..core.dims import DECODING_DIMS, factor_dims, preferred_factor
from . import text
from .canvas import MARKER_SHAPES, colors, new_ax, subplots

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["decoding_bias", "flip_probability", "standard_error"]


def standard_error(
    se: xr.DataArray, *, by: Hashable | None = None, ax: Axes | None = None
) -> Figure:
    """SE of the N-sample estimator vs N (log-log), one line per level of ``by``.

    ``se`` is :func:`xlikert.analysis.sampling.standard_error` output ``(*factors, n)``.
    Lines are the mean over the other conditions; the band spans their min to
    max.

    Parameters
    ----------
    se : xr.DataArray
        Standard errors ``(*factors, n)``.
    by : hashable, optional
        The factor of the lines (default the model factor or the first).
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; default a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    DesignError
        A factor given that is not a dim, or a dim with a name xlikert reserves
        (:mod:`xlikert.core.dims`).

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2, "target": 2}, n_items=3)
    >>> fig = standard_error(xl.sampling.standard_error(pmf, n=[10, 100]))
    >>> fig.axes[0].get_xscale(), fig.axes[0].get_yscale()
    ('log', 'log')
    """
    fig, ax = new_ax(ax)
    factors = factor_dims(se, item_dim=None, score_dim=None, auxiliary=["n"], what="the SE")
    by = preferred_factor(factors, by) if factors else None
    rest = [f for f in factors if f != by]
    n = np.asarray(se["n"].values, dtype=float)
    lv = text.labels(se, by) if by is not None else ["all"]
    for j, (name, c) in enumerate(zip(lv, colors(len(lv)), strict=True)):
        s = se.isel({by: j}) if by is not None else se
        mean = s.mean(rest) if rest else s
        ax.plot(
            n,
            mean.values,
            color=c,
            marker=MARKER_SHAPES[j % len(MARKER_SHAPES)],
            label=name,
            lw=1.4,
        )
        if rest:
            ax.fill_between(n, s.min(rest).values, s.max(rest).values, color=c, alpha=0.15, lw=0)
    ax.set_xscale("log")
    # a log scale needs some positive SE (all 0: every condition answers one way for sure)
    ax.set_yscale("log" if bool((se > 0).any()) else "linear")
    text.budget_ticks(ax, n)
    ax.set_xlabel("Samples per condition N")
    ax.set_ylabel("SE (composite-score points)")
    ax.grid(True, which="major", alpha=0.3)
    if by is not None:
        ax.legend(title=text.title(by), fontsize="small")
    note = f"; band: range over {text.names(rest)}" if rest else ""
    ax.set_title("Sampling noise decays as 1/√N" + note, fontsize="medium")
    return fig


def decoding_bias(
    bias: xr.DataArray, *, by: Hashable | None = None, consensus: xr.DataArray | None = None
) -> Figure:
    """Decoding bias vs temperature (left) and vs top-p (right), one line per level of ``by``.

    Each line is the mean bias over the other decoding parameter and the other
    conditions; the band spans min to max over those. With ``consensus``, the
    legend shows each level's mean Consensus.

    Parameters
    ----------
    bias : xr.DataArray
        The bias of :func:`xlikert.analysis.sampling.decoding_bias`,
        ``(*factors, temperature, top_p)``.
    by : hashable, optional
        The factor of the lines (default the model factor or the first).
    consensus : xr.DataArray, optional
        Consensus per condition, for the legend.

    Returns
    -------
    matplotlib.figure.Figure
        The figure (two panels).

    Raises
    ------
    DesignError
        A factor given that is not a dim, or a dim with a name xlikert reserves
        (:mod:`xlikert.core.dims`).

    Examples
    --------
    >>> import xlikert as xl
    >>> ds = xl.datasets.synthetic_results(n_items=3)
    >>> fig = decoding_bias(xl.sampling.decoding_bias(ds))
    >>> len(fig.axes)
    2
    """
    fig, axes = subplots(1, 2, figsize=(10, 3.8), sharey=True, layout="constrained")
    factors = factor_dims(
        bias, item_dim=None, score_dim=None, auxiliary=DECODING_DIMS, what="the bias"
    )
    by = preferred_factor(factors, by) if factors else None
    rest = [f for f in factors if f != by]
    lv = text.labels(bias, by) if by is not None else ["all"]
    for ax, param, other in zip(
        axes, ("temperature", "top_p"), ("top_p", "temperature"), strict=True
    ):
        x = np.asarray(bias[param].values, dtype=float)
        for j, (name, c) in enumerate(zip(lv, colors(len(lv)), strict=True)):
            b = bias.isel({by: j}) if by is not None else bias
            red = [other, *rest]
            label = name
            if consensus is not None and by is not None:
                label += f" (Cns {float(consensus.isel({by: j}).mean()):.2f})"
            ax.plot(
                x,
                b.mean(red).values,
                color=c,
                marker=MARKER_SHAPES[j % len(MARKER_SHAPES)],
                label=label,
                lw=1.4,
            )
            ax.fill_between(x, b.min(red).values, b.max(red).values, color=c, alpha=0.12, lw=0)
        ax.axhline(0, color="0.3", lw=0.8, ls=":")
        if len(x) <= 8:  # the grid's own values, not a run of 0.825, 0.850, ...
            ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.set_xlabel("Temperature" if param == "temperature" else "top-p")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Bias of E[composite]\n(composite-score points)")
    if by is not None:
        handles, labels = axes[1].get_legend_handles_labels()
        # below the panels: a legend beside them would share the top row with the title
        fig.legend(
            handles,
            labels,
            title=text.title(by),
            fontsize="small",
            loc="outside lower center",
            ncols=min(len(labels), 3),
        )
    fig.suptitle(
        "Decoding bias vs native (T = 1, top-p = 1); line: mean, band: range", fontsize="medium"
    )
    return fig


def flip_probability(flips: pd.DataFrame, *, ax: Axes | None = None, log_x: bool = True) -> Figure:
    """Sign-flip probability vs exact ``|E|``, one colour and marker per budget N.

    ``flips`` is :func:`xlikert.analysis.sampling.flip_probability` output. Main effects
    are filled markers, interactions hollow.

    Parameters
    ----------
    flips : pandas.DataFrame
        The table of :func:`xlikert.analysis.sampling.flip_probability`.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; default a new figure.
    log_x : bool
        A symmetric log scale for ``|E|`` (linear below the smallest nonzero value).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2, "target": 2}, n_items=3)
    >>> fig = flip_probability(xl.sampling.flip_probability(pmf, n=[10, 100]))
    >>> fig.axes[0].get_xscale()  # a log scale that holds exact zeros
    'symlog'
    """
    fig, ax = new_ax(ax)
    budgets = sorted(flips["n"].unique())
    for j, (nv, c) in enumerate(zip(budgets, colors(len(budgets)), strict=True)):
        sub = flips[flips["n"] == nv]
        x = sub["E"].abs().to_numpy()
        m = MARKER_SHAPES[j % len(MARKER_SHAPES)]
        main = (sub["order"] == 1).to_numpy()
        ax.scatter(
            x[main], sub["p_flip"].to_numpy()[main], color=c, marker=m, s=22, label=f"N = {nv}"
        )
        ax.scatter(
            x[~main],
            sub["p_flip"].to_numpy()[~main],
            facecolors="none",
            edgecolors=c,
            marker=m,
            s=22,
        )
    if log_x:
        pos = flips["E"].abs()
        pos = pos[pos > 0]
        if len(pos):
            linthresh = max(float(pos.min()), 1e-3)
            ax.set_xscale("symlog", linthresh=linthresh)
            text.symlog_ticks(ax, linthresh, float(pos.max()))
    ax.set_ylim(-0.02, 0.52)
    ax.set_xlabel("|E exact| (composite-score points)")
    ax.set_ylabel("P(sign flip)")
    ax.grid(alpha=0.3)
    ax.legend(title="filled: main effect\nhollow: interaction", fontsize="small")
    ax.set_title("Sign flips of a sampling study (normal approximation)", fontsize="medium")
    return fig
