"""What every figure of a report is checked for: no collapsed axes, a legend a reader can read.

:func:`watch_figures` records every figure a report draws (by its file name), laid out as it is
saved; :func:`figure_faults` lists what is wrong with one: an axes narrower or lower than
:data:`MIN_AXES_PX`, a legend of more than :data:`MAX_LEGEND` entries, a layout matplotlib
gave up on ("constrained_layout not applied").
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

__all__ = ["MAX_LEGEND", "MIN_AXES_PX", "figure_faults", "watch_figures"]

#: The most entries a legend may have (a legend per person is not one).
MAX_LEGEND = 12
#: The least width and height of an axes with data, in pixels at the saved dpi.
MIN_AXES_PX = 40


def figure_faults(fig: Any) -> list[str]:
    """What is wrong with a drawn figure (empty: nothing)."""
    faults = []
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        fig.draw_without_rendering()  # the layout and every artist, as savefig draws them
    faults += [str(w.message) for w in said if "constrained_layout" in str(w.message)]
    scale = 130 / fig.dpi  # the report saves at dpi 130
    for ax in fig.axes:
        if (
            not ax.get_visible()
            or not ax.axison
            or not (ax.lines or ax.patches or ax.collections or ax.images)
        ):
            continue  # an empty facet, a panel turned off
        if getattr(ax, "_colorbar", None) is not None:
            continue  # a colour bar is narrow by design
        box = ax.get_window_extent()
        if min(box.width, box.height) * scale < MIN_AXES_PX:
            faults.append(
                f"axes {ax.get_title()!r} collapsed to {box.width:.0f}x{box.height:.0f} px"
            )
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    for legend in (lg for lg in legends if lg is not None):
        n = len(legend.get_texts())
        if n > MAX_LEGEND:
            faults.append(f"a legend of {n} entries (at most {MAX_LEGEND})")
    return faults


@contextlib.contextmanager
def watch_figures() -> Iterator[dict[str, list[str]]]:
    """Within: every figure a report saves, by name -> its faults (:func:`figure_faults`)."""
    from xlikert.report import page

    found: dict[str, list[str]] = {}
    add = page.Section.figure

    def watched(self, fig, out, name, caption):
        if not page.DRAW_FIGURES.get():
            return add(self, fig, out, name, caption)
        made = fig() if callable(fig) else fig
        found[name] = figure_faults(made)
        return add(self, made, out, name, caption)

    with warnings.catch_warnings():
        page.Section.figure = watched
        try:
            yield found
        finally:
            page.Section.figure = add
