"""The valid-token set: every vocabulary token that decodes to a scale value.

A token is valid for scale value ``y`` when its surface form is ``str(y)``,
optionally preceded by ONE word-boundary marker: a space, SentencePiece's ``▁``
or byte-level BPE's ``Ġ``. Words ("seven"), punctuation ("7.") and longer
numbers ("17") are never valid: they are constraint failures (paper §3,
"Constraint"). Byte-fallback tokens such as ``<0x37>`` count when they decode
to the digit.

Many tokenizers (Llama 3, Qwen 2.5, Gemma, SmolLM2) never merge the space into
the digit: ``"Answer: 5"`` is ``[":", "▁", "5"]``. There the answer ``" 5"``
starts with a bare space token, and a next-token read counts it as a failure.
:mod:`xlikert.collect.answers.spellings` adds those spellings (space token, then a digit
token without a marker), scored exactly from the same forward pass with the space
token appended (:data:`~xlikert.collect.answers.spellings.SPACED_ANSWER_RULE`); the answer
spellings themselves are :class:`~xlikert.collect.answers.sequences.AnswerSequences`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.errors import AnswerLabelError, CollectionError
from ..foreign import Tokenizer
from .numerals import read_numeral, shown_scripts
from .numerals import scripts as all_scripts
from .vocabulary import numeral_index, token_text, vocabulary

__all__ = [
    "MARKERS",
    "ValidTokens",
    "answer_words",
    "find_label_tokens",
    "find_valid_tokens",
    "known_scripts",
    "label_note",
    "needs_sequences",
    "number_labels",
    "number_values",
    "read_scripts",
]

MARKERS = ("", " ", "▁", "Ġ")


@dataclass(frozen=True)
class ValidTokens:
    """Valid token ids, their surface forms (raw vocabulary strings) and scale values."""

    ids: tuple[int, ...]
    surfaces: tuple[str, ...]
    scores: tuple[int, ...]
    scale: tuple[int, ...]
    #: Each token's numeral script (:mod:`xlikert.collect.answers.numerals`; ``""`` for a word).
    scripts: tuple[str, ...] = ()
    #: The scripts the numeral rule read (empty: no label is a number).
    numeral_scripts: tuple[str, ...] = ()

    def as_records(self, tokenizer: Tokenizer = None) -> list[dict[str, Any]]:
        """``[{"id": ..., "token": ..., "score": ..., "script": ...}, ...]`` for provenance.

        ``token`` is the token's text (:func:`~xlikert.collect.answers.vocabulary.token_text`)
        when ``tokenizer`` is given, else its vocabulary string.
        """
        scripts = self.scripts or ("",) * len(self.ids)
        return [
            {
                "id": i,
                "token": s if tokenizer is None else token_text(tokenizer, i),
                "score": y,
                **({"script": c} if c else {}),
            }
            for i, s, y, c in zip(self.ids, self.surfaces, self.scores, scripts, strict=True)
        ]


def answer_words(scale: list[int], labels: Mapping[int, str] | None) -> dict[str, int]:
    """Answer label text -> score (default: the score's digits)."""
    if labels is None:
        return {str(v): v for v in scale}
    return {str(labels[v]): v for v in scale}


def label_note(labels: Mapping[int, str] | None, missing: list[int]) -> str:
    return "" if labels is None else f" (answer labels {[labels[v] for v in missing]})"


def find_valid_tokens(
    tokenizer: Tokenizer,
    scale: Sequence[int],
    labels: Mapping[int, str] | None = None,
    *,
    scripts: Collection[str] | None = None,
) -> ValidTokens:
    """Find every vocabulary token that decodes to a value of ``scale``.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase or Any
        A transformers tokenizer (anything with ``get_vocab`` and ``decode``).
    scale : range or list of int
        The scale values, e.g. ``range(1, 8)``.
    labels : mapping of int to str, optional
        Score -> the answer label that means it (a response format,
        :mod:`xlikert.design.formats`); default: the score's digits.
    scripts : collection of str, optional
        The numeral scripts counted (:mod:`xlikert.collect.answers.numerals`); default every
        script: a label that is a number is answered by every token whose text, after
        one leading space, is that number in any decimal script.

    Returns
    -------
    ValidTokens
        Sorted by score, then token id.

    Raises
    ------
    CollectionError
        When a scale value has no single-token surface form (multi-token answers
        are not supported), naming the values and the tokenizer.

    Examples
    --------
    A toy tokenizer with a byte-level vocabulary (``Ġ`` is a leading space):

    >>> class Tokenizer:
    ...     vocab = {"1": 0, "Ġ1": 1, "2": 2, "Ġ2": 3, "12": 4, "yes": 5}
    ...     def get_vocab(self):
    ...         return self.vocab
    ...     def decode(self, ids):
    ...         return {i: t for t, i in self.vocab.items()}[ids[0]].replace("Ġ", " ")
    >>> vt = find_valid_tokens(Tokenizer(), range(1, 3))
    >>> vt.ids, vt.surfaces, vt.scores
    ((0, 1, 2, 3), ('1', 'Ġ1', '2', 'Ġ2'), (1, 1, 2, 2))
    >>> find_valid_tokens(Tokenizer(), range(1, 4))
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: tokenizer 'Tokenizer' has no single-token surface form ...
    """
    scale = [int(v) for v in scale]
    targets = answer_words(scale, labels)
    numbers = number_labels(targets)
    words = {t: v for t, v in targets.items() if t not in numbers.values()}
    found: dict[int, tuple[str, int, str]] = {}
    read: tuple[str, ...] = ()
    if numbers:
        vocab = vocabulary(tokenizer)
        by_value = {n: y for y, n in number_values(numbers).items()}
        read = read_scripts(tokenizer, scripts, numbers)
        for tok in numeral_index(tokenizer):
            if tok.value in by_value and tok.script in read:
                found[tok.id] = (vocab.raw[tok.id], by_value[tok.value], tok.script)
    if words:
        forms = {m + s: v for s, v in words.items() for m in MARKERS}
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        maxlen = max(len(f) for f in forms)
        byte_re = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
        for token, idx in tokenizer.get_vocab().items():
            if idx in special:
                continue
            if token in forms:
                found[idx] = (token, forms[token], "")
                continue
            if len(token) <= maxlen + 2 or byte_re.match(token):
                # Decode short tokens too: catches byte-fallback and normaliser quirks.
                try:
                    text = tokenizer.decode([idx])
                except Exception:  # pragma: no cover - exotic tokenizers
                    continue
                if text in forms:
                    found[idx] = (token, forms[text], "")
    # a value is present when its label has a token in the label's own script (or, a
    # word, as written): a number shown in a script the tokenizer spells in bytes (an
    # Arabic-Indic digit in Qwen's vocabulary) needs the multi-token rule
    own = {y: read_numeral(t)[1] for y, t in numbers.items()}  # type: ignore[index]
    present = {v for _, v, c in found.values() if own.get(v, "") == c}
    missing = [v for v in scale if v not in present]
    if missing:
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        label_of = {v: w for w, v in targets.items()}
        raise CollectionError(
            f"tokenizer {name!r} has no single-token surface form for scale value(s) "
            f"{missing}{label_note(labels, missing)} (looked for "
            f"{sorted({repr(label_of[v]) for v in missing})} with optional "
            "leading ' ', '▁' or 'Ġ'); multi-token answers are not supported"
        )
    order = sorted(found, key=lambda i: (found[i][1], i))
    return ValidTokens(
        ids=tuple(order),
        surfaces=tuple(found[i][0] for i in order),
        scores=tuple(found[i][1] for i in order),
        scale=tuple(scale),
        scripts=tuple(found[i][2] for i in order),
        numeral_scripts=read,
    )


def number_labels(targets: Mapping[str, int]) -> dict[int, str]:
    """Score -> label, for the labels that are numbers in some script."""
    return {y: t for t, y in targets.items() if read_numeral(t) is not None}


def number_values(numbers: Mapping[int, str]) -> dict[int, int]:
    """Score -> the number its label writes; two labels of one number raise."""
    out = {y: read_numeral(t)[0] for y, t in numbers.items()}  # type: ignore[index]
    if len(set(out.values())) < len(out):
        same = sorted(t for y, t in numbers.items() if list(out.values()).count(out[y]) > 1)
        raise AnswerLabelError(
            f"answer labels {same} write the same number in different scripts: under the "
            "numeral rule (xlikert.collect.answers.numerals) they are one answer"
        )
    return out


def known_scripts(tokenizer: Tokenizer) -> tuple[str, ...]:
    """The numeral scripts a tokenizer knows: those with a number as a token of its own.

    Examples
    --------
    >>> known_scripts(qwen_tokenizer)  # doctest: +SKIP
    ('ascii', 'fullwidth')
    """
    have = {t.script for t in numeral_index(tokenizer)}
    return tuple(s for s in all_scripts() if s in have)


def read_scripts(
    tokenizer: Tokenizer, scripts: Collection[str] | None, numbers: Mapping[int, str]
) -> tuple[str, ...]:
    """The scripts the numeral rule reads: ``scripts`` (None: those the tokenizer knows),
    with the scripts of the labels shown always among them."""
    shown = set(shown_scripts(numbers))
    want = set(known_scripts(tokenizer)) if scripts is None else set(scripts)
    unknown = sorted(want - set(all_scripts()))
    if unknown:
        raise CollectionError(
            f"unknown numeral script(s) {unknown}; known: {', '.join(all_scripts())}"
        )
    return tuple(s for s in all_scripts() if s in want | shown)


def find_label_tokens(
    tokenizer: Tokenizer,
    scale: Sequence[int],
    labels: Mapping[int, str] | None = None,
    *,
    scripts: Collection[str] | None = None,
) -> ValidTokens:
    """:func:`find_valid_tokens` for a response format's answer labels.

    Raises
    ------
    AnswerLabelError
        Labels that are not numbers and are not single tokens for the tokenizer.
    CollectionError
        Numeric labels (the digits by default) without a single-token form: the
        caller may fall back to multi-token spellings (:func:`~xlikert.collect.answers.spellings.answer_rule`).
    """
    try:
        return find_valid_tokens(tokenizer, scale, labels, scripts=scripts)
    except AnswerLabelError:
        raise
    except CollectionError as exc:
        if labels is None or all(read_numeral(str(labels[int(v)])) for v in scale):
            raise
        raise AnswerLabelError(
            f"answer labels must be single tokens for the model's tokenizer: {exc}"
        ) from None


def needs_sequences(scale: Sequence[int], labels: Mapping[int, str] | None = None) -> bool:
    """True when a value's text is a proper prefix of another's (``"1"`` and ``"10"``).

    One next-token pass cannot tell such values apart: the first token ``"1"``
    may be the whole answer 1 or the start of 10.

    Examples
    --------
    >>> needs_sequences(range(1, 8)), needs_sequences(range(0, 11))
    (False, True)
    """
    texts = list(answer_words([int(v) for v in scale], labels))
    return any(a != b and b.startswith(a) for a in texts for b in texts)
