"""Response formats: how the scale is shown and how the answer is read.

A response format (a level of a factor of kind ``format``) says

* the **order** of the scale points as shown: ``ascending`` (the instrument's
  lowest score first), ``reversed`` (highest first), or any permutation, given
  as the ranks of the points in the order shown (``(3, 4, 5, 1, 2)``: the third
  lowest point first); :func:`~xlikert.design.option_order.option_orders` makes every cyclic rotation or
  every permutation, up to a cap;
* which points carry their text in ``{anchors}``: ``instrument`` (the points
  the instrument labels), ``ends`` (the two ends), ``every`` (every point) or
  ``numbers`` (the answer labels alone);
* the **answer labels**, one per shown position: digits by default
  (``1 .. n``, as the scale is numbered), or e.g. letters ``A .. G``.

Each level maps its answer labels onto the instrument's ``score`` values
(:meth:`ResponseFormat.labels_by_score`), so the ``pmf`` of every level lives on
the same ``score`` axis: under ``reversed`` the digit 1 is shown first, next to
the highest point's text, and means the highest score; under the order
``(3, 4, 5, 1, 2)`` the digit 1 is shown first, next to the third point's text,
and means the score ``scale_min + 2``. The labels keep their places (the first
label shown is the first label) and the points move, as in a questionnaire whose
options are shuffled. An order other than ascending or reversed shows which point
each label means only through the texts, so it needs every point's text (style
``every``, or ``instrument`` where the instrument labels every point). Reverse-keyed
items are reflected on top of that, on the score axis, as without a format.

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
>>> from xlikert.design.option_order import permuted_formats
>>> rotated = permuted_formats(builtin_format("labelled"), 3, "rotations")
>>> list(rotated)
['123', '231', '312']
>>> rotated["231"].labels_by_score(1, 3)
{1: '3', 2: '1', 3: '2'}
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..core.errors import FormatError, LabelMappingError, UnknownNameError

__all__ = [
    "BUILTIN_FORMATS",
    "DEFAULT_MAX_LEVELS",
    "LABEL_FIELDS",
    "ORDERS",
    "PERMUTE",
    "STYLES",
    "ResponseFormat",
    "builtin_format",
    "letters",
    "order_name",
]

ORDERS = ("ascending", "reversed")
#: The generated option orders: every cyclic rotation, or every permutation, of the points.
PERMUTE = ("rotations", "all")
#: The most levels :func:`~xlikert.design.option_order.option_orders` makes unless told otherwise (every order of 5 points).
DEFAULT_MAX_LEVELS = 120
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
        The order the points are shown in: ``"ascending"``, ``"reversed"``, or the
        ranks of the points as shown (1 = the lowest score; a permutation of
        ``1 .. n``).
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
    order: Literal["ascending", "reversed"] | tuple[int, ...] = "ascending"
    anchors: Literal["instrument", "ends", "every", "numbers"] = "instrument"
    labels: tuple[str, ...] | None = None
    description: str = ""
    lettered: bool = False

    def for_points(self, n_points: int) -> ResponseFormat:
        """This format for a scale of ``n_points`` points: letters resized, else itself.

        Parameters
        ----------
        n_points : int
            The number of points of the item's scale.

        Returns
        -------
        ResponseFormat
            A lettered format with ``n_points`` letters, or this format unchanged.

        Examples
        --------
        >>> builtin_format("letters", 7).for_points(4).labels
        ('A', 'B', 'C', 'D')
        """
        return replace(self, labels=letters(n_points)) if self.lettered else self

    def shown_scores(self, lo: int, hi: int) -> list[int]:
        """The scores in the order they are shown.

        Parameters
        ----------
        lo, hi : int
            The lowest and highest scores of the scale.

        Returns
        -------
        list of int
            ``lo..hi``, highest first for a ``"reversed"`` format.

        Raises
        ------
        LabelMappingError
            When the order is not a permutation of the ranks ``1 .. n`` of the scale.

        Examples
        --------
        >>> builtin_format("reversed").shown_scores(1, 5)
        [5, 4, 3, 2, 1]
        """
        scores = list(range(lo, hi + 1))
        order = self.order
        if isinstance(order, str):
            if order not in ORDERS:
                raise LabelMappingError(
                    f"format {self.name!r}: unknown order {order!r}; one of {', '.join(ORDERS)} "
                    "or the ranks of the points in the order shown"
                )
            return scores[::-1] if order == "reversed" else scores
        ranks = list(order)
        if sorted(ranks) != list(range(1, len(scores) + 1)):
            raise LabelMappingError(
                f"format {self.name!r}: the order {ranks} is not a permutation of the ranks "
                f"1..{len(scores)} of the scale {lo}..{hi}"
            )
        return [lo + r - 1 for r in ranks]

    def permuted(self, lo: int, hi: int) -> bool:
        """Whether the points are shown in an order other than ascending or reversed.

        Parameters
        ----------
        lo, hi : int
            The lowest and highest scores of the scale.

        Returns
        -------
        bool
            True for a shuffled order (a rotation or another permutation).

        Examples
        --------
        >>> builtin_format("reversed").permuted(1, 5)
        False
        >>> fmt = format_from_table("r", {"base": "labelled", "anchors": "every",
        ...                               "order": "3 4 5 1 2"}, 5)
        >>> fmt.permuted(1, 5)
        True
        """
        scores = self.shown_scores(lo, hi)
        return scores not in (sorted(scores), sorted(scores, reverse=True))

    def shown_labels(self, lo: int, hi: int) -> list[str]:
        """The answer labels in the order they are shown.

        Parameters
        ----------
        lo, hi : int
            The lowest and highest scores of the scale.

        Returns
        -------
        list of str
            One label per shown position: :attr:`labels`, or the digits
            ``lo..hi``.

        Raises
        ------
        LabelMappingError
            When the labels are not one distinct, non-empty label per scale point.

        Examples
        --------
        >>> builtin_format("letters", n_points=5).shown_labels(1, 5)
        ['A', 'B', 'C', 'D', 'E']
        >>> ResponseFormat("twice", labels=("A", "A")).shown_labels(1, 2)
        Traceback (most recent call last):
        ...
        xlikert.core.errors.LabelMappingError: format 'twice': ...: labels repeat ['A']
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
        """Score -> its answer label (a bijection onto ``lo..hi``), in score order.

        Parameters
        ----------
        lo, hi : int
            The lowest and highest scores of the scale.

        Returns
        -------
        dict of int to str
            The label that answers each score: the label shown at the score's
            position.

        Raises
        ------
        LabelMappingError
            When the labels are not one distinct, non-empty label per scale point.

        Examples
        --------
        A reversed scale shows the highest score first, numbered 1:

        >>> builtin_format("reversed").labels_by_score(1, 3)
        {1: '3', 2: '2', 3: '1'}
        """
        pairs = dict(zip(self.shown_scores(lo, hi), self.shown_labels(lo, hi), strict=True))
        return {y: pairs[y] for y in range(lo, hi + 1)}

    def point_texts(self, lo: int, hi: int, anchors: Mapping[int, str]) -> dict[int, str]:
        """Score -> text for the points ``{anchors}`` labels under this format.

        Parameters
        ----------
        lo, hi : int
            The lowest and highest scores of the scale.
        anchors : mapping of int to str
            The scale's text of each labelled score (the instrument's or the
            experiment's ``[scale.anchors]``).

        Returns
        -------
        dict of int to str
            The labelled scores and their text: none for ``"numbers"``, the two
            ends for ``"ends"``, the scale's own for ``"instrument"``, every point
            for ``"every"`` (the standard agreement texts fill the middle of a
            5- or 7-point agree-disagree scale).

        Raises
        ------
        LabelMappingError
            When the format labels every point and the scale has no text for one, or
            shows the points permuted without every point's text.

        Examples
        --------
        >>> ends = {1: "Strongly disagree", 5: "Strongly agree"}
        >>> builtin_format("labelled").point_texts(1, 5, ends)[2]
        'Disagree'
        >>> builtin_format("numbers").point_texts(1, 5, ends)
        {}
        """
        texts = self._texts(lo, hi, anchors)
        untold = [y for y in range(lo, hi + 1) if y not in texts]
        if untold and self.permuted(lo, hi):
            raise LabelMappingError(
                f"format {self.name!r} shows the points in the order "
                f"{order_name(self.shown_ranks(lo, hi))}, which only the points' texts tell, "
                f"but the style {self.anchors!r} gives no text for the score(s) {untold}; "
                "use anchors = 'every' (base 'labelled')"
            )
        return texts

    def shown_ranks(self, lo: int, hi: int) -> tuple[int, ...]:
        """The ranks (1 = the lowest score) of the points in the order they are shown.

        Parameters
        ----------
        lo, hi : int
            The lowest and highest scores of the scale.

        Returns
        -------
        tuple of int
            The rank of each point shown, first shown first.

        Examples
        --------
        >>> builtin_format("reversed").shown_ranks(0, 4)
        (5, 4, 3, 2, 1)
        """
        return tuple(y - lo + 1 for y in self.shown_scores(lo, hi))

    def _texts(self, lo: int, hi: int, anchors: Mapping[int, str]) -> dict[int, str]:
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
        """The scale placeholders as this format renders them (see the module docstring).

        Parameters
        ----------
        lo, hi : int
            The lowest and highest scores of the scale.
        anchors : mapping of int to str
            The scale's text of each labelled score (the instrument's or the
            experiment's ``[scale.anchors]``).

        Returns
        -------
        dict of str to str
            The value of each scale placeholder, as
            :func:`~xlikert.design.scale_fields` gives them for the original
            format: ``scale_min`` and ``scale_max`` are the first and last shown
            labels, ``anchors`` pairs the shown labels with their texts.

        Raises
        ------
        LabelMappingError
            Labels that are not a bijection onto the scale, or points to label
            without a text.

        Examples
        --------
        >>> ends = {1: "Strongly disagree", 5: "Strongly agree"}
        >>> builtin_format("letters", n_points=5).fields(1, 5, ends)["anchors"]
        'A=Strongly disagree, E=Strongly agree'
        >>> builtin_format("reversed").fields(1, 5, ends)["anchors"]
        '1=Strongly agree, 5=Strongly disagree'
        """
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
        """One line: order, labelled points, labels.

        Returns
        -------
        str
            The order, the points that carry their text, the answer labels.

        Examples
        --------
        >>> builtin_format("letters", n_points=5).describe()
        'ascending, instrument labelled, answer labels ABCDE'
        """
        order = self.order if isinstance(self.order, str) else "shown " + order_name(self.order)
        labels = (
            "digits"
            if self.labels is None
            else "".join(self.labels)
            if all(len(x) == 1 for x in self.labels)
            else ", ".join(self.labels)
        )
        return f"{order}, {self.anchors} labelled, answer labels {labels}"


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

    Parameters
    ----------
    name : str
        One of :data:`BUILTIN_FORMATS`: ``"original"``, ``"reversed"``,
        ``"labelled"``, ``"numbers"``, ``"letters"``.
    n_points : int, optional
        The number of scale points, which sizes the letter labels of ``"letters"``
        (default 7); the other formats ignore it. A format is checked against the
        scale where it is used.

    Returns
    -------
    ResponseFormat
        The format: its order, anchors, answer labels (``None``: the scale's
        digits) and description.

    Raises
    ------
    UnknownNameError
        An unknown name (also a :class:`KeyError`), naming it and the built-in formats.

    Examples
    --------
    >>> builtin_format("letters", n_points=5).labels
    ('A', 'B', 'C', 'D', 'E')
    >>> builtin_format("reversed").order
    'reversed'
    """
    if name not in BUILTIN_FORMATS:
        raise UnknownNameError(
            f"no built-in format {name!r}; built-in: {', '.join(BUILTIN_FORMATS)}"
        )
    spec = dict(BUILTIN_FORMATS[name])
    make = spec.pop("labels", None)
    labels = make(n_points or 7) if make is not None else None
    return ResponseFormat(name=name, labels=labels, **spec)


def format_from_table(name: str, table: Mapping[str, Any], n_points: int) -> ResponseFormat:
    """A custom format from its inline table: ``base``, ``order``, ``anchors``, ``labels``.

    ``labels`` is an array of strings or one string of labels separated by spaces
    or commas; ``order`` is ``ascending``, ``reversed`` or the ranks of the points
    as shown, the same way (``"3 4 5 1 2"``); ``base`` names a built-in format the
    other keys change.

    Raises
    ------
    FormatError
        An unknown key or value, naming it (also a :class:`ValueError`).
    """
    known = ("base", "order", "anchors", "labels", "description")
    unknown = [k for k in table if k not in known]
    if unknown:
        raise FormatError(f"unknown key(s) {unknown}; a format level takes {', '.join(known)}")
    base = table.get("base", "original")
    if base not in BUILTIN_FORMATS:
        raise FormatError(f"base {base!r} is not a built-in format ({', '.join(BUILTIN_FORMATS)})")
    fmt = builtin_format(base, n_points)
    order = _order(table.get("order", fmt.order))
    style = table.get("anchors", fmt.anchors)
    if style not in STYLES:
        raise FormatError(f"anchors must be one of {STYLES}, got {style!r}")
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


def _order(value: Any) -> Literal["ascending", "reversed"] | tuple[int, ...]:
    """An ``order`` value: a name of :data:`ORDERS` or ranks (a string or an array)."""
    if isinstance(value, tuple) or value in ORDERS:
        return value
    ranks = value.replace(",", " ").split() if isinstance(value, str) else value
    try:
        return tuple(int(r) for r in ranks)
    except (TypeError, ValueError):
        raise FormatError(
            f"order must be one of {ORDERS} or the ranks of the points as shown "
            f'("3 4 5 1 2"), got {value!r}'
        ) from None


def order_name(ranks: Sequence[int]) -> str:
    """The level label of an order: its ranks, run together (``"34512"``; with ``-``
    between them from 10 points up).

    Examples
    --------
    >>> order_name((3, 4, 5, 1, 2))
    '34512'
    """
    return ("" if len(ranks) < 10 else "-").join(str(r) for r in ranks)
