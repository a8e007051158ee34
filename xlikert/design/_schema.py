"""Hand-written schema checks for the TOML files (no jsonschema dependency).

Errors are collected, so that one run reports every problem in a file, and
raised together as one :class:`~xlikert.errors.ConfigError` whose lines name
the file, the item or table, and the field.
"""

from __future__ import annotations

import difflib
import hashlib
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigError

_MISSING = object()
_TYPE_NAMES = {
    str: "a string",
    bool: "true or false",
    int: "an integer",
    dict: "a table",
    list: "an array",
}


class Problems:
    """Collects problems found in one file and raises them together."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.lines.append(f"{where}: {message}" if where else message)

    def raise_if_any(self) -> None:
        if not self.lines:
            return
        if len(self.lines) == 1:
            raise ConfigError(f"{self.file}: {self.lines[0]}")
        body = "\n".join(f"  - {line}" for line in self.lines)
        raise ConfigError(f"{self.file}: {len(self.lines)} problems:\n{body}")

    def get(
        self,
        table: dict,
        key: str,
        kind: type | tuple[type, ...],
        where: str,
        default: Any = _MISSING,
    ) -> Any:
        """``table[key]`` checked to be of ``kind``; records a problem and returns ``default``."""
        if key not in table:
            if default is _MISSING:
                self.add(where, f"required field {key!r} is missing")
                return None
            return default
        value = table[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if not ok:
            want = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
            self.add(where, f"field {key!r} must be {want}, got {_show(value)}")
            return None if default is _MISSING else default
        return value

    def unknown_keys(self, table: dict, allowed: Iterable[str], where: str) -> None:
        allowed = list(allowed)
        for key in table:
            if key not in allowed:
                self.add(
                    where,
                    f"unknown field {key!r}{suggest(key, allowed)}; allowed: {', '.join(allowed)}",
                )


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
