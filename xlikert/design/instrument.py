"""Psychometric instruments: items, scale, lexicon and system-prompt framings.

An instrument is a TOML file (format in ``xlikert/design/README.md``). Built-in
instruments ship as package data in ``xlikert/design/instruments/``; list them
with :func:`builtin_instruments`.
"""

from __future__ import annotations

import difflib
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..errors import ConfigError
from ._schema import Problems, read_toml, suggest
from .template import Template, TemplateSyntaxError

__all__ = [
    "SCALE_FIELDS",
    "Instrument",
    "Item",
    "builtin_instruments",
    "load_instrument",
    "scale_fields",
]

#: Placeholders every template may use; their values come from the scale.
SCALE_FIELDS = ("scale_min", "scale_max", "n_points", "min_label", "max_label", "anchors")

_INSTRUMENT_KEYS = (
    "name",
    "title",
    "citation",
    "description",
    "source",
    "lexicon_factor",
    "framing_factor",
    "default_framing",
    "placeholders",
)
_TOP_KEYS = ("instrument", "scale", "items", "lexicon", "framings")
_ITEM_KEYS = ("id", "template", "reverse_keyed", "subscale", "source_text")


@dataclass(frozen=True)
class Item:
    """One Likert item: a stable id, a template, its keying and its subscale ("" if none)."""

    id: str
    template: str
    reverse_keyed: bool = False
    subscale: str = ""
    source_text: str = ""


@dataclass(frozen=True, repr=False)
class Instrument:
    """A psychometric instrument loaded from a TOML file.

    Attributes
    ----------
    name, title, citation, description
        Identification and the reference to cite.
    scale_min, scale_max
        The response scale ``y_min..y_max``.
    anchors
        Scale value -> label, e.g. ``{1: "Strongly disagree", 7: "Strongly agree"}``.
    items
        The items, in file order.
    lexicon
        Level of :attr:`lexicon_factor` (e.g. target country) -> field -> text.
    lexicon_factor, framing_factor
        Default factor names of the lexicon (``"target"``) and of the framings
        (``"prompt"``).
    framings
        System-prompt variant name -> template text.
    default_framing
        Framing used when an experiment has no framing factor ("" for none).
    placeholders
        Extra placeholders an experiment must supply (e.g. ``persona``).
    path, sha256
        Where the file was read from and the sha256 of its bytes.
    """

    name: str
    title: str
    citation: str
    description: str
    source: str
    scale_min: int
    scale_max: int
    anchors: dict[int, str]
    items: tuple[Item, ...]
    lexicon: dict[str, dict[str, str]]
    lexicon_factor: str
    framings: dict[str, str]
    framing_factor: str
    default_framing: str
    placeholders: tuple[str, ...]
    path: str
    sha256: str
    templates: dict[str, Template] = field(default_factory=dict, compare=False)

    @property
    def labels(self) -> dict[int, str]:
        """Alias of :attr:`anchors`."""
        return self.anchors

    @property
    def scale(self) -> tuple[int, int]:
        return (self.scale_min, self.scale_max)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def item_ids(self) -> list[str]:
        return [it.id for it in self.items]

    @property
    def subscales(self) -> list[str]:
        """Distinct non-empty subscales, in order of first appearance."""
        return list(dict.fromkeys(it.subscale for it in self.items if it.subscale))

    @property
    def lexicon_fields(self) -> tuple[str, ...]:
        first = next(iter(self.lexicon.values()), {})
        return tuple(first)

    def item(self, item_id: str) -> Item:
        for it in self.items:
            if it.id == item_id:
                return it
        raise KeyError(item_id)

    def scale_labels_json(self) -> str:
        """The anchors as a JSON object string (keys are the scale values)."""
        return json.dumps({str(k): v for k, v in sorted(self.anchors.items())})

    def __repr__(self) -> str:
        keyed = sum(it.reverse_keyed for it in self.items)
        lines = [
            f"<xlikert.Instrument {self.name!r}: {self.n_items} items, "
            f"scale {self.scale_min}..{self.scale_max}>",
            f"  title:     {self.title}",
            f"  anchors:   {self.scale_labels_json()}",
            f"  reverse-keyed items: {keyed}; subscales: {self.subscales or 'none'}",
            f"  lexicon ({self.lexicon_factor}): {list(self.lexicon) or 'none'}",
            f"  framings ({self.framing_factor}): {list(self.framings) or 'none'}",
            f"  file:      {self.path}",
        ]
        return "\n".join(lines)


def scale_fields(scale_min: int, scale_max: int, anchors: Mapping[int, str]) -> dict[str, str]:
    """Values of the scale placeholders (:data:`SCALE_FIELDS`).

    Examples
    --------
    >>> f = scale_fields(1, 7, {1: "Strongly disagree", 7: "Strongly agree"})
    >>> f["anchors"]
    '1=Strongly disagree, 7=Strongly agree'
    """
    return {
        "scale_min": str(scale_min),
        "scale_max": str(scale_max),
        "n_points": str(scale_max - scale_min + 1),
        "min_label": anchors.get(scale_min, ""),
        "max_label": anchors.get(scale_max, ""),
        "anchors": ", ".join(f"{k}={v}" for k, v in sorted(anchors.items())),
    }


def _instrument_dir():
    return resources.files("xlikert.design").joinpath("instruments")


def builtin_instruments() -> list[str]:
    """Names of the instruments shipped with xlikert.

    Examples
    --------
    >>> "cetscale" in builtin_instruments()
    True
    """
    return sorted(
        p.name.removesuffix(".toml")
        for p in _instrument_dir().iterdir()
        if p.name.endswith(".toml")
    )


def _resolve(name_or_path: str | Path, kind: str, directory, builtins: list[str]) -> Path:
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.is_file():
        return path
    looks_like_path = (
        isinstance(name_or_path, Path) or text.endswith(".toml") or "/" in text or "\\" in text
    )
    if not looks_like_path:
        candidate = directory.joinpath(f"{text}.toml")
        if candidate.is_file():
            return Path(str(candidate))
        raise ConfigError(
            f"unknown built-in {kind} {text!r}{suggest(text, builtins)}; built-in {kind}s: "
            f"{', '.join(builtins)}; or pass the path of a .toml file"
        )
    raise ConfigError(f"{kind} file {text!r} does not exist")


def load_instrument(name_or_path: str | Path) -> Instrument:
    """Load and validate an instrument, built-in (by name) or from a TOML file.

    Parameters
    ----------
    name_or_path
        A built-in name (``"cetscale"``, ``"mini_ipip"``; see
        :func:`builtin_instruments`) or the path of a TOML instrument file.

    Returns
    -------
    Instrument

    Raises
    ------
    ConfigError
        Listing every problem in the file, each naming the item or table and the field.

    Examples
    --------
    >>> cet = load_instrument("cetscale")
    >>> cet.n_items, cet.scale
    (17, (1, 7))
    >>> cet.items[0].template
    '{people:cap} should always buy {adj}-made products instead of imports.'
    """
    path = _resolve(name_or_path, "instrument", _instrument_dir(), builtin_instruments())
    table, digest = read_toml(path)
    return _parse_instrument(table, str(path), digest)


def _parse_scale(
    p: Problems, table: dict, where: str = "[scale]"
) -> tuple[int, int, dict[int, str]] | None:
    """Validate a ``[scale]`` table; shared with experiment files (scale override)."""
    if not isinstance(table, dict):
        p.add(where, f"must be a table with min, max and anchors, got {table!r}")
        return None
    p.unknown_keys(table, ("min", "max", "anchors"), where)
    lo = p.get(table, "min", int, where)
    hi = p.get(table, "max", int, where)
    raw = p.get(table, "anchors", dict, where, default={})
    if lo is None or hi is None:
        return None
    if hi < lo:
        p.add(where, f"inverted scale: min = {lo} is above max = {hi}")
        return None
    if hi == lo:
        p.add(where, f"empty scale: min = max = {lo}; a Likert scale needs at least two points")
        return None
    anchors: dict[int, str] = {}
    for key, label in (raw or {}).items():
        try:
            value = int(key)
        except ValueError:
            p.add(f"{where}.anchors", f"key {key!r} is not a scale value (an integer)")
            continue
        if not lo <= value <= hi:
            p.add(f"{where}.anchors", f"key {key!r} is outside the scale {lo}..{hi}")
        elif not isinstance(label, str) or not label.strip():
            p.add(f"{where}.anchors", f"label of {key!r} must be a non-empty string, got {label!r}")
        else:
            anchors[value] = label
    for end in (lo, hi):
        if end not in anchors and raw is not None:
            p.add(f"{where}.anchors", f'the scale end {end} needs a label (e.g. {end} = "...")')
    return lo, hi, anchors


def _warn_lone_subscales(file: Path | str, items: list[Item]) -> None:
    """Warn about a one-item subscale whose name is close to another's (a typo splits a subscale).

    Examples
    --------
    >>> import warnings
    >>> items = [Item("1", "a", subscale="extraversion"), Item("2", "b", subscale="extraversion"),
    ...          Item("3", "c", subscale="extroversion")]
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     _warn_lone_subscales("x.toml", items)
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


def _parse_template(p: Problems, text: str, where: str) -> Template | None:
    try:
        return Template.parse(text)
    except TemplateSyntaxError as exc:
        p.add(where, f"template syntax: {exc}")
        return None


def _parse_instrument(table: dict, file: str, digest: str) -> Instrument:
    p = Problems(file)
    p.unknown_keys(table, _TOP_KEYS, "top level")
    head = p.get(table, "instrument", dict, "top level", default={}) or {}
    if "instrument" not in table:
        p.add("top level", "required table [instrument] (name, citation, ...) is missing")
    p.unknown_keys(head, _INSTRUMENT_KEYS, "[instrument]")
    name = p.get(head, "name", str, "[instrument]") or ""
    if "name" in head and not str(name).strip():
        p.add("[instrument]", "field 'name' must not be empty")
    citation = p.get(head, "citation", str, "[instrument]") or ""
    title = p.get(head, "title", str, "[instrument]", default=name) or name
    description = p.get(head, "description", str, "[instrument]", default="") or ""
    source = p.get(head, "source", str, "[instrument]", default="") or ""
    lexicon_factor = (
        p.get(head, "lexicon_factor", str, "[instrument]", default="target") or "target"
    )
    framing_factor = (
        p.get(head, "framing_factor", str, "[instrument]", default="prompt") or "prompt"
    )
    default_framing = p.get(head, "default_framing", str, "[instrument]", default="") or ""
    extra = p.get(head, "placeholders", list, "[instrument]", default=[]) or []
    for ph in extra:
        if not isinstance(ph, str) or not ph.isidentifier():
            p.add("[instrument]", f"field 'placeholders' must list identifiers, got {ph!r}")
    extra = tuple(x for x in extra if isinstance(x, str))

    scale = None
    if "scale" not in table:
        p.add("top level", "required table [scale] (min, max, anchors) is missing")
    else:
        scale = _parse_scale(p, table["scale"])
    lo, hi, anchors = scale if scale else (1, 2, {})

    # lexicon: level -> {field: text}, every level with the same fields
    lexicon: dict[str, dict[str, str]] = {}
    raw_lex = p.get(table, "lexicon", dict, "top level", default={}) or {}
    all_fields: dict[str, None] = {}
    for level, fields in raw_lex.items():
        where = f"lexicon level {level!r}"
        if not isinstance(fields, dict):
            p.add(where, f"must be a table of fields ([lexicon.{level}]), got {fields!r}")
            continue
        if not fields:
            p.add(where, "has no fields")
        good = {}
        for key, val in fields.items():
            if not key.isidentifier():
                p.add(where, f"field name {key!r} is not an identifier")
            elif key in SCALE_FIELDS:
                p.add(where, f"field {key!r} is reserved for the scale")
            elif not isinstance(val, str):
                p.add(where, f"field {key!r} must be a string, got {val!r}")
            else:
                good[key] = val
                all_fields.setdefault(key)
        lexicon[str(level)] = good
    for level, fields in lexicon.items():
        for key in all_fields:
            if key not in fields:
                others = [lv for lv in lexicon if key in lexicon[lv]]
                p.add(
                    f"lexicon level {level!r}",
                    f"missing lexicon field {key!r} (defined for {', '.join(map(repr, others))})",
                )

    known = set(SCALE_FIELDS) | set(all_fields) | set(extra) | {lexicon_factor}
    templates: dict[str, Template] = {}

    framings: dict[str, str] = {}
    raw_fr = p.get(table, "framings", dict, "top level", default={}) or {}
    for fname, text in raw_fr.items():
        where = f"framing {fname!r}"
        if not isinstance(text, str):
            p.add(where, f"must be a string (the system prompt), got {text!r}")
            continue
        t = _parse_template(p, text, where)
        if t is not None:
            for ph in t.fields:
                if ph not in known:
                    p.add(
                        where,
                        f"unknown placeholder {{{ph}}}{suggest(ph, known)}; known: {', '.join(sorted(known))}",
                    )
            templates[f"framing:{fname}"] = t
        framings[str(fname)] = text
    if default_framing and default_framing not in framings:
        p.add(
            "[instrument]",
            f"default_framing {default_framing!r} is not a framing{suggest(default_framing, framings)}; "
            f"framings: {', '.join(framings) or 'none'}",
        )

    items: list[Item] = []
    raw_items = table.get("items")
    if raw_items is None:
        p.add("top level", "required array [[items]] is missing")
        raw_items = []
    elif not isinstance(raw_items, list) or not raw_items:
        p.add("top level", "[[items]] must be a non-empty array of tables")
        raw_items = []
    seen: dict[str, int] = {}
    for k, raw in enumerate(raw_items):
        where = f"items[{k}]"
        if not isinstance(raw, dict):
            p.add(where, f"must be a table, got {raw!r}")
            continue
        iid = raw.get("id")
        if isinstance(iid, int) and not isinstance(iid, bool):
            iid = str(iid)
        if isinstance(iid, str) and iid.strip():
            where = f"item {iid!r} (items[{k}])"
        p.unknown_keys(raw, _ITEM_KEYS, where)
        if not isinstance(iid, str) or not iid.strip():
            p.add(where, f"field 'id' must be a non-empty string or integer, got {raw.get('id')!r}")
            continue
        if iid in seen:
            p.add(where, f"duplicate item id {iid!r} (first used by items[{seen[iid]}])")
            continue
        seen[iid] = k
        text = p.get(raw, "template", str, where)
        if text is not None and not text.strip():
            p.add(where, "field 'template' is empty")
        rk = p.get(raw, "reverse_keyed", bool, where, default=False)
        sub = p.get(raw, "subscale", str, where, default="")
        src = p.get(raw, "source_text", str, where, default="")
        if text is None:
            continue
        t = _parse_template(p, text, f"{where}, field 'template'")
        if t is not None:
            for ph in t.fields:
                if ph not in known:
                    p.add(
                        f"{where}, field 'template'",
                        f"unknown placeholder {{{ph}}}{suggest(ph, known)}; known: {', '.join(sorted(known))}",
                    )
            templates[f"item:{iid}"] = t
        items.append(Item(iid, text, bool(rk), sub or "", src or ""))

    p.raise_if_any()
    _warn_lone_subscales(file, items)
    return Instrument(
        name=name,
        title=title,
        citation=citation,
        description=description,
        source=source,
        scale_min=lo,
        scale_max=hi,
        anchors=anchors,
        items=tuple(items),
        lexicon=lexicon,
        lexicon_factor=lexicon_factor,
        framings=framings,
        framing_factor=framing_factor,
        default_framing=default_framing,
        placeholders=extra,
        path=file,
        sha256=digest,
        templates=templates,
    )
