"""Figures of the alignment with human respondents (:mod:`xlikert.analysis.alignment`): the
model's PMFs over the humans', and representativeness with its interval and noise ceiling."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from ..analysis.alignment import silicon_population
from ..analysis.human import human_marginal
from ..core.dims import factor_dims, preferred_factor
from . import text
from .canvas import MAX_LEGEND, OKABE_ITO, colors, legend_inches, subplots

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["human_pmfs", "representativeness"]


def human_pmfs(model: xr.DataArray, human: xr.Dataset, *, by: Hashable | None = None) -> Figure:
    """Model PMFs (lines, one per level of ``by``) over human PMFs (bars), per item and group.

    One row of panels per item, on the item's own points (``score_min`` to ``score_max``
    where the human PMFs have them; a nominal item's points are not joined by a line).
    The first column is all respondents (the model mixed over its persona factors with
    the respondents' counts, :func:`xlikert.silicon_population`), then one column per
    level of the humans' first group attribute (the model's persona of that level, or
    the model as it is where it has no such persona factor).

    Parameters
    ----------
    model : xr.DataArray
        Item PMFs ``(by, [persona factors named like the human groups], item, score)``.
    human : xr.Dataset
        Human PMFs (:func:`xlikert.human_pmf`) on the same items and score axis.
    by : hashable, optional
        The factor of the lines (default the model factor, else the first factor that is
        not a human group).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Raises
    ------
    DesignError
        ``by`` not a factor of ``model``, or a dim with a name xlikert reserves.

    Examples
    --------
    >>> import xlikert as xl
    >>> people = pd.DataFrame({"q1": [1, 2, 2, 5], "q2": [3, 4, 4, 5]})
    >>> human = xl.human_pmf(people, ["q1", "q2"], scale=(1, 5))
    >>> model = xl.datasets.synthetic_pmf({"model": 2}, n_items=2, scale=(1, 5))
    >>> fig = human_pmfs(model.assign_coords(item=["q1", "q2"]), human)
    >>> len(fig.axes)
    2
    """
    groups = [d for d in human["n"].dims if d != "item"]
    factors = factor_dims(model, auxiliary=groups, what="the model PMFs")
    by = preferred_factor([f for f in factors if f not in groups], by)
    first = groups[0] if groups else None
    rest = [d for d in groups if d != first]
    cols: list[tuple[str, xr.DataArray, xr.DataArray]] = [
        ("all respondents", human_marginal(human).pmf, silicon_population(model, human))
    ]
    if first is not None:
        h1 = human_marginal(human, dim=rest) if rest else human
        m1 = silicon_population(model, human, dim=rest) if rest else model
        # a model without the persona factor is the same model beside every group
        pick = (lambda v: m1.sel({first: v})) if first in m1.dims else (lambda v: m1)
        cols += [
            (f"{text.escape(first)}={text.escape(v)}", h1.pmf.sel({first: v}), pick(v))
            for v in human[first].values
        ]
    items = list(human["item"].values)
    levels = model[by].values if by is not None else [None]
    labels = _line_labels(levels, by)
    fig, axes = subplots(
        len(items),
        len(cols),
        figsize=(
            2.6 * len(cols) + 0.4 + legend_inches(labels, text.title(by)),
            2.0 * len(items) + 0.6,
        ),
        squeeze=False,
        sharey="row",
        layout="constrained",
    )
    scores = human["score"].values
    nominal = model.coords.get("nominal")
    for i, item in enumerate(items):
        y = scores
        if "score_min" in human.coords and "score_max" in human.coords:  # its own points
            lo, hi = (float(human[c].sel(item=item)) for c in ("score_min", "score_max"))
            y = scores[(scores >= lo) & (scores <= hi)]
        # a nominal item's answers have no order: points, not a line through them
        style = "none" if nominal is not None and bool(nominal.sel(item=item)) else "-"
        for j, (title, h, m) in enumerate(cols):
            ax = axes[i, j]
            ax.bar(y, h.sel(item=item, score=y).values, color="#bbbbbb", label="humans")
            _model_lines(ax, m.sel(item=item, score=y), y, by, levels, labels, style)
            if i == 0:
                ax.set_title(title, fontsize=9)
            if j == 0:
                ax.set_ylabel(text.escape(item), fontsize=9)
            ax.set_xticks(y)
            ax.tick_params(labelsize=8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, title=text.title(by), fontsize=8, loc="outside right upper")
    fig.supxlabel("Score", fontsize=9)
    fig.supylabel("Probability (rows: items)", fontsize=9)
    return fig


def _line_labels(levels: Any, by: Hashable | None) -> list[str]:
    """The legend entries of :func:`human_pmfs`' lines: a level each, or (past
    :data:`~.canvas.MAX_LEGEND` levels) their median and band."""
    if by is None:
        return ["LLM"]
    if len(levels) > MAX_LEGEND:
        return [f"median of {len(levels)} {text.escape(by)} levels", "10–90% of the levels"]
    return [text.escape(v) for v in levels]


def _model_lines(ax: Axes, m: xr.DataArray, y: Any, by: Hashable | None, levels: Any,
                 labels: list[str], style: str) -> None:  # fmt: skip
    """The model's PMF over ``y``: a line per level of ``by``, or past
    :data:`~.canvas.MAX_LEGEND` levels their median and 10–90% band."""
    ms = 3 if style == "-" else 5
    if by is None or len(levels) <= MAX_LEGEND:
        for k, (level, c) in enumerate(zip(levels, colors(len(levels)), strict=True)):
            line = m if level is None else m.sel({by: level})
            ax.plot(y, line.values, marker="o", ms=ms, ls=style, color=c, label=labels[k])
        return
    q = m.quantile([0.1, 0.5, 0.9], dim=[by]).transpose("quantile", ...).values
    ax.fill_between(y, q[0], q[2], color=OKABE_ITO[0], alpha=0.3, lw=0, label=labels[1])
    ax.plot(y, q[1], marker="o", ms=ms, ls=style, color=OKABE_ITO[0], label=labels[0])


def representativeness(table: pd.DataFrame, *, by: Hashable | None = None) -> Figure:
    """Representativeness per (group, item), one point with its interval per level of ``by``.

    A vertical bar marks each row's noise ceiling (two independent human samples of
    the same size).

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`xlikert.analysis.alignment.alignment_table` output (columns ``by``,
        ``group``, ``item``, ``metric``, ``estimate``, ``lower``, ``upper``, ``ceiling``);
        its ``representativeness`` rows are drawn.
    by : hashable, optional
        The column of the points' levels (default the table's first column).

    Returns
    -------
    matplotlib.figure.Figure
        The figure.

    Examples
    --------
    >>> t = pd.DataFrame({"model": ["a", "b"], "group": "all respondents", "item": "q1",
    ...                   "metric": "representativeness", "estimate": [0.8, 0.7],
    ...                   "lower": [0.75, 0.6], "upper": [0.85, 0.8], "ceiling": 0.95})
    >>> representativeness(t).axes[0].get_xlabel()
    'Representativeness 1 − W1/(K − 1)'
    """
    by = table.columns[0] if by is None else by
    rep = table[table.metric == "representativeness"]
    rows = list(dict.fromkeys(zip(rep.group, rep["item"], strict=True)))
    levels = list(dict.fromkeys(rep[by]))
    fig, ax = subplots(figsize=(7, 0.28 * len(rows) + 1.6), layout="constrained")
    pos = {row: k for k, row in enumerate(rows)}
    for j, (level, c) in enumerate(zip(levels, colors(len(levels)), strict=True)):
        sub = rep[rep[by] == level]
        yy = np.array([pos[(g, i)] for g, i in zip(sub.group, sub["item"], strict=True)], float)
        yy += (j - (len(levels) - 1) / 2) * 0.8 / max(len(levels), 1)
        err = [sub.estimate - sub.lower, sub.upper - sub.estimate]
        ax.errorbar(sub.estimate, yy, xerr=err, fmt="o", ms=3, color=c, label=text.escape(level))
    ceil = rep.drop_duplicates(["group", "item"])
    ax.scatter(
        ceil.ceiling,
        [pos[(g, i)] for g, i in zip(ceil.group, ceil["item"], strict=True)],
        marker="|",
        s=120,
        color="k",
        label="noise ceiling (two human samples)",
    )
    ticks = [f"{text.escape(g)} · {text.escape(i)}" for g, i in rows]
    ax.set_yticks(range(len(rows)), ticks, fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the table's first row on top
    ax.set_xlabel("Representativeness 1 − W1/(K − 1)")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(
        handles, labels, title=text.title(by), fontsize=7, loc="outside upper center", ncols=3
    )
    return fig
