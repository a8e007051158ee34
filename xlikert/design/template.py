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

from ..core.errors import TemplateSyntaxError

__all__ = ["MODIFIERS", "Placeholder", "Template", "TemplateSyntaxError"]

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


#: Modifiers accepted after a colon, ``{name:cap}``.
MODIFIERS = {"cap": _cap, "lower": str.lower, "upper": str.upper}


@dataclass(frozen=True)
class Placeholder:
    """One ``{name}`` or ``{name:modifier}`` in a template.

    ``outer`` is the modifier of an enclosing ``{item:modifier}`` (see
    :meth:`Template.splice`), applied after the placeholder's own.
    """

    name: str
    modifier: str = ""
    outer: str = ""

    def apply(self, value: str) -> str:
        for m in (self.modifier, self.outer):
            value = MODIFIERS[m](value) if m else value
        return value


@dataclass(frozen=True)
class Template:
    """A parsed template: a tuple of literal strings and :class:`Placeholder` s."""

    text: str
    parts: tuple[str | Placeholder, ...]

    @classmethod
    def parse(cls, text: str) -> Template:
        """Parse ``text``; raise :class:`TemplateSyntaxError` on malformed braces or names.

        Parameters
        ----------
        text : str
            A template: literal text, ``{name}`` or ``{name:modifier}``
            placeholders, ``{{`` and ``}}`` for literal braces.

        Returns
        -------
        Template
            The text and its parts (literal strings and placeholders).

        Raises
        ------
        TemplateSyntaxError
            A lone brace, a placeholder name that is not an identifier, or an
            unknown modifier, naming the character or placeholder where it is (an
            :class:`~xlikert.core.errors.XlikertError`, so also a :class:`ValueError`).

        Examples
        --------
        >>> Template.parse("{people:cap} should buy {adj}-made products.").fields
        ('people', 'adj')
        >>> Template.parse("a {b")
        Traceback (most recent call last):
        ...
        xlikert.core.errors.TemplateSyntaxError: lone '{' at character 2 (write '{{' ...)
        """
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
        """Distinct placeholder names in order of first appearance.

        Examples
        --------
        >>> Template.parse("{a} and {b}, then {a:lower}").fields
        ('a', 'b')
        """
        return tuple(dict.fromkeys(p.name for p in self.parts if isinstance(p, Placeholder)))

    def splice(self, name: str, other: Template) -> Template:
        """Replace every ``{name}`` placeholder by the parts of ``other`` (used for ``{item}``).

        A modifier on the placeholder applies to the whole rendered text of
        ``other``: ``{item:lower}`` lower-cases the item text and the values
        filled into it, ``{item:cap}`` upper-cases its first letter.

        Parameters
        ----------
        name : str
            The placeholder to replace.
        other : Template
            The template spliced in its place.

        Returns
        -------
        Template
            A new template; ``self`` is unchanged.

        Examples
        --------
        >>> user = Template.parse("I think that {item:lower}")
        >>> user.splice("item", Template.parse("{people:cap} buy {adj} goods.")).render(
        ...     {"people": "the Chinese", "adj": "Chinese"})
        'I think that the chinese buy chinese goods.'
        >>> Template.parse("{item:cap}").splice("item", Template.parse("{who} said so")).render(
        ...     {"who": "everyone"})
        'Everyone said so'
        """
        parts: list[str | Placeholder] = []
        text = self.text
        for p in self.parts:
            if isinstance(p, Placeholder) and p.name == name:
                parts.extend(other._modified(p.modifier))
                text = text.replace(
                    "{" + name + (":" + p.modifier if p.modifier else "") + "}", other.text
                )
            else:
                parts.append(p)
        return Template(text, tuple(parts))

    def _modified(self, modifier: str) -> tuple[str | Placeholder, ...]:
        """The parts with ``modifier`` applied to the text they render (``cap``: its first letter)."""
        if not modifier:
            return self.parts
        out: list[str | Placeholder] = []
        pending = True  # cap: only the first non-empty part
        for p in self.parts:
            if pending or modifier != "cap":
                if isinstance(p, str):
                    pending = pending and not p
                    p = MODIFIERS[modifier](p)
                else:
                    pending = False
                    p = Placeholder(p.name, p.modifier, modifier)
            out.append(p)
        return tuple(out)

    def render(self, values: Mapping[str, str]) -> str:
        """Substitute ``values``; a missing field raises ``KeyError`` (checked beforehand by callers).

        A value that ends with a full stop absorbs the full stop that follows its
        placeholder (``"Into {short}."`` with ``short = "the U.S."``).

        Parameters
        ----------
        values : mapping of str to str
            A value for every placeholder of :attr:`fields`.

        Returns
        -------
        str
            The rendered text, each placeholder's modifier applied.

        Raises
        ------
        KeyError
            A placeholder without a value.

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
