"""What every figure is drawn on: the palette, the markers, new figures and axes.

Colours are the Okabe-Ito palette (colour-blind safe); continuous maps are ``cividis``
and the diverging ``RdBu_r`` (ColorBrewer, colour-blind safe). Inside :func:`offscreen`
a new figure is a standalone :class:`~matplotlib.figure.Figure` (no pyplot window).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "MARKER_SHAPES",
    "MAX_LEGEND",
    "OKABE_ITO",
    "colors",
    "legend_inches",
    "new_ax",
    "offscreen",
    "pyplot",
    "subplots",
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
#: The matplotlib marker shapes of the lines and points of one level each, in order.
MARKER_SHAPES = ("o", "s", "^", "D", "v", "P", "X", "*")
#: The most levels a figure draws one by one, each with a legend entry; past it (a factor of
#: one level per respondent) a figure draws their distribution: a median and a band.
MAX_LEGEND = 12
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


def pyplot() -> Any:
    """:mod:`matplotlib.pyplot`, imported on first use (``import xlikert`` stays light)."""
    import matplotlib.pyplot as plt

    return plt


def colors(n: int) -> list[str]:
    """The first ``n`` colours of :data:`OKABE_ITO`, repeated past its end."""
    return [OKABE_ITO[i % len(OKABE_ITO)] for i in range(n)]


def legend_inches(labels: Any, title: str = "", fontsize: float = 8.0) -> float:
    """The width a legend of ``labels`` takes beside the axes, in inches (a figure made
    that much wider keeps its axes' width: its panels do not collapse to slivers).

    Examples
    --------
    >>> round(legend_inches(["m1", "a much longer model name"]), 2)
    2.04
    """
    chars = max([len(str(x)) for x in labels] + [len(str(title)), 4])
    return 0.6 + chars * fontsize * 0.0075


def subplots(*args: Any, **kwargs: Any) -> tuple[Figure, Any]:
    """``plt.subplots``; inside :func:`offscreen`, a standalone figure's subplots."""
    if not _OFFSCREEN.get():
        return pyplot().subplots(*args, **kwargs)
    from matplotlib.figure import Figure

    fig = Figure(**{k: v for k, v in kwargs.items() if k not in _GRID_KEYWORDS})
    return fig, fig.subplots(*args, **{k: v for k, v in kwargs.items() if k in _GRID_KEYWORDS})


def new_ax(ax: Axes | None, figsize: tuple[float, float] = (6.4, 3.6)) -> tuple[Figure, Axes]:
    """``ax`` and its figure, or a new figure of ``figsize`` with one axes."""
    if ax is not None:  # on a subfigure, the subfigure (its figure's methods): typed as one
        return cast("Figure", ax.figure), ax
    fig, ax = subplots(figsize=figsize, layout="constrained")
    return fig, ax
