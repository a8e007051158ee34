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
:func:`_spaced_answers` adds those spellings (space token, then a digit token
without a marker), scored exactly from the same forward pass with the space
token appended (:data:`SPACED_ANSWER_RULE`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..core.errors import AnswerLabelError, CollectionError
from ..kernels.readout import scale_mass
from .layout import AnswerLayout, answer_codes

__all__ = [
    "ANSWER_RULE",
    "ONE_TOKEN_RULE",
    "SPACED_ANSWER_RULE",
    "WORD_ANSWER_RULE",
    "AnswerSequences",
    "ValidTokens",
    "answer_rule",
    "find_label_tokens",
    "find_valid_tokens",
    "needs_sequences",
]

_MARKERS = ("", " ", "▁", "Ġ")
_SPACE_FORMS = (" ", "▁", "Ġ", "<0x20>")


@dataclass(frozen=True)
class ValidTokens:
    """Valid token ids, their surface forms (raw vocabulary strings) and scale values."""

    ids: tuple[int, ...]
    surfaces: tuple[str, ...]
    scores: tuple[int, ...]
    scale: tuple[int, ...]

    def as_records(self) -> list[dict[str, Any]]:
        """``[{"id": ..., "token": ..., "score": ...}, ...]`` for provenance."""
        return [
            {"id": i, "token": s, "score": y}
            for i, s, y in zip(self.ids, self.surfaces, self.scores, strict=True)
        ]


def _words(scale: list[int], labels: Mapping[int, str] | None) -> dict[str, int]:
    """Answer label text -> score (default: the score's digits)."""
    if labels is None:
        return {str(v): v for v in scale}
    return {str(labels[v]): v for v in scale}


def _label_note(labels: Mapping[int, str] | None, missing: list[int]) -> str:
    return "" if labels is None else f" (answer labels {[labels[v] for v in missing]})"


def find_valid_tokens(
    tokenizer: Any, scale: range | list[int], labels: Mapping[int, str] | None = None
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
    targets = _words(scale, labels)
    forms = {m + s: v for s, v in targets.items() for m in _MARKERS}
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    maxlen = max(len(f) for f in forms)
    byte_re = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
    found: dict[int, tuple[str, int]] = {}
    for token, idx in tokenizer.get_vocab().items():
        if idx in special:
            continue
        if token in forms:
            found[idx] = (token, forms[token])
            continue
        if len(token) <= maxlen + 2 or byte_re.match(token):
            # Decode short tokens too: catches byte-fallback and normaliser quirks.
            try:
                text = tokenizer.decode([idx])
            except Exception:  # pragma: no cover - exotic tokenizers
                continue
            if text in forms:
                found[idx] = (token, forms[text])
    present = {v for _, v in found.values()}
    missing = [v for v in scale if v not in present]
    if missing:
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        words = {v: w for w, v in targets.items()}
        raise CollectionError(
            f"tokenizer {name!r} has no single-token surface form for scale value(s) "
            f"{missing}{_label_note(labels, missing)} (looked for "
            f"{sorted({repr(words[v]) for v in missing})} with optional "
            "leading ' ', '▁' or 'Ġ'); multi-token answers are not supported"
        )
    order = sorted(found, key=lambda i: (found[i][1], i))
    return ValidTokens(
        ids=tuple(order),
        surfaces=tuple(found[i][0] for i in order),
        scores=tuple(found[i][1] for i in order),
        scale=tuple(scale),
    )


# ---------------------------------------------------------------------------- multi-token
#: The definition of a multi-token answer; stored in the results' attrs.
ANSWER_RULE = (
    "answer y = a token sequence t_1..t_n (no special tokens) whose text is str(y), the first "
    "token optionally carrying ONE leading ' ', '▁' or 'Ġ' marker (or being a bare space token "
    "itself, when the tokenizer keeps the space apart from digits) and later tokens "
    "carrying none, FOLLOWED BY a token that does not continue the number (any token whose text "
    "does not start with a digit 0-9 right away, e.g. end-of-turn, newline, '.', ' 3'); "
    "P(y | x) = sum over such spellings of P(t_1..t_n | x) * P(next token is not a digit "
    "continuation | x, t_1..t_n); the events are disjoint, so P(y) sums to the valid mass <= 1"
)


#: The multi-token rule for answer labels that are words (a candidate's name, "Don't
#: know"); stored in the results' attrs.
WORD_ANSWER_RULE = (
    "answer y = a token sequence t_1..t_n (no special tokens) whose text is the answer label "
    "of y, exactly (case and inner spaces as written; a token's leading ' ', '▁' or 'Ġ' "
    "marker is a space), the first token optionally carrying ONE leading marker (or being a "
    "bare space token itself), FOLLOWED BY a token that does not continue the word (any token "
    "whose text does not start right away with a letter, a digit or '_', e.g. end-of-turn, "
    "newline, '.', ' and'); P(y | x) = sum over such spellings of P(t_1..t_n | x) * P(next "
    "token does not continue the word | x, t_1..t_n); the events are disjoint, so P(y) sums "
    "to at most 1"
)


#: The one-token rule with a split leading space; stored in the results' attrs.
SPACED_ANSWER_RULE = (
    "answer y = a valid token for y (its text is str(y), optionally with ONE leading ' ', '▁' "
    "or 'Ġ' marker), OR a bare space token followed by a valid token for y that carries no "
    "marker; P(y | x) = sum of P(t | x) over the first kind + sum over space tokens s of "
    "P(s | x) * P(t | x, s) over the second, read from one forward pass of the prompt with s "
    "appended; as in the one-token rule, the token after the digit is not checked"
)


#: The paper's one-token rule; stored in the results' attrs.
ONE_TOKEN_RULE = "one token: the next token is a valid token"


@dataclass(frozen=True)
class AnswerSequences:
    """Every token spelling of every scale value: the answer rule every backend applies.

    ``sequences[i]`` spells ``scores[i]``; ``continuation`` are the ids of tokens
    that would extend a number (text starting with a digit, no marker): an answer
    counts only when the token after it is not one of them. ``continuation=None``
    means no such check (the one-token and split-space rules: an answer is read
    off its tokens).

    A backend needs the next-token log-probabilities of the tokens :attr:`need`
    after the prompt followed by each of the :attr:`contexts` (``()`` is the
    prompt itself); :meth:`masses` turns them into the probability of each
    scale value.

    ``layout`` (None: the scale is the results' ``score`` axis) places an item's
    answer codes in a results row: its points on the file's ``score`` axis, its
    non-substantive options on the ``option`` axis (:mod:`xlikert.collect.layout`).
    """

    sequences: tuple[tuple[int, ...], ...]
    scores: tuple[int, ...]
    surfaces: tuple[tuple[str, ...], ...]
    continuation: tuple[int, ...] | None
    scale: tuple[int, ...]
    layout: AnswerLayout | None = None

    def as_records(self) -> list[dict[str, Any]]:
        """``[{"ids": [...], "tokens": [...], "score": ...}, ...]`` for provenance."""
        return [
            {"ids": list(i), "tokens": list(t), "score": y}
            for i, t, y in zip(self.sequences, self.surfaces, self.scores, strict=True)
        ]

    @property
    def is_one_token(self) -> bool:
        """True when every answer is one token read right after the prompt."""
        return self.continuation is None and all(len(s) == 1 for s in self.sequences)

    @property
    def need(self) -> tuple[int, ...]:
        """Token ids whose probabilities enter some spelling of an answer."""
        return tuple(sorted({t for seq in self.sequences for t in seq}))

    @property
    def pooled(self) -> tuple[int, ...] | None:
        """The continuation tokens, read as one summed probability (None: no stop check).

        A backend reads them with ``pooled=`` (:func:`~xlikert.kernels.readout.next_token_readout`):
        one column after those of :attr:`need`, the log of their summed probability. A
        word's continuations are a third of a vocabulary; summed where the logits are,
        they cost one column, not thousands.
        """
        return tuple(sorted(self.continuation)) if self.continuation else None

    @property
    def width(self) -> int:
        """Columns of a readout row: :attr:`need`, then one for :attr:`pooled`."""
        return len(self.need) + (self.pooled is not None)

    @property
    def contexts(self) -> tuple[tuple[int, ...], ...]:
        """Token sequences appended to the prompt before a next-token read.

        Every proper prefix of a spelling (its tokens are read there) and, with a
        stop check, every whole spelling (the stop probability is read there).
        """
        extra = 1 if self.continuation is not None else 0
        ctx = {s[:k] for s in self.sequences for k in range(len(s) + extra)}
        return tuple(sorted(ctx, key=lambda c: (len(c), c)))

    @property
    def leaves(self) -> tuple[tuple[int, ...], ...]:
        """Contexts that no other context extends: one teacher-forced row each."""
        ctx = self.contexts
        return tuple(c for c in ctx if not any(len(d) > len(c) and d[: len(c)] == c for d in ctx))

    def masses(self, logq: np.ndarray) -> np.ndarray:
        """Probability of each scale value from next-token log-probabilities.

        Parameters
        ----------
        logq : np.ndarray
            ``(..., len(contexts), width)``: log-probability of token ``need[j]``
            after the prompt followed by ``contexts[c]`` (``-inf`` for 0, NaN where
            unknown), then (with :attr:`pooled`) of any continuation token.

        Returns
        -------
        np.ndarray
            ``(..., len(scale))``: P(y) = sum over the spellings of y of the product
            of their tokens' conditional probabilities (times the probability of
            stopping after them, with a stop check), summed per scale value by
            :func:`xlikert.kernels.readout.scale_mass`. The total is the valid mass.

        Examples
        --------
        >>> ans = AnswerSequences(((5,), (9, 6)), (1, 2), (("1",), ("▁", "2")), None, (1, 2))
        >>> ans.contexts, ans.need
        (((), (9,)), (5, 6, 9))
        >>> logq = np.log([[[0.2, 0.1, 0.5], [1e-300, 0.6, 1e-300]]])
        >>> ans.masses(logq)
        array([[0.2, 0.3]])
        """
        logq = np.asarray(logq, dtype=np.float64)
        ctx = {c: i for i, c in enumerate(self.contexts)}
        col = {t: j for j, t in enumerate(self.need)}
        if logq.shape[-2:] != (len(ctx), self.width):
            raise CollectionError(
                f"answer log-probabilities have shape {logq.shape[-2:]}, expected "
                f"(contexts, need + pooled) = {(len(ctx), self.width)}"
            )
        if self.continuation is not None:  # P(next token does not continue the answer)
            with np.errstate(divide="ignore"):
                going = np.exp(logq[..., -1]) if self.pooled else np.zeros(logq.shape[:-1])
                log_stop = np.log1p(-np.minimum(going, 1.0))
        cols = []
        for seq in self.sequences:
            lp = sum(logq[..., ctx[seq[:k]], col[t]] for k, t in enumerate(seq))
            if self.continuation is not None:
                lp = lp + log_stop[..., ctx[seq]]
            cols.append(np.exp(lp))
        score = np.array([self.scale.index(y) for y in self.scores])
        return scale_mass(np.stack(cols, axis=-1), score, len(self.scale))

    def readout(self, raw: np.ndarray, grid: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Item PMFs, valid masses and the decoding grid from answer log-probabilities.

        Parameters
        ----------
        raw : np.ndarray
            ``(B, contexts, need)`` raw log-probabilities (temperature 1, no nucleus).
        grid : np.ndarray, optional
            ``(B, T, P, contexts, need)`` the same under every decoding setting
            (:func:`xlikert.kernels.readout.nucleus_logprobs`); NaN where not measured.

        Returns
        -------
        dict
            ``pmf (B, S)``, ``valid_mass (B,)`` and, with ``grid``,
            ``decoding_pmf (B, T, P, S)`` and ``decoding_valid_mass (B, T, P)``
            (NaN PMF where no valid answer is in the nucleus). With a
            :attr:`layout`, ``S`` is the file's ``score`` axis, ``valid_mass`` the
            item's points' mass, and ``nonsubstantive_mass (B, O)`` is added when
            the file has non-substantive options
            (:meth:`~xlikert.collect.layout.AnswerLayout.readout`).
        """
        if self.layout is not None:
            return self.layout.readout(
                self.masses(raw), None if grid is None else self.masses(grid)
            )
        out = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            m = self.masses(raw)
            out["valid_mass"] = m.sum(-1)
            out["pmf"] = m / out["valid_mass"][..., None]
            if grid is not None:
                g = self.masses(grid)
                gm = g.sum(-1)
                out["decoding_valid_mass"] = gm
                out["decoding_pmf"] = np.where(gm[..., None] > 0, g / gm[..., None], np.nan)
        return out


def _one_token_answers(valid: ValidTokens) -> AnswerSequences:
    """The one-token rule as answer spellings: each valid token alone, no stop check.

    Examples
    --------
    >>> vt = ValidTokens((16, 17), ("1", "2"), (1, 2), (1, 2))
    >>> _one_token_answers(vt).contexts
    ((),)
    """
    return AnswerSequences(
        sequences=tuple((i,) for i in valid.ids),
        scores=valid.scores,
        surfaces=tuple((s,) for s in valid.surfaces),
        continuation=None,
        scale=valid.scale,
    )


def find_label_tokens(
    tokenizer: Any, scale: range | list[int], labels: Mapping[int, str] | None = None
) -> ValidTokens:
    """:func:`find_valid_tokens` for a response format's answer labels.

    Raises
    ------
    AnswerLabelError
        Labels that are not numbers and are not single tokens for the tokenizer.
    CollectionError
        Numeric labels (the digits by default) without a single-token form: the
        caller may fall back to multi-token spellings (:func:`answer_rule`).
    """
    try:
        return find_valid_tokens(tokenizer, scale, labels)
    except CollectionError as exc:
        if labels is None or all(str(labels[int(v)]).isdecimal() for v in scale):
            raise
        raise AnswerLabelError(
            f"answer labels must be single tokens for the model's tokenizer: {exc}"
        ) from None


def answer_rule(
    tokenizer: Any,
    scale: range | list[int],
    *,
    split_space: bool = True,
    labels: Mapping[int, str] | None = None,
    nonsubstantive: Sequence[str] | None = None,
) -> tuple[ValidTokens, AnswerSequences, str]:
    """The valid tokens, the answer spellings and the rule's description for a tokenizer.

    Single-token answers use the one-token rule, extended by the split-space
    spellings when ``split_space`` and the tokenizer has a bare space token;
    answers that need several tokens (0-10, a candidate's name, "Don't know") use
    every spelling with a stop check (:data:`ANSWER_RULE` for numbers,
    :data:`WORD_ANSWER_RULE` when some label is a word). ``labels`` (score ->
    answer label, a response format or an item's own options) replaces the
    digits: the rule reads the labels and puts each one's probability on its
    score; an item answering on part of ``scale`` labels only its own points.
    ``nonsubstantive`` (one answer label per option of the results' ``option``
    axis, ``""`` where the item does not offer it) adds the non-substantive
    answers, read apart from the points (:mod:`xlikert.collect.layout`).

    Raises
    ------
    CollectionError
        When some answer has no spelling at all.
    """
    codes, by_code, layout = answer_codes(scale, labels, nonsubstantive)
    plain = layout is None and labels is None
    labels = None if plain else by_code
    scale = list(codes)
    words = not all(str(by_code[v]).isdecimal() for v in scale)
    if needs_sequences(scale, labels):
        answers = _find_answer_sequences(tokenizer, scale, labels)
    else:
        try:
            valid = find_label_tokens(tokenizer, scale, labels)
        except CollectionError:  # no single token for some label: every spelling
            answers = _find_answer_sequences(tokenizer, scale, labels)
        else:
            answers = (_spaced_answers(tokenizer, valid) if split_space else None) or (
                _one_token_answers(valid)
            )
    if answers.continuation is not None:
        # the one-token answers, for the record; scoring uses every spelling
        singles = [
            (s[0], y) for s, y in zip(answers.sequences, answers.scores, strict=True) if len(s) == 1
        ]
        valid = ValidTokens(
            ids=tuple(i for i, _ in singles),
            surfaces=tuple(tokenizer.convert_ids_to_tokens(i) for i, _ in singles),
            scores=tuple(y for _, y in singles),
            scale=tuple(scale),
        )
        what = WORD_ANSWER_RULE if words else ANSWER_RULE
        rule = "multi-token (exact, teacher forced): " + what
    elif answers.is_one_token:
        rule = ONE_TOKEN_RULE
    else:
        rule = "one token or split space (exact, same pass): " + SPACED_ANSWER_RULE
    return valid, replace(answers, layout=layout), rule


def needs_sequences(scale: range | list[int], labels: Mapping[int, str] | None = None) -> bool:
    """True when a value's text is a proper prefix of another's (``"1"`` and ``"10"``).

    One next-token pass cannot tell such values apart: the first token ``"1"``
    may be the whole answer 1 or the start of 10.

    Examples
    --------
    >>> needs_sequences(range(1, 8)), needs_sequences(range(0, 11))
    (False, True)
    """
    texts = list(_words([int(v) for v in scale], labels))
    return any(a != b and b.startswith(a) for a in texts for b in texts)


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _digit(c: str) -> bool:
    return c in "0123456789"


def _token_texts(tokenizer: Any, maxlen: int, decode_long: bool = False) -> dict[int, str]:
    """Text of every non-special token: the raw vocabulary string, or its decoding.

    A token with a leading marker keeps its raw form (a decoder may strip the
    marker); a short token is decoded (byte fallback, normaliser quirks); a long one
    keeps its raw form unless ``decode_long`` (the first character of a word label's
    next token decides the stop check, and a raw byte-level form spells a newline as
    the letter ``Ċ``).
    """
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    byte_re = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
    out: dict[int, str] = {}
    todo: list[tuple[int, str]] = []
    for token, idx in tokenizer.get_vocab().items():
        if idx in special:
            continue
        marked = token[:1] in _MARKERS[1:]  # keep the marker the decoder may strip
        long = len(token) > maxlen + 2 and not byte_re.match(token)
        if marked or (long and not decode_long):
            out[idx] = token
        else:
            todo.append((idx, token))
    try:
        texts = tokenizer.batch_decode([[i] for i, _ in todo])
    except Exception:  # pragma: no cover - exotic tokenizers: one at a time
        texts = [_decode_one(tokenizer, i, t) for i, t in todo]
    out.update((i, text) for (i, _), text in zip(todo, texts, strict=True))
    return out


def _decode_one(tokenizer: Any, idx: int, token: str) -> str:
    try:
        return tokenizer.decode([idx])
    except Exception:  # pragma: no cover - exotic tokenizers
        return token


def _find_answer_sequences(
    tokenizer: Any, scale: range | list[int], labels: Mapping[int, str] | None = None
) -> AnswerSequences:
    """Enumerate every token spelling of every scale value (see :data:`ANSWER_RULE`).

    Parameters
    ----------
    tokenizer
        A transformers tokenizer.
    scale
        The scale values, e.g. ``range(0, 11)``.

    Returns
    -------
    AnswerSequences
        Sorted by score, then length, then ids.

    Raises
    ------
    CollectionError
        When some value has no spelling at all, naming the values.

    Examples
    --------
    >>> ans = _find_answer_sequences(tok, range(0, 11))  # doctest: +SKIP
    >>> [s for s, y in zip(ans.surfaces, ans.scores) if y == 10]  # doctest: +SKIP
    [('1', '0'), ('Ġ1', '0'), ('10',)]
    """
    scale = [int(v) for v in scale]
    words = _words(scale, labels)
    maxlen = max(len(w) for w in words) + 1
    numeric = all(w.isdecimal() for w in words)
    texts = _token_texts(tokenizer, maxlen, decode_long=not numeric)
    # a word label stops at a token that does not go on with a letter, digit or '_';
    # a number at one that does not go on with a digit
    goes_on = _digit if numeric else _word_char
    first: dict[str, list[int]] = {}  # body (marker stripped) -> ids
    inner: dict[str, list[int]] = {}  # text, a leading marker read as a space -> ids
    cont: list[int] = []
    for idx, text in texts.items():
        if not text:
            continue
        has_marker = text[0] in _MARKERS[1:]
        body = text[1:] if has_marker else text
        if not has_marker and goes_on(text[0]):
            cont.append(idx)
        if body and len(body) <= maxlen:
            first.setdefault(body, []).append(idx)
        # inside a label a marked token is a space and its word ("Don't" + " know")
        within = " " + body if has_marker else body
        if within and len(within) <= maxlen:
            inner.setdefault(within, []).append(idx)
    seqs: list[tuple[tuple[int, ...], int]] = []

    def extend(word: str, pos: int, ids: tuple[int, ...], y: int) -> None:
        if pos == len(word):
            seqs.append((ids, y))
            return
        for end in range(pos + 1, len(word) + 1):
            for idx in inner.get(word[pos:end], ()):
                extend(word, end, (*ids, idx), y)

    spaces = _find_space_tokens(tokenizer)
    for w, y in words.items():
        for end in range(1, len(w) + 1):
            for idx in first.get(w[:end], ()):
                extend(w, end, (idx,), y)
        for idx in spaces:  # " 10" spelled as a bare space token, then "1", "0"
            extend(w, 0, (idx,), y)
    present = {y for _, y in seqs}
    missing = [v for v in scale if v not in present]
    if missing:
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise CollectionError(
            f"tokenizer {name!r} has no single-token surface form for scale value(s) "
            f"{missing}{_label_note(labels, missing)} and no multi-token spelling of them "
            "either (looked for token sequences spelling "
            f"{sorted({repr(w) for w, v in words.items() if v in missing})} with an optional "
            "leading ' ', '▁' or 'Ġ')"
        )
    seqs.sort(key=lambda s: (scale.index(s[1]), len(s[0]), s[0]))
    vocab_inv = {i: t for t, i in tokenizer.get_vocab().items()}
    return AnswerSequences(
        sequences=tuple(s for s, _ in seqs),
        scores=tuple(y for _, y in seqs),
        surfaces=tuple(tuple(vocab_inv[i] for i in s) for s, _ in seqs),
        continuation=tuple(sorted(cont)),
        scale=tuple(scale),
    )


# ---------------------------------------------------------------------------- split space
def _find_space_tokens(tokenizer: Any) -> tuple[int, ...]:
    """Ids of the non-special tokens that are exactly one space.

    A vocabulary entry ``" "``, ``"▁"``, ``"Ġ"`` or byte-fallback ``"<0x20>"`` that
    decodes to a single space (or to nothing, as some SentencePiece decoders do
    for a lone ``▁``). Gemma's literal ``"Ġ"`` decodes to ``"Ġ"`` and is not one.

    Examples
    --------
    >>> _find_space_tokens(gemma_tokenizer)  # doctest: +SKIP
    (270, 236743)
    """
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    out = []
    for token, idx in tokenizer.get_vocab().items():
        if idx in special or token not in _SPACE_FORMS:
            continue
        try:
            text = tokenizer.decode([idx])
        except Exception:  # pragma: no cover - exotic tokenizers
            continue
        if text == " " or (text == "" and token in ("▁", "Ġ")):
            out.append(idx)
    return tuple(sorted(out))


def _spaced_answers(tokenizer: Any, valid: ValidTokens) -> AnswerSequences | None:
    """The one-token answers plus their split-space spellings (:data:`SPACED_ANSWER_RULE`).

    Parameters
    ----------
    tokenizer
        A transformers tokenizer.
    valid
        Its valid tokens (:func:`find_valid_tokens`).

    Returns
    -------
    AnswerSequences or None
        ``(t,)`` for every valid token and ``(s, t)`` for every space token ``s`` and
        valid token ``t`` without a marker, with ``continuation=None``; None when the
        tokenizer has no space token (then every answer is one token).

    Examples
    --------
    >>> ans = _spaced_answers(tok, find_valid_tokens(tok, range(1, 8)))  # doctest: +SKIP
    >>> [s for s, y in zip(ans.surfaces, ans.scores) if y == 5]  # doctest: +SKIP
    [('5',), ('▁', '5')]
    """
    spaces = _find_space_tokens(tokenizer)
    bare = [
        (i, s, y)
        for i, s, y in zip(valid.ids, valid.surfaces, valid.scores, strict=True)
        if s[:1] not in _MARKERS[1:]
    ]
    if not spaces or not bare:
        return None
    vocab_inv = {i: t for t, i in tokenizer.get_vocab().items()}
    seqs = [
        ((i,), y, (s,)) for i, s, y in zip(valid.ids, valid.surfaces, valid.scores, strict=True)
    ]
    seqs += [((m, i), y, (vocab_inv[m], s)) for m in spaces for i, s, y in bare]
    seqs.sort(key=lambda r: (valid.scale.index(r[1]), len(r[0]), r[0]))
    return AnswerSequences(
        sequences=tuple(r[0] for r in seqs),
        scores=tuple(r[1] for r in seqs),
        surfaces=tuple(r[2] for r in seqs),
        continuation=None,
        scale=valid.scale,
    )
