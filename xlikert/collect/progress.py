"""Progress inside a long cell: what a certified reader has read so far, for a progress bar.

A cell read by a tree of forward passes (own words: :mod:`xlikert.collect.own_words`;
sequential administration: :mod:`xlikert.collect.context.sequential`; a certified label
walk) may take minutes. Such a reader takes a ``progress`` callable
(:data:`CellProgressFn`) and calls it after every round of passes with a
:class:`CellProgress`: the passes read out of the budget, the certified bound reached and
the mass still unread, and the time since the cell started (:class:`CellClock` keeps it).
The run shows it on its progress bar (:func:`bar_postfix`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CellClock", "CellProgress", "CellProgressFn", "bar_postfix"]


@dataclass(frozen=True)
class CellProgress:
    """One report of a long cell's reader.

    Attributes
    ----------
    reading
        What is read (``"own words"``, ``"sequential"``, ``"word labels"``).
    passes, budget
        The forward passes read so far, and the most allowed (``max_passes``).
    bound
        The certified bound on the cell's error reached so far (the stored one, if the
        reader stopped now).
    unread
        The probability mass not read yet.
    tol
        The bound asked.
    elapsed
        Seconds since the cell's reading started.
    """

    reading: str
    passes: int
    budget: int
    bound: float
    unread: float
    tol: float
    elapsed: float

    def text(self) -> str:
        """The report in a few words, for a progress bar.

        Examples
        --------
        >>> CellProgress("own words", 256, 10_000, 3.2e-3, 0.01, 1e-4, 185.0).text()
        'own words: 256/10000 passes, bound 0.0032 (tol 0.0001), unread 0.01, 3m05s'
        """
        minutes, seconds = divmod(int(self.elapsed), 60)
        return (
            f"{self.reading}: {self.passes}/{self.budget} passes, bound {self.bound:.2g} "
            f"(tol {self.tol:g}), unread {self.unread:.2g}, {minutes}m{seconds:02d}s"
        )


#: What a long cell's reader calls after each round of passes.
CellProgressFn = Callable[[CellProgress], None]


class CellClock:
    """A reader's side of the seam: the cell's start time, what it reads, its budget and
    ``tol``; calling it with the passes, bound and unread mass reports them (nothing
    without a ``progress`` callable).

    Examples
    --------
    >>> seen = []
    >>> clock = CellClock(seen.append, "sequential", budget=100, tol=1e-3)
    >>> clock(passes=64, bound=0.02, unread=0.05)
    >>> seen[0].passes, seen[0].budget, seen[0].reading
    (64, 100, 'sequential')
    >>> CellClock(None, "sequential", budget=100, tol=1e-3)(passes=1, bound=1.0, unread=1.0)
    """

    def __init__(self, progress: CellProgressFn | None, reading: str, *, budget: int,
                 tol: float):  # fmt: skip
        self.progress, self.reading = progress, reading
        self.budget, self.tol = int(budget), float(tol)
        self.started = time.perf_counter()

    def __call__(self, *, passes: int, bound: float, unread: float) -> None:
        if self.progress is None:
            return
        self.progress(CellProgress(self.reading, int(passes), self.budget, float(bound),
                                   float(unread), self.tol,
                                   time.perf_counter() - self.started))  # fmt: skip


def bar_postfix(bar: Any) -> CellProgressFn:
    """A :data:`CellProgressFn` that writes each report to a tqdm bar's postfix (shown
    beside the count of cells while one long cell is read)."""

    def show(p: CellProgress) -> None:
        bar.set_postfix_str(p.text(), refresh=True)

    return show
