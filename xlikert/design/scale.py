"""An item's response options: its scale, its non-substantive options, how it is answered.

Questionnaires as they are fielded give each question its own options: a 1..4
question beside a 0..7 count and a 1..7 placement, a "Don't know" the respondent
may choose instead of a point of the scale, a vote choice whose options have no
order. A :class:`Scale` holds one item's options:

* the **points** ``min..max`` (integer codes, as survey data record them) and the
  labels of some or all of them (``anchors``);
* the **non-substantive options** (:class:`Option`: "Don't know", "Refused"), each
  with its label and, optionally, its code: they are answers, not points of the
  scale, and their mass is measured apart from the item PMF;
* how the model **answers**: with the codes (``"codes"``, the default: the digits,
  and a non-substantive option's code, or its label when it has none), with letters
  (``"letters"``: ``A, B, ...`` in the order shown, the non-substantive options
  lettered after the points) or with the labels themselves (``"labels"``: the words,
  e.g. a candidate's name; every point needs one).

:meth:`Scale.show` resolves what a prompt shows and what the model's answer is read
as under a response format (:mod:`xlikert.design.formats`): the answer label of
each point and option, and the values of the scale placeholders, ``{options}``
among them (one option per line, in the order shown).

Examples
--------
>>> dk = Option("Don't know", code=8)
>>> s = Scale(1, 4, {1: "Not at all", 4: "A great deal"}, nonsubstantive=(dk,))
>>> shown = s.show()
>>> shown.labels, shown.options
({1: '1', 2: '2', 3: '3', 4: '4'}, {"Don't know": '8'})
>>> print(shown.fields["options"])
1. Not at all
2
3
4. A great deal
8. Don't know
>>> print(Scale(0, 1, {0: "Clinton", 1: "Dole"}, answers="letters").show().fields["options"])
A. Clinton
B. Dole
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from ..core.errors import LabelMappingError
from .formats import ResponseFormat, builtin_format, letters

__all__ = ["ANSWERS", "Option", "Scale", "ShownScale", "anchors_json"]

#: How an item is answered: with its codes, with letters, or with its labels.
ANSWERS = ("codes", "letters", "labels")


@dataclass(frozen=True)
class Option:
    """A non-substantive answer option ("Don't know", "Refused", "Prefer not to say").

    Attributes
    ----------
    label
        Its text, shown in the prompt (and answered with where there is no code).
    code
        Its code as survey data record it (e.g. 8, 98, -9), or None. Where the
        item is answered with codes, the model answers with it (with the label
        when there is none); human data count it apart from the scale.
    name
        Its name in the results (the ``option`` coordinate): the instrument's own
        label, the same in every language (default: ``label``).

    Examples
    --------
    >>> Option("Don't know", 8).name
    "Don't know"
    >>> Option("Weiß nicht", 8, name="Don't know").name
    "Don't know"
    """

    label: str
    code: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.label)


@dataclass(frozen=True)
class ShownScale:
    """An item's options as one response format shows and reads them.

    Attributes
    ----------
    labels
        Score -> the answer label that means it, in score order.
    options
        Non-substantive option name (:attr:`Option.name`) -> the answer label that means it.
    fields
        The scale placeholders as rendered for the item (:data:`SCALE_FIELDS`).
    """

    labels: dict[int, str]
    options: dict[str, str]
    fields: dict[str, str]


@dataclass(frozen=True)
class Scale:
    """One item's response options (see the module docstring).

    Attributes
    ----------
    min, max
        The points ``min..max`` (integer codes).
    anchors
        Point -> label, for some or all points.
    nonsubstantive
        The non-substantive options, in the order shown (after the points).
    answers
        ``"codes"``, ``"letters"`` or ``"labels"`` (:data:`ANSWERS`).
    """

    min: int
    max: int
    anchors: Mapping[int, str] = field(default_factory=dict)
    nonsubstantive: tuple[Option, ...] = ()
    answers: Literal["codes", "letters", "labels"] = "codes"

    @property
    def scores(self) -> range:
        """The points, ``min..max``."""
        return range(self.min, self.max + 1)

    @property
    def n_points(self) -> int:
        return self.max - self.min + 1

    @property
    def key(self) -> tuple:
        """A hashable value equal for equal scales (to group items by scale)."""
        return (
            self.min,
            self.max,
            tuple(sorted(self.anchors.items())),
            self.nonsubstantive,
            self.answers,
        )

    def __hash__(self) -> int:  # the anchors are a dict: hash the key (items are hashable)
        return hash(self.key)

    def describe(self) -> str:
        """One line: points, labels, non-substantive options and answers.

        Examples
        --------
        >>> Scale(0, 1, {0: "Clinton", 1: "Dole"}, answers="labels").describe()
        '0..1 (0=Clinton, 1=Dole), answered with the labels'
        """
        text = f"{self.min}..{self.max}"
        if self.anchors:
            text += " (" + ", ".join(f"{k}={v}" for k, v in sorted(self.anchors.items())) + ")"
        for opt in self.nonsubstantive:
            text += f" + {opt.label!r}" + (f" ({opt.code})" if opt.code is not None else "")
        return text + ("" if self.answers == "codes" else f", answered with the {self.answers}")

    def item_format(self, fmt: ResponseFormat | None = None) -> ResponseFormat:
        """The response format ``fmt`` (default: as the scale is) made for this scale.

        Letters are sized to the scale's points; a format without labels of its
        own takes the scale's answers (the codes, letters, or the labels in the
        order shown).

        Raises
        ------
        LabelMappingError
            ``answers = "labels"`` on a scale with an unlabelled point.
        """
        fmt = builtin_format("original") if fmt is None else fmt
        if fmt.lettered:
            return fmt.for_points(self.n_points)
        if fmt.labels is not None or self.answers == "codes":
            return fmt
        if self.answers == "letters":
            return replace(fmt, labels=letters(self.n_points), lettered=True)
        shown = fmt.shown_scores(self.min, self.max)
        missing = [y for y in shown if y not in self.anchors]
        if missing:
            raise LabelMappingError(
                f"the scale {self.min}..{self.max} is answered with its labels, but the "
                f"point(s) {missing} have none"
            )
        return replace(fmt, labels=tuple(self.anchors[y] for y in shown))

    def show(self, fmt: ResponseFormat | None = None) -> ShownScale:
        """What a prompt shows and how the answer is read, under the format ``fmt``.

        Parameters
        ----------
        fmt
            A response format (a level of a format factor); default: the scale
            as it is (ascending, its own answers).

        Returns
        -------
        ShownScale

        Raises
        ------
        LabelMappingError
            Answer labels that are not one distinct label per point and option,
            naming the clash.

        Examples
        --------
        >>> s = Scale(1, 3, {1: "No", 3: "Yes"}, (Option("Refused"),), answers="letters")
        >>> shown = s.show(builtin_format("reversed"))
        >>> shown.labels, shown.options
        ({1: 'C', 2: 'B', 3: 'A'}, {'Refused': 'D'})
        >>> shown.fields["anchors"], shown.fields["nonsubstantive"]
        ('A=Yes, C=No', 'D=Refused')
        """
        eff = self.item_format(fmt)
        lo, hi = self.min, self.max
        labels = eff.labels_by_score(lo, hi)
        options = self._option_labels(eff)
        seen: dict[str, str] = {}
        for what, x in [*((f"point {y}", x) for y, x in labels.items()), *options.items()]:
            if x in seen:
                raise LabelMappingError(
                    f"format {eff.name!r}: the answer label {x!r} means both {seen[x]} and "
                    f"{what if what.startswith('point') else repr(what)} on the scale {lo}..{hi}"
                )
            seen[x] = what if what.startswith("point") else repr(what)
        texts = eff.point_texts(lo, hi, self.anchors)
        lines = [_line(labels[y], texts.get(y)) for y in eff.shown_scores(lo, hi)] + [
            _line(options[o.name], o.label) for o in self.nonsubstantive
        ]
        fields = eff.fields(lo, hi, self.anchors)
        fields["options"] = "\n".join(lines)
        fields["nonsubstantive"] = ", ".join(
            x if x == o.label else f"{x}={o.label}"
            for o, x in ((o, options[o.name]) for o in self.nonsubstantive)
        )
        return ShownScale(labels, options, fields)

    def _option_labels(self, eff: ResponseFormat) -> dict[str, str]:
        """Non-substantive option name -> its answer label under the format ``eff``."""
        n, m = self.n_points, len(self.nonsubstantive)
        if eff.lettered:
            return dict(
                zip(
                    (o.name for o in self.nonsubstantive),
                    letters(n + m)[n:],
                    strict=True,
                )
            )
        codes = eff.labels is None  # answered with the codes
        return {
            o.name: str(o.code) if codes and o.code is not None else o.label
            for o in self.nonsubstantive
        }


def _line(label: str, text: str | None) -> str:
    """One line of ``{options}``: ``"A. text"``, or the label alone (no text, or it is the text)."""
    return label if text is None or text == label else f"{label}. {text}"


def anchors_json(anchors: Mapping[int, str], *, ensure_ascii: bool = True) -> str:
    """Score -> label as a JSON object string, keys in scale order (the ``scale_labels``
    attribute of the prompts and results).

    Examples
    --------
    >>> anchors_json({7: "Agree", 1: "Disagree"})
    '{"1": "Disagree", "7": "Agree"}'
    """
    return json.dumps({str(k): v for k, v in sorted(anchors.items())}, ensure_ascii=ensure_ascii)
