"""Reading the TOML files and reporting their problems.

Problems are collected, so that one run reports every problem in a file, and
raised together as one :class:`~xlikert.core.errors.ConfigError` whose lines name
the file, the item or table, and the field. :func:`validate` turns the errors
of a pydantic schema (:mod:`.file_schema`) into such lines.
"""

from __future__ import annotations

import difflib
import hashlib
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..core.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

#: Arrays of tables: the noun of one element and the key that labels it.
_ROWS = {"items": ("item", "id"), "models": ("model", "name")}
#: Tables of tables: the noun of one entry.
_ENTRIES = {"lexicon": "lexicon level", "factors": "factor", "levels": "level"}
#: pydantic's error type -> what the value must be.
_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "true or false",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "list_type": "an array",
}


class Problems:
    """Collects problems found in one file and raises them together."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: list[str] = []
        #: The named error class of each problem that has one (None: a plain ConfigError).
        self.kinds: list[type[ConfigError] | None] = []
        #: Array -> indices of the elements left out by :func:`validate`.
        self.dropped: dict[str, list[int]] = {}

    def add(self, where: str, message: str, kind: type[ConfigError] | None = None) -> None:
        """Record a problem; ``kind`` names its error class (a :class:`ConfigError`)."""
        self.lines.append(f"{where}: {message}" if where else message)
        self.kinds.append(kind)

    def raise_if_any(self) -> None:
        if self.lines:
            raise self.error()

    def error(self) -> ConfigError:
        """One error listing every problem: of the problems' named class when they share one."""
        kinds = set(self.kinds) | ({None} if len(self.kinds) < len(self.lines) else set())
        only = kinds.pop() if len(kinds) == 1 else None
        cls = only if only is not None else ConfigError
        if len(self.lines) == 1:
            return cls(f"{self.file}: {self.lines[0]}")
        body = "\n".join(f"  - {line}" for line in self.lines)
        return cls(f"{self.file}: {len(self.lines)} problems:\n{body}")

    def file_index(self, array: str, k: int) -> int:
        """The index in the file of element ``k`` of ``array`` as validated."""
        for j in sorted(self.dropped.get(array, ())):
            if j <= k:
                k += 1
        return k


def suggest(name: str, options: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` or ``""``."""
    close = difflib.get_close_matches(name, list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def read_toml(path: Path) -> tuple[dict, str]:
    """Parse ``path`` as TOML; return the table and the sha256 of its bytes."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc.strerror or exc})") from exc
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: malformed TOML: {exc}") from exc
    return table, hashlib.sha256(data).hexdigest()


def validate(model: type[M], table: dict, p: Problems) -> M:
    """``table`` checked against the schema ``model``; each error added to ``p``.

    With errors only inside some elements of top-level arrays (an item, a
    model), the rest is validated again without them (recorded in
    ``p.dropped``) and returned, so that the checks across fields still run and
    report their problems with these. Otherwise raises every problem found.

    Raises
    ------
    ConfigError
        Naming the file, the place (table, item, factor) and the field of each error.
    """
    try:
        return model.model_validate(table)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    for error in errors:
        p.add(*_describe(error, model, table))
    if not all(_in_row(e["loc"]) for e in errors):
        raise p.error()  # an error outside the elements of arrays
    for key, k in {(str(e["loc"][0]), int(e["loc"][1])) for e in errors}:  # rows (_in_row)
        p.dropped.setdefault(key, []).append(k)
    kept = {**table}
    for key, gone in p.dropped.items():
        kept[key] = [row for j, row in enumerate(table[key]) if j not in gone]
    try:
        return model.model_validate(kept)
    except ValidationError:
        raise p.error() from None


def _in_row(loc: tuple) -> bool:
    return len(loc) >= 2 and loc[0] in _ROWS and isinstance(loc[1], int)


def _describe(error: Mapping[str, Any], model: type[BaseModel], table: dict) -> tuple[str, str]:
    """The place (``"item 'q1' (items[0])"``) and the message of one pydantic error."""
    loc = tuple(c for c in error["loc"] if not (isinstance(c, str) and c.startswith("<")))
    whole = error["type"] == "value_error" and _model_at(model, loc) is not None
    place, rest = _place(loc, table, whole)
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        allowed = list(parent.model_fields) if parent else []
        return place, (
            f"unknown field {rest[-1]!r}{suggest(str(rest[-1]), allowed)}; "
            f"allowed: {', '.join(allowed)}"
        )
    subject = _subject(rest)
    lead = f"{subject} " if subject else ""
    if kind == "missing":
        return place, f"required {subject} is missing"
    got = f", got {_show(error['input'])}"
    if kind in _TYPE_WORDS:
        return place, f"{lead}must be {_TYPE_WORDS[kind]}{got}"
    if kind == "too_short" and error.get("ctx", {}).get("actual_length") == 0:
        return place, f"{lead}is empty"
    msg = error["msg"].removeprefix("Value error, ").replace("Input should", "must", 1)
    if not msg.startswith(("must", "is ")):
        return place, f"{subject}: {msg}" if subject else msg
    return place, f"{lead}{msg}{got if msg.startswith('must be') else ''}"


def _place(loc: tuple, table: dict, whole: bool) -> tuple[str, list]:
    """Split ``loc`` into the place it names and the field path inside it."""
    if len(loc) < 2 and not whole:
        return "top level", list(loc)
    head, i = loc[0], 1
    if _in_row(loc):
        noun, key = _ROWS[head]
        label = _row_label(table, head, loc[1], key)
        place = f"{noun} {label!r} ({head}[{loc[1]}])" if label else f"{head}[{loc[1]}]"
        i = 2
    elif head in _ENTRIES and len(loc) > 2 - whole:
        place, i = f"{_ENTRIES[head]} {loc[1]!r}", 2
    else:
        place = f"[{head}]"
    # nested tables of tables, e.g. a factor's table of levels
    while i + 2 < len(loc) + whole and loc[i] in _ENTRIES and loc[i + 1] != "[key]":
        place += f" {_ENTRIES[loc[i]]} {loc[i + 1]!r}"
        i += 2
    return place, list(loc[i:])


def _row_label(table: dict, head: str, k: int, key: str) -> str:
    row = table[head][k] if isinstance(table.get(head), list) else None
    if not isinstance(row, dict):
        return ""
    label = row.get(key, row.get("source") if head == "models" else None)
    return str(label) if isinstance(label, str | int) and not isinstance(label, bool) else ""


def _subject(rest: list) -> str:
    """``field 'levels[0]'``, ``key 'x' in 'anchors'`` or ``""`` (the place itself)."""
    if rest and rest[-1] == "[key]":
        inside = f" in {_path(rest[:-2])!r}" if len(rest) > 2 else ""
        return f"key {rest[-2]!r}{inside}" if len(rest) > 1 else ""
    return f"field {_path(rest)!r}" if rest else ""


def _path(parts: list) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The schema model of the table at ``loc`` (None: not a table of the schema)."""
    tp: Any = model
    for part in loc:
        tp = _strip(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(str(part))
            if field is None:
                return None
            tp = field.annotation
        elif typing.get_origin(tp) in (list, dict):
            tp = typing.get_args(tp)[-1]
        else:
            return None
    tp = _strip(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _strip(tp: Any) -> Any:
    """``Annotated[X, ...]`` and ``X | None`` -> ``X``."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp
