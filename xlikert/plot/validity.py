"""Figure of :func:`xlikert.validity`: each reading's distance to the people, with its SE."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from ..core.dims import ELICITATION_DIM
from . import text
from .canvas import colors, subplots

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["reading_distances"]

_LABELS = {
    "wasserstein": "W1 to the people (score units)",
    "total_variation": "Total variation to the people",
    "jensen_shannon": "Jensen–Shannon divergence to the people (bits)",
}


def reading_distances(
    validity: xr.Dataset, *, metric: str = "wasserstein", dim: Hashable = ELICITATION_DIM,
    z: float = 1.96,
) -> Figure:  # fmt: skip
    """Each level's mean distance to the people over the items, ``± z SE``, per condition.

    One row per condition (every dim of ``overall`` but ``dim`` and ``metric``: model,
    language, group); one point per level; the closest level's point is filled, the
    others hollow. The SE is :func:`xlikert.validity`'s ``overall_se`` (an upper bound).

    Parameters
    ----------
    validity : xr.Dataset
        :func:`xlikert.validity`'s output.
    metric : str, keyword-only
        ``wasserstein``, ``total_variation`` or ``jensen_shannon``.
    dim : hashable, keyword-only
        The factor whose levels were compared.
    z : float, keyword-only
        The half-width of the bars in SEs.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Examples
    --------
    >>> import pandas as pd, xarray as xr, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"q": [1, 2, 2, 3] * 25}), ["q"], scale=(1, 3))
    >>> pmf = xr.DataArray([[[0.25, 0.5, 0.25]], [[0.6, 0.3, 0.1]]],
    ...                    dims=("elicitation", "item", "score"),
    ...                    coords={"elicitation": ["stated", "first_token"], "item": ["q"],
    ...                            "score": [1, 2, 3]})
    >>> reading_distances(xl.validity(pmf, h)).axes[0].get_xlabel()
    'W1 to the people (score units)'
    """
    v = validity.sel(metric=metric)
    mean = v["overall"].transpose(..., dim)
    se = v["overall_se"].transpose(*mean.dims)
    rows = [d for d in mean.dims if d != dim]
    stacked = mean.stack(_row=rows) if rows else mean.expand_dims(_row=[0])
    se_s = se.stack(_row=rows) if rows else se.expand_dims(_row=[0])
    best = v["closest"].stack(_row=rows) if rows else v["closest"].expand_dims(_row=[0])
    n_rows = stacked.sizes["_row"]
    levels = [str(x) for x in mean[dim].values]
    fig, ax = subplots(figsize=(7, 0.35 * n_rows * max(1, len(levels) / 3) + 1.6),
                       layout="constrained")  # fmt: skip
    for j, (level, c) in enumerate(zip(levels, colors(len(levels)), strict=True)):
        x = stacked.sel({dim: level}).transpose("_row").values
        err = z * se_s.sel({dim: level}).transpose("_row").values
        y = np.arange(n_rows) + (j - (len(levels) - 1) / 2) * 0.8 / len(levels)
        ax.errorbar(x, y, xerr=err, fmt="none", color=c, lw=1)
        is_best = best.transpose("_row").values == level
        face = [c if b else "none" for b in is_best]
        ax.scatter(x, y, s=16, edgecolors=c, facecolors=face, label=text.escape(level))
    ticks = (
        [" · ".join(text.escape(str(part)) for part in np.atleast_1d(r))
         for r in stacked["_row"].values] if rows else [""]
    )  # fmt: skip
    ax.set_yticks(range(n_rows), ticks, fontsize=7)
    ax.set_ylim(n_rows - 0.5, -0.5)
    ax.set_xlabel(_LABELS.get(metric, metric))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, title=f"{text.title(dim)} (filled: closest)", fontsize=7,
               loc="outside upper center", ncols=min(len(levels), 5))  # fmt: skip
    return fig
