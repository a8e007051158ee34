"""Reading experiment files: TOML (or an already parsed table) -> :class:`Experiment`.

:func:`load_experiment` reads a file or a built-in experiment by name and
:func:`experiment_from_dict` a parsed table; both validate every field against
the file schema (:mod:`xlikert.design.file_schema`), collect every problem
(:mod:`xlikert.design.problems`) and check each template against the fields its
factor levels supply, so :meth:`Experiment.build_prompts` cannot fail half-way.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from ..core.dims import ADMINISTRATION_DIM
from ..core.errors import (
    ConfigError,
    DesignError,
    FormatError,
    FormatNotShownError,
    LabelMappingError,
)
from .elicitation import ELICITATION_DIM, check_elicitation_levels
from .experiment import Experiment, Factor
from .file_schema import (
    RESERVED,
    SCALE_FIELDS,
    ExperimentFile,
    ExperimentHead,
    FactorSpec,
    ModelSpec,
)
from .formats import (
    BUILTIN_FORMATS,
    DEFAULT_MAX_LEVELS,
    LABEL_FIELDS,
    ResponseFormat,
    builtin_format,
    format_from_table,
)
from .instrument import (
    Instrument,
    Item,
    builtin_instruments,
    has_item_options,
    load_instrument,
    nominal_problems,
    resolve_file,
    scale_from_spec,
)
from .item_order import ADMINISTRATIONS, item_orders
from .option_order import permuted_formats
from .problems import Problems, read_toml, suggest, validate
from .scale import Scale
from .template import Template, TemplateSyntaxError

__all__ = ["builtin_experiments", "experiment_from_dict", "load_experiment"]


def _experiment_dir():
    return resources.files("xlikert.design").joinpath("experiments")


def builtin_experiments() -> list[str]:
    """Names of the experiments shipped with xlikert (``"demo"``, ``"paper"``, ``"framing"``, ...).

    Returns
    -------
    list of str
        The names, sorted; each loads with :func:`load_experiment`.

    Examples
    --------
    >>> builtin_experiments()
    ['anes96', 'anes96_survey', 'demo', 'formats', 'framing', 'paper']
    """
    return sorted(
        p.name.removesuffix(".toml")
        for p in _experiment_dir().iterdir()
        if p.name.endswith(".toml")
    )


def load_experiment(path_or_builtin: str | Path) -> Experiment:
    """Load and validate an experiment file, or a built-in experiment by name.

    Parameters
    ----------
    path_or_builtin : str or pathlib.Path
        Path of a TOML experiment file, or a built-in name (``"demo"``: the
        offline demo, 3 zoo models x 4 targets on CETSCALE; ``"paper"``: the
        paper's 5 x 4 design; ``"framing"``: 3 models x 4 targets x 6 framings;
        ``"formats"``: 3 response formats x 4 targets on SmolLM2-135M;
        ``"anes96"``: the ANES 1996 example; see :func:`builtin_experiments`).
        A string is read as a path when it names an existing file, ends in
        ``.toml`` or holds a path separator.

    Returns
    -------
    Experiment
        The validated experiment: its factors, items, models and templates;
        :meth:`Experiment.build_prompts` renders its prompts.

    Raises
    ------
    ConfigError
        Listing every problem, each naming the file, the item or table and the field.

    Examples
    --------
    >>> exp = load_experiment("framing")
    >>> exp.factors["prompt"][:2], exp.n_prompts
    (['v0_original', 'v1_participant'], 408)
    """
    path = resolve_file(path_or_builtin, "experiment", _experiment_dir(), builtin_experiments())
    table, digest = read_toml(path)
    return experiment_from_dict(table, file=str(path), sha256=digest, base_dir=path.parent)


def experiment_from_dict(
    table: dict[str, Any],
    *,
    file: str = "<dict>",
    sha256: str | None = None,
    base_dir: str | Path | None = None,
    _instrument: Instrument | None = None,
) -> Experiment:
    """Build an :class:`Experiment` from an already parsed table (same schema as the file).

    Parameters
    ----------
    table : dict
        The experiment as a TOML file would parse: ``[experiment]``, ``[factors.*]``,
        ``[[models]]``, optional ``[scale]``, ``[constants]`` and ``[collect]``
        (see :doc:`/design-files`).
    file : str, default "<dict>"
        The name the error messages give the table; its stem is the experiment's
        name when ``[experiment]`` has none.
    sha256 : str, optional
        The experiment's hash, recorded in the results; default: the SHA-256 of the
        table's canonical JSON.
    base_dir : str or pathlib.Path, optional
        The folder a relative instrument path is resolved against (default: the
        working directory).
    _instrument : Instrument, optional
        Internal: the instrument to use instead of ``[experiment] instrument`` (one
        language of an experiment with a ``language`` factor).

    Returns
    -------
    Experiment
        The validated experiment.

    Raises
    ------
    ConfigError
        Listing every problem, each naming the file, the item or table and the field.

    Examples
    --------
    >>> exp = experiment_from_dict({
    ...     "experiment": {"name": "mini", "instrument": "cetscale", "items": ["1", "2"]},
    ...     "factors": {"target": {"levels": ["USA", "France"]}},
    ...     "models": [{"name": "SmolLM2-135M-Instruct", "source": "smollm2-135m-instruct"}],
    ... })
    >>> exp.factors, exp.n_prompts
    ({'target': ['USA', 'France']}, 4)
    >>> experiment_from_dict({"experiment": {"instrument": "cetscal"}})
    Traceback (most recent call last):
    ...
    xlikert.core.errors.ConfigError: <dict>: [experiment], field 'instrument': ...'cetscale'?); ...
    """
    if not isinstance(table, dict):
        raise ConfigError(f"{file}: an experiment must be a table, got {type(table).__name__}")
    p = Problems(file)
    spec = validate(ExperimentFile, table, p)
    head = spec.experiment
    inst = _instrument_of(p, head.instrument, base_dir) if _instrument is None else _instrument
    default = inst.response_scale if spec.scale is None else scale_from_spec(spec.scale)
    items = _select_items(p, inst, head.items)
    scales = _item_scales(p, items, default, overridden=spec.scale is not None)
    factors, failed = _parse_factors(p, inst, spec.factors, scales, items)
    system_text, system_source = _system_prompt(p, inst, head, factors)
    models = _check_models(p, spec.models)
    constants = dict(spec.constants)
    supply = _Suppliers.of(p, inst, constants, factors, lenient=failed)
    user_templates = _user_templates(p, inst, head.user, items, supply)
    system_templates = _system_templates(p, factors, system_text, system_source, supply)
    _check_format_shown(p, factors, user_templates, system_templates, (default.min, default.max))
    _check_item_options_shown(p, items, scales, default, user_templates, system_templates)
    _check_factors_change_prompts(p, factors, (*user_templates, *system_templates.values()))
    p.raise_if_any()
    if sha256 is None:
        sha256 = hashlib.sha256(json.dumps(table, sort_keys=True, default=str).encode()).hexdigest()
    by_language: dict[str, Experiment] = {}
    for f in factors:
        if f.kind == "language":  # one experiment per language, without the factor
            rest = {**table, "factors": {k: v for k, v in table.get("factors", {}).items()
                                         if k != f.name}}  # fmt: skip
            for lv in f.levels:
                by_language[lv] = experiment_from_dict(
                    rest, file=file, sha256=sha256, base_dir=base_dir,
                    _instrument=inst.translated(lv),
                )  # fmt: skip
    return Experiment(
        name=head.name or (Path(file).stem if file != "<dict>" else "experiment"),
        description=head.description,
        instrument=inst,
        factor_specs=tuple(factors),
        models=models,
        items=items,
        scale_min=default.min,
        scale_max=default.max,
        anchors=dict(default.anchors),
        constants=constants,
        system=system_text,
        system_source=system_source,
        user=head.user,
        path=file,
        sha256=sha256,
        collect=dict(spec.collect) if spec.collect is not None else None,
        nonsubstantive=default.nonsubstantive,
        answers=default.answers,
        _user_templates=user_templates,
        _system_templates=system_templates,
        _by_language=by_language,
    )


def _instrument_of(p: Problems, ref: str, base_dir: str | Path | None) -> Instrument:
    """The instrument named by ``[experiment] instrument`` (a path relative to ``base_dir``)."""
    target: str | Path = ref
    if ref not in builtin_instruments() and base_dir is not None:
        candidate = Path(base_dir) / ref
        target = candidate if candidate.is_file() or ref.endswith(".toml") else ref
    try:
        return load_instrument(target)
    except ConfigError as exc:
        p.add("[experiment], field 'instrument'", str(exc))
        raise p.error() from None


def _select_items(p: Problems, inst: Instrument, chosen: list[str] | None) -> tuple[Item, ...]:
    """The items administered: ``[experiment] items`` of the instrument, or all of them."""
    if chosen is None:
        return inst.items
    where, known = "[experiment], field 'items'", inst.item_ids
    bad = [x for x in chosen if x not in known]
    for x in bad:
        p.add(where, f"unknown item id {x!r}{suggest(x, known)}")
    dup = [x for x, n in Counter(chosen).items() if n > 1]
    if dup:
        p.add(where, f"duplicate item ids {dup}")
    return inst.items if bad or dup else tuple(inst.item(x) for x in chosen)


@dataclass(frozen=True)
class _ItemScales:
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


def _item_scales(
    p: Problems, items: tuple[Item, ...], default: Scale, overridden: bool
) -> _ItemScales:
    """Each item's options (its own, or the default); a nominal item's checked against them."""
    by_item = {it.id: it.scale or default for it in items}
    for it in items:
        if it.nominal and it.scale is None and overridden and (why := nominal_problems(default)):
            p.add(f"item {it.id!r}", why + " (the experiment's [scale])")
    return _ItemScales(default, by_item, has_item_options(items, default))


def _system_prompt(
    p: Problems, inst: Instrument, head: ExperimentHead, factors: list[Factor]
) -> tuple[str, str]:
    """The fixed system-prompt template ("" if none or varying) and where it comes from."""
    framing_factors = [f.name for f in factors if f.kind == "framing"]
    framing, system = head.framing, head.system
    if framing_factors and (framing is not None or system is not None):
        p.add(
            "[experiment]",
            f"'framing'/'system' conflict with the framing factor {framing_factors[0]!r}; drop one",
        )
    elif framing is not None and system is not None:
        p.add(
            "[experiment]",
            "give either 'framing' (a framing of the instrument) or 'system' (a template), not both",
        )
    elif framing_factors:
        return "", f"varies with factor {framing_factors[0]!r}"
    elif system is not None:
        return system, "custom template" if system else "none (empty system prompt)"
    else:
        chosen = inst.default_framing if framing is None else framing
        if chosen and chosen not in inst.framings:
            p.add(
                "[experiment], field 'framing'",
                f"unknown framing {chosen!r}{suggest(chosen, inst.framings)}; "
                f"framings of {inst.name}: {', '.join(inst.framings) or 'none'}",
            )
        elif chosen:
            return inst.framings[chosen], f"fixed framing {chosen!r}"
        else:
            return "", "none (empty system prompt)"
    return "", "none"


def _check_models(p: Problems, models: list[ModelSpec]) -> list[dict[str, Any]]:
    """One dict per model level (``name``, ``source``, further keys), names unique."""
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for k, m in enumerate(models):
        k = p.file_index("models", k)
        name = m.name or m.source
        if name in seen:
            p.add(
                f"model {name!r} (models[{k}])",
                f"duplicate model name {name!r} (first used by models[{seen[name]}])",
            )
            continue
        seen[name] = k
        rest = m.model_dump(exclude_unset=True, exclude={"name", "source"})
        out.append({"name": name, "source": m.source, **rest})
    return out


# --------------------------------------------------------------------------- factors


def _parse_factors(
    p: Problems,
    inst: Instrument,
    specs: dict[str, FactorSpec],
    scales: _ItemScales,
    items: tuple[Item, ...] = (),
) -> tuple[list[Factor], bool]:
    """The factors that parse, and whether any failed to."""
    factors = [
        _parse_language(p, inst, name, spec)
        if spec.kind == "language"
        else _parse_format(p, name, spec, scales)
        if spec.kind == "format"
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


# --------------------------------------------------------------------------- placeholders


@dataclass(frozen=True)
class _Suppliers:
    """Which factor, constant or scale field supplies each placeholder."""

    owner: dict[str, str]
    factors: dict[str, Factor]
    lenient: bool  # a factor failed to parse: an unknown placeholder may be its

    @classmethod
    def of(
        cls,
        p: Problems,
        inst: Instrument,
        constants: dict[str, str],
        factors: list[Factor],
        lenient: bool,
    ) -> _Suppliers:
        """Every placeholder's one supplier; a field supplied twice is a problem."""
        owner: dict[str, str] = dict.fromkeys(SCALE_FIELDS, "the scale")
        owner.update(dict.fromkeys(constants, "[constants]"))
        for f in factors:
            declared = f.fields
            if f.kind == "format":  # it renders the scale placeholders; it supplies its name
                declared = tuple(k for k in f.fields if k not in SCALE_FIELDS)
            if f.kind == "lexicon":  # an inline level lacking a lexicon field is reported per level
                declared = tuple(dict.fromkeys((*f.fields, *inst.lexicon_fields)))
            for key in declared:
                if key in RESERVED:
                    p.add(f"factor {f.name!r}", f"field {key!r} is reserved")
                elif key in owner:
                    p.add(
                        f"factor {f.name!r}",
                        f"field {key!r} is also supplied by {owner[key]}; rename one",
                    )
                else:
                    owner[key] = f"factor {f.name!r}"
        return cls(owner, {f"factor {f.name!r}": f for f in factors}, lenient)

    def check(
        self, p: Problems, template: Template, where: str, also: tuple[str, ...] = ()
    ) -> None:
        """Every placeholder of ``template`` (but ``also``) is supplied, by every level of its factor."""
        for ph in template.fields:
            if ph in also:
                continue
            src = self.owner.get(ph)
            if src is None and not self.lenient:
                known = sorted(self.owner)
                p.add(
                    where,
                    f"unknown placeholder {{{ph}}}{suggest(ph, known)}: no factor, lexicon field or "
                    f"constant supplies it; known: {', '.join(known)}",
                )
            f = self.factors.get(src or "")
            if f is None:
                continue
            for level in f.levels:
                if ph not in f.bindings[level]:
                    what = "lexicon field" if f.kind == "lexicon" else "field"
                    p.add(
                        where,
                        f"{f.name} level {level!r} has no {what} {ph!r} for placeholder {{{ph}}}",
                    )


def _user_templates(
    p: Problems, inst: Instrument, user: str, items: tuple[Item, ...], supply: _Suppliers
) -> tuple[Template, ...]:
    """The user template with each item's template spliced in for ``{item}``."""
    where = "[experiment], field 'user'"
    user_t = Template.parse(user)  # its syntax is checked by the schema
    if "item" not in user_t.fields:
        p.add(where, "the user template must contain {item} (the item text)")
    supply.check(p, user_t, where, also=("item",))  # {item} is only valid here
    out = []
    for it in items:
        item_t = inst.templates.get(f"item:{it.id}") or Template.parse(it.template)
        supply.check(p, item_t, f"instrument {inst.path}: item {it.id!r}, field 'template'")
        out.append(user_t.splice("item", item_t))
    return tuple(out)


def _system_templates(
    p: Problems, factors: list[Factor], fixed: str, source: str, supply: _Suppliers
) -> dict[str, Template]:
    """``"factor:level"`` -> system template for a framing factor, else ``""`` -> the fixed one."""
    framing = next((f for f in factors if f.kind == "framing"), None)
    if framing is None:
        if not fixed:
            return {}
        template = Template.parse(fixed)  # an instrument framing or [experiment] system
        supply.check(p, template, f"system prompt ({source})")
        return {"": template}
    out: dict[str, Template] = {}
    for level in framing.levels:
        where = f"factor {framing.name!r} level {level!r}"
        try:
            template = Template.parse(framing.systems[level])
        except TemplateSyntaxError as exc:
            p.add(where, f"template syntax: {exc}")
            continue
        supply.check(p, template, f"{where} (system prompt)")
        out[f"{framing.name}:{level}"] = template
    return out


# --------------------------------------------------------------------------- formats


def _parse_format(p: Problems, name: str, spec: FactorSpec, scales: _ItemScales) -> Factor | None:
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


def _check_shown(p: Problems, scales: _ItemScales, fmt: ResponseFormat | None, at: str) -> bool:
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


def _check_format_shown(
    p: Problems,
    factors: list[Factor],
    user_templates: tuple[Template, ...],
    system_templates: dict[str, Template],
    scale: tuple[int, int],
) -> None:
    """A format factor needs a rendered template that shows the answer labels, and
    ``{anchors}`` where a level permutes the points (only the texts tell the order)."""
    fmt = next((f for f in factors if f.kind == "format"), None)
    if fmt is None:
        return
    shown = [
        t
        for t in (*user_templates, *system_templates.values())
        if set(t.fields) & set(LABEL_FIELDS)
    ]
    if not shown:
        p.add(
            f"factor {fmt.name!r}",
            "a response format varies but no prompt shows the answer labels: no template it "
            "renders (system prompt, user template, items) has "
            + ", ".join(f"{{{k}}}" for k in LABEL_FIELDS),
            FormatNotShownError,
        )
    permuted = [lv for lv, f in fmt.formats.items() if f.permuted(*scale)]
    templates = (*user_templates, *system_templates.values())
    if shown and permuted and not any("anchors" in t.fields for t in templates):
        p.add(
            f"factor {fmt.name!r}",
            f"level(s) {permuted[:3]}{' ...' if len(permuted) > 3 else ''} show the points "
            "permuted, which only the points' texts tell, but no template it renders has "
            "{anchors}",
            FormatNotShownError,
        )


#: Placeholders that show an item's own points (its codes, their range or their texts).
_POINT_FIELDS = frozenset(SCALE_FIELDS) - {"nonsubstantive"}
#: Placeholders that show its non-substantive options ("Don't know", "Refused").
_NONSUBSTANTIVE_FIELDS = frozenset({"options", "nonsubstantive"})


def _check_item_options_shown(
    p: Problems,
    items: tuple[Item, ...],
    scales: _ItemScales,
    default: Scale,
    user_templates: tuple[Template, ...],
    system_templates: dict[str, Template],
) -> None:
    """An item with its own points, or with non-substantive options, must show them.

    Its prompt (the user template with the item's template spliced in, and every
    system prompt it is asked under) must have a placeholder that renders them:
    otherwise the model is asked to choose among options it is never shown.
    """
    systems: list[Template | None] = [*system_templates.values()] or [None]
    for it, user_t in zip(items, user_templates, strict=True):
        scale = scales.by_item[it.id]
        needs = []
        if it.scale is not None and scale.key != default.key:
            needs.append((f"its own options ({scale.describe()})", _POINT_FIELDS))
        if scale.nonsubstantive:
            names = ", ".join(repr(o.label) for o in scale.nonsubstantive)
            needs.append((f"its non-substantive option(s) {names}", _NONSUBSTANTIVE_FIELDS))
        for what, fields in needs:
            shown = [
                sys_t
                for sys_t in systems
                if fields & {*user_t.fields, *(sys_t.fields if sys_t is not None else ())}
            ]
            if len(shown) < len(systems):
                p.add(
                    f"item {it.id!r}",
                    f"has {what}, but its prompt shows them nowhere: no template it renders "
                    "(system prompt, user template, item) has "
                    + " or ".join(f"{{{k}}}" for k in sorted(fields))
                    + "; add {options} to the user template (or the item's template)",
                )


def _check_factors_change_prompts(
    p: Problems, factors: list[Factor], templates: tuple[Template, ...]
) -> None:
    """Every level of every non-format factor renders prompts of its own.

    A free or lexicon factor that no rendered template uses, or two levels that
    fill every used placeholder (and the system prompt) alike, would make
    replicate conditions with identical prompts and a zero effect. A format
    factor changes how the answer is read, so it is not checked here.
    """
    used = {ph for t in templates for ph in t.fields}
    for f in factors:
        if f.kind in ("format", "administration", "item_order", "elicitation", "language"):
            continue  # how the answer is read, the conversation, or every text
        fields = [k for k in f.fields if k in used]
        if not fields and f.kind != "framing":
            others = [k for k in f.fields if k != f.name]
            its = f" (or its fields {', '.join(others)})" if others else ""
            p.add(
                f"factor {f.name!r}",
                f"changes no prompt: no template the experiment renders (system prompt, user "
                f"template, items) uses {{{f.name}}}{its}, so its levels would be replicates "
                "with identical prompts and a zero effect; use it in a template or drop it",
            )
            continue
        if f.kind == "respondent":
            continue  # its levels are people, not conditions: two may share a background
        first: dict[tuple, str] = {}
        for level in f.levels:
            key = (f.systems.get(level), *(f.bindings[level].get(k) for k in fields))
            if key in first:
                p.add(
                    f"factor {f.name!r}",
                    f"levels {first[key]!r} and {level!r} render identical prompts (the same "
                    f"text in {', '.join(f'{{{k}}}' for k in fields) or 'the system prompt'}); "
                    "they would be replicates with a zero effect: merge or change them",
                )
            first.setdefault(key, level)
