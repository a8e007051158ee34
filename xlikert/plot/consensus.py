"""Figure of the consensus stage (:mod:`xlikert.analysis.consensus`): Multivariate Consensus."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from ..core.dims import factor_dims, preferred_factor
from . import text
from .canvas import MAX_LEGEND, OKABE_ITO, colors, new_ax

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["consensus"]


def consensus(
    cns: xr.DataArray,
    *,
    x: Hashable | None = None,
    hue: Hashable | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Multivariate Consensus as grouped bars: ``x`` groups, ``hue`` bars.

    Further factors are averaged and their range (min to max) is drawn as an
    error bar. A ``hue`` of more than :data:`~.canvas.MAX_LEGEND` levels (one per
    respondent) is drawn as its distribution instead: a box per ``x`` level over the
    ``hue`` levels, no legend. ``x`` defaults to the model factor (:data:`xlikert.core.dims.MODEL_DIM`)
    where present, else the first factor; ``hue`` to the next factor in dim order.

    Parameters
    ----------
    cns : xr.DataArray
        Consensus per condition, ``(*factors)`` (:func:`xlikert.consensus`).
    x, hue : hashable, optional
        The factors of the groups and of the bars within a group.
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
    >>> pmf = xl.datasets.synthetic_pmf({"model": 2, "target": 3}, n_items=4)
    >>> fig = consensus(xl.consensus(pmf))
    >>> fig.axes[0].get_xlabel()
    'Model'
    """
    fig, ax = new_ax(ax)
    factors = factor_dims(cns, item_dim=None, score_dim=None, what="the Consensus")
    x = preferred_factor(factors, x)
    hue = preferred_factor(factors, hue, exclude=[x])
    rest = [f for f in factors if f not in (x, hue)]
    if hue is not None and cns.sizes[hue] > MAX_LEGEND:
        return _spread(fig, ax, cns, x, hue, rest)
    mean = cns.mean(rest) if rest else cns
    lo = cns.min(rest) if rest else None
    hi = cns.max(rest) if rest else None
    xl = text.labels(cns, x) if x is not None else ["all"]
    hl = text.labels(cns, hue) if hue is not None else [None]
    width = 0.8 / len(hl)
    for j, (h, c) in enumerate(zip(hl, colors(len(hl)), strict=True)):
        sel = {hue: cns[hue].values[j]} if hue is not None else {}
        vals = np.atleast_1d(mean.sel(sel).values) if sel else np.atleast_1d(mean.values)
        pos = np.arange(len(xl)) - 0.4 + width * (j + 0.5)
        yerr = None
        if lo is not None and hi is not None:
            lv = np.atleast_1d(lo.sel(sel).values if sel else lo.values)
            hv = np.atleast_1d(hi.sel(sel).values if sel else hi.values)
            yerr = np.vstack([vals - lv, hv - vals])
        ax.bar(pos, vals, width, color=c, label=h, yerr=yerr, capsize=2, edgecolor="white")
    ax.set_xticks(range(len(xl)), xl)
    text.rotate(ax, xl)
    ax.set_ylim(0, 1.0)
    ax.set_ylabel("Consensus (Cns)")
    ax.set_xlabel(text.title(x))
    if hue is not None:
        ax.legend(
            title=text.title(hue), loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small"
        )
    note = f"; bars: range over {text.names(rest)}" if rest else ""
    ax.set_title(
        "Consensus: 1 = full agreement, 0 = polarised" + text.collapse_note(rest) + note,
        fontsize="medium",
    )
    return fig


def _spread(fig: Figure, ax: Axes, cns: xr.DataArray, x: Hashable | None, hue: Hashable,
            rest: list[Hashable]) -> Figure:  # fmt: skip
    """Consensus per ``x`` level as a box over the many levels of ``hue`` (``rest`` averaged)."""
    mean = cns.mean(rest) if rest else cns
    xl = text.labels(cns, x) if x is not None else ["all"]
    rows = (
        [mean.sel({x: v}).values.ravel() for v in cns[x].values]
        if x is not None
        else [mean.values.ravel()]
    )
    box = ax.boxplot(rows, positions=np.arange(len(xl)), widths=0.6, patch_artist=True)
    for patch in box["boxes"]:
        patch.set_facecolor(OKABE_ITO[1])
    ax.set_xticks(range(len(xl)), xl)
    text.rotate(ax, xl)
    ax.set_ylim(0, 1.0)
    ax.set_ylabel("Consensus (Cns)")
    ax.set_xlabel(text.title(x))
    ax.set_title(
        f"Consensus over the {cns.sizes[hue]} {text.names([hue])} levels (box: quartiles, "
        "whiskers 1.5 IQR)" + text.collapse_note(rest),
        fontsize="medium",
    )
    return fig
