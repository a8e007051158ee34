"""An instrument's text in another language: ``[translations.<language>]`` applied.

:func:`translation_problems` names every text a translation lacks (and every key it
gives that the instrument does not have), by item, framing, anchor, option or lexicon
entry and language; :func:`translated_table` is the instrument's table with the
translated texts; :func:`named_options` gives the translated non-substantive options
the instrument's own labels as their names (:attr:`~xlikert.design.scale.Option.name`),
so the ``option`` coordinate of results is one coordinate across languages.

An experiment with a ``language`` factor translates the texts it adds to the
instrument's (``[experiment] system`` and ``user``, its ``[scale]`` labels) in its own
``[translations.<language>]``: :func:`experiment_translation_problems` names what is
missing, :func:`translated_experiment` applies them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .elicitation import stated_instruction_problem
from .items import Item
from .scale import Option, Scale

__all__ = [
    "experiment_translation_problems",
    "named_options",
    "translated_experiment",
    "translated_table",
    "translation_problems",
]


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


#: The experiment's own texts of its ``[experiment]`` table that a translation gives.
_TEXTS = ("system", "user", "stated_instruction")


def _experiment_texts(table: dict[str, Any]) -> dict[str, Any]:
    """The texts an experiment table adds to its instrument's: ``system``, ``user`` (when
    given and not the default ``{item}``), ``stated_instruction``, its ``[scale]`` anchors
    and option labels."""
    head, scale = table.get("experiment", {}), table.get("scale") or {}
    out: dict[str, Any] = {}
    if head.get("system"):  # "" (no system prompt) has nothing to translate
        out["system"] = head["system"]
    if head.get("user", "{item}") != "{item}":
        out["user"] = head["user"]
    if head.get("stated_instruction"):
        out["stated_instruction"] = head["stated_instruction"]
    if scale.get("anchors"):
        out["anchors"] = {int(k) for k in scale["anchors"]}
    if scale.get("nonsubstantive"):
        out["nonsubstantive"] = [str(o["label"]) for o in scale["nonsubstantive"]]
    return out


def experiment_translation_problems(
    table: dict[str, Any], languages: tuple[str, ...] | None, own: str
) -> list[str]:
    """Every text of an experiment (``system``, ``user``, ``[scale]`` labels) that its
    ``[translations.<language>]`` lacks for a level of its language factor, and every
    translation no level needs, each named by text and language.

    Parameters
    ----------
    table : dict
        The experiment table as parsed.
    languages : tuple of str or None
        The levels of its language factor (None: it has none).
    own : str
        The instrument's own language (its level uses the experiment's own texts).

    Examples
    --------
    >>> table = {"experiment": {"instrument": "bfi_short", "system": "Answer {answer_labels}."},
    ...          "scale": {"min": 1, "max": 5, "anchors": {1: "No", 5: "Yes"}},
    ...          "translations": {"de": {"system": "Antworten Sie {answer_labels}.",
    ...                                  "anchors": {1: "Nein"}}}}
    >>> for p in experiment_translation_problems(table, ("en", "de", "zh"), "en"):
    ...     print(p)
    [translations.de]: the experiment's [scale] anchor 5 has no 'de' translation
    [translations.zh]: the experiment's [experiment] system has no 'zh' translation (give it; the same text keeps it)
    [translations.zh]: the experiment's [scale] anchor 1 has no 'zh' translation
    [translations.zh]: the experiment's [scale] anchor 5 has no 'zh' translation
    """
    given = table.get("translations") or {}
    if languages is None:
        return [
            f"[translations.{lv}]: the experiment has no language factor to translate its texts for"
            for lv in given
        ]
    texts, problems = _experiment_texts(table), []
    for lv in given:
        if lv == own:
            problems.append(
                f"[translations.{lv}]: {lv!r} is the instrument's own language: the experiment's "
                "own texts are its texts"
            )
        elif lv not in languages:
            problems.append(
                f"[translations.{lv}]: {lv!r} is not a level of the language factor "
                f"(levels: {', '.join(languages)})"
            )
    for lv in languages:
        if lv == own:
            continue
        tr, where = given.get(lv, {}), f"[translations.{lv}]"
        problems += [
            f"{where}: the experiment's [experiment] {key} has no {lv!r} translation "
            "(give it; the same text keeps it)"
            for key in _TEXTS
            if key in texts and key not in tr
        ]
        said = tr.get("stated_instruction")
        bad = None if said is None else stated_instruction_problem(said)
        if bad is not None:
            problems.append(f"{where}: stated_instruction {bad}")
        have = {int(k) for k in tr.get("anchors", {})}
        problems += [
            f"{where}: the experiment's [scale] anchor {y} has no {lv!r} translation"
            for y in sorted(texts.get("anchors", set()) - have)
        ]
        problems += [
            f"{where}: the experiment's [scale] anchor {y} is not an anchor of its [scale]"
            for y in sorted(have - texts.get("anchors", set()))
        ]
        options, named = (
            texts.get("nonsubstantive", []),
            {str(k) for k in tr.get("nonsubstantive", {})},
        )
        problems += [
            f"{where}: the experiment's [scale] option {o!r} has no {lv!r} translation"
            for o in options
            if o not in named
        ]
        problems += [
            f"{where}: nonsubstantive {k!r} is not an option of the experiment's [scale]"
            for k in sorted(named - set(options))
        ]
        problems += [
            f"{where}: the experiment sets no {key} to translate"
            for key in _TEXTS
            if key in tr and key not in texts
        ]
    return problems


def translated_experiment(table: dict[str, Any], language: str) -> dict[str, Any]:
    """The experiment table with its own texts in ``language`` and no translations
    (:func:`experiment_translation_problems` found nothing); the own language's table
    is returned without its translations."""
    out = {k: v for k, v in table.items() if k != "translations"}
    tr = (table.get("translations") or {}).get(language)
    if tr is None:
        return out
    head = {**out["experiment"]}
    head.update({k: tr[k] for k in _TEXTS if k in tr})
    out["experiment"] = head
    if out.get("scale"):
        scale = {**out["scale"]}
        if "anchors" in tr:
            scale["anchors"] = dict(tr["anchors"])
        if scale.get("nonsubstantive"):
            names = {str(k): v for k, v in tr.get("nonsubstantive", {}).items()}
            scale["nonsubstantive"] = [
                {**o, "label": names[str(o["label"])]} for o in scale["nonsubstantive"]
            ]
        out["scale"] = scale
    return out
