"""Response formats: how the scale is shown and how the answer is read.

A response format (a level of a factor of kind ``format``) says

* the **order** of the scale points as shown: ``ascending`` (the instrument's
  lowest score first) or ``reversed`` (highest first);
* which points carry their text in ``{anchors}``: ``instrument`` (the points
  the instrument labels), ``ends`` (the two ends), ``every`` (every point) or
  ``numbers`` (the answer labels alone);
* the **answer labels**, one per shown position: digits by default
  (``1 .. n``, as the scale is numbered), or e.g. letters ``A .. G``.

Each level maps its answer labels onto the instrument's ``score`` values
(:meth:`ResponseFormat.labels_by_score`), so the ``pmf`` of every level lives on
the same ``score`` axis: under ``reversed`` the digit 1 is shown first, next to
the highest point's text, and means the highest score. Reverse-keyed items are
reflected on top of that, on the score axis, as without a format.

Under a format the scale placeholders follow what is shown: ``{scale_min}`` and
``{scale_max}`` are the first and last labels shown, ``{min_label}`` and
``{max_label}`` the texts of the first and last points shown, ``{anchors}``
the labelled points in the order shown and ``{answer_labels}`` every label.

Examples
--------
>>> fmt = builtin_format("reversed")
>>> fmt.labels_by_score(1, 7)
{1: '7', 2: '6', 3: '5', 4: '4', 5: '3', 6: '2', 7: '1'}
>>> fmt.fields(1, 7, {1: "Strongly disagree", 7: "Strongly agree"})["anchors"]
'1=Strongly agree, 7=Strongly disagree'
>>> builtin_format("letters", n_points=3).labels_by_score(1, 3)
{1: 'A', 2: 'B', 3: 'C'}
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..errors import LabelMappingError

__all__ = [
    "BUILTIN_FORMATS",
    "LABEL_FIELDS",
    "ORDERS",
    "STYLES",
    "ResponseFormat",
    "builtin_format",
    "letters",
]

ORDERS = ("ascending", "reversed")
STYLES = ("instrument", "ends", "every", "numbers")
#: The scale placeholders that show the answer labels: a format factor needs one of them.
LABEL_FIELDS = ("anchors", "scale_min", "scale_max", "answer_labels", "options")

#: Texts of every point of the usual agreement scales (used by ``every`` when the
#: instrument labels only the ends ``Strongly disagree`` .. ``Strongly agree``).
_AGREEMENT = {
    5: ("Strongly disagree", "Disagree", "Neither agree nor disagree", "Agree", "Strongly agree"),
    7: (
        "Strongly disagree",
        "Disagree",
        "Somewhat disagree",
        "Neither agree nor disagree",
        "Somewhat agree",
        "Agree",
        "Strongly agree",
    ),
}


@dataclass(frozen=True)
class ResponseFormat:
    """One way of presenting the scale and reading the answer.

    Attributes
    ----------
    name
        The level label.
    order
        ``"ascending"`` or ``"reversed"``: the order the points are shown in.
    anchors
        Which points carry their text in ``{anchors}`` (:data:`STYLES`).
    labels
        Answer labels, one per shown position (first shown first); None: the
        digits numbering the scale (``scale_min .. scale_max``), or what an item's
        own scale answers with (:class:`xlikert.design.scale.Scale`).
    description
        What the level changes.
    lettered
        True when the labels are the letters ``A, B, ...`` (as many as the scale
        has points: :meth:`for_points` resizes them for an item's own scale).
    """

    name: str
    order: Literal["ascending", "reversed"] = "ascending"
    anchors: Literal["instrument", "ends", "every", "numbers"] = "instrument"
    labels: tuple[str, ...] | None = None
    description: str = ""
    lettered: bool = False

    def for_points(self, n_points: int) -> ResponseFormat:
        """This format for a scale of ``n_points`` points: letters resized, else itself.

        Examples
        --------
        >>> builtin_format("letters", 7).for_points(4).labels
        ('A', 'B', 'C', 'D')
        """
        return replace(self, labels=letters(n_points)) if self.lettered else self

    def shown_scores(self, lo: int, hi: int) -> list[int]:
        """The scores in the order they are shown."""
        scores = list(range(lo, hi + 1))
        return scores[::-1] if self.order == "reversed" else scores

    def shown_labels(self, lo: int, hi: int) -> list[str]:
        """The answer labels in the order they are shown.

        Raises
        ------
        LabelMappingError
            When the labels are not one distinct, non-empty label per scale point.
        """
        n = hi - lo + 1
        labels = (
            list(self.labels) if self.labels is not None else [str(v) for v in range(lo, hi + 1)]
        )
        problems = []
        if len(labels) != n:
            problems.append(f"{len(labels)} labels for the {n} points of the scale {lo}..{hi}")
        blank = [x for x in labels if not isinstance(x, str) or not x.strip() or x != x.strip()]
        if blank:
            problems.append(f"labels must be non-empty with no surrounding space, got {blank}")
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            problems.append(f"labels repeat {dup}")
        if problems:
            raise LabelMappingError(
                f"format {self.name!r}: the answer labels {labels} are not a bijection onto the "
                f"scale {lo}..{hi}: " + "; ".join(problems)
            )
        return labels

    def labels_by_score(self, lo: int, hi: int) -> dict[int, str]:
        """Score -> its answer label (a bijection onto ``lo..hi``), in score order."""
        pairs = dict(zip(self.shown_scores(lo, hi), self.shown_labels(lo, hi), strict=True))
        return {y: pairs[y] for y in range(lo, hi + 1)}

    def point_texts(self, lo: int, hi: int, anchors: Mapping[int, str]) -> dict[int, str]:
        """Score -> text for the points ``{anchors}`` labels under this format."""
        if self.anchors == "numbers":
            return {}
        if self.anchors == "ends":
            return {y: anchors[y] for y in (lo, hi) if y in anchors}
        if self.anchors == "instrument":
            return {y: anchors[y] for y in range(lo, hi + 1) if y in anchors}
        missing = [y for y in range(lo, hi + 1) if y not in anchors]
        if not missing:
            return {y: anchors[y] for y in range(lo, hi + 1)}
        standard = _AGREEMENT.get(hi - lo + 1)
        ends = (anchors.get(lo, "").lower(), anchors.get(hi, "").lower())
        if standard is not None and ends == (standard[0].lower(), standard[-1].lower()):
            return {y: anchors.get(y, standard[y - lo]) for y in range(lo, hi + 1)}
        raise LabelMappingError(
            f"format {self.name!r} labels every point, but the scale has no text for "
            f"{missing}; give them in the experiment's [scale.anchors]"
        )

    def fields(self, lo: int, hi: int, anchors: Mapping[int, str]) -> dict[str, str]:
        """The scale placeholders as this format renders them (see the module docstring)."""
        scores, labels = self.shown_scores(lo, hi), self.shown_labels(lo, hi)
        texts = self.point_texts(lo, hi, anchors)
        if self.anchors == "numbers":
            shown = ", ".join(labels)
        else:  # a label that is the point's text (answered by its words) is shown once
            shown = ", ".join(
                x if x == texts[y] else f"{x}={texts[y]}"
                for y, x in zip(scores, labels, strict=True)
                if y in texts
            )
        return {
            "scale_min": labels[0],
            "scale_max": labels[-1],
            "n_points": str(hi - lo + 1),
            "min_label": anchors.get(scores[0], ""),
            "max_label": anchors.get(scores[-1], ""),
            "anchors": shown,
            "answer_labels": ", ".join(labels),
        }

    def describe(self) -> str:
        """One line: order, labelled points, labels."""
        labels = (
            "digits"
            if self.labels is None
            else "".join(self.labels)
            if all(len(x) == 1 for x in self.labels)
            else ", ".join(self.labels)
        )
        return f"{self.order}, {self.anchors} labelled, answer labels {labels}"


def letters(n: int) -> tuple[str, ...]:
    """The first ``n`` letters ``A, B, ...`` (at most 26).

    Raises
    ------
    LabelMappingError
        More than 26 are asked for.
    """
    if n > len(string.ascii_uppercase):
        raise LabelMappingError(f"{n} options cannot be lettered A..Z (at most 26)")
    return tuple(string.ascii_uppercase[:n])


#: The built-in levels of a format factor: name -> (order, anchors, label maker, description).
BUILTIN_FORMATS: dict[str, dict[str, Any]] = {
    "original": {"description": "the instrument's scale as it is (ascending digits)"},
    "reversed": {"order": "reversed", "description": "the points shown from the highest down"},
    "labelled": {"anchors": "every", "description": "every point shown with its text"},
    "numbers": {"anchors": "numbers", "description": "the labels shown with no text"},
    "letters": {
        "labels": letters,
        "lettered": True,
        "description": "letters A, B, ... as answer labels",
    },
}


def builtin_format(name: str, n_points: int | None = None) -> ResponseFormat:
    """A built-in response format by name (:data:`BUILTIN_FORMATS`).

    ``n_points`` sizes the letter labels (default 7; a format is checked against
    the scale where it is used).

    Raises
    ------
    KeyError
        An unknown name.
    """
    spec = dict(BUILTIN_FORMATS[name])
    make = spec.pop("labels", None)
    labels = make(n_points or 7) if make is not None else None
    return ResponseFormat(name=name, labels=labels, **spec)


def format_from_table(name: str, table: Mapping[str, Any], n_points: int) -> ResponseFormat:
    """A custom format from its inline table: ``base``, ``order``, ``anchors``, ``labels``.

    ``labels`` is an array of strings or one string of labels separated by spaces
    or commas; ``base`` names a built-in format the other keys change.

    Raises
    ------
    ValueError
        An unknown key or value, naming it.
    """
    known = ("base", "order", "anchors", "labels", "description")
    unknown = [k for k in table if k not in known]
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; a format level takes {', '.join(known)}")
    base = table.get("base", "original")
    if base not in BUILTIN_FORMATS:
        raise ValueError(f"base {base!r} is not a built-in format ({', '.join(BUILTIN_FORMATS)})")
    fmt = builtin_format(base, n_points)
    order = table.get("order", fmt.order)
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    style = table.get("anchors", fmt.anchors)
    if style not in STYLES:
        raise ValueError(f"anchors must be one of {STYLES}, got {style!r}")
    labels: Sequence[str] | str | None = table.get("labels", fmt.labels)
    if isinstance(labels, str):
        labels = labels.replace(",", " ").split()
    return ResponseFormat(
        name=name,
        order=order,
        anchors=style,
        labels=tuple(labels) if labels is not None else None,
        description=str(table.get("description", "")),
        lettered=fmt.lettered and "labels" not in table,
    )
