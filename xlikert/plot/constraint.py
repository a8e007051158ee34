"""Figure of the constraint stage (:mod:`xlikert.analysis.constraint`): the failure rate."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from ..core.dims import factor_dims, preferred_factor
from . import text
from .canvas import OKABE_ITO, new_ax, pyplot

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["failure_rate"]


def failure_rate(
    fr: xr.DataArray, *, by: Hashable | None = None, ax: Axes | None = None, floor: float = 1e-16
) -> Figure:
    """Failure rate of every (condition, item), one jittered strip per level of ``by``.

    Log scale; exact zeros (and values below ``floor``) are drawn at ``floor``
    and counted in the label. A model-size coordinate on ``by`` (``model_size``)
    colours the points (cividis). The median of each strip is a black bar.

    Parameters
    ----------
    fr : xr.DataArray
        Failure rates ``(*factors, item)`` (``xl.failure_rate(ds)``).
    by : hashable, optional
        The factor on the x axis (default ``model`` or the first factor).
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; default a new figure.
    floor : float
        The smallest value drawn (log scale).

    Returns
    -------
    matplotlib.figure.Figure
        The figure (that of ``ax`` when given).

    Raises
    ------
    DesignError
        A factor given that is not a dim, or a dim with a name xlikert reserves
        (:mod:`xlikert.core.dims`).

    Examples
    --------
    >>> import xlikert as xl
    >>> ds = xl.datasets.synthetic_results(n_items=3)
    >>> fig = failure_rate(xl.failure_rate(ds))
    >>> fig.axes[0].get_xlabel(), fig.axes[0].get_yscale()
    ('Model', 'log')
    """
    plt = pyplot()
    fig, ax = new_ax(ax)
    factors = factor_dims(fr, score_dim=None, what="the failure rates")
    by = preferred_factor(factors, by)
    size = None
    if by is not None and f"{by}_size" in fr.coords:
        size = np.asarray(fr.coords[f"{by}_size"].values, dtype=float)
    groups = [fr.sel({by: lv}) for lv in fr[by].values] if by is not None else [fr]
    labels = text.labels(fr, by) if by is not None else ["all"]
    rng = np.random.default_rng(0)  # jitter only: a drawing aid, not a result
    cmap = plt.get_cmap("cividis")
    norm = plt.Normalize(np.nanmin(size), np.nanmax(size)) if size is not None else None
    n_floor = 0
    for i, g in enumerate(groups):
        v = np.asarray(g.values, dtype=float).ravel()
        n_floor += int(np.sum(v < floor))
        v = np.maximum(v, floor)
        x = i + rng.uniform(-0.28, 0.28, v.size)
        color = cmap(norm(size[i])) if size is not None and norm is not None else OKABE_ITO[3]
        ax.scatter(x, v, s=14, alpha=0.65, color=color, edgecolors="none")
        ax.hlines(np.median(v), i - 0.35, i + 0.35, color="black", lw=2)
    drawn = np.concatenate([np.asarray(g.values, dtype=float).ravel() for g in groups])
    drawn = np.maximum(drawn[np.isfinite(drawn)], floor)
    if drawn.size and drawn.max() <= drawn.min():  # one value throughout (every rate 0,
        ax.set_ylim(drawn.min() / 10, drawn.max() * 10)  # drawn at the floor): a decade round
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)), labels)
    text.rotate(ax, labels)
    ax.set_xlabel(text.title(by))
    ylabel = "Failure rate (1 − valid mass)"
    if n_floor:
        ylabel += f"\n{n_floor} values < {floor:g} drawn at {floor:g}"
    ax.set_ylabel(ylabel)
    if size is not None:
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=norm)
        fig.colorbar(sm, ax=ax, label=f"{text.title(by)} size")
    ax.set_title("Constraint: failure rate per condition and item (bar: median)")
    return fig
