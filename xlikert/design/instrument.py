"""Psychometric instruments: items, scale, lexicon and system-prompt framings.

An instrument is a TOML file (format in ``xlikert/design/README.md``). Built-in
instruments ship as package data in ``xlikert/design/instruments/``; list them
with :func:`builtin_instruments`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ..core.errors import ConfigError, UnknownNameError
from .file_schema import SCALE_FIELDS, InstrumentFile
from .items import (
    Item,
    check_items,
    check_lexicon,
    describe_item_scales,
    known_placeholders,
    scale_from_spec,
    warn_lone_subscales,
)
from .problems import Problems, read_toml, suggest, validate
from .scale import Option, Scale, anchors_json
from .template import Template
from .translation import named_options, translated_table, translation_problems

__all__ = [
    "SCALE_FIELDS",
    "Instrument",
    "builtin_instruments",
    "load_instrument",
]


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
    nonsubstantive, answers
        The scale's non-substantive options and how it is answered
        (:class:`~xlikert.design.scale.Scale`).
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
    nonsubstantive: tuple[Option, ...] = ()
    answers: Literal["codes", "letters", "labels"] = "codes"
    templates: dict[str, Template] = field(default_factory=dict, compare=False)
    #: The language of the texts (a tag such as ``"en"``).
    language: str = "en"
    #: Language tag -> who translated it (``[translations.<tag>] source``).
    translations: dict[str, str] = field(default_factory=dict)
    _table: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def languages(self) -> tuple[str, ...]:
        """The instrument's own language, then those of its translations.

        Examples
        --------
        >>> load_instrument("bfi_short").languages
        ('en', 'de', 'zh')
        """
        return (self.language, *self.translations)

    @property
    def sources(self) -> dict[str, str]:
        """Language -> where its text comes from (own text, then each ``source``).

        Examples
        --------
        >>> load_instrument("bfi_short").sources["en"]
        "the instrument's own text"
        """
        return {self.language: "the instrument's own text", **self.translations}

    def translated(self, language: str) -> Instrument:
        """The instrument with every text in ``language`` (itself for its own language).

        The item texts, the framings, the scale's anchors, the anchors of each
        item's own scale, the non-substantive options' labels and the lexicon are
        taken from ``[translations.<language>]``; everything else (ids, keying,
        subscales, the scales' values, the options' codes) stays. Each option keeps
        the instrument's own label as its name (the ``option`` coordinate).

        Parameters
        ----------
        language : str
            A language tag of :attr:`languages`.

        Returns
        -------
        Instrument
            The instrument parsed again with the translated texts (its
            ``language`` set; the same path and translations).

        Raises
        ------
        ConfigError
            An unknown language, or every text the translation lacks, each named by
            item (framing, anchor, option, lexicon level and field) and language.

        Examples
        --------
        >>> load_instrument("bfi_short").translated("de").items[0].template
        'Ich sehe mich als jemand, der eher zurückhaltend, reserviert ist.'
        """
        if language == self.language:
            return self
        if language not in self.translations:
            raise ConfigError(
                f"{self.path}: instrument {self.name!r} has no translation {language!r}; "
                f"languages: {', '.join(self.languages)}"
            )
        table = self._table
        missing = translation_problems(table, language)
        if missing:
            raise ConfigError(f"{self.path}: " + "; ".join(missing))
        out = translated_table(table, language)
        inst = _parse_instrument(out, f"{self.path} [translations.{language}]", self.sha256)
        inst = named_options(inst, table)
        return replace(inst, path=self.path, translations=dict(self.translations))

    @property
    def labels(self) -> dict[int, str]:
        """Alias of :attr:`anchors`.

        Examples
        --------
        >>> load_instrument("cetscale").labels
        {1: 'Strongly disagree', 7: 'Strongly agree'}
        """
        return self.anchors

    @property
    def scale(self) -> tuple[int, int]:
        """The response scale as ``(scale_min, scale_max)``.

        Examples
        --------
        >>> load_instrument("mini_ipip").scale
        (1, 5)
        """
        return (self.scale_min, self.scale_max)

    @property
    def response_scale(self) -> Scale:
        """The instrument's scale: the response options of every item without its own.

        Examples
        --------
        >>> load_instrument("anes96_survey").response_scale.nonsubstantive[0].label
        "Don't know"
        """
        return Scale(
            self.scale_min, self.scale_max, dict(self.anchors), self.nonsubstantive, self.answers
        )

    def scale_of(self, item_id: str) -> Scale:
        """The response options of one item: its own, or the instrument's.

        Parameters
        ----------
        item_id : str
            The item's id.

        Returns
        -------
        Scale
            The item's own :class:`~xlikert.design.scale.Scale`, else :attr:`response_scale`.

        Raises
        ------
        UnknownNameError
            No item has that id.

        Examples
        --------
        >>> load_instrument("anes96_survey").scale_of("TVnews").describe()
        '0..7 (0=None, 7=Every day)'
        """
        return self.item(item_id).scale or self.response_scale

    @property
    def n_items(self) -> int:
        """Number of items.

        Examples
        --------
        >>> load_instrument("mini_ipip").n_items
        20
        """
        return len(self.items)

    @property
    def item_ids(self) -> list[str]:
        """The items' ids, in file order (the ``item`` coordinate of the results).

        Examples
        --------
        >>> load_instrument("mini_ipip").item_ids[:3]
        ['1', '2', '3']
        """
        return [it.id for it in self.items]

    @property
    def subscales(self) -> list[str]:
        """Distinct non-empty subscales, in order of first appearance.

        Examples
        --------
        >>> load_instrument("mini_ipip").subscales
        ['extraversion', 'agreeableness', 'conscientiousness', 'neuroticism', 'intellect']
        """
        return list(dict.fromkeys(it.subscale for it in self.items if it.subscale))

    @property
    def lexicon_fields(self) -> tuple[str, ...]:
        """The placeholders each level of the lexicon fills (those of its first level).

        Examples
        --------
        >>> load_instrument("cetscale").lexicon_fields[:3]
        ('people', 'adj', 'person')
        """
        first = next(iter(self.lexicon.values()), {})
        return tuple(first)

    def item(self, item_id: str) -> Item:
        """One item by id.

        Parameters
        ----------
        item_id : str
            The item's id (one of :attr:`item_ids`).

        Returns
        -------
        Item
            Its template, keying and subscale.

        Raises
        ------
        UnknownNameError
            No item of that id (also a :class:`KeyError`), naming it, the
            instrument and its item ids.

        Examples
        --------
        >>> item = load_instrument("mini_ipip").item("1")
        >>> item.template, item.reverse_keyed, item.subscale
        ('Am the life of the party.', False, 'extraversion')
        """
        for it in self.items:
            if it.id == item_id:
                return it
        ids = self.item_ids
        shown = ", ".join(ids) if len(ids) <= 12 else f"{ids[0]}, {ids[1]}, ..., {ids[-1]}"
        raise UnknownNameError(
            f"instrument {self.name!r} has no item {item_id!r}{suggest(str(item_id), ids)}; "
            f"its item ids: {shown or 'none'}"
        )

    def scale_labels_json(self) -> str:
        """The anchors as a JSON object string (keys are the scale values).

        Returns
        -------
        str
            The JSON object, keys in scale order (the ``scale_labels`` attribute of
            the prompts and results).

        Examples
        --------
        >>> load_instrument("cetscale").scale_labels_json()
        '{"1": "Strongly disagree", "7": "Strongly agree"}'
        """
        return anchors_json(self.anchors)

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
            *describe_item_scales(self.items, self.response_scale, indent="  "),
            f"  file:      {self.path}",
        ]
        return "\n".join(lines)


def _instrument_dir():
    return resources.files("xlikert.design").joinpath("instruments")


def builtin_instruments() -> list[str]:
    """Names of the instruments shipped with xlikert.

    Returns
    -------
    list of str
        The names, sorted; each loads with :func:`load_instrument`.

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


def resolve_file(name_or_path: str | Path, kind: str, directory, builtins: list[str]) -> Path:
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
    name_or_path : str or pathlib.Path
        A built-in name (``"cetscale"``, ``"mini_ipip"``, ``"anes96"``; see
        :func:`builtin_instruments`) or the path of a TOML instrument file.

    Returns
    -------
    Instrument
        The validated instrument: its items (keying, subscales), scale and anchors.

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
    path = resolve_file(name_or_path, "instrument", _instrument_dir(), builtin_instruments())
    table, digest = read_toml(path)
    return _parse_instrument(table, str(path), digest)


def _parse_instrument(table: dict, file: str, digest: str) -> Instrument:
    p = Problems(file)
    spec = validate(InstrumentFile, table, p)
    head, scale = spec.instrument, spec.scale
    fields = check_lexicon(p, spec.lexicon)
    known = {*SCALE_FIELDS, *fields, *head.placeholders, head.lexicon_factor}
    templates = {
        f"framing:{name}": known_placeholders(p, text, known, f"framing {name!r}")
        for name, text in spec.framings.items()
    }
    framing = head.default_framing
    if framing and framing not in spec.framings:
        p.add(
            "[instrument]",
            f"default_framing {framing!r} is not a framing{suggest(framing, spec.framings)}; "
            f"framings: {', '.join(spec.framings) or 'none'}",
        )
    default = scale_from_spec(scale)
    items = check_items(p, spec.items, known, templates, default)
    p.raise_if_any()
    warn_lone_subscales(file, items)
    return Instrument(
        name=head.name,
        title=head.title or head.name,
        citation=head.citation,
        description=head.description,
        source=head.source,
        scale_min=scale.min,
        scale_max=scale.max,
        anchors=dict(scale.anchors),
        items=tuple(items),
        lexicon={level: dict(values) for level, values in spec.lexicon.items()},
        lexicon_factor=head.lexicon_factor,
        framings=dict(spec.framings),
        framing_factor=head.framing_factor,
        default_framing=framing,
        placeholders=tuple(head.placeholders),
        path=file,
        sha256=digest,
        nonsubstantive=default.nonsubstantive,
        answers=default.answers,
        templates=templates,
        language=head.language,
        translations={lang: t.source for lang, t in spec.translations.items()},
        _table=table,
    )
