"""Checking an experiment's templates: placeholders, shown options and effective factors.

Each placeholder must have one supplier (a factor, a constant or the scale), a
varied response format and an item's own options must be shown, and every factor
level must render prompts of its own; for :func:`xlikert.design.parser.experiment_from_dict`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import FormatNotShownError
from .experiment import Factor
from .file_schema import RESERVED, SCALE_FIELDS
from .formats import LABEL_FIELDS
from .instrument import Instrument
from .items import Item
from .parse_factors import ItemScales
from .problems import Problems, suggest
from .scale import Scale
from .template import Template, TemplateSyntaxError


@dataclass(frozen=True)
class Suppliers:
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
    ) -> Suppliers:
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


def build_user_templates(
    p: Problems, inst: Instrument, user: str, items: tuple[Item, ...], supply: Suppliers
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


def build_system_templates(
    p: Problems, factors: list[Factor], fixed: str, source: str, supply: Suppliers
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


def check_format_shown(
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


def check_item_scales_shown(
    p: Problems,
    items: tuple[Item, ...],
    scales: ItemScales,
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


def check_factors_change_prompts(
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
        if f.kind in ("format", "administration", "item_order", "elicitation", "language",
                      "perturbation"):  # fmt: skip
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
