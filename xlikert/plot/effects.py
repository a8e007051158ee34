"""Figures of the construct stage's decomposition (:mod:`xlikert.analysis.construct.effects`):
the main effects' PMFs and a two-factor interaction."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from ..core.dims import preferred_factor
from ..core.errors import DesignError
from . import text
from .canvas import MAX_LEGEND, OKABE_ITO, new_ax, pyplot, subplots

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["effect_distributions", "interaction_heatmap"]

#: The statistics in a main-effect panel's title, and their formats.
_STATS, _SPECS = ("E", "SNR", "dPD"), ("+.2f", ".2f", ".2f")


def effect_distributions(
    effect_pmf: xr.DataArray,
    summary: xr.Dataset | None = None,
    *,
    effect_dim: Hashable = "effect",
    col_wrap: int = 3,
) -> Figure:
    """PMFs of the main effects of one factor (``dec[factor].pmf``), one panel per level.

    Each panel marks ``E`` (solid) and ``E +- SD`` (shaded) and, with
    ``summary`` (a Dataset with ``E``, ``SD``, ``SNR``, ``dPD`` over the same
    level dim), titles the panel with them. Zero is a dotted line.

    Parameters
    ----------
    effect_pmf : xr.DataArray
        The effect PMFs of one factor, ``(level, effect_dim)``.
    summary : xr.Dataset, optional
        ``E``, ``SD``, ``SNR``, ``dPD`` over the same level dim (the node of
        :func:`xlikert.decompose`).
    effect_dim : keyword-only
        Name of the effect dim.
    col_wrap : keyword-only
        The most panels per row (the rows are filled evenly).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    DesignError
        ``effect_pmf`` with other dims than one level dim and ``effect_dim``.

    Examples
    --------
    >>> import xlikert as xl
    >>> dec = xl.decompose(xl.datasets.synthetic_pmf({"target": 3}, n_items=4))
    >>> fig = effect_distributions(dec["target"].pmf, dec["target"].dataset)
    >>> len([a for a in fig.axes if a.get_visible()])
    3
    """
    levels_dims = [d for d in effect_pmf.dims if d != effect_dim]
    if len(levels_dims) != 1:
        raise DesignError(
            f"effect_distributions needs the PMFs of one factor, dims (level, {effect_dim!r}); "
            f"got {tuple(effect_pmf.dims)}"
        )
    dim = levels_dims[0]
    if effect_pmf.sizes[dim] > MAX_LEGEND:  # a level per respondent: their distribution
        return _effect_spread(effect_pmf, dim, effect_dim)
    names = text.labels(effect_pmf, dim)
    nrows = int(np.ceil(len(names) / col_wrap))
    ncols = int(np.ceil(len(names) / nrows))  # rows as full as each other: 4 levels, 2 x 2
    fig, axes = subplots(
        nrows,
        ncols,
        figsize=(3.0 * ncols + 0.5, 2.3 * nrows + 0.5),
        sharex=True,
        sharey=True,
        squeeze=False,
        layout="constrained",
    )
    x = np.asarray(effect_pmf[effect_dim].values, dtype=float)
    keep = np.asarray((effect_pmf > 1e-6 * float(effect_pmf.max())).any([dim]).values)
    xs = x[keep] if keep.any() else x
    for i, name in enumerate(names):
        ax = axes.flat[i]
        v = np.asarray(effect_pmf.isel({dim: i}).values, dtype=float)
        e = float((v * x).sum())
        sd = float(np.sqrt(max((v * x**2).sum() - e**2, 0.0)))
        ax.axvspan(e - sd, e + sd, color=OKABE_ITO[1], alpha=0.2, lw=0)
        ax.plot(x, v, color="black", lw=1.2)
        ax.fill_between(x, v, color="0.55", alpha=0.5, lw=0)
        ax.axvline(e, color=OKABE_ITO[4], lw=1.4)
        ax.axvline(0, color="0.3", ls=":", lw=0.9)
        title = name
        if summary is not None and "SNR" in summary:
            s = summary.isel({dim: i})
            e_txt, snr, dpd = (
                text.number(float(s[k]), f) for k, f in zip(_STATS, _SPECS, strict=True)
            )
            title += f"\nE={e_txt}  SNR={snr}  dPD={dpd}"
        ax.set_title(title, fontsize="small")
        ax.set_xlim(xs.min() - 1, xs.max() + 1)
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    fig.supxlabel(
        f"Main effect of {text.escape(dim)} (composite-score points; line: E, band: E ± SD)"
    )
    fig.supylabel("Probability")
    return fig


def _effect_spread(effect_pmf: xr.DataArray, dim: Hashable, effect_dim: Hashable) -> Figure:
    """The main effects of many levels as their distribution: the median effect PMF with
    its 10–90% band over the levels, and a histogram of the levels' E."""
    x = np.asarray(effect_pmf[effect_dim].values, dtype=float)
    fig, (left, right) = subplots(1, 2, figsize=(9.0, 3.2), layout="constrained")
    q = effect_pmf.quantile([0.1, 0.5, 0.9], dim=[dim]).transpose("quantile", effect_dim).values
    left.fill_between(x, q[0], q[2], color=OKABE_ITO[1], alpha=0.35, lw=0,
                      label="10–90% of the levels")  # fmt: skip
    left.plot(x, q[1], color="black", lw=1.2, label="median")
    left.axvline(0, color="0.3", ls=":", lw=0.9)
    left.set_xlabel("Main effect (composite-score points)")
    left.set_ylabel("Probability")
    left.legend(fontsize="small")
    e = (effect_pmf * effect_pmf[effect_dim]).sum([effect_dim]).values.ravel()
    right.hist(e, bins=min(30, max(5, e.size // 10)), color=OKABE_ITO[3])
    right.axvline(0, color="0.3", ls=":", lw=0.9)
    right.set_xlabel("E of each level's main effect")
    right.set_ylabel("Levels")
    fig.suptitle(f"Main effects of the {effect_pmf.sizes[dim]} levels of {text.escape(dim)}",
                 fontsize="medium")  # fmt: skip
    return fig


def interaction_heatmap(
    E: xr.DataArray,
    SD: xr.DataArray | None = None,
    *,
    row: Hashable | None = None,
    col: Hashable | None = None,
    ingroup: xr.DataArray | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Heatmap of a two-factor interaction's ``E`` with the value (and SD) in each cell.

    Diverging ``RdBu_r`` centred at 0 with symmetric limits. ``ingroup`` (a
    boolean array over the same two dims) outlines cells, e.g. a model rated
    on its own country of origin.

    Parameters
    ----------
    E : xr.DataArray
        The interaction's expected effects, two dims (``dec["a:b"].E``).
    SD : xr.DataArray, optional
        Their SDs, written under each value.
    row, col : hashable, optional
        The dims of the rows and columns; default the model factor on the
        columns.
    ingroup : xr.DataArray, optional
        Boolean over the same dims: the cells to outline.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; default a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    DesignError
        ``E`` not two-dimensional, or a dim with a name xlikert reserves.

    Examples
    --------
    >>> import xlikert as xl
    >>> dec = xl.decompose(xl.datasets.synthetic_pmf({"model": 2, "target": 3}, n_items=4))
    >>> fig = interaction_heatmap(dec["model:target"].E, dec["model:target"].SD)
    >>> fig.axes[0].get_ylabel(), fig.axes[0].get_xlabel()
    ('Target', 'Model')
    """
    plt = pyplot()
    factors = list(E.dims)
    if len(factors) != 2:
        raise DesignError(f"interaction_heatmap needs a 2-D effect, got dims {tuple(E.dims)}")
    if row is None:  # the model factor (or the first) across, the other down
        col = preferred_factor(factors, col)
        row = preferred_factor(factors, row, exclude=[col])
    else:
        row = preferred_factor(factors, row)
        col = preferred_factor(factors, col, exclude=[row])
    data = E.transpose(row, col)
    nr, nc = data.shape
    many = max(nr, nc) > MAX_LEGEND  # a level per respondent: colours only, ticks thinned
    width = min(1.15 * nc + 2.6, 14.0) + (2.0 if many else 0.0)  # room for the title
    fig, ax = new_ax(ax, figsize=(width, min(0.75 * nr + 1.8, 10.0)))
    lim = float(np.nanmax(np.abs(data.values))) or 1.0
    im = ax.imshow(data.values, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
    sd = SD.transpose(row, col).values if SD is not None else None
    for i in range(nr if not many else 0):
        for j in range(nc):
            v = float(data.values[i, j])
            txt = text.number(v, "+.2f") + (f"\n±{sd[i, j]:.2f}" if sd is not None else "")
            color = "white" if abs(v) > 0.6 * lim else "black"
            ax.text(j, i, txt, ha="center", va="center", color=color, fontsize="small")
    if ingroup is not None:
        g = ingroup.transpose(row, col).values
        for i, j in zip(*np.nonzero(g), strict=True):
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2.5, ec="black"))
    cl, rl = text.labels(data, col), text.labels(data, row)
    cs, rs = (max(1, -(-n // MAX_LEGEND)) for n in (nc, nr))  # every level up to 12 ticks
    ax.set_xticks(range(0, nc, cs), cl[::cs])
    ax.set_yticks(range(0, nr, rs), rl[::rs])
    cl = cl[::cs]
    text.rotate(ax, cl)
    ax.set_xlabel(text.title(col))
    ax.set_ylabel(text.title(row))
    fig.colorbar(im, ax=ax, label="Interaction E (composite-score points)")
    t = f"{text.title(col)} × {text.title(row)} interaction"
    if SD is not None:
        t += " (E ± SD)"
    if ingroup is not None:
        t += "; outlined: in-group"
    if many:
        t += f"; {nr} × {nc} cells, values in colour only"
    ax.set_title(t, fontsize="medium")
    return fig
