"""Figure of human samples against the models (:mod:`xlikert.analysis.human`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from . import text
from .canvas import MARKER_SHAPES, OKABE_ITO, new_ax

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["human_vs_llm"]


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
    fig, ax = new_ax(ax, figsize=(7.0, 3.8))
    xs: list[int] = []
    labels: list[str] = []
    pos = 0
    groups = list(dict.fromkeys(table["group"]))
    styles = {
        g: (c, m) for g, c, m in zip(groups, ["#000000", *OKABE_ITO], MARKER_SHAPES, strict=False)
    }
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
            label=text.escape(g),
            lw=1.3,
        )
        xs.extend(x.tolist())
        labels.extend(text.escape(v) for v in sub["label"])
        pos += len(sub) + 1  # a gap between groups
    ax.set_xticks(xs, labels)
    for t in ax.get_xticklabels():
        t.set_rotation(35)
        t.set_horizontalalignment("right")
    ax.set_ylabel(ylabel + "\n(point: E, bar: ±1 SD)")
    ax.legend(loc="best")
    ax.grid(axis="y", alpha=0.3)
    return fig
