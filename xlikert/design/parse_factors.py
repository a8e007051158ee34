"""Parsing an experiment's factors: ``[factors.*]`` -> :class:`Factor`, formats included.

Each factor kind (lexicon, framing, free, respondent, language, administration,
item order, elicitation and response format) is read from its table here, every
problem collected, for :func:`xlikert.design.parser.experiment_from_dict`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..core.dims import ADMINISTRATION_DIM
from ..core.errors import (
    ConfigError,
    DesignError,
    FormatError,
    LabelMappingError,
    TemplateSyntaxError,
)
from .elicitation import ELICITATION_DIM, check_elicitation_levels
from .experiment import Factor
from .file_schema import FactorSpec
from .formats import (
    BUILTIN_FORMATS,
    DEFAULT_MAX_LEVELS,
    ResponseFormat,
    builtin_format,
    format_from_table,
)
from .instrument import Instrument
from .item_order import ADMINISTRATIONS, item_orders
from .items import Item, has_item_scales, nominal_problems
from .option_order import permuted_formats
from .perturbation import Perturbation, parse_rule
from .problems import Problems, suggest
from .scale import Scale
from .template import Template


@dataclass(frozen=True)
class ItemScales:
    """The response options of the items administered: the default, and each item's."""

    default: Scale
    by_item: dict[str, Scale]
    per_item: bool  # some item's options differ from the default's plain codes

    def groups(self) -> list[tuple[Scale, list[str]]]:
        """Each distinct scale and the ids of its items (the default first when used)."""
        out: dict[tuple, tuple[Scale, list[str]]] = {}
        for item_id, scale in self.by_item.items():
            out.setdefault(scale.key, (scale, []))[1].append(item_id)
        return sorted(out.values(), key=lambda g: g[0].key != self.default.key)


def parse_item_scales(
    p: Problems, items: tuple[Item, ...], default: Scale, overridden: bool
) -> ItemScales:
    """Each item's options (its own, or the default); a nominal item's checked against them."""
    by_item = {it.id: it.scale or default for it in items}
    for it in items:
        if it.nominal and it.scale is None and overridden and (why := nominal_problems(default)):
            p.add(f"item {it.id!r}", why + " (the experiment's [scale])")
    return ItemScales(default, by_item, has_item_scales(items, default))


def parse_factors(
    p: Problems,
    inst: Instrument,
    specs: dict[str, FactorSpec],
    scales: ItemScales,
    items: tuple[Item, ...] = (),
) -> tuple[list[Factor], bool]:
    """The factors that parse, and whether any failed to."""
    factors = [
        _parse_language(p, inst, name, spec)
        if spec.kind == "language"
        else _parse_format(p, name, spec, scales)
        if spec.kind == "format"
        else _parse_perturbation(p, name, spec, items)
        if spec.kind == "perturbation"
        else _parse_elicitation(p, name, spec)
        if spec.kind == "elicitation" or (spec.kind is None and name == ELICITATION_DIM)
        else _parse_context(p, name, spec, items)
        if spec.kind in ("administration", "item_order") or name == ADMINISTRATION_DIM
        else _parse_factor(p, inst, name, spec)
        for name, spec in specs.items()
    ]
    if scales.per_item and not any(spec.kind == "format" for spec in specs.values()):
        _check_shown(p, scales, None, "")
    parsed = [f for f in factors if f is not None]
    _check_context(p, parsed)
    framing = [f.name for f in parsed if f.kind == "framing"]
    if len(framing) > 1:
        p.add("[factors]", f"only one framing factor may set the system prompt, got {framing}")
    formats = [f.name for f in parsed if f.kind == "format"]
    if len(formats) > 1:
        p.add("[factors]", f"only one factor may set the response format, got {formats}")
    languages = [f.name for f in parsed if f.kind == "language"]
    if len(languages) > 1:
        p.add("[factors]", f"only one factor may set the language, got {languages}")
    return parsed, len(parsed) < len(factors)


def _parse_language(p: Problems, inst: Instrument, name: str, spec: FactorSpec) -> Factor | None:
    """A ``language`` factor: its levels are languages of the instrument (default: all),
    each translation complete (every missing text named, by item and language)."""
    where = f"factor {name!r}"
    raw = list(inst.languages) if spec.levels is None else spec.levels
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        p.add(where, "levels of a language factor are language tags, e.g. ['en', 'de', 'zh']")
        return None
    n_before = len(p.lines)
    for lv in raw:
        if lv not in inst.languages:
            p.add(
                where,
                f"level {lv!r} is not a language of instrument {inst.name!r}"
                f"{suggest(lv, inst.languages)}; languages: {', '.join(inst.languages)}",
            )
            continue
        try:
            inst.translated(lv)
        except ConfigError as exc:
            p.add(where, str(exc))
    if len(set(raw)) < len(raw):
        p.add(where, f"repeats a language: {raw}")
    if len(p.lines) > n_before:
        return None
    bindings = {lv: {name: lv} for lv in raw}
    return Factor(name, "language", tuple(raw), bindings, description=spec.description)


def _parse_context(
    p: Problems, name: str, spec: FactorSpec, items: tuple[Item, ...]
) -> Factor | None:
    """A factor of kind ``administration`` or ``item_order`` (:mod:`.item_order`)."""
    where = f"factor {name!r}"
    kind = spec.kind or "administration"
    raw = spec.levels
    if kind == "administration":
        if name != ADMINISTRATION_DIM:
            p.add(where, f"a factor of kind 'administration' must be named {ADMINISTRATION_DIM!r}")
            return None
        levels = list(ADMINISTRATIONS) if raw is None else list(raw)
        bad = [lv for lv in levels if lv not in ADMINISTRATIONS]
        if bad or isinstance(raw, dict):
            p.add(where, f"levels must be among {list(ADMINISTRATIONS)} (an array), got {raw}")
            return None
        return Factor(name, kind, tuple(levels), {lv: {} for lv in levels}, {}, spec.description)
    if raw is None:
        p.add(where, "field 'levels' is missing (e.g. ['as_listed', 'reversed'])")
        return None
    entries = list(raw) if isinstance(raw, list) else [
        (lv, str(v).replace(",", " ").split()) for lv, v in raw.items()
    ]  # fmt: skip
    try:
        orders = item_orders([it.id for it in items], entries)
    except DesignError as exc:
        p.add(where, str(exc))
        return None
    order_levels = tuple(orders)
    return Factor(name, kind, order_levels, {lv: {} for lv in order_levels}, {}, spec.description,
                  orders={lv: tuple(o) for lv, o in orders.items()})  # fmt: skip


def _parse_elicitation(p: Problems, name: str, spec: FactorSpec) -> Factor | None:
    """A factor of kind ``elicitation`` (:mod:`.elicitation`): how the answer is read."""
    where = f"factor {name!r}"
    if name != ELICITATION_DIM:
        p.add(where, f"a factor of kind 'elicitation' must be named {ELICITATION_DIM!r}")
        return None
    raw = spec.levels
    if isinstance(raw, dict):
        p.add(where, f"levels must be a list of names (an array), got {raw}")
        return None
    try:
        levels = check_elicitation_levels(
            ["first_token", "prefix", "greedy"] if raw is None else list(raw)
        )
    except DesignError as exc:
        p.add(where, str(exc))
        return None
    return Factor(name, "elicitation", levels, {lv: {} for lv in levels}, {}, spec.description)


def _parse_perturbation(
    p: Problems, name: str, spec: FactorSpec, items: tuple[Item, ...]
) -> Factor | None:
    """A factor of kind ``perturbation`` (:mod:`.perturbation`): each level a stated rule on
    the item text; a bad rule or rate, or a paraphrase that lacks an item, named."""
    where = f"factor {name!r}"
    raw = spec.levels
    if not isinstance(raw, dict):
        p.add(where, "levels must be a table of level -> rule, e.g. "
                     "{ clean = 'none', typos = 'typos rate=0.05 seed=1' }")  # fmt: skip
        return None
    n_before = len(p.lines)
    rules: dict[str, Perturbation] = {}
    ids = [it.id for it in items]
    for lv, value in raw.items():
        try:
            rules[lv] = parse_rule(value, ids)
        except DesignError as exc:
            p.add(f"{where} level {lv!r}", str(exc))
            continue
        for it in items if rules[lv].paraphrases else ():
            _check_paraphrase(p, f"{where} level {lv!r}", it, rules[lv].paraphrases[it.id])
    if len(p.lines) > n_before:
        return None
    return Factor(name, "perturbation", tuple(rules), {lv: {} for lv in rules}, {},
                  spec.description, perturbations=rules)  # fmt: skip


def _check_paraphrase(p: Problems, where: str, item: Item, text: str) -> None:
    """A paraphrase is a template whose placeholders the item's own template has."""
    try:
        fields = set(Template.parse(text).fields)
    except TemplateSyntaxError as exc:
        p.add(where, f"item {item.id!r}: paraphrase template syntax: {exc}")
        return
    own = set(Template.parse(item.template).fields)
    if extra := sorted(fields - own):
        p.add(where, f"item {item.id!r}: the paraphrase uses placeholders {extra} that the "
                     f"item's template does not (it has {sorted(own)})")  # fmt: skip


def _check_context(p: Problems, factors: list[Factor]) -> None:
    """An item order needs sequential administration and nothing isolated (it would change no
    prompt); one of each kind."""
    for kind in ("administration", "item_order"):
        named = [f.name for f in factors if f.kind == kind]
        if len(named) > 1:
            p.add("[factors]", f"only one factor of kind {kind!r}, got {named}")
    order = next((f for f in factors if f.kind == "item_order"), None)
    admin = next((f for f in factors if f.kind == "administration"), None)
    if order is not None and (admin is None or "isolated" in admin.levels):
        p.add(
            f"factor {order.name!r}",
            "an item order changes no prompt under isolated administration (every item has "
            "its own prompt): add [factors.administration] levels = ['sequential'] or drop it",
        )


def _inferred_kind(inst: Instrument, name: str) -> str:
    """A factor's kind from the instrument's factor names (see :data:`KINDS`)."""
    if name == inst.lexicon_factor and inst.lexicon:
        return "lexicon"
    return "framing" if name == inst.framing_factor else "free"


def _parse_factor(p: Problems, inst: Instrument, name: str, spec: FactorSpec) -> Factor | None:
    """A factor's levels and what each binds; None (problems reported) if unusable."""
    where = f"factor {name!r}"
    kind = spec.kind or _inferred_kind(inst, name)
    if given := [k for k in ("permute", "max_levels") if getattr(spec, k) is not None]:
        p.add(where, f"field(s) {given} are for factors of kind 'format', this one is {kind!r}")
        return None
    raw = spec.levels
    if raw is None and kind in ("free", "respondent"):
        p.add(where, "field 'levels' is missing (a free factor needs its levels)")
        return None
    if raw is None:
        raw = list(inst.lexicon if kind == "lexicon" else inst.framings)
        if not raw:
            p.add(where, f"field 'levels' is missing and {inst.name} has no {kind} levels")
            return None
    bindings: dict[str, dict[str, str]] = {}
    systems: dict[str, str] = {}
    n_before = len(p.lines)
    if isinstance(raw, list):
        _levels_from_array(p, inst, name, kind, raw, bindings, systems)
    else:
        _levels_from_table(p, name, kind, raw, bindings, systems)
    if len(p.lines) > n_before:
        return None
    # a level label is also available as {factor} unless a level binds that field itself
    if not any(name in b for b in bindings.values()):
        bindings = {level: {**b, name: level} for level, b in bindings.items()}
    return Factor(name, kind, tuple(bindings), bindings, systems, spec.description)


def _levels_from_array(
    p: Problems,
    inst: Instrument,
    name: str,
    kind: str,
    levels: list[str],
    bindings: dict[str, dict[str, str]],
    systems: dict[str, str],
) -> None:
    """Levels given by label: lexicon levels and framings of the instrument, or free labels."""
    where = f"factor {name!r}"
    for lv in levels:
        if lv in bindings:
            p.add(where, f"duplicate level {lv!r}")
        elif kind == "lexicon" and lv not in inst.lexicon:
            p.add(
                where,
                f"level {lv!r} is not in the lexicon of {inst.name}{suggest(lv, inst.lexicon)}; "
                f"lexicon levels: {', '.join(inst.lexicon) or 'none'} "
                f"(or give the level's fields inline: [factors.{name}.levels.{lv}])",
            )
        elif kind == "framing" and lv not in inst.framings:
            p.add(
                where,
                f"level {lv!r} is not a framing of {inst.name}{suggest(lv, inst.framings)}; "
                f"framings: {', '.join(inst.framings) or 'none'}",
            )
        elif kind == "lexicon":
            bindings[lv] = dict(inst.lexicon[lv])
        elif kind == "framing":
            bindings[lv], systems[lv] = {}, inst.framings[lv]
        else:
            bindings[lv] = {name: lv}


def _levels_from_table(
    p: Problems,
    name: str,
    kind: str,
    levels: dict[str, str | dict[str, str | list[str]]],
    bindings: dict[str, dict[str, str]],
    systems: dict[str, str],
) -> None:
    """Levels given inline: a framing's template, a free factor's text, or a table of fields."""
    for lv, value in levels.items():
        where = f"factor {name!r} level {lv!r}"
        if kind == "framing" and not isinstance(value, str):
            p.add(where, f"must be a string (the system prompt template), got {value!r}")
        elif kind == "framing":
            bindings[lv], systems[lv] = {}, str(value)
        elif isinstance(value, str) and kind == "lexicon":
            p.add(where, f"must be a table of lexicon fields, got {value!r}")
        elif isinstance(value, str):
            bindings[lv] = {name: value}
        elif lists := [k for k, v in value.items() if not isinstance(v, str)]:
            p.add(where, f"field(s) {lists} must be strings (arrays are for format levels)")
        else:
            bindings[lv] = {k: str(v) for k, v in value.items()}  # every one a string (above)


def _parse_format(p: Problems, name: str, spec: FactorSpec, scales: ItemScales) -> Factor | None:
    """A factor of kind ``format``: each level a built-in format or an inline table, or
    (``permute``) one format shown in every rotation or permutation of the points.

    Each level binds the scale placeholders as its format renders them on the
    default scale (:meth:`~xlikert.design.formats.ResponseFormat.fields`; an item
    with its own options renders its own, :meth:`~xlikert.design.scale.Scale.show`)
    and ``{<factor>}`` (the level label); a level whose labels are not a bijection
    onto an item's scale is a :class:`~xlikert.core.errors.LabelMappingError`.
    """
    default = scales.default
    lo, hi = default.min, default.max
    where = f"factor {name!r}"
    raw = spec.levels
    if raw is None and spec.permute is None:
        p.add(where, f"field 'levels' is missing (built-in formats: {', '.join(BUILTIN_FORMATS)})")
        return None
    if spec.max_levels is not None and spec.permute is None:
        p.add(where, "field 'max_levels' caps what 'permute' makes; this factor has no 'permute'")
        return None
    n_before = len(p.lines)
    entries = list(raw.items()) if isinstance(raw, dict) else [(lv, None) for lv in raw or []]
    n_points = hi - lo + 1
    formats: dict[str, ResponseFormat] = {}
    if spec.permute is not None:
        formats = _permuted_levels(p, name, spec, entries, n_points)
    for lv, value in entries if spec.permute is None else []:
        fmt = _one_format(p, name, lv, value, n_points)
        if lv in formats:
            p.add(where, f"duplicate level {lv!r}")
        elif fmt is not None:
            formats[lv] = fmt
    for lv, fmt in formats.items():
        if not _check_shown(p, scales, fmt, f"{where} level {lv!r}") and spec.permute is not None:
            break  # the permuted levels share the problem: once is enough
    if len(p.lines) > n_before:
        return None
    bindings = {
        lv: {**default.show(fmt).fields, name: lv}
        if any(s.key == default.key for s, _ in scales.groups())
        else {name: lv}
        for lv, fmt in formats.items()
    }
    return Factor(
        name, "format", tuple(formats), bindings, description=spec.description, formats=formats
    )


def _one_format(
    p: Problems, name: str, lv: str, value: Any, n_points: int
) -> ResponseFormat | None:
    """The format of level ``lv`` of factor ``name``: a built-in name or an inline table
    (None: problems reported)."""
    at = f"factor {name!r} level {lv!r}"
    if value is None or isinstance(value, str):
        base = lv if value is None else value
        if base not in BUILTIN_FORMATS:
            p.add(
                at,
                f"{base!r} is not a built-in format{suggest(base, BUILTIN_FORMATS)}; "
                f"built-in: {', '.join(BUILTIN_FORMATS)} (or give a table: "
                f"[factors.{name}.levels.{lv}] with base, order, anchors, labels)",
            )
            return None
        return replace(builtin_format(base, n_points), name=lv)
    try:
        return format_from_table(lv, value, n_points)
    except ValueError as exc:
        p.add(at, str(exc))
        return None


def _permuted_levels(
    p: Problems, name: str, spec: FactorSpec, entries: list[tuple[str, Any]], n_points: int
) -> dict[str, ResponseFormat]:
    """``permute``: the one format of ``levels`` (default ``labelled``) in every order."""
    where = f"factor {name!r}"
    if len(entries) > 1:
        p.add(
            where,
            f"'permute' shows one format in every order: 'levels' names at most one (the "
            f"format to permute), got {len(entries)}",
        )
        return {}
    lv, value = entries[0] if entries else ("labelled", None)
    base = _one_format(p, name, lv, value, n_points)
    if base is None:
        return {}
    try:
        return permuted_formats(
            base, n_points, str(spec.permute), spec.max_levels or DEFAULT_MAX_LEVELS
        )
    except FormatError as exc:
        p.add(where, str(exc), FormatError)
        return {}


def _check_shown(p: Problems, scales: ItemScales, fmt: ResponseFormat | None, at: str) -> bool:
    """Every item's options can be shown and read under ``fmt``; False (reported) if not."""
    ok = True
    for scale, ids in scales.groups():
        try:
            scale.show(fmt)
        except LabelMappingError as exc:
            own = scale.key != scales.default.key
            items = f"item(s) {', '.join(map(repr, ids))} on their own scale" if own else ""
            p.add(
                ", ".join(x for x in (at, items) if x) or "the scale", str(exc), LabelMappingError
            )
            ok = False
    return ok
