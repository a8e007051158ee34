"""An instrument's text in another language: ``[translations.<language>]`` applied.

:func:`translation_problems` names every text a translation lacks (and every key it
gives that the instrument does not have), by item, framing, anchor, option or lexicon
entry and language; :func:`translated_table` is the instrument's table with the
translated texts; :func:`named_options` gives the translated non-substantive options
the instrument's own labels as their names (:attr:`~xlikert.design.scale.Option.name`),
so the ``option`` coordinate of results is one coordinate across languages.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .items import Item
from .scale import Option, Scale

__all__ = ["named_options", "translated_table", "translation_problems"]


def _own_scales(table: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(item id, [items.scale] table)`` of every item with its own scale."""
    return [(str(it["id"]), it["scale"]) for it in table["items"] if "scale" in it]


def _option_labels(table: dict[str, Any]) -> list[str]:
    """Every non-substantive option's label, of ``[scale]`` and the items' scales, once each."""
    scales = [table["scale"], *(sc for _, sc in _own_scales(table))]
    return list(
        dict.fromkeys(str(o["label"]) for sc in scales for o in sc.get("nonsubstantive", []))
    )


def translation_problems(table: dict[str, Any], language: str) -> list[str]:
    """Every text ``[translations.<language>]`` lacks, and every key it gives that the
    instrument has not, each named by item (framing, anchor, option, lexicon level and
    field) and language.

    Examples
    --------
    >>> table = {"items": [{"id": "tv", "template": "x", "scale": {"min": 0, "max": 7,
    ...          "anchors": {0: "None", 7: "Every day"}}}],
    ...          "scale": {"min": 1, "max": 5, "nonsubstantive": [{"label": "Don't know"}]},
    ...          "translations": {"de": {"items": {"tv": "y"}, "item_anchors": {"tv": {0: "Keinen"}}}}}
    >>> for p in translation_problems(table, "de"):
    ...     print(p)
    [translations.de]: item 'tv' scale anchor 7 has no 'de' translation
    [translations.de]: option "Don't know" has no 'de' translation
    """
    tr = table.get("translations", {}).get(language, {})
    where = f"[translations.{language}]"
    missing = [
        f"{where}: item {item['id']!r} has no {language!r} translation"
        for item in table["items"]
        if str(item["id"]) not in {str(k) for k in tr.get("items", {})}
    ]
    missing += [
        f"{where}: framing {name!r} has no {language!r} translation"
        for name in table.get("framings", {})
        if name not in tr.get("framings", {})
    ]
    known_ids = {str(item["id"]) for item in table["items"]}
    missing += [
        f"{where}: item {k!r} is not an item of the instrument"
        for k in tr.get("items", {})
        if str(k) not in known_ids
    ]
    given = {int(k) for k in tr.get("anchors", {})}
    missing += [
        f"{where}: scale anchor {k} has no {language!r} translation"
        for k in table["scale"].get("anchors", {})
        if int(k) not in given
    ]
    for level, values in table.get("lexicon", {}).items():
        have = tr.get("lexicon", {}).get(level, {})
        missing += [
            f"{where}: lexicon level {level!r} field {key!r} has no {language!r} translation"
            for key in values
            if key not in have
        ]
    return missing + _option_problems(table, tr, where, language)


def _option_problems(
    table: dict[str, Any], tr: dict[str, Any], where: str, language: str
) -> list[str]:
    """The items' own anchors and the non-substantive options a translation lacks or
    names wrongly."""
    own = dict(_own_scales(table))
    given = {str(k): {int(y) for y in v} for k, v in tr.get("item_anchors", {}).items()}
    missing = []
    for item, scale in own.items():
        anchors = {int(y) for y in scale.get("anchors", {})}
        missing += [
            f"{where}: item {item!r} scale anchor {y} has no {language!r} translation"
            for y in sorted(anchors - given.get(item, set()))
        ]
        missing += [
            f"{where}: item {item!r} scale anchor {y} is not an anchor of the item's own "
            "scale ([items.scale.anchors])"
            for y in sorted(given.get(item, set()) - anchors)
        ]
    missing += [
        f"{where}: item_anchors {k!r} is not an item with its own scale ([items.scale])"
        for k in given
        if k not in own
    ]
    options = _option_labels(table)
    have = {str(k) for k in tr.get("nonsubstantive", {})}
    missing += [
        f"{where}: option {o!r} has no {language!r} translation" for o in options if o not in have
    ]
    missing += [
        f"{where}: nonsubstantive {k!r} is not an option of the instrument "
        f"(options: {', '.join(map(repr, options)) or 'none'})"
        for k in sorted(have - set(options))
    ]
    return missing


def translated_table(table: dict[str, Any], language: str) -> dict[str, Any]:
    """The instrument's table with every text in ``language`` (its translations dropped;
    :func:`translation_problems` found nothing)."""
    tr = table.get("translations", {}).get(language, {})
    items = {str(k): v for k, v in tr.get("items", {}).items()}
    anchors = {str(k): v for k, v in tr.get("item_anchors", {}).items()}
    options = {str(k): v for k, v in tr.get("nonsubstantive", {}).items()}

    def scale(sc: dict[str, Any], new_anchors: dict[Any, str]) -> dict[str, Any]:
        out = {**sc, "anchors": dict(new_anchors)}
        if "nonsubstantive" in sc:
            out["nonsubstantive"] = [
                {**o, "label": options[str(o["label"])]} for o in sc["nonsubstantive"]
            ]
        return out

    def item(it: dict[str, Any]) -> dict[str, Any]:
        out = {**it, "template": items[str(it["id"])]}
        if "scale" in it:
            out["scale"] = scale(it["scale"], anchors.get(str(it["id"]), {}))
        return out

    out = {k: v for k, v in table.items() if k != "translations"}
    out["instrument"] = {**table["instrument"], "language": language}
    out["items"] = [item(it) for it in table["items"]]
    if "framings" in table:
        out["framings"] = dict(tr["framings"])
    out["scale"] = scale(table["scale"], tr.get("anchors", {}))
    if "lexicon" in table:
        out["lexicon"] = {lv: dict(tr["lexicon"][lv]) for lv in table["lexicon"]}
    return out


def _named(options: tuple[Option, ...], own: list[dict[str, Any]]) -> tuple[Option, ...]:
    return tuple(replace(o, name=str(x["label"])) for o, x in zip(options, own, strict=True))


def named_options(inst: Any, table: dict[str, Any]) -> Any:
    """``inst`` (parsed from :func:`translated_table`) with each non-substantive option
    named by the instrument's own label in ``table``, on ``[scale]`` and each item's scale."""
    own = dict(_own_scales(table))

    def item(it: Item) -> Item:
        if it.scale is None or it.id not in own:
            return it
        sc: Scale = it.scale
        opts = _named(sc.nonsubstantive, own[it.id].get("nonsubstantive", []))
        return replace(it, scale=replace(sc, nonsubstantive=opts))

    return replace(
        inst,
        nonsubstantive=_named(inst.nonsubstantive, table["scale"].get("nonsubstantive", [])),
        items=tuple(item(it) for it in inst.items),
    )
