"""An instrument's items: :class:`Item`, the items' own scales, and the checks of an
instrument file's items, lexicon and placeholders (for :mod:`xlikert.design.instrument`).
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .file_schema import SCALE_FIELDS, ItemSpec, ScaleSpec
from .problems import Problems, suggest
from .scale import Option, Scale
from .template import Template

__all__ = ["Item", "scale_fields"]


@dataclass(frozen=True)
class Item:
    """One item: a stable id, a template, its keying and its subscale ("" if none).

    ``scale`` is the item's own response options (None: the instrument's, or the
    experiment's ``[scale]``); ``nominal`` marks options without an order.
    """

    id: str
    template: str
    reverse_keyed: bool = False
    subscale: str = ""
    source_text: str = ""
    scale: Scale | None = None
    nominal: bool = False


def has_item_scales(items: tuple[Item, ...], default: Scale) -> bool:
    """True when the items' scales (their options) must be recorded per item.

    That is when some item has its own options or is nominal, or the default
    scale has non-substantive options or is answered with letters or labels.
    """
    return (
        any(it.scale is not None or it.nominal for it in items)
        or bool(default.nonsubstantive)
        or default.answers != "codes"
    )


def describe_item_scales(items: tuple[Item, ...], default: Scale, indent: str = "") -> list[str]:
    """Lines naming the items whose options are not ``default``'s plain codes (none: ``[]``).

    Examples
    --------
    >>> items = (Item("a", "A?"), Item("v", "Vote?", scale=Scale(0, 1, {0: "C", 1: "D"}),
    ...          nominal=True))
    >>> describe_item_scales(items, Scale(1, 7, {1: "No", 7: "Yes"}))
    ['own options: v 0..1 (0=C, 1=D), nominal']
    """
    lines = []
    if default.nonsubstantive or default.answers != "codes":
        lines.append(f"{indent}scale:     {default.describe()}")
    own = [
        f"{it.id} {it.scale.describe()}" + (", nominal" if it.nominal else "")
        for it in items
        if it.scale is not None
    ]
    own += [f"{it.id} nominal" for it in items if it.scale is None and it.nominal]
    if own:
        lines.append(f"{indent}own options: " + "; ".join(own))
    return lines


def scale_fields(scale_min: int, scale_max: int, anchors: Mapping[int, str]) -> dict[str, str]:
    """Values of the scale placeholders (:data:`SCALE_FIELDS`) of a scale answered with its codes.

    Parameters
    ----------
    scale_min, scale_max : int
        The lowest and highest points of the scale.
    anchors : mapping of int to str
        The text of the labelled points (e.g. the two ends).

    Returns
    -------
    dict of str to str
        The value of each placeholder: ``scale_min``, ``scale_max``, ``n_points``,
        ``min_label``, ``max_label`` (``""`` where the end has no anchor),
        ``anchors`` (``"1=..., 7=..."``) and ``answer_labels`` (``"1, 2, ..., 7"``).

    Examples
    --------
    >>> f = scale_fields(1, 7, {1: "Strongly disagree", 7: "Strongly agree"})
    >>> f["anchors"]
    '1=Strongly disagree, 7=Strongly agree'
    """
    return Scale(scale_min, scale_max, dict(anchors)).show().fields


def scale_from_spec(spec: ScaleSpec) -> Scale:
    """The :class:`~xlikert.design.scale.Scale` a ``[scale]`` table declares."""
    return Scale(
        spec.min,
        spec.max,
        dict(spec.anchors),
        tuple(Option(o.label, o.code) for o in spec.nonsubstantive),
        spec.answers,
    )


def nominal_problems(scale: Scale) -> str:
    """Why a nominal item cannot have ``scale`` ("" when it can): every option needs its label."""
    bare = [y for y in scale.scores if y not in scale.anchors]
    if not bare:
        return ""
    return (
        f"a nominal item's options are known by their labels, but the point(s) {bare} of "
        f"its scale {scale.min}..{scale.max} have none"
    )


def warn_lone_subscales(file: Path | str, items: list[Item]) -> None:
    """Warn about a one-item subscale whose name is close to another's (a typo splits a subscale).

    Examples
    --------
    >>> import warnings
    >>> items = [Item("1", "a", subscale="extraversion"), Item("2", "b", subscale="extraversion"),
    ...          Item("3", "c", subscale="extroversion")]
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     warn_lone_subscales("x.toml", items)
    >>> print(w[0].message)
    x.toml: subscale 'extroversion' has one item ('3') and its name is close to 'extraversion' (2 items): a typo would make it a subscale of its own, composed and analysed apart
    """
    counts: dict[str, list[str]] = {}
    for it in items:
        if it.subscale:
            counts.setdefault(it.subscale, []).append(it.id)
    for name, ids in counts.items():
        if len(ids) != 1:
            continue
        others = {o.lower(): o for o in counts if o != name}
        close = difflib.get_close_matches(name.lower(), list(others), n=1, cutoff=0.75)
        if close:
            other = others[close[0]]
            warnings.warn(
                f"{file}: subscale {name!r} has one item ({ids[0]!r}) and its name is close to "
                f"{other!r} ({len(counts[other])} items): a typo would make it a subscale of its "
                "own, composed and analysed apart",
                UserWarning,
                stacklevel=3,
            )


def known_placeholders(p: Problems, text: str, known: set[str], where: str) -> Template:
    """``text`` as a template (its syntax checked by the schema); unknown placeholders reported."""
    template = Template.parse(text)
    for ph in template.fields:
        if ph not in known:
            p.add(
                where,
                f"unknown placeholder {{{ph}}}{suggest(ph, known)}; known: {', '.join(sorted(known))}",
            )
    return template


def check_lexicon(p: Problems, lexicon: dict[str, dict[str, str]]) -> tuple[str, ...]:
    """The lexicon's fields; every level has the same fields, none a scale field."""
    fields = tuple(
        dict.fromkeys(key for level in lexicon.values() for key in level if key not in SCALE_FIELDS)
    )
    for level, values in lexicon.items():
        for key in values:
            if key in SCALE_FIELDS:
                p.add(f"lexicon level {level!r}", f"field {key!r} is reserved for the scale")
        for key in fields:
            if key not in values:
                others = [lv for lv in lexicon if key in lexicon[lv]]
                p.add(
                    f"lexicon level {level!r}",
                    f"missing lexicon field {key!r} (defined for {', '.join(map(repr, others))})",
                )
    return fields


def check_items(
    p: Problems,
    specs: list[ItemSpec],
    known: set[str],
    templates: dict[str, Template],
    default: Scale,
) -> list[Item]:
    """The items, with unique ids and known placeholders; their templates go to ``templates``."""
    items: list[Item] = []
    seen: dict[str, int] = {}
    for k, it in enumerate(specs):
        k = p.file_index("items", k)
        where = f"item {it.id!r} (items[{k}])"
        if it.id in seen:
            p.add(where, f"duplicate item id {it.id!r} (first used by items[{seen[it.id]}])")
            continue
        seen[it.id] = k
        t = known_placeholders(p, it.template, known, f"{where}, field 'template'")
        templates[f"item:{it.id}"] = t
        scale = scale_from_spec(it.scale) if it.scale is not None else None
        if it.nominal and (why := nominal_problems(scale or default)):
            p.add(where, why + ("" if scale else " (the instrument's [scale])"))
        items.append(
            Item(
                it.id,
                it.template,
                it.reverse_keyed,
                it.subscale,
                it.source_text,
                scale=scale,
                nominal=it.nominal,
            )
        )
    return items
