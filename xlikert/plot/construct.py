"""Figure of the construct stage's composites (:mod:`xlikert.analysis.construct.composite`):
the composite PMFs."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from ..core.dims import factor_dims, preferred_factor
from . import text
from .canvas import MAX_LEGEND, OKABE_ITO, colors, subplots

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["composite_pmfs"]


def composite_pmfs(
    comp: xr.DataArray,
    *,
    facet: Hashable | None = None,
    hue: Hashable | None = None,
    row: Hashable | None = None,
    score_dim: Hashable = "score",
    col_wrap: int = 3,
    xlabel: str = "Composite score",
) -> Figure:
    """Composite PMFs: one panel per level of ``facet``, one line per level of ``hue``.

    Other factors are mixed (uniform mixture = ``.mean(dim)``, the paper's
    marginal PMF). A ``hue`` of more than :data:`~.canvas.MAX_LEGEND` levels (one per
    respondent) is drawn as its distribution: the median PMF and its 10–90% band over
    the levels. The expected score of each curve is a dashed tick. With a
    ``row`` dim (default ``subscale`` when the composite has one) the figure is
    small multiples: one row of panels per level, each row on its own score
    range (a subscale's ``score_min``..``score_max``), the level named at the left.

    Parameters
    ----------
    comp : xr.DataArray
        Composite PMFs ``(*factors, [subscale], score)`` (:func:`xlikert.composite`).
    facet, hue : hashable, optional
        The factors of the panels and of the lines; default the model factor (or
        the first) and the next one.
    row : keyword-only
        The dim of the rows of panels (default ``subscale`` when present).
    score_dim : keyword-only
        Name of the score dim.
    col_wrap : keyword-only
        Panels per row.
    xlabel : keyword-only
        The label of the score axis.

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
    >>> pmf = pmf.assign_coords(subscale=("item", ["A", "A", "B"]))
    >>> fig = composite_pmfs(xl.composite(pmf))
    >>> fig.axes[0].get_ylabel(), len([a for a in fig.axes if a.get_visible()])
    ('A', 4)
    """
    row = row if row is not None else ("subscale" if "subscale" in comp.dims else None)
    aux = [row] if row is not None else []
    factors = factor_dims(
        comp, item_dim=None, score_dim=score_dim, auxiliary=aux, what="the composite PMFs"
    )
    facet = preferred_factor(factors, facet)
    hue = preferred_factor(factors, hue, exclude=[facet])
    rest = [f for f in factors if f not in (facet, hue)]
    mix = comp.mean(rest) if rest else comp
    panels = text.labels(comp, facet) if facet is not None else ["all"]
    rows = text.labels(comp, row) if row is not None else [None]
    ncols = min(col_wrap, len(panels)) if row is None else len(panels)
    per_row = int(np.ceil(len(panels) / ncols))
    nrows = per_row * len(rows)
    fig, axes = subplots(
        nrows,
        ncols,
        figsize=(3.3 * ncols + 1.5, 2.4 * nrows + 0.6),
        sharex="row" if row is not None else True,
        sharey=True,
        squeeze=False,
        layout="constrained",
    )
    hl = text.labels(comp, hue) if hue is not None else [None]
    many = hue is not None and len(hl) > MAX_LEGEND
    if many:
        hl = [f"median of {len(hl)} levels", "10–90% of the levels"]
    for r, level in enumerate(rows):
        part = mix.isel({row: r}) if row is not None else mix
        y = np.asarray(part[score_dim].values, dtype=float)
        support = (part > 1e-6 * float(part.max())).any([d for d in part.dims if d != score_dim])
        ys = y[np.asarray(support.values)]
        lo, hi = (ys.min(), ys.max()) if ys.size else (y.min(), y.max())
        if "score_min" in part.coords and "score_max" in part.coords:  # a subscale's range
            lo, hi = float(part["score_min"]), float(part["score_max"])
        pad = max(2.0, 0.05 * (hi - lo))
        cells = axes[r * per_row : (r + 1) * per_row].flat
        for i, (ax, name) in enumerate(zip(cells, panels, strict=False)):
            sub = part.isel({facet: i}) if facet is not None else part
            (_spread if many else _lines)(ax, sub, hue, y, hl, score_dim)
            if r == 0 or row is None:
                ax.set_title(name, fontsize="medium")
            ax.set_xlim(lo - pad, hi + pad)
            if level is not None and i == 0:
                ax.set_ylabel(level, fontsize="medium")
        for ax in list(cells)[len(panels) :]:
            ax.set_visible(False)
    fig.supxlabel(xlabel + " (dashed: expected score)")
    fig.supylabel("Probability" + (f" (rows: {text.title(row).lower()})" if row else ""))
    if hue is not None:
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, title=text.title(hue), loc="outside right center")
    if rest:
        fig.suptitle("Mixed over " + text.names(rest), fontsize="small")
    return fig


def _lines(ax: Axes, sub: xr.DataArray, hue: Hashable | None, y: np.ndarray,
           labels: list[Any], score_dim: Hashable) -> None:  # fmt: skip
    """A PMF per level of ``hue`` (filled beneath), its expected score dashed."""
    for j, (h, c) in enumerate(zip(labels, colors(len(labels)), strict=True)):
        p = sub.isel({hue: j}) if hue is not None else sub
        v = np.asarray(p.transpose(score_dim).values, dtype=float)
        ax.plot(y, v, color=c, lw=1.4, label=h)
        ax.fill_between(y, v, color=c, alpha=0.18, lw=0)
        ax.axvline(float((v * y).sum()), color=c, ls="--", lw=0.8)


def _spread(ax: Axes, sub: xr.DataArray, hue: Hashable, y: np.ndarray, labels: list[Any],
            score_dim: Hashable) -> None:  # fmt: skip
    """The median PMF over the levels of ``hue`` and its 10–90% band, the median's expected
    score dashed."""
    q = sub.quantile([0.1, 0.5, 0.9], dim=[hue]).transpose("quantile", score_dim).values
    ax.fill_between(y, q[0], q[2], color=OKABE_ITO[1], alpha=0.35, lw=0, label=labels[1])
    ax.plot(y, q[1], color=OKABE_ITO[0], lw=1.4, label=labels[0])
    ax.axvline(float((q[1] * y).sum() / q[1].sum()), color=OKABE_ITO[0], ls="--", lw=0.8)
