"""What the figures write: labels from the data, shown as text.

A factor's name, its levels, item ids and subscale names are data: any string. matplotlib
reads a string with two ``$`` as mathtext (``"$x$"`` is drawn as an italic *x*, and
``"$\\x$"`` fails to draw), and it hides a legend entry whose label starts with ``_``.
:func:`escape` makes such a string plain text for matplotlib, with its math parsing left
on, so that the axes' own labels (a log axis's ``10⁻¹``, written as mathtext) still render.
Every text of a figure that is built from data goes through :func:`escape` (or
:func:`labels`, :func:`title`, :func:`names`, which call it).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING

import xarray as xr

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = [
    "budget_ticks",
    "collapse_note",
    "escape",
    "labels",
    "names",
    "number",
    "rotate",
    "symlog_ticks",
    "title",
]

#: A zero-width space: put before a label that starts with ``_`` so that matplotlib's
#: legend does not take it for a hidden artist's label.
_ZERO_WIDTH = "\u200b"


def escape(value: object) -> str:
    """``value`` as a string that matplotlib draws as it is.

    Every ``$`` becomes ``\\$`` (matplotlib's escaped dollar, drawn as ``$``) while
    matplotlib parses math (``rcParams["text.parse_math"]``, on by default); a leading
    ``_`` gets a zero-width space before it (a legend would drop the entry otherwise).

    Parameters
    ----------
    value : object
        A label from the data (a factor level, factor name, item id, ...).

    Returns
    -------
    str
        The text to give matplotlib.

    Examples
    --------
    >>> escape("US $ & <img>")
    'US \\\\$ & <img>'
    >>> escape("_hidden")[1:]
    '_hidden'
    """
    import matplotlib

    text = str(value)
    if matplotlib.rcParams["text.parse_math"] and not matplotlib.rcParams["text.usetex"]:
        text = text.replace("$", r"\$")
    return _ZERO_WIDTH + text if text.startswith("_") else text


def labels(obj: xr.DataArray, dim: Hashable) -> list[str]:
    """The levels of ``dim`` as figure text (:func:`escape`); positions where it has none."""
    if dim in obj.coords:
        return [escape(v) for v in obj[dim].values]
    return [str(i) for i in range(obj.sizes[dim])]


def title(name: Hashable | None) -> str:
    """A dim's name as an axis title: underscores as spaces, capitalised, escaped."""
    return "" if name is None else escape(str(name).replace("_", " ").capitalize())


def names(dims: Iterable[Hashable]) -> str:
    """Dim names as figure text, comma separated."""
    return ", ".join(escape(d) for d in dims)


def collapse_note(dims: Sequence[Hashable]) -> str:
    """`` (mean over a, b)`` for the dims a figure averages over; empty for none."""
    return f" (mean over {names(dims)})" if dims else ""


def rotate(ax: Axes, ticks: Sequence[str], *, angle: float = 30) -> None:
    """Slant the x tick labels of ``ax`` when they are too long to stand side by side."""
    if max((len(s) for s in ticks), default=0) * len(ticks) > 40:
        for t in ax.get_xticklabels():
            t.set_rotation(angle)
            t.set_horizontalalignment("right")


def budget_ticks(ax: Axes, budgets: Iterable[float], *, most: int = 8) -> None:
    """Put the x ticks of a log axis of sampling budgets at the budgets themselves.

    A budget below 10,000 is written as a number, a power of ten from 10,000 on as
    ``10⁴`` (mathtext), any other with thousands separators; the minor ticks are left
    unlabelled. With more than ``most`` budgets matplotlib's decades stay (labels side by
    side would run into one another).
    """
    from matplotlib.ticker import NullFormatter

    values = sorted({int(v) for v in budgets if v > 0})
    if not values or len(values) > most:
        return
    ax.set_xticks(values, [_budget(v) for v in values])
    ax.xaxis.set_minor_formatter(NullFormatter())


def _budget(v: int) -> str:
    k = len(str(v)) - 1
    if v < 10_000:
        return str(v)
    return f"$10^{{{k}}}$" if v == 10**k else f"{v:,}"


def symlog_ticks(ax: Axes, linthresh: float, top: float) -> None:
    """Label a symmetric log x axis that spans under two decades at 1, 2, 5 steps.

    matplotlib labels the decades only: from ``linthresh`` to ``top`` within two decades
    that is one or two numbers. The steps are written as plain numbers (``0.2``, ``0.5``,
    ``1``, ``2``); a wider axis keeps its decades (``10⁻¹``, ``10⁰``, ...).
    """
    from matplotlib.ticker import FuncFormatter, SymmetricalLogLocator

    if top <= 0 or top / linthresh >= 100:
        return
    locator = SymmetricalLogLocator(linthresh=linthresh, base=10, subs=[1.0, 2.0, 5.0])
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v, "g")))


def number(value: float, spec: str) -> str:
    """``value`` formatted by ``spec``, with a true minus sign (``−``, as on the axes)."""
    return format(value, spec).replace("-", "\u2212")
