"""Prompt templates: ``{placeholder}`` substitution with a strict, checkable syntax.

A template is plain text with placeholders in braces:

``{name}``
    replaced by the value of field ``name`` (a lexicon field, a free factor, a
    constant or a scale field such as ``{scale_min}``);
``{name:cap}``, ``{name:lower}``, ``{name:upper}``
    the same value with its first letter upper-cased (``"the Chinese"`` ->
    ``"The Chinese"`` at the start of a sentence), lower-cased or upper-cased;
``{{`` and ``}}``
    literal braces.

Names are Python identifiers. Anything else in braces, or a lone brace, is a
syntax error. Values are inserted literally: a brace inside a lexicon value is
text, never a nested placeholder. One typographic rule applies: a value that
ends in a period absorbs a period written right after the placeholder, so
``"entry into {country_short}."`` with ``"the U.S."`` reads ``"entry into the
U.S."``, not ``"the U.S.."``.

Examples
--------
>>> t = Template.parse("{people:cap} should always buy {adj}-made products instead of imports.")
>>> t.fields
('people', 'adj')
>>> t.render({"people": "the Chinese", "adj": "Chinese"})
'The Chinese should always buy Chinese-made products instead of imports.'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MODIFIERS", "Placeholder", "Template", "TemplateSyntaxError"]

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


#: Modifiers accepted after a colon, ``{name:cap}``.
MODIFIERS = {"cap": _cap, "lower": str.lower, "upper": str.upper}


class TemplateSyntaxError(Exception):
    """Raised by :meth:`Template.parse`; callers wrap it in a ConfigError naming file and field."""


@dataclass(frozen=True)
class Placeholder:
    """One ``{name}`` or ``{name:modifier}`` in a template."""

    name: str
    modifier: str = ""

    def apply(self, value: str) -> str:
        return MODIFIERS[self.modifier](value) if self.modifier else value


@dataclass(frozen=True)
class Template:
    """A parsed template: a tuple of literal strings and :class:`Placeholder` s."""

    text: str
    parts: tuple[str | Placeholder, ...]

    @classmethod
    def parse(cls, text: str) -> Template:
        """Parse ``text``; raise :class:`TemplateSyntaxError` on malformed braces or names."""
        parts: list[str | Placeholder] = []
        pos = 0
        for m in _TOKEN.finditer(text):
            if m.start() > pos:
                parts.append(text[pos : m.start()])
            tok = m.group(0)
            if tok == "{{":
                parts.append("{")
            elif tok == "}}":
                parts.append("}")
            elif m.group(1) is None:
                raise TemplateSyntaxError(
                    f"lone {tok!r} at character {m.start()} (write {tok * 2!r} for a literal brace)"
                )
            else:
                name, _, modifier = m.group(1).partition(":")
                name = name.strip()
                modifier = modifier.strip()
                if not _NAME.match(name):
                    raise TemplateSyntaxError(
                        f"bad placeholder {tok!r} at character {m.start()}: a placeholder is "
                        "{name} or {name:modifier} with name a letter/underscore identifier"
                    )
                if modifier and modifier not in MODIFIERS:
                    raise TemplateSyntaxError(
                        f"unknown modifier {modifier!r} in {tok!r}; known modifiers: "
                        f"{', '.join(MODIFIERS)}"
                    )
                parts.append(Placeholder(name, modifier))
            pos = m.end()
        if pos < len(text):
            parts.append(text[pos:])
        return cls(text, tuple(parts))

    @property
    def fields(self) -> tuple[str, ...]:
        """Distinct placeholder names in order of first appearance."""
        return tuple(dict.fromkeys(p.name for p in self.parts if isinstance(p, Placeholder)))

    def splice(self, name: str, other: Template) -> Template:
        """Replace every ``{name}`` placeholder by the parts of ``other`` (used for ``{item}``)."""
        parts: list[str | Placeholder] = []
        for p in self.parts:
            if isinstance(p, Placeholder) and p.name == name:
                parts.extend(other.parts)
            else:
                parts.append(p)
        return Template(self.text.replace("{" + name + "}", other.text), tuple(parts))

    def render(self, values: Mapping[str, str]) -> str:
        """Substitute ``values``; a missing field raises ``KeyError`` (checked beforehand by callers).

        Examples
        --------
        >>> Template.parse("Keep {country} working. Into {short}.").render(
        ...     {"country": "America", "short": "the U.S."})
        'Keep America working. Into the U.S.'
        """
        out: list[str] = []
        absorb = False
        for p in self.parts:
            if isinstance(p, str):
                if absorb and p.startswith(".") and not p.startswith(".."):
                    p = p[1:]
                out.append(p)
                absorb = False
            else:
                text = p.apply(values[p.name])
                out.append(text)
                absorb = text.endswith(".") and not text.endswith("..")
        return "".join(out)
