"""A tokenizer's tokens as bytes and text, worked out once per tokenizer.

A vocabulary string is not a token's text: byte-level BPE (GPT-2, Llama 3, Qwen,
SmolLM2) spells the bytes of 不 as ``ä¸į``, SentencePiece spells a space ``▁`` and a
byte it has no piece for ``<0xE4>``. :func:`token_bytes` gives each token's bytes;
:func:`token_text` its text as a reader sees it: the bytes read as UTF-8, where a
token holds an incomplete UTF-8 sequence (a character split between tokens) the
bytes it holds escaped (``\\xe4\\xb8``). Stored and shown tokens (top-k listings,
traces, the CLI, the report) are this text, beside their ids.

Byte-level and SentencePiece vocabularies spell the bytes (no decode is needed); a
tokenizer of another kind is asked to ``decode`` each token once (a leading ``▁`` or
``Ġ`` it keeps as a letter is read as a space, as the answer rules always have).
:func:`numeral_index` lists every token whose text is a number in some decimal
script (:mod:`xlikert.collect.answers.numerals`). Both are cached per tokenizer, so the valid
sets of every label set of a run cost one pass over the vocabulary and no forward pass.
"""

from __future__ import annotations

import contextlib
import functools
import re
import weakref
from dataclasses import dataclass
from typing import Any

from ..foreign import Tokenizer
from .numerals import read_numeral

__all__ = [
    "NumeralToken",
    "Vocabulary",
    "numeral_index",
    "show_bytes",
    "token_bytes",
    "token_text",
    "vocabulary",
]

_BYTE_RE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_MARKS = ("▁", "Ġ")
#: The longest numeral text indexed (a sign and 15 digits).
_LONGEST = 16


@functools.cache
def _byte_level() -> dict[str, int]:
    """GPT-2's byte-level alphabet: printable stand-in character -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def show_bytes(data: bytes) -> str:
    """Bytes as text: UTF-8 where they are, the rest escaped (``\\xe4\\xb8``).

    Examples
    --------
    >>> show_bytes("不".encode()), show_bytes("不".encode()[:2]), show_bytes(b" 5")
    ('不', '\\\\xe4\\\\xb8', ' 5')
    """
    return data.decode("utf-8", errors="backslashreplace")


@dataclass(frozen=True)
class NumeralToken:
    """A token whose text is a number: its id, value, script and leading space."""

    id: int
    value: int
    script: str
    marked: bool


@dataclass(frozen=True)
class Vocabulary:
    """Every non-special token of a tokenizer as bytes (see the module docstring).

    ``raw`` is the vocabulary string of each id (the tokenizer's own spelling),
    ``data`` its bytes, ``special`` the special ids (left out of ``data``).
    """

    raw: dict[int, str]
    data: dict[int, bytes]
    special: frozenset[int]

    def text(self, idx: int) -> str:
        """The token's text (:func:`show_bytes` of its bytes); a special token's own string."""
        if idx in self.data:
            return show_bytes(self.data[idx])
        return self.raw.get(idx, "")

    def complete(self, idx: int) -> str | None:
        """The token's text when its bytes are whole UTF-8 characters, else None."""
        try:
            return self.data[idx].decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            return None


def _scheme(tokenizer: Tokenizer) -> str:
    """``"byte-level"``, ``"sentencepiece"`` or ``"decode"`` (ask the tokenizer per token)."""
    convert = getattr(tokenizer, "convert_tokens_to_string", None)
    if convert is None:
        return "decode"
    try:
        if convert(["Ġ"]) == " ":
            return "byte-level"
        if convert(["a", "▁b"]) == "a b":
            return "sentencepiece"
    except Exception:  # pragma: no cover - exotic tokenizers
        pass
    return "decode"


def _bytes_of(token: str, scheme: str) -> bytes | None:
    if scheme == "byte-level":
        table = _byte_level()
        if all(c in table for c in token):
            return bytes(table[c] for c in token)
        return token.encode()  # an added token spelled as itself
    if scheme == "sentencepiece":
        m = _BYTE_RE.match(token)
        return bytes([int(m.group(1), 16)]) if m else token.replace("▁", " ").encode()
    return None


def _decode_all(tokenizer: Tokenizer, ids: list[int]) -> list[str]:
    try:
        return list(tokenizer.batch_decode([[i] for i in ids]))
    except Exception:  # pragma: no cover - exotic tokenizers: one at a time
        return [tokenizer.decode([i]) for i in ids]


def _build(tokenizer: Tokenizer) -> Vocabulary:
    special = frozenset(int(i) for i in (getattr(tokenizer, "all_special_ids", None) or []))
    raw = {int(i): str(t) for t, i in tokenizer.get_vocab().items()}
    scheme = _scheme(tokenizer)
    ids = [i for i in raw if i not in special]
    data: dict[int, bytes] = {}
    if scheme != "decode":  # the bytes follow from the spelling: no decode needed
        for i in ids:
            data[i] = _bytes_of(raw[i], scheme) or b""
        return Vocabulary(raw, data, special)
    for i, text in zip(ids, _decode_all(tokenizer, ids), strict=True):
        if raw[i][:1] in _MARKS and text[:1] != " ":
            # a marker the decoder dropped, or kept as a letter: a leading space
            text = " " + (text[1:] if text[:1] == raw[i][:1] else text)
        data[i] = text.encode()
    return Vocabulary(raw, data, special)


_CACHE: weakref.WeakKeyDictionary[Any, Vocabulary] = weakref.WeakKeyDictionary()
_NUMERALS: weakref.WeakKeyDictionary[Any, tuple[NumeralToken, ...]] = weakref.WeakKeyDictionary()


def vocabulary(tokenizer: Tokenizer) -> Vocabulary:
    """The tokenizer's :class:`Vocabulary`, built on first use and cached with it.

    Examples
    --------
    >>> vocabulary(qwen_tokenizer).text(qwen_tokenizer.convert_tokens_to_ids("ä¸į"))  # doctest: +SKIP
    '不'
    """
    try:
        return _CACHE[tokenizer]
    except (KeyError, TypeError):
        pass
    vocab = _build(tokenizer)
    with contextlib.suppress(TypeError):  # not weakly referenceable: not cached
        _CACHE[tokenizer] = vocab
    return vocab


def token_bytes(tokenizer: Tokenizer, idx: int) -> bytes:
    """The bytes of token ``idx`` (a special token: its string's UTF-8)."""
    vocab = vocabulary(tokenizer)
    return vocab.data.get(int(idx), vocab.raw.get(int(idx), "").encode())


def token_text(tokenizer: Tokenizer, idx: int) -> str:
    """The text of token ``idx`` as stored and shown (incomplete UTF-8 escaped)."""
    return vocabulary(tokenizer).text(int(idx))


def numeral_index(tokenizer: Tokenizer) -> tuple[NumeralToken, ...]:
    """Every token whose text is a number in one script, after at most one leading space.

    Cached per tokenizer: every label set of a run reads its valid tokens from it.
    """
    try:
        return _NUMERALS[tokenizer]
    except (KeyError, TypeError):
        pass
    vocab = vocabulary(tokenizer)
    out = []
    for idx in sorted(vocab.data):
        text = vocab.complete(idx)
        if not text:
            continue
        marked = text[0] == " "
        body = text[1:] if marked else text
        if not body or len(body) > _LONGEST or not (body[0] == "-" or body[0].isdecimal()):
            continue
        got = read_numeral(body)
        if got is not None:
            out.append(NumeralToken(idx, got[0], got[1], marked))
    index = tuple(out)
    with contextlib.suppress(TypeError):
        _NUMERALS[tokenizer] = index
    return index
