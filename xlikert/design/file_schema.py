"""The TOML formats of instrument and experiment files, declared with pydantic.

Each model is one TOML table: its fields are the table's keys, with their
types, defaults and meanings (the attribute docstrings). ``extra="forbid"``
rejects unknown keys; ``strict=True`` takes TOML values as they are (no
``"3"`` for ``3``). Rules that need one value only (a non-empty string, an
identifier, a template's syntax) are declared on the types below; rules that
relate fields or files (placeholders, levels of the instrument, duplicates)
are checked after this by :mod:`.instrument` and :mod:`.experiment`.

The reference tables of ``xlikert/design/README.md`` are generated from these
models (:func:`_readme_tables`); :func:`update_readme` rewrites them.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)
from pydantic_core import PydanticUndefined

from ..core.dims import CORE_DIMS, MODEL_DIM, check_factor_name
from ..core.errors import DesignError
from .template import Template, TemplateSyntaxError

#: Placeholders every template may use; their values come from the scale.
SCALE_FIELDS = (
    "scale_min", "scale_max", "n_points", "min_label", "max_label", "anchors", "answer_labels",
    "options", "nonsubstantive",
)  # fmt: skip

#: Names no factor, lexicon field or constant may take (factors also avoid the
#: names of xlikert.core.dims: its auxiliary dims and the variables it writes).
RESERVED = frozenset(
    {*CORE_DIMS, MODEL_DIM, "system", "user", "reverse_keyed", "subscale", "nominal",
     *SCALE_FIELDS}
)  # fmt: skip
KINDS = (
    "lexicon", "framing", "free", "format", "administration", "item_order", "elicitation",
    "respondent", "language", "perturbation",
)  # fmt: skip


@dataclass(frozen=True)
class TypeName:
    """How the README names a constrained type (metadata of an ``Annotated`` type)."""

    text: str


# --------------------------------------------------------------------------- value rules


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text


def _identifier(text: str) -> str:
    if not text.isidentifier():
        raise ValueError("must be an identifier (letters, digits, _; not starting with a digit)")
    return text


def _template(text: str) -> str:
    try:
        Template.parse(text)
    except TemplateSyntaxError as exc:
        raise ValueError(f"template syntax: {exc}") from None
    return text


def _item_id(value: Any) -> Any:
    """An integer item id is its decimal string (TOML ``id = 3`` is item ``"3"``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise ValueError("must be a string or an integer")
    return value


def _scale_value(key: Any) -> int:
    if isinstance(key, str) and re.fullmatch(r"[+-]?[0-9]+", key):
        return int(key)
    raise ValueError("must be a scale value (an integer)")


def _trimmed(text: str) -> str:
    if text != text.strip():
        raise ValueError("must not start or end with white space")
    return text


def _placeholder_name(name: str) -> str:
    if not name.isidentifier() or name in RESERVED:
        raise ValueError("is not a usable placeholder name (reserved or not an identifier)")
    return name


def _factor_name(name: str) -> str:
    if not name.isidentifier() or name in RESERVED:
        raise ValueError(
            "factor names must be identifiers other than " + ", ".join(sorted(RESERVED))
        )
    try:  # the names of xlikert's own dims and variables (xlikert.core.dims)
        check_factor_name(name, where="")
    except DesignError as exc:
        raise ValueError(str(exc).removeprefix(": ")) from None
    return name


NonBlank = Annotated[str, AfterValidator(_not_blank), TypeName("non-empty string")]
Label = Annotated[
    str, AfterValidator(_not_blank), AfterValidator(_trimmed), TypeName("non-empty string")
]
Identifier = Annotated[str, AfterValidator(_identifier), TypeName("identifier")]
TemplateText = Annotated[str, AfterValidator(_template), TypeName("template")]
ItemTemplate = Annotated[
    str, AfterValidator(_not_blank), AfterValidator(_template), TypeName("non-empty template")
]
ItemId = Annotated[
    str, BeforeValidator(_item_id), AfterValidator(_not_blank), TypeName("string or integer")
]
ScaleValue = Annotated[int, BeforeValidator(_scale_value)]
PlaceholderName = Annotated[str, AfterValidator(_placeholder_name)]
FactorName = Annotated[str, AfterValidator(_factor_name)]


def _shape(value: Any) -> str | None:
    """The tag of a tagged union: ``<array>``, ``<table>``, ``<text>`` (None: neither).

    pydantic puts the tag in an error's location; names in angle brackets are
    left out of the place an error names (:func:`._problems.validate`).
    """
    if isinstance(value, list):
        return "<array>"
    if isinstance(value, dict):
        return "<table>"
    return "<text>" if isinstance(value, str) else None


#: A level of a table of levels: a text (free factor value, framing template) or fields.
LevelValue = Annotated[
    Annotated[str, Tag("<text>")]
    | Annotated[dict[Identifier, str | list[str]], Field(min_length=1), Tag("<table>")],
    Discriminator(
        _shape, custom_error_type="level_shape", custom_error_message="must be a string or a table"
    ),
    TypeName("string or table"),
]
Levels = Annotated[
    Annotated[list[NonBlank], Field(min_length=1), Tag("<array>")]
    | Annotated[dict[NonBlank, LevelValue], Field(min_length=1), Tag("<table>")],
    Discriminator(
        _shape, custom_error_type="levels_shape", custom_error_message="must be an array or a table"
    ),
    TypeName("array of level labels, or table"),
]


class _Table(BaseModel):
    """A TOML table: unknown keys rejected, values taken as typed (no coercion)."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True
    )
    #: How the README names the table.
    toml: ClassVar[str] = ""


# --------------------------------------------------------------------------- instrument file


class OptionSpec(_Table):
    """A non-substantive answer option ("Don't know", "Refused"): an answer, not a point of the scale."""

    toml: ClassVar[str] = "[[scale.nonsubstantive]]"

    label: Label
    """Its text, shown in `{options}`; also its name in the results (the `option` coordinate)."""
    code: int | None = None
    """Its code as survey data record it (e.g. `8`); a scale answered with codes is answered with it (default: with the label)."""


class ScaleSpec(_Table):
    """The response scale ``min..max``, the labels of its points, its non-substantive options."""

    toml: ClassVar[str] = "[scale]"

    min: int
    """Lowest scale value."""
    max: int
    """Highest scale value (above ``min``)."""
    anchors: dict[ScaleValue, NonBlank] = {}
    """Scale value -> label (`[scale.anchors]`, `1 = "Strongly disagree"`); both ends need one."""
    nonsubstantive: list[OptionSpec] = []
    """Non-substantive options, shown after the points (`nonsubstantive = [{ label = "Don't know", code = 8 }]`)."""
    answers: Literal["codes", "letters", "labels"] = "codes"
    """How the model answers: with the codes, with letters `A, B, ...` in the order shown, or with the labels (every point needs one)."""

    @model_validator(mode="after")
    def _check_range(self) -> ScaleSpec:
        if self.max < self.min:
            raise ValueError(f"inverted scale: min = {self.min} is above max = {self.max}")
        if self.max == self.min:
            raise ValueError(
                f"empty scale: min = max = {self.min}; a Likert scale needs at least two points"
            )
        outside = [k for k in self.anchors if not self.min <= k <= self.max]
        unlabelled = [end for end in (self.min, self.max) if end not in self.anchors]
        problems = [f"anchor {k} is outside the scale {self.min}..{self.max}" for k in outside]
        problems += [
            f'the scale end {end} needs a label (e.g. {end} = "...")' for end in unlabelled
        ]
        problems += self._option_problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _option_problems(self) -> list[str]:
        """Non-substantive options off the scale, each code and label once; labels to answer with."""
        problems = []
        codes = [o.code for o in self.nonsubstantive if o.code is not None]
        labels = [o.label for o in self.nonsubstantive]
        for code in codes:
            if self.min <= code <= self.max:
                problems.append(
                    f"the non-substantive code {code} is a point of the scale "
                    f"{self.min}..{self.max}; give it a code off the scale"
                )
        problems += [f"the non-substantive code {c} is used twice" for c in _repeated(codes)]
        problems += [f"the non-substantive option {x!r} is listed twice" for x in _repeated(labels)]
        if self.answers == "labels":
            bare = [y for y in range(self.min, self.max + 1) if y not in self.anchors]
            if bare:
                problems.append(
                    f'answers = "labels" needs a label on every point; {bare} have none'
                )
            texts = [*self.anchors.values(), *labels]
            problems += [f"the label {x!r} is used twice" for x in _repeated(texts)]
            problems += [
                f"the label {x!r} starts or ends with white space (it is the answer)"
                for x in self.anchors.values()
                if x != x.strip()
            ]
        return problems


def _repeated(values: list) -> list:
    """The values that occur more than once, in order of first appearance."""
    return [v for v in dict.fromkeys(values) if values.count(v) > 1]


class InstrumentHead(_Table):
    """Identification of the instrument and the names of its factors."""

    toml: ClassVar[str] = "[instrument]"

    name: NonBlank
    """Short name (e.g. `cetscale`)."""
    citation: str
    """The reference to cite."""
    title: str = ""
    """Full title (default: `name`)."""
    description: str = ""
    """What the instrument measures."""
    source: str = ""
    """Where the item text comes from."""
    lexicon_factor: Identifier = "target"
    """The factor whose levels the lexicon keys."""
    framing_factor: Identifier = "prompt"
    """The factor whose levels are the framings."""
    default_framing: str = ""
    """Framing used when an experiment has no framing factor (`""`: no system prompt)."""
    placeholders: list[Identifier] = []
    """Extra fields an experiment must supply (a free factor or a constant), e.g. `persona`."""
    language: NonBlank = "en"
    """The language of the texts of this file (a tag such as `en`); `[translations.<tag>]` gives others."""


class ItemSpec(_Table):
    """One item, in administration order."""

    toml: ClassVar[str] = "[[items]]"

    id: ItemId
    """Unique item id; an integer is converted to a string."""
    template: ItemTemplate
    """The item text, a template."""
    reverse_keyed: bool = False
    """Whether the item is reverse-keyed (reflected before composing)."""
    subscale: str = ""
    """The item's subscale (`""`: none)."""
    source_text: str = ""
    """The original wording, for provenance."""
    nominal: bool = False
    """Whether the options have no order (vote choice, religion): every point needs a label, and what needs an order refuses the item."""
    scale: ScaleSpec | None = None
    """The item's own response options (`[items.scale]`, the keys of `[scale]`), replacing the instrument's for this item."""

    @model_validator(mode="after")
    def _check_nominal(self) -> ItemSpec:
        keyed = [k for k in ("reverse_keyed", "subscale") if getattr(self, k)]
        if self.nominal and keyed:
            raise ValueError(
                f"a nominal item has no order to reverse or sum: drop {' and '.join(keyed)}"
            )
        return self


class TranslationSpec(_Table):
    """The instrument's texts in another language (its ids, keying, scale values and option codes stay)."""

    toml: ClassVar[str] = "[translations.<language>]"

    source: str = ""
    """Who translated (provenance): a published translation, or the project's own."""
    items: dict[ItemId, ItemTemplate] = {}
    """Item id -> the item's text in this language (every item needs one)."""
    framings: dict[str, TemplateText] = {}
    """Framing name -> the system-prompt template in this language (every framing needs one)."""
    anchors: dict[ScaleValue, NonBlank] = {}
    """Scale value -> label in this language (every anchor of `[scale.anchors]` needs one)."""
    lexicon: dict[str, Annotated[dict[Identifier, str], Field(min_length=1)]] = {}
    """Lexicon level -> field -> text in this language (every level and field needs one)."""
    item_anchors: dict[ItemId, dict[ScaleValue, NonBlank]] = {}
    """Item id -> scale value -> label in this language, for the items with their own scale (`[translations.de.item_anchors.tv]`, `0 = "Keinen"`; every anchor of each `[items.scale.anchors]` needs one)."""
    nonsubstantive: dict[NonBlank, Label] = {}
    """A non-substantive option's label -> its label in this language (`[translations.de.nonsubstantive]`, `"Don't know" = "Weiß nicht"`; every option of `[scale]` and of each item's scale needs one). The results keep the instrument's own label as the option's name (the `option` coordinate)."""


class InstrumentFile(_Table):
    """An instrument file."""

    toml: ClassVar[str] = "instrument file, top level"

    instrument: InstrumentHead
    """Identification: `[instrument]`."""
    scale: ScaleSpec
    """The response scale: `[scale]`."""
    items: Annotated[list[ItemSpec], Field(min_length=1)]
    """The items: `[[items]]`, one table each."""
    lexicon: dict[str, Annotated[dict[Identifier, str], Field(min_length=1)]] = {}
    """Level of the lexicon factor -> field -> text (`[lexicon.Canada]`); every level has the same fields."""
    framings: dict[str, TemplateText] = {}
    """Framing name -> system-prompt template."""
    translations: dict[NonBlank, TranslationSpec] = {}
    """Language tag -> the instrument's texts in that language (`[translations.de]`); a `language` factor of an experiment crosses them."""


# --------------------------------------------------------------------------- experiment file


class ExperimentHead(_Table):
    """The instrument administered and the texts around each item."""

    toml: ClassVar[str] = "[experiment]"

    instrument: NonBlank
    """A built-in instrument name or the path of a `.toml` file (relative to this file)."""
    name: str = ""
    """Short name (default: the file name)."""
    description: str = ""
    """What the experiment is about."""
    framing: str | None = None
    """A framing of the instrument as the fixed system prompt (default: the instrument's `default_framing`)."""
    system: TemplateText | None = None
    """Or a fixed system-prompt template (`""`: no system prompt); not with `framing`."""
    user: TemplateText = "{item}"
    """The user-message template around the item text; must contain `{item}`."""
    items: Annotated[list[ItemId], Field(min_length=1)] | None = None
    """Administer these items, in this order (default: all)."""
    stated_instruction: NonBlank | None = None
    """The instruction of the elicitation level `stated`, added to the user's text; `{options}` names the options (the cell's answer labels); translated in `[translations.<language>]` (default: the run's `stated_instruction`, in English)."""


class FactorSpec(_Table):
    """One non-model factor; the factors, in file order, are the dims of the prompts."""

    toml: ClassVar[str] = "[factors.<name>]"

    kind: (
        Literal[
            "lexicon",
            "framing",
            "free",
            "format",
            "administration",
            "item_order",
            "elicitation",
            "respondent",
            "language",
            "perturbation",
        ]
        | None
    ) = None
    """`lexicon`, `framing`, `free`, `format` (a response format), `administration` (levels `isolated`, `sequential`; the factor must be named `administration`), `item_order` (the order of the items in a sequential conversation), `elicitation` (how the answer is read: levels `first_token`, `prefix`, `greedy`, `own_words`; the factor must be named `elicitation`), `respondent` (a free factor with one level per person of a survey table, `xlikert.design.respondent_personas`: two people may share a persona), `language` (levels: the instrument's language and its translations) or `perturbation` (prompt noise: each level a rule on the item text, `none`, `typos rate=R seed=S`, `case upper`, `case lower`, `whitespace rate=R seed=S`, or a table `{ paraphrase = [one text per item] }`; `xlikert.design.perturbation`). Default: `administration` or `elicitation` for a factor of that name, else inferred from the instrument's factor names)."""
    levels: Levels | None = None
    """Level labels, or a table of level -> text or fields (default for lexicon and framing: all; format: built-in names or tables of `base`, `order`, `anchors`, `labels`; administration: both; elicitation: a list, default `first_token`, `prefix`, `greedy`; item_order: `as_listed`, `reversed`, `rotation<k>`, `latin_square`, or a table of level -> the item ids in the order asked, space-separated)."""
    description: str = ""
    """What the factor varies."""
    permute: Literal["rotations", "all"] | None = None
    """Format factors: the levels are one format (`levels`: at most one, default `labelled`) shown in every cyclic rotation (`rotations`) or every permutation (`all`) of the points, each named by its order (`34512`)."""
    max_levels: Annotated[int, Field(gt=0)] | None = None
    """With `permute`: the most levels it may make (default 120; more is an error naming the count)."""


class ModelSpec(BaseModel):
    """One level of the model factor; any other key goes to the collection layer untouched."""

    model_config = ConfigDict(
        extra="allow", strict=True, frozen=True, use_attribute_docstrings=True
    )
    toml: ClassVar[str] = "[[models]]"

    source: NonBlank
    """A built-in offline zoo name, a Hugging Face id or a local path."""
    name: NonBlank | None = None
    """The level label (default: `source`)."""
    trust_remote_code: bool | None = None
    """Whether to run the model repository's own code (Hugging Face)."""


class ExperimentTranslationSpec(_Table):
    """The experiment's own texts in one language of its `language` factor."""

    toml: ClassVar[str] = "[translations.<language>] (experiment)"

    system: TemplateText | None = None
    """The `[experiment] system` template in this language (needed where the experiment sets one; the same text keeps it)."""
    user: TemplateText | None = None
    """The `[experiment] user` template in this language (needed where the experiment sets one)."""
    stated_instruction: NonBlank | None = None
    """The `[experiment] stated_instruction` in this language (needed where the experiment sets one; it must name `{options}`)."""
    anchors: dict[ScaleValue, NonBlank] = {}
    """Scale value -> label in this language (every anchor of the experiment's `[scale.anchors]` needs one)."""
    nonsubstantive: dict[NonBlank, Label] = {}
    """An option's label in the experiment's `[scale]` -> its label in this language (every option needs one; the results keep the experiment's label as its name)."""


class ExperimentFile(_Table):
    """An experiment file."""

    toml: ClassVar[str] = "experiment file, top level"

    experiment: ExperimentHead
    """The instrument and the prompt texts: `[experiment]`."""
    factors: dict[FactorName, FactorSpec] = {}
    """The non-model factors: `[factors.<name>]`, in this order."""
    models: list[ModelSpec] = []
    """The models: `[[models]]`, one table each (crossed at collection)."""
    constants: dict[PlaceholderName, str] = {}
    """Fields fixed for every prompt."""
    scale: ScaleSpec | None = None
    """Overrides the instrument's scale (same keys as its `[scale]`)."""
    collect: dict[str, Any] | None = None
    """Collection options: a table checked by the collection layer (`xlikert.collect.options.CollectOptions`)."""
    translations: dict[NonBlank, ExperimentTranslationSpec] = {}
    """Language tag -> the experiment's own texts (`system`, `user`, `stated_instruction`, `[scale]` labels) in that language of its `language` factor (`[translations.zh]`)."""


MODELS: tuple[type[BaseModel], ...] = (
    InstrumentFile,
    InstrumentHead,
    ScaleSpec,
    OptionSpec,
    ItemSpec,
    TranslationSpec,
    ExperimentFile,
    ExperimentHead,
    FactorSpec,
    ModelSpec,
    ExperimentTranslationSpec,
)


# --------------------------------------------------------------------------- README tables


def _type_name(tp: Any) -> str:
    """The README's words for an annotation (``list[str]`` -> ``array of string``).

    Examples
    --------
    >>> _type_name(dict[str, list[int]])
    'table of array of integer'
    >>> _type_name(Identifier | None)
    'identifier'
    """
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        names = [m.text for m in tp.__metadata__ if isinstance(m, TypeName)]
        return names[-1] if names else _type_name(args[0])
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    if origin is Literal:
        return " or ".join(f"`{a!r}`".replace("'", '"') for a in args)
    if origin in (list, dict):
        return f"{'array' if origin is list else 'table'} of {_type_name(args[-1])}"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "table"
    words = {str: "string", int: "integer", bool: "boolean", Any: "any"}
    return words.get(tp, getattr(tp, "__name__", str(tp)))


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None or value is PydanticUndefined:
        return "optional"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value!r}`"


def _readme_table(model: type[BaseModel]) -> str:
    """The Markdown reference table of one TOML table: key, type, default, meaning."""
    lines = [
        f"**`{model.toml}`**: {(model.__doc__ or '').strip()}",  # type: ignore[attr-defined]
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for key, field in model.model_fields.items():
        meaning = (field.description or "").replace("|", "\\|")
        names = [m.text for m in field.metadata if isinstance(m, TypeName)]
        text = (names[-1] if names else _type_name(field.annotation)).replace("|", "\\|")
        lines.append(f"| `{key}` | {text} | {_default(field)} | {meaning} |")
    return "\n".join(lines)


BEGIN = "<!-- schema tables: generated by xlikert.design.file_schema.update_readme; do not edit -->"
END = "<!-- end of schema tables -->"


def _readme_tables() -> str:
    """Every reference table, between the README's markers."""
    body = "\n\n".join(_readme_table(m) for m in MODELS)
    return f"{BEGIN}\n\n{body}\n\n{END}"


def update_readme(path: Path | None = None) -> bool:
    """Rewrite the generated tables of the design README; True if it changed."""
    path = path or Path(__file__).with_name("README.md")
    text = path.read_text("utf-8")
    head, found, rest = text.partition(BEGIN)
    if not found:
        raise ValueError(f"{path}: no line {BEGIN!r} marks where the tables go")
    tail = rest.partition(END)[2]
    new = head + _readme_tables() + tail
    path.write_text(new, "utf-8")
    return new != text
