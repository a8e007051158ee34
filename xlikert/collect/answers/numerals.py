"""Numbers in any script: the numeral rule every answer rule applies.

An answer token counts as a code when its text (after ONE leading space marker) is
that number written in one decimal script: the ASCII digits ``5``, the full-width
``５`` (how Chinese and Japanese questionnaires print a scale), the Arabic-Indic
``٥``, the Persian ``۵``, the Devanagari ``५``, the Bengali ``৫``, the Thai ``๕``
and every other set of Unicode decimal digits (general category Nd). All the
digits of one number are of ONE script (``1٠`` is no number); a number has no
leading zero (``05`` is not 5) and may carry an ASCII ``-``. A *script* here is one
set of ten Unicode decimal digits, named after its zero (``ascii``, ``fullwidth``,
``arabic-indic``, ``extended-arabic-indic``, ``devanagari``, ...): :func:`scripts`
lists them all, in code point order, for the Unicode version of this Python
(:data:`UNICODE_VERSION`).

A run may restrict the rule to the scripts its prompts show
(``CollectOptions(numerals="shown")``): the scripts of the answer labels (the
digits of the scale, ASCII, when a prompt shows no format's labels).

Examples
--------
>>> read_numeral("５"), read_numeral("٣"), read_numeral("१०")
((5, 'fullwidth'), (3, 'arabic-indic'), (10, 'devanagari'))
>>> read_numeral("1٠") is None, read_numeral("05") is None, read_numeral("5.") is None
(True, True, True)
>>> write_numeral(12, "fullwidth"), write_numeral(-3, "thai")
('１２', '-๓')
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Iterable, Mapping

from ...core.errors import CollectionError

__all__ = [
    "NUMERAL_MODES",
    "NUMERAL_RULE",
    "UNICODE_VERSION",
    "digit_script",
    "read_numeral",
    "rule_scripts",
    "scripts",
    "shown_scripts",
    "write_numeral",
]

#: The Unicode version whose decimal digits the rule knows (this Python's ``unicodedata``).
UNICODE_VERSION = unicodedata.unidata_version

#: The values of ``CollectOptions.numerals``: every script, or the scripts the prompts show.
NUMERAL_MODES = ("any", "shown")

#: The numeral rule; stored in the results' attrs (``numeral_rule``).
NUMERAL_RULE = (
    "a numeric answer label y is answered by any text that is the number y written in ONE "
    "decimal script: every character a Unicode decimal digit (general category Nd) of one "
    "set of ten (ASCII 0-9, full-width, Arabic-Indic, Persian, Devanagari, Bengali, Thai, "
    "...), no leading zero, an optional ASCII '-'; the answer rule's token texts (decoded "
    "bytes, one leading space marker allowed) are read this way, and each answer's mass is "
    "kept per script (script_mass); numerals = 'any' counts every script of the file's "
    "script axis, 'shown' only the scripts of the answer labels the prompt shows "
    f"(Unicode {UNICODE_VERSION})"
)


@functools.cache
def _zeros() -> dict[int, str]:
    """Code point of each decimal script's zero -> the script's name."""
    out: dict[int, str] = {}
    for cp in range(sys.maxunicode + 1):
        d = unicodedata.decimal(chr(cp), None)
        if d is not None and cp - d not in out:
            name = unicodedata.name(chr(cp - d))
            out[cp - d] = (
                "ascii"
                if name == "DIGIT ZERO"
                else name.removesuffix(" DIGIT ZERO").lower().replace(" ", "-")
            )
    return dict(sorted(out.items()))


@functools.cache
def _zero_of() -> dict[str, int]:
    return {v: k for k, v in _zeros().items()}


def scripts() -> tuple[str, ...]:
    """Every decimal script Unicode knows, in code point order (``ascii`` first).

    Returns
    -------
    tuple of str
        The names of the results' ``script`` axis.

    Examples
    --------
    >>> scripts()[:4]
    ('ascii', 'arabic-indic', 'extended-arabic-indic', 'nko')
    >>> "fullwidth" in scripts() and "devanagari" in scripts()
    True
    """
    return tuple(_zeros().values())


def digit_script(char: str) -> str | None:
    """The script of one decimal digit, or None when ``char`` is no decimal digit.

    Examples
    --------
    >>> digit_script("7"), digit_script("７"), digit_script("۷"), digit_script("x")
    ('ascii', 'fullwidth', 'extended-arabic-indic', None)
    >>> digit_script("²") is None  # a superscript is no decimal digit (category No)
    True
    """
    d = unicodedata.decimal(char, None) if len(char) == 1 else None
    return None if d is None else _zeros()[ord(char) - d]


def read_numeral(text: str) -> tuple[int, str] | None:
    """The number ``text`` writes and its script, or None when it writes none.

    Parameters
    ----------
    text : str
        The text, without a leading space (a token's marker is stripped first).

    Returns
    -------
    tuple of (int, str) or None
        ``(value, script)`` when every character is a decimal digit of one script,
        without a leading zero, after an optional ASCII ``-``.

    Examples
    --------
    >>> read_numeral("12"), read_numeral("-3"), read_numeral("０")
    ((12, 'ascii'), (-3, 'ascii'), (0, 'fullwidth'))
    >>> [read_numeral(t) for t in ("", "-", " 5", "5 ", "1٠", "007")]
    [None, None, None, None, None, None]
    """
    body = text[1:] if text[:1] == "-" else text
    if not body:
        return None
    found = {digit_script(c) for c in body}
    script = found.pop() if len(found) == 1 else None
    if script is None:
        return None
    if len(body) > 1 and unicodedata.decimal(body[0]) == 0:
        return None
    value = int("".join(str(unicodedata.decimal(c)) for c in body))
    return (-value if body is not text else value), script


def write_numeral(value: int, script: str) -> str:
    """The number ``value`` written in ``script``.

    Raises
    ------
    CollectionError
        An unknown script, naming the known ones.

    Examples
    --------
    >>> write_numeral(5, "ascii"), write_numeral(10, "arabic-indic"), write_numeral(4, "bengali")
    ('5', '١٠', '৪')
    """
    zero = _zero_of().get(script)
    if zero is None:
        raise CollectionError(f"unknown numeral script {script!r}; known: {', '.join(scripts())}")
    text = str(int(value))
    return "".join(c if c == "-" else chr(zero + int(c)) for c in text)


def shown_scripts(labels: Mapping[int, str] | Iterable[str] | None) -> tuple[str, ...]:
    """The scripts of the numeric answer labels a prompt shows (None: the ASCII digits).

    Examples
    --------
    >>> shown_scripts(None), shown_scripts({1: "１", 2: "２"}), shown_scripts(["Yes", "No"])
    (('ascii',), ('fullwidth',), ())
    """
    if labels is None:
        return ("ascii",)
    texts = labels.values() if isinstance(labels, Mapping) else labels
    found = {r[1] for t in texts if (r := read_numeral(str(t))) is not None}
    return tuple(s for s in scripts() if s in found)


def rule_scripts(
    mode: str, labels: Mapping[int, str] | Iterable[str] | None
) -> tuple[str, ...] | None:
    """The scripts the numeral rule counts under ``mode``: None for every script.

    Examples
    --------
    >>> rule_scripts("any", None) is None, rule_scripts("shown", {1: "٥"})
    (True, ('arabic-indic',))
    """
    if mode not in NUMERAL_MODES:
        raise CollectionError(f"numerals must be one of {list(NUMERAL_MODES)}, got {mode!r}")
    return None if mode == "any" else shown_scripts(labels)
