"""The labels' token trie: every spelling of the answers as a tree of token prefixes.

The multi-token rule (:data:`~xlikert.collect.answers.spellings.ANSWER_RULE`,
:data:`~xlikert.collect.answers.spellings.WORD_ANSWER_RULE`) counts every token sequence
whose bytes, after ONE optional leading space (``' '``, ``'▁'``, ``'Ġ'``, or a bare space
token first), are an answer label, followed by a token that does not go on with it. Its
spellings are the leaves of a tree: a node is a token prefix whose bytes are a prefix of
some label; the root is the prompt. :class:`LabelTrie` gives a node's children (the
tokens that keep its bytes a label prefix), the label it completes and the labels it is
consistent with, on demand: the tree is never listed. The best-first walk
(:mod:`xlikert.collect.answers.walk`) reads it; the enumeration of every spelling
(:func:`~xlikert.collect.answers.spellings.answer_rule`) lists it, from the same
:class:`SpellingPieces`, so both read one rule.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..foreign import Tokenizer
from .numerals import digit_script, write_numeral
from .numerals import scripts as all_scripts
from .tokens import answer_words, number_labels, number_values, read_scripts
from .vocabulary import vocabulary

__all__ = ["LabelTrie", "SpellingPieces", "find_space_tokens", "spelling_pieces"]

_SPACE_FORMS = (" ", "▁", "Ġ", "<0x20>")


@dataclass(frozen=True)
class SpellingPieces:
    """The tokens that spell a rule's labels, split by where they may stand.

    Attributes
    ----------
    words
        Each label's UTF-8 bytes; a label that is a number once per numeral script read.
    codes
        The score of each word.
    scripts
        Each word's numeral script (``""``: a word).
    numeral_scripts
        The scripts the numeral rule read.
    first
        A first token's bytes, one leading space stripped -> its ids (only bytes that are
        a non-empty prefix of some word).
    inner
        A later token's bytes (a leading space kept: inside a label it is a space) -> its
        ids (only bytes that occur in some word).
    spaces
        The bare space tokens (:func:`find_space_tokens`): a first token of no bytes.
    continuation
        The ids of the tokens that would go on with the answer (a word: a letter, digit or
        ``'_'`` first; a number: a digit of any script): an answer counts only when the
        token after it is none of them.
    numeric
        Whether every label is a number.
    labels
        Score -> the label as shown (its canonical tokenization is the tokenizer's
        encoding of this text).
    """

    words: tuple[bytes, ...]
    codes: tuple[int, ...]
    scripts: tuple[str, ...]
    numeral_scripts: tuple[str, ...]
    first: Mapping[bytes, tuple[int, ...]]
    inner: Mapping[bytes, tuple[int, ...]]
    spaces: tuple[int, ...]
    continuation: tuple[int, ...]
    numeric: bool
    labels: Mapping[int, str] = field(default_factory=dict)


def spelling_pieces(
    tokenizer: Tokenizer,
    scale: Sequence[int],
    labels: Mapping[int, str] | None = None,
    *,
    scripts: Collection[str] | None = None,
) -> SpellingPieces:
    """The :class:`SpellingPieces` of a label set for a tokenizer (matched on token bytes).

    A label that is a number is spelled in every numeral script read (``scripts``; None:
    those the tokenizer knows, with the labels' own scripts always read).
    """
    scale = [int(v) for v in scale]
    words = answer_words(scale, labels)
    numbers = number_labels(words)
    read: tuple[str, ...] = ()
    spell: list[tuple[bytes, int, str]] = []
    if numbers:
        read = read_scripts(tokenizer, scripts, numbers)
        for y, n in number_values(numbers).items():
            spell += [(write_numeral(n, c).encode(), y, c) for c in read]
    spell += [(w.encode(), y, "") for w, y in words.items() if y not in numbers]
    numeric = len(numbers) == len(words)
    goes_on = _continues_number if numeric else _continues_word
    prefixes = {w[:k] for w, _, _ in spell for k in range(1, len(w) + 1)}
    pieces = {w[a:b] for w, _, _ in spell for a in range(len(w)) for b in range(a + 1, len(w) + 1)}
    first: dict[bytes, list[int]] = {}
    inner: dict[bytes, list[int]] = {}
    cont: list[int] = []
    for idx, data in vocabulary(tokenizer).data.items():
        if not data:
            continue
        body = data[1:] if data[:1] == b" " else data
        if data[:1] != b" " and goes_on(data):
            cont.append(idx)
        if body in prefixes:
            first.setdefault(body, []).append(idx)
        if data in pieces:
            inner.setdefault(data, []).append(idx)
    return SpellingPieces(
        words=tuple(w for w, _, _ in spell),
        codes=tuple(y for _, y, _ in spell),
        scripts=tuple(c for _, _, c in spell),
        numeral_scripts=read,
        first={k: tuple(sorted(v)) for k, v in first.items()},
        inner={k: tuple(sorted(v)) for k, v in inner.items()},
        spaces=find_space_tokens(tokenizer),
        continuation=tuple(sorted(cont)),
        numeric=numeric,
        labels={y: w for w, y in words.items()},
    )


@dataclass
class LabelTrie:
    """The tree of an answer rule's spellings, its nodes found on demand.

    A node is given by its bytes (what its tokens spell, the first token's one leading
    space stripped) and whether it is the root (the prompt: only there may a token carry
    the leading space, or be a bare space token).

    Parameters
    ----------
    pieces
        The rule's :class:`SpellingPieces`.
    scale
        The answer codes, in the order of the masses the walk returns.

    Examples
    --------
    >>> p = SpellingPieces(words=(b"ab", b"b"), codes=(1, 2), scripts=("", ""),
    ...     numeral_scripts=(), first={b"a": (1,), b"ab": (3,), b"b": (2, 4)},
    ...     inner={b"a": (1,), b"b": (2,), b"ab": (3,)}, spaces=(9,), continuation=(1, 2, 3),
    ...     numeric=False)
    >>> trie = LabelTrie(p, (1, 2))
    >>> trie.children(b"", True)
    ((1, b'a'), (2, b'b'), (3, b'ab'), (4, b'b'), (9, b''))
    >>> trie.children(b"a", False), trie.completes(b"ab"), trie.mask(b"").tolist()
    (((2, b'ab'),), 0, [True, True])
    """

    pieces: SpellingPieces
    scale: tuple[int, ...]
    _children: dict[tuple[bytes, bool], tuple[tuple[int, bytes], ...]] = field(
        default_factory=dict, repr=False
    )

    def __post_init__(self) -> None:
        self.scale = tuple(int(v) for v in self.scale)
        code = {y: i for i, y in enumerate(self.scale)}
        #: Each word's column in :attr:`scale`.
        self.word_code = np.array([code[y] for y in self.pieces.codes], dtype=np.intp)
        self._masks: dict[bytes, np.ndarray] = {}
        self._complete = {w: i for i, w in enumerate(self.pieces.words)}
        for w, c in zip(self.pieces.words, self.word_code, strict=True):
            for k in range(len(w) + 1):
                m = self._masks.setdefault(w[:k], np.zeros(len(self.scale), dtype=bool))
                m[c] = True

    @property
    def disjoint(self) -> bool:
        """Whether no answer's spelling can also be another's: no label is a prefix of
        another that goes on with a token the stop check lets through ("Agree" and "Agree
        strongly" are not disjoint, "1" and "10" are). Where False, the walk's bounds count
        a node's unread mass once for each label consistent with it."""
        goes_on = _continues_number if self.pieces.numeric else _continues_word
        words = self.pieces.words
        return not any(
            a != b and b.startswith(a) and not goes_on(b[len(a) :]) for a in words for b in words
        )

    def mask(self, data: bytes) -> np.ndarray:
        """``(len(scale),)`` True for the answers with a label that ``data`` is a prefix of."""
        return self._masks[data]

    def completes(self, data: bytes) -> int:
        """The index in :attr:`pieces` ``.words`` of the label ``data`` spells; -1: none."""
        return self._complete.get(data, -1)

    def canonical(self, tokenizer: Tokenizer) -> tuple[tuple[int, ...] | None, ...]:
        """Each answer's canonical tokenization: the tokenizer's encoding of its label as
        shown, no special tokens (what lm-evaluation-harness scores); None: no label."""
        return self._encoded(tokenizer, "")

    def spaced(self, tokenizer: Tokenizer) -> tuple[tuple[int, ...] | None, ...]:
        """Each answer's label as the tokenizer encodes it after a space (``" " + label``, no
        special tokens): the spelling a model writes after a space, which the walk reads
        ahead beside the canonical one; None: no label."""
        return self._encoded(tokenizer, " ")

    def _encoded(self, tokenizer: Tokenizer, before: str) -> tuple[tuple[int, ...] | None, ...]:
        """Each answer's label after ``before``, encoded with no special tokens; None: none."""
        shown = self.pieces.labels
        return tuple(
            tuple(tokenizer.encode(before + shown[y], add_special_tokens=False))
            if y in shown else None
            for y in self.scale
        )  # fmt: skip

    def children(self, data: bytes, root: bool) -> tuple[tuple[int, bytes], ...]:
        """``(token id, child bytes)`` of every token that keeps a node a label prefix,
        sorted by id (at the root: a first token, leading space stripped, or a bare space
        token; elsewhere a token whose bytes, a leading space kept, go on with a label)."""
        key = (data, root)
        got = self._children.get(key)
        if got is not None:
            return got
        out: dict[int, bytes] = {}
        if root:
            for body, ids in self.pieces.first.items():
                out.update((t, body) for t in ids)
            out.update((t, b"") for t in self.pieces.spaces)
        else:
            for w in self.pieces.words:
                if not w.startswith(data):
                    continue
                for end in range(len(data) + 1, len(w) + 1):
                    out.update((t, w[:end]) for t in self.pieces.inner.get(w[len(data) : end], ()))
        got = tuple(sorted(out.items()))
        self._children[key] = got
        return got


# ---------------------------------------------------------------------------- the stop check
def _first_char(data: bytes) -> str | None:
    """The first character of ``data``; None when it is cut off (or no UTF-8)."""
    for k in range(1, min(4, len(data)) + 1):
        try:
            return data[:k].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


@functools.cache
def _digit_prefixes() -> frozenset[bytes]:
    """Every proper prefix of the UTF-8 bytes of a decimal digit of any script."""
    out: set[bytes] = set()
    for s in all_scripts():
        for d in range(10):
            b = write_numeral(d, s).encode()
            out.update(b[:k] for k in range(1, len(b)))
    return frozenset(out)


def _continues_number(data: bytes) -> bool:
    """A token that would go on with a number: its first character is a decimal digit
    (any script), or its bytes are the start of one (a digit split between tokens)."""
    c = _first_char(data)
    if c is None:  # cut off: the token is part of one character
        return data in _digit_prefixes()
    return digit_script(c) is not None


def _continues_word(data: bytes) -> bool:
    """A token that would go on with a word: a letter, digit or '_' first, or the start
    of a character split between tokens (a letter, for all the rule can tell)."""
    c = _first_char(data)
    if c is None:
        return data[:1] >= b"\xc0"
    return c.isalnum() or c == "_"


def find_space_tokens(tokenizer: Tokenizer) -> tuple[int, ...]:
    """Ids of the non-special tokens that are exactly one space.

    A vocabulary entry ``" "``, ``"▁"``, ``"Ġ"`` or byte-fallback ``"<0x20>"`` that
    decodes to a single space (or to nothing, as some SentencePiece decoders do
    for a lone ``▁``). Gemma's literal ``"Ġ"`` decodes to ``"Ġ"`` and is not one.

    Examples
    --------
    >>> find_space_tokens(gemma_tokenizer)  # doctest: +SKIP
    (270, 236743)
    """
    vocab = vocabulary(tokenizer)  # built once per tokenizer
    out = []
    for idx, token in vocab.raw.items():
        if idx in vocab.special or token not in _SPACE_FORMS:
            continue
        try:
            text = tokenizer.decode([idx])
        except Exception:  # pragma: no cover - exotic tokenizers
            continue
        if text == " " or (text == "" and token in ("▁", "Ġ")):
            out.append(idx)
    return tuple(sorted(out))
