"""Where an item's answers go in a results row: its points and its non-substantive options.

A results file has one ``score`` axis, the union of its items' points, and one
``option`` axis, the non-substantive options ("Don't know", "Refused") of any item
(:data:`xlikert.core.schema.ITEM_SCALE_VARIABLES`). An item answers on part of them: its own points (its
support) and the options it offers, each with its answer label. The answer rule
(:func:`xlikert.collect.answers.spellings.answer_rule`) reads one probability per *answer
code*: the item's points, then one code per option it offers (codes above the
score axis, which mean nothing else). :class:`AnswerLayout` puts each code's mass
where it belongs:

* ``pmf`` -- the points' masses on the file's ``score`` axis (zero off the
  support), renormalised; ``valid_mass`` -- their sum (the substantive mass);
* ``nonsubstantive_mass`` -- each offered option's mass on the ``option`` axis,
  NaN where the item does not offer it.

The failure rate is what is left: ``1 - valid_mass - nonsubstantive_mass.sum()``.

Examples
--------
>>> codes, labels, layout = answer_codes((0, 1, 2, 3), {1: "1", 2: "2"}, ("8", ""))
>>> codes, labels
((1, 2, 4), {1: '1', 2: '2', 4: '8'})
>>> out = layout.readout(np.array([[0.2, 0.6, 0.1]]))
>>> out["pmf"].round(2).tolist(), out["valid_mass"].round(2).tolist()
([[0.0, 0.25, 0.75, 0.0]], [0.8])
>>> out["nonsubstantive_mass"].round(2).tolist()
[[0.1, nan]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...core.errors import CollectionError

__all__ = ["AnswerLayout", "answer_codes"]


@dataclass(frozen=True)
class AnswerLayout:
    """The columns of a rule's answer codes in a results row (see the module docstring).

    Attributes
    ----------
    n_scores, n_options
        Lengths of the file's ``score`` and ``option`` axes.
    columns
        For each answer code of the rule, in its order: the index of its point on
        the ``score`` axis, or ``n_scores`` + the index of its option.
    """

    n_scores: int
    n_options: int
    columns: tuple[int, ...]

    @property
    def offered(self) -> np.ndarray:
        """``(n_options,)`` True where the item offers the option."""
        out = np.zeros(self.n_options, dtype=bool)
        out[[c - self.n_scores for c in self.columns if c >= self.n_scores]] = True
        return out

    def split(self, mass: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(..., codes)`` masses -> ``(..., n_scores)`` points and ``(..., n_options)`` options.

        Points off the support get 0; options the item does not offer get NaN.
        """
        mass = np.asarray(mass, dtype=np.float64)
        full = np.zeros((*mass.shape[:-1], self.n_scores + self.n_options))
        full[..., list(self.columns)] = mass
        options = full[..., self.n_scores :]
        options[..., ~self.offered] = np.nan
        return full[..., : self.n_scores], options

    def readout(self, mass: np.ndarray, grid: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Item PMFs, substantive and non-substantive masses from each code's mass.

        Parameters
        ----------
        mass : np.ndarray
            ``(B, codes)``: each answer code's probability.
        grid : np.ndarray, optional
            ``(B, T, P, codes)``: the same under each decoding setting.

        Returns
        -------
        dict
            ``pmf (B, S)``, ``valid_mass (B,)``, ``nonsubstantive_mass (B, O)`` (when
            the file has options) and, with ``grid``, ``decoding_pmf (B, T, P, S)`` and
            ``decoding_valid_mass (B, T, P)`` (the points' mass inside the nucleus; NaN
            PMF where none is in it) and, when the file has options,
            ``decoding_nonsubstantive_mass (B, T, P, O)`` (each option's mass inside the
            nucleus: a conversation's histories branch on it, :mod:`xlikert.collect.context`).
        """
        points, options = self.split(mass)
        # sums over the item's own points (not the file's score axis, whose zeros would
        # change the order of the additions): a cell's numbers are those of its item alone,
        # the same bits in a file of any other items (a reused cell equals a computed one)
        own = [k for k, c in enumerate(self.columns) if c < self.n_scores]
        out: dict[str, np.ndarray] = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            out["valid_mass"] = np.asarray(mass, dtype=np.float64)[..., own].sum(-1)
            out["pmf"] = points / out["valid_mass"][..., None]
            if self.n_options:
                out["nonsubstantive_mass"] = options
            if grid is not None:
                g, g_options = self.split(grid)
                gm = np.asarray(grid, dtype=np.float64)[..., own].sum(-1)
                if self.n_options:
                    out["decoding_nonsubstantive_mass"] = g_options
                out["decoding_valid_mass"] = gm
                out["decoding_pmf"] = np.where(gm[..., None] > 0, g / gm[..., None], np.nan)
        return out


def answer_codes(
    scale: Sequence[int],
    labels: Mapping[int, str] | None,
    nonsubstantive: Sequence[str] | None = None,
) -> tuple[tuple[int, ...], dict[int, str], AnswerLayout | None]:
    """The answer codes of an item, their labels, and their layout (None: the plain scale).

    Parameters
    ----------
    scale
        The file's ``score`` axis.
    labels
        Point -> answer label for the item's points (its support); None: every
        point of ``scale``, answered with its digits.
    nonsubstantive
        One answer label per option of the file's ``option`` axis, ``""`` where the
        item does not offer it; None or empty: no options.

    Returns
    -------
    codes, labels, layout
        The item's points then one code per offered option (``max(scale) + 1 + j``
        for option ``j``); each code's answer label; the layout, or None when the
        item answers on the whole ``scale`` and the file has no options (the rule's
        own readout is then the row).

    Raises
    ------
    CollectionError
        A point that is not on ``scale``, or fewer than two points.
    """
    scale = tuple(int(v) for v in scale)
    options = tuple(nonsubstantive or ())
    if labels is None:
        labels = {y: str(y) for y in scale}
    points = tuple(y for y in scale if y in labels)
    off = sorted(set(labels) - set(scale))
    if off or len(points) < 2:
        raise CollectionError(
            f"answer labels {dict(labels)} must label at least two points of the scale "
            f"{list(scale)}" + (f"; {off} are not on it" if off else "")
        )
    top = max(scale) + 1
    extra = {top + j: x for j, x in enumerate(options) if x}
    codes = (*points, *extra)
    by_code = {**{y: str(labels[y]) for y in points}, **extra}
    if points == scale and not options:
        return codes, by_code, None
    index = {y: i for i, y in enumerate(scale)}
    columns = (*(index[y] for y in points), *(len(scale) + c - top for c in extra))
    return codes, by_code, AnswerLayout(len(scale), len(options), columns)
