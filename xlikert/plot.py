"""Figures of the paper, from xlikert's results (matplotlib).

Every function takes already computed xarray/pandas objects (so it works on
any design), draws into ``ax`` (or a new figure) and returns the
:class:`matplotlib.figure.Figure`. Factor names come from the data (every dim
that is not a core or auxiliary dim of :mod:`xlikert.core.dims`; a dim with a
reserved name raises a ``DesignError``): where a figure picks its factors
itself, the model factor (:data:`xlikert.core.dims.MODEL_DIM`) comes first where it
exists, then the factors in dim order. Every argument after the data is
keyword-only.
Colours are the Okabe-Ito palette (colour-blind safe); continuous maps are
``cividis`` and the diverging ``RdBu_r`` (ColorBrewer, colour-blind safe).

============================  =================================================
function                      figure
============================  =================================================
:func:`failure_rate`          failure rate per (condition, item), by one factor
:func:`consensus`             Multivariate Consensus per condition, x by hue
:func:`composite_pmfs`        composite PMFs faceted by one factor, another as hue
:func:`effect_distributions`  main-effect PMFs of one factor, with E and SD
:func:`interaction_heatmap`   two-factor interaction E (and SD), in-group cells
:func:`human_vs_llm`          human samples vs LLM composites (mean +- SD)
:func:`standard_error`        SE of the N-sample estimator vs N
:func:`decoding_bias`         decoding bias vs temperature and vs top-p
:func:`flip_probability`      sign-flip probability vs exact effect size
============================  =================================================

Examples
--------
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> from xlikert import plot, sampling
>>> from xlikert.datasets import synthetic_pmf
>>> fig = plot.flip_probability(sampling.flip_probability(synthetic_pmf(n_items=3)))
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from .core.dims import DECODING_DIMS, factor_dims, preferred_factor
from .core.errors import DesignError

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "OKABE_ITO",
    "composite_pmfs",
    "consensus",
    "decoding_bias",
    "effect_distributions",
    "failure_rate",
    "flip_probability",
    "human_vs_llm",
    "interaction_heatmap",
    "offscreen",
    "standard_error",
]

#: Okabe & Ito (2008) colour-blind-safe qualitative palette (black last).
OKABE_ITO = (
    "#E69F00",
    "#56B4E9",
    "#009E73",
    "#0072B2",
    "#D55E00",
    "#CC79A7",
    "#F0E442",
    "#000000",
)
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: Whether figures are drawn as standalone Figure objects (:func:`offscreen`), in this context.
_OFFSCREEN: ContextVar[bool] = ContextVar("xlikert_plot_offscreen", default=False)
#: The keywords of ``subplots`` that place the axes (the others make the figure).
_GRID_KEYWORDS = frozenset(
    {"nrows", "ncols", "sharex", "sharey", "squeeze", "width_ratios", "height_ratios",
     "subplot_kw", "gridspec_kw"}
)  # fmt: skip


@contextlib.contextmanager
def offscreen() -> Iterator[None]:
    """Draw the block's figures as standalone :class:`~matplotlib.figure.Figure` objects.

    A figure made inside the block belongs to no pyplot backend: it opens no
    window, ``plt.show`` does not show it, and it is rendered by its own canvas
    when saved (``fig.savefig``: PNG by Agg). Nothing global changes (the
    backend, pyplot's figures); the setting is this context's own (threads and
    asyncio tasks started elsewhere are not affected) and ends with the block.
    :func:`xlikert.report.write_report` draws its figures so.

    Yields
    ------
    None

    Examples
    --------
    >>> from xlikert import plot, sampling
    >>> from xlikert.datasets import synthetic_pmf
    >>> with plot.offscreen():
    ...     fig = plot.flip_probability(sampling.flip_probability(synthetic_pmf(n_items=3)))
    >>> fig.canvas.manager is None  # no pyplot window behind it
    True
    """
    token = _OFFSCREEN.set(True)
    try:
        yield
    finally:
        _OFFSCREEN.reset(token)


# --------------------------------------------------------------------------- helpers
def _plt():
    import matplotlib.pyplot as plt

    return plt


def _colors(n: int) -> list[str]:
    return [OKABE_ITO[i % len(OKABE_ITO)] for i in range(n)]


def _labels(obj: xr.DataArray, dim: Hashable) -> list[str]:
    return (
        [str(v) for v in obj[dim].values]
        if dim in obj.coords
        else [str(i) for i in range(obj.sizes[dim])]
    )


def _title(name: Hashable | None) -> str:
    return "" if name is None else str(name).replace("_", " ").capitalize()


def _subplots(*args: Any, **kwargs: Any) -> tuple[Figure, Any]:
    """``plt.subplots``; inside :func:`offscreen`, a standalone figure's subplots."""
    if not _OFFSCREEN.get():
        return _plt().subplots(*args, **kwargs)
    from matplotlib.figure import Figure

    fig = Figure(**{k: v for k, v in kwargs.items() if k not in _GRID_KEYWORDS})
    return fig, fig.subplots(*args, **{k: v for k, v in kwargs.items() if k in _GRID_KEYWORDS})


def _new_ax(ax: Axes | None, figsize=(6.4, 3.6)) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig, ax = _subplots(figsize=figsize, layout="constrained")
    return fig, ax


def _rotate(ax: Axes, labels: Sequence[str]) -> None:
    if max((len(s) for s in labels), default=0) * len(labels) > 40:
        for t in ax.get_xticklabels():
            t.set_rotation(30)
            t.set_horizontalalignment("right")


def _collapse_note(dims: Sequence[Hashable]) -> str:
    return f" (mean over {', '.join(map(str, dims))})" if dims else ""


# --------------------------------------------------------------------------- constraint
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
    plt = _plt()
    fig, ax = _new_ax(ax)
    factors = factor_dims(fr, score_dim=None, what="the failure rates")
    by = preferred_factor(factors, by)
    size = None
    if by is not None and f"{by}_size" in fr.coords:
        size = np.asarray(fr.coords[f"{by}_size"].values, dtype=float)
    groups = [fr.sel({by: lv}) for lv in fr[by].values] if by is not None else [fr]
    labels = _labels(fr, by) if by is not None else ["all"]
    rng = np.random.default_rng(0)  # jitter only: a drawing aid, not a result
    cmap = plt.get_cmap("cividis")
    norm = plt.Normalize(np.nanmin(size), np.nanmax(size)) if size is not None else None
    n_floor = 0
    for i, g in enumerate(groups):
        v = np.asarray(g.values, dtype=float).ravel()
        n_floor += int(np.sum(v < floor))
        v = np.maximum(v, floor)
        x = i + rng.uniform(-0.28, 0.28, v.size)
        color = cmap(norm(size[i])) if size is not None else OKABE_ITO[3]
        ax.scatter(x, v, s=14, alpha=0.65, color=color, edgecolors="none")
        ax.hlines(np.median(v), i - 0.35, i + 0.35, color="black", lw=2)
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)), labels)
    _rotate(ax, labels)
    ax.set_xlabel(_title(by))
    ylabel = "Failure rate (1 − valid mass)"
    if n_floor:
        ylabel += f"\n{n_floor} values < {floor:g} drawn at {floor:g}"
    ax.set_ylabel(ylabel)
    if size is not None:
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=norm)
        fig.colorbar(sm, ax=ax, label=f"{_title(by)} size")
    ax.set_title("Constraint: failure rate per condition and item (bar: median)")
    return fig


# --------------------------------------------------------------------------- consensus
def consensus(
    cns: xr.DataArray,
    *,
    x: Hashable | None = None,
    hue: Hashable | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Multivariate Consensus as grouped bars: ``x`` groups, ``hue`` bars.

    Further factors are averaged and their range (min to max) is drawn as an
    error bar. ``x`` defaults to the model factor (:data:`xlikert.core.dims.MODEL_DIM`)
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
    fig, ax = _new_ax(ax)
    factors = factor_dims(cns, item_dim=None, score_dim=None, what="the Consensus")
    x = preferred_factor(factors, x)
    hue = preferred_factor(factors, hue, exclude=[x])
    rest = [f for f in factors if f not in (x, hue)]
    mean = cns.mean(rest) if rest else cns
    lo = cns.min(rest) if rest else None
    hi = cns.max(rest) if rest else None
    xl = _labels(cns, x) if x is not None else ["all"]
    hl = _labels(cns, hue) if hue is not None else [None]
    width = 0.8 / len(hl)
    for j, (h, c) in enumerate(zip(hl, _colors(len(hl)), strict=True)):
        sel = {hue: cns[hue].values[j]} if hue is not None else {}
        vals = np.atleast_1d(mean.sel(sel).values) if sel else np.atleast_1d(mean.values)
        pos = np.arange(len(xl)) - 0.4 + width * (j + 0.5)
        yerr = None
        if rest:
            lv = np.atleast_1d(lo.sel(sel).values if sel else lo.values)
            hv = np.atleast_1d(hi.sel(sel).values if sel else hi.values)
            yerr = np.vstack([vals - lv, hv - vals])
        ax.bar(pos, vals, width, color=c, label=h, yerr=yerr, capsize=2, edgecolor="white")
    ax.set_xticks(range(len(xl)), xl)
    _rotate(ax, xl)
    ax.set_ylim(0, 1.0)
    ax.set_ylabel("Consensus (Cns)")
    ax.set_xlabel(_title(x))
    if hue is not None:
        ax.legend(title=_title(hue), loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    note = f"; bars: range over {', '.join(map(str, rest))}" if rest else ""
    ax.set_title(
        "Consensus: 1 = full agreement, 0 = polarised" + _collapse_note(rest) + note,
        fontsize="medium",
    )
    return fig


# --------------------------------------------------------------------------- construct
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
    marginal PMF). The expected score of each curve is a dashed tick. With a
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
    panels = _labels(comp, facet) if facet is not None else ["all"]
    rows = _labels(comp, row) if row is not None else [None]
    ncols = min(col_wrap, len(panels)) if row is None else len(panels)
    per_row = int(np.ceil(len(panels) / ncols))
    nrows = per_row * len(rows)
    fig, axes = _subplots(
        nrows,
        ncols,
        figsize=(3.3 * ncols + 1.5, 2.4 * nrows + 0.6),
        sharex="row" if row is not None else True,
        sharey=True,
        squeeze=False,
        layout="constrained",
    )
    hl = _labels(comp, hue) if hue is not None else [None]
    cols = _colors(len(hl))
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
            for j, h in enumerate(hl):
                p = sub.isel({hue: j}) if hue is not None else sub
                v = np.asarray(p.transpose(score_dim).values, dtype=float)
                ax.plot(y, v, color=cols[j], lw=1.4, label=h)
                ax.fill_between(y, v, color=cols[j], alpha=0.18, lw=0)
                ax.axvline(float((v * y).sum()), color=cols[j], ls="--", lw=0.8)
            if r == 0 or row is None:
                ax.set_title(name, fontsize="medium")
            ax.set_xlim(lo - pad, hi + pad)
            if level is not None and i == 0:
                ax.set_ylabel(level, fontsize="medium")
        for ax in list(cells)[len(panels) :]:
            ax.set_visible(False)
    fig.supxlabel(xlabel + " (dashed: expected score)")
    fig.supylabel("Probability" + (f" (rows: {_title(row).lower()})" if row else ""))
    if hue is not None:
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, title=_title(hue), loc="outside right center")
    if rest:
        fig.suptitle("Mixed over " + ", ".join(map(str, rest)), fontsize="small")
    return fig


def effect_distributions(
    effect_pmf: xr.DataArray,
    summary: xr.Dataset | None = None,
    *,
    effect_dim: Hashable = "effect",
    col_wrap: int = 4,
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
        Panels per row.

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
    names = _labels(effect_pmf, dim)
    ncols = min(col_wrap, len(names))
    nrows = int(np.ceil(len(names) / ncols))
    fig, axes = _subplots(
        nrows,
        ncols,
        figsize=(3.0 * ncols + 0.5, 2.3 * nrows + 0.5),
        sharex=True,
        sharey=True,
        squeeze=False,
        layout="constrained",
    )
    x = np.asarray(effect_pmf[effect_dim].values, dtype=float)
    keep = np.asarray((effect_pmf > 1e-6 * float(effect_pmf.max())).any(dim).values)
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
            title += f"\nE={float(s.E):+.2f}  SNR={float(s.SNR):.2f}  dPD={float(s.dPD):.2f}"
        ax.set_title(title, fontsize="small")
        ax.set_xlim(xs.min() - 1, xs.max() + 1)
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    fig.supxlabel(f"Main effect of {dim} (composite-score points; line: E, band: E ± SD)")
    fig.supylabel("Probability")
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
    plt = _plt()
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
    fig, ax = _new_ax(ax, figsize=(1.15 * nc + 2.6, 0.75 * nr + 1.8))
    lim = float(np.nanmax(np.abs(data.values))) or 1.0
    im = ax.imshow(data.values, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
    sd = SD.transpose(row, col).values if SD is not None else None
    for i in range(nr):
        for j in range(nc):
            v = float(data.values[i, j])
            txt = f"{v:+.2f}" + (f"\n±{sd[i, j]:.2f}" if sd is not None else "")
            color = "white" if abs(v) > 0.6 * lim else "black"
            ax.text(j, i, txt, ha="center", va="center", color=color, fontsize="small")
    if ingroup is not None:
        g = ingroup.transpose(row, col).values
        for i, j in zip(*np.nonzero(g), strict=True):
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2.5, ec="black"))
    cl, rl = _labels(data, col), _labels(data, row)
    ax.set_xticks(range(nc), cl)
    ax.set_yticks(range(nr), rl)
    _rotate(ax, cl)
    ax.set_xlabel(_title(col))
    ax.set_ylabel(_title(row))
    fig.colorbar(im, ax=ax, label="Interaction E (composite-score points)")
    t = f"{_title(col)} × {_title(row)} interaction"
    if SD is not None:
        t += " (E ± SD)"
    if ingroup is not None:
        t += "; outlined: in-group"
    ax.set_title(t, fontsize="medium")
    return fig


def human_vs_llm(
    table: pd.DataFrame, *, ax: Axes | None = None, ylabel: str = "Composite score"
) -> Figure:
    """Human samples vs LLM composites: expected score with ``±1 SD`` bars.

    ``table`` has columns ``group`` (``Human`` / ``LLM``), ``label``, ``mean``
    and ``sd`` (see :func:`xlikert.analysis.human.human_vs_llm`). Human SDs are
    population spread across respondents; LLM SDs are the dispersion of one
    model's PMF -- not commensurable, as the paper notes.

    Parameters
    ----------
    table : pandas.DataFrame
        The rows to draw, columns ``group``, ``label``, ``mean``, ``sd``.
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; default a new figure.
    ylabel : str
        The label of the score axis.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"group": ["Human", "LLM"], "label": ["survey", "model"],
    ...                   "mean": [60.0, 45.0], "sd": [20.0, 5.0]})
    >>> human_vs_llm(t).axes[0].get_ylabel()
    'Composite score\\n(point: E, bar: ±1 SD)'
    """
    fig, ax = _new_ax(ax, figsize=(7.0, 3.8))
    xs, labels, pos = [], [], 0
    groups = list(dict.fromkeys(table["group"]))
    styles = {g: (c, m) for g, c, m in zip(groups, ["#000000", *OKABE_ITO], _MARKERS, strict=False)}
    for g in groups:
        sub = table[table["group"] == g]
        x = np.arange(pos, pos + len(sub))
        color, marker = styles[g]
        ax.errorbar(
            x,
            sub["mean"],
            yerr=sub["sd"],
            fmt=marker,
            color=color,
            capsize=4,
            ms=6,
            label=g,
            lw=1.3,
        )
        xs.extend(x)
        labels.extend(sub["label"].astype(str))
        pos += len(sub) + 1  # a gap between groups
    ax.set_xticks(xs, labels)
    for t in ax.get_xticklabels():
        t.set_rotation(35)
        t.set_horizontalalignment("right")
    ax.set_ylabel(ylabel + "\n(point: E, bar: ±1 SD)")
    ax.legend(loc="best")
    ax.grid(axis="y", alpha=0.3)
    return fig


# --------------------------------------------------------------------------- sampling cost
def standard_error(
    se: xr.DataArray, *, by: Hashable | None = None, ax: Axes | None = None
) -> Figure:
    """SE of the N-sample estimator vs N (log-log), one line per level of ``by``.

    ``se`` is :func:`xlikert.analysis.cost.standard_error` output ``(*factors, n)``.
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
    fig, ax = _new_ax(ax)
    factors = factor_dims(se, item_dim=None, score_dim=None, auxiliary=["n"], what="the SE")
    by = preferred_factor(factors, by) if factors else None
    rest = [f for f in factors if f != by]
    n = np.asarray(se["n"].values, dtype=float)
    lv = _labels(se, by) if by is not None else ["all"]
    for j, (name, c) in enumerate(zip(lv, _colors(len(lv)), strict=True)):
        s = se.isel({by: j}) if by is not None else se
        mean = s.mean(rest) if rest else s
        ax.plot(n, mean.values, color=c, marker=_MARKERS[j % len(_MARKERS)], label=name, lw=1.4)
        if rest:
            ax.fill_between(n, s.min(rest).values, s.max(rest).values, color=c, alpha=0.15, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Samples per condition N")
    ax.set_ylabel("SE (composite-score points)")
    ax.grid(True, which="major", alpha=0.3)
    if by is not None:
        ax.legend(title=_title(by), fontsize="small")
    note = f"; band: range over {', '.join(map(str, rest))}" if rest else ""
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
        The bias of :func:`xlikert.analysis.cost.decoding_bias`,
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
    fig, axes = _subplots(1, 2, figsize=(10, 3.8), sharey=True, layout="constrained")
    factors = factor_dims(
        bias, item_dim=None, score_dim=None, auxiliary=DECODING_DIMS, what="the bias"
    )
    by = preferred_factor(factors, by) if factors else None
    rest = [f for f in factors if f != by]
    lv = _labels(bias, by) if by is not None else ["all"]
    for ax, param, other in zip(
        axes, ("temperature", "top_p"), ("top_p", "temperature"), strict=True
    ):
        x = np.asarray(bias[param].values, dtype=float)
        for j, (name, c) in enumerate(zip(lv, _colors(len(lv)), strict=True)):
            b = bias.isel({by: j}) if by is not None else bias
            red = [other, *rest]
            label = name
            if consensus is not None and by is not None:
                label += f" (Cns {float(consensus.isel({by: j}).mean()):.2f})"
            ax.plot(
                x,
                b.mean(red).values,
                color=c,
                marker=_MARKERS[j % len(_MARKERS)],
                label=label,
                lw=1.4,
            )
            ax.fill_between(x, b.min(red).values, b.max(red).values, color=c, alpha=0.12, lw=0)
        ax.axhline(0, color="0.3", lw=0.8, ls=":")
        ax.set_xlabel("Temperature" if param == "temperature" else "top-p")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Bias of E[composite]\n(composite-score points)")
    if by is not None:
        handles, labels = axes[1].get_legend_handles_labels()
        # below the panels: a legend beside them would share the top row with the title
        fig.legend(
            handles,
            labels,
            title=_title(by),
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

    ``flips`` is :func:`xlikert.analysis.cost.flip_probability` output. Main effects
    are filled markers, interactions hollow.

    Parameters
    ----------
    flips : pandas.DataFrame
        The table of :func:`xlikert.analysis.cost.flip_probability`.
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
    fig, ax = _new_ax(ax)
    budgets = sorted(flips["n"].unique())
    for j, (nv, c) in enumerate(zip(budgets, _colors(len(budgets)), strict=True)):
        sub = flips[flips["n"] == nv]
        x = sub["E"].abs().to_numpy()
        m = _MARKERS[j % len(_MARKERS)]
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
            ax.set_xscale("symlog", linthresh=max(float(pos.min()), 1e-3))
    ax.set_ylim(-0.02, 0.52)
    ax.set_xlabel("|E exact| (composite-score points)")
    ax.set_ylabel("P(sign flip)")
    ax.grid(alpha=0.3)
    ax.legend(title="filled: main effect\nhollow: interaction", fontsize="small")
    ax.set_title("Sign flips of a sampling study (normal approximation)", fontsize="medium")
    return fig
