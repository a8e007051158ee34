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

import functools
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..core.errors import AnswerLabelError, CollectionError
from ..kernels.readout import scale_mass
from .layout import AnswerLayout, answer_codes
from .numerals import NUMERAL_RULE, digit_script, read_numeral, render, shown_scripts
from .numerals import scripts as all_scripts
from .vocabulary import numeral_index, token_text, vocabulary

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
    "known_scripts",
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
    #: Each token's numeral script (:mod:`xlikert.collect.numerals`; ``""`` for a word).
    scripts: tuple[str, ...] = ()
    #: The scripts the numeral rule read (empty: no label is a number).
    numeral_scripts: tuple[str, ...] = ()

    def as_records(self, tokenizer: Any = None) -> list[dict[str, Any]]:
        """``[{"id": ..., "token": ..., "score": ..., "script": ...}, ...]`` for provenance.

        ``token`` is the token's text (:func:`~xlikert.collect.vocabulary.token_text`)
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


def _words(scale: list[int], labels: Mapping[int, str] | None) -> dict[str, int]:
    """Answer label text -> score (default: the score's digits)."""
    if labels is None:
        return {str(v): v for v in scale}
    return {str(labels[v]): v for v in scale}


def _label_note(labels: Mapping[int, str] | None, missing: list[int]) -> str:
    return "" if labels is None else f" (answer labels {[labels[v] for v in missing]})"


def find_valid_tokens(
    tokenizer: Any,
    scale: range | list[int],
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
        The numeral scripts counted (:mod:`xlikert.collect.numerals`); default every
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
    targets = _words(scale, labels)
    numbers = _numbers(targets)
    words = {t: v for t, v in targets.items() if t not in numbers.values()}
    found: dict[int, tuple[str, int, str]] = {}
    read: tuple[str, ...] = ()
    if numbers:
        vocab = vocabulary(tokenizer)
        by_value = {n: y for y, n in _values(numbers).items()}
        read = _read_scripts(tokenizer, scripts, numbers)
        for tok in numeral_index(tokenizer):
            if tok.value in by_value and tok.script in read:
                found[tok.id] = (vocab.raw[tok.id], by_value[tok.value], tok.script)
    if words:
        forms = {m + s: v for s, v in words.items() for m in _MARKERS}
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
        scripts=tuple(found[i][2] for i in order),
        numeral_scripts=read,
    )


def _numbers(targets: Mapping[str, int]) -> dict[int, str]:
    """Score -> label, for the labels that are numbers in some script."""
    return {y: t for t, y in targets.items() if read_numeral(t) is not None}


def _values(numbers: Mapping[int, str]) -> dict[int, int]:
    """Score -> the number its label writes; two labels of one number raise."""
    out = {y: read_numeral(t)[0] for y, t in numbers.items()}  # type: ignore[index]
    if len(set(out.values())) < len(out):
        same = sorted(t for y, t in numbers.items() if list(out.values()).count(out[y]) > 1)
        raise AnswerLabelError(
            f"answer labels {same} write the same number in different scripts: under the "
            "numeral rule (xlikert.collect.numerals) they are one answer"
        )
    return out


def known_scripts(tokenizer: Any) -> tuple[str, ...]:
    """The numeral scripts a tokenizer knows: those with a number as a token of its own.

    Examples
    --------
    >>> known_scripts(qwen_tokenizer)  # doctest: +SKIP
    ('ascii', 'fullwidth')
    """
    have = {t.script for t in numeral_index(tokenizer)}
    return tuple(s for s in all_scripts() if s in have)


def _read_scripts(
    tokenizer: Any, scripts: Collection[str] | None, numbers: Mapping[int, str]
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
    #: Each spelling's numeral script (``""``: a word); empty: not recorded.
    scripts: tuple[str, ...] = ()
    #: The scripts the numeral rule read (:mod:`xlikert.collect.numerals`).
    numeral_scripts: tuple[str, ...] = ()

    def as_records(self, tokenizer: Any = None) -> list[dict[str, Any]]:
        """``[{"ids": [...], "tokens": [...], "score": ...}, ...]`` for provenance
        (``tokens``: their text with ``tokenizer``, else the vocabulary strings)."""
        return [
            {
                "ids": list(i),
                "tokens": list(t) if tokenizer is None else [token_text(tokenizer, k) for k in i],
                "score": y,
            }
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

    def spelling_masses(self, logq: np.ndarray) -> np.ndarray:
        """Probability of each spelling (``(..., len(sequences))``), see :meth:`masses`."""
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
        return np.stack(cols, axis=-1)

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
        score = np.array([self.scale.index(y) for y in self.scores])
        return scale_mass(self.spelling_masses(logq), score, len(self.scale))

    def script_mass(self, logq: np.ndarray) -> np.ndarray:
        """The points' mass per numeral script (the results' ``script_mass``).

        Parameters
        ----------
        logq : np.ndarray
            As for :meth:`masses`.

        Returns
        -------
        np.ndarray
            ``(..., len(numerals.scripts()))``: the summed probability of the spellings
            of the item's points written in each script; NaN for a script the rule did
            not read (:attr:`numeral_scripts`). Over the scripts read it sums to the
            valid mass when every point's label is a number.

        Examples
        --------
        >>> ans = AnswerSequences(((5,), (7,)), (1, 1), (("1",), ("１",)), None, (1, 2),
        ...                       scripts=("ascii", "fullwidth"),
        ...                       numeral_scripts=("ascii", "fullwidth"))
        >>> m = ans.script_mass(np.log([[[0.25, 0.5]]]))
        >>> m[0, :1].tolist(), float(m[0, all_scripts().index("fullwidth")])
        ([0.25], 0.5)
        """
        names = all_scripts()
        logq = np.asarray(logq, dtype=np.float64)
        out = np.full((*logq.shape[:-2], len(names)), np.nan)
        if not self.numeral_scripts:
            return out
        index = {s: i for i, s in enumerate(names)}
        read = [index[s] for s in self.numeral_scripts]
        out[..., read] = 0.0
        points = self._points()
        keep = [k for k, (y, c) in enumerate(zip(self.scores, self.scripts, strict=True))
                if c and y in points]  # fmt: skip
        if keep:
            p = self.spelling_masses(logq)[..., keep]
            col = np.array([index[self.scripts[k]] for k in keep])
            out[..., read] = scale_mass(p, col, len(names))[..., read]
        return out

    def _points(self) -> set[int]:
        """The codes that are the item's points (not a non-substantive option)."""
        if self.layout is None:
            return set(self.scale)
        return {y for y, c in zip(self.scale, self.layout.columns, strict=True)
                if c < self.layout.n_scores}  # fmt: skip

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
            out = self.layout.readout(self.masses(raw), None if grid is None else self.masses(grid))
            out["script_mass"] = self.script_mass(raw)
            return out
        out = {"script_mass": self.script_mass(raw)}
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
        scripts=valid.scripts,
        numeral_scripts=valid.numeral_scripts,
    )


def find_label_tokens(
    tokenizer: Any,
    scale: range | list[int],
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
        caller may fall back to multi-token spellings (:func:`answer_rule`).
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


def answer_rule(
    tokenizer: Any,
    scale: range | list[int],
    *,
    split_space: bool = True,
    labels: Mapping[int, str] | None = None,
    nonsubstantive: Sequence[str] | None = None,
    scripts: Collection[str] | None = None,
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
    answers, read apart from the points (:mod:`xlikert.collect.layout`). A label
    that is a number is read in every numeral script of ``scripts`` (None: every
    script the tokenizer knows; the labels' own scripts always;
    :data:`~xlikert.collect.numerals.NUMERAL_RULE`).

    Raises
    ------
    CollectionError
        When some answer has no spelling at all.
    """
    codes, by_code, layout = answer_codes(scale, labels, nonsubstantive)
    plain = layout is None and labels is None
    labels = None if plain else by_code
    scale = list(codes)
    words = not all(read_numeral(str(by_code[v])) for v in scale)
    if needs_sequences(scale, labels):
        answers = _find_answer_sequences(tokenizer, scale, labels, scripts=scripts)
    else:
        try:
            valid = find_label_tokens(tokenizer, scale, labels, scripts=scripts)
        except CollectionError:  # no single token for some label: every spelling
            answers = _find_answer_sequences(tokenizer, scale, labels, scripts=scripts)
        else:
            answers = (_spaced_answers(tokenizer, valid) if split_space else None) or (
                _one_token_answers(valid)
            )
    if answers.continuation is not None:
        # the one-token answers, for the record; scoring uses every spelling
        singles = [
            (s[0], y, c)
            for s, y, c in zip(answers.sequences, answers.scores, answers.scripts, strict=True)
            if len(s) == 1
        ]
        valid = ValidTokens(
            ids=tuple(i for i, _, _ in singles),
            surfaces=tuple(tokenizer.convert_ids_to_tokens(i) for i, _, _ in singles),
            scores=tuple(y for _, y, _ in singles),
            scale=tuple(scale),
            scripts=tuple(c for _, _, c in singles),
            numeral_scripts=answers.numeral_scripts,
        )
        what = WORD_ANSWER_RULE if words else ANSWER_RULE
        rule = "multi-token (exact, teacher forced): " + what
    elif answers.is_one_token:
        rule = ONE_TOKEN_RULE
    else:
        rule = "one token or split space (exact, same pass): " + SPACED_ANSWER_RULE
    if answers.numeral_scripts:
        rule += f"; numbers in the scripts {', '.join(answers.numeral_scripts)}: " + NUMERAL_RULE
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


def _find_answer_sequences(
    tokenizer: Any,
    scale: range | list[int],
    labels: Mapping[int, str] | None = None,
    *,
    scripts: Collection[str] | None = None,
) -> AnswerSequences:
    """Enumerate every token spelling of every scale value (see :data:`ANSWER_RULE`).

    Spellings are matched on the tokens' bytes
    (:func:`~xlikert.collect.vocabulary.token_bytes`), so a character the tokenizer
    splits between tokens (an Arabic-Indic digit in Qwen's vocabulary is two byte
    tokens) is spelled as it is written. A label that is a number is spelled in
    every numeral script read (``scripts``; None: those the tokenizer knows, with
    the labels' own scripts always read; :mod:`xlikert.collect.numerals`).

    Parameters
    ----------
    tokenizer
        A transformers tokenizer.
    scale
        The scale values, e.g. ``range(0, 11)``.
    labels
        Score -> answer label; default the score's digits.
    scripts
        The numeral scripts counted.

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
    numbers = _numbers(words)
    read: tuple[str, ...] = ()
    spell: list[tuple[bytes, int, str]] = []  # (text, score, script)
    if numbers:
        read = _read_scripts(tokenizer, scripts, numbers)
        for y, n in _values(numbers).items():
            spell += [(render(n, c).encode(), y, c) for c in read]
    spell += [(w.encode(), y, "") for w, y in words.items() if y not in numbers]
    numeric = len(numbers) == len(words)
    vocab = vocabulary(tokenizer)
    maxlen = max(len(w) for w, _, _ in spell) + 1
    # a word label stops at a token that does not go on with a letter, digit or '_';
    # a number at one that does not go on with a digit (of any script)
    goes_on = _continues_number if numeric else _continues_word
    first: dict[bytes, list[int]] = {}  # body (one leading space stripped) -> ids
    inner: dict[bytes, list[int]] = {}  # bytes, a leading space kept -> ids
    cont: list[int] = []
    for idx, data in vocab.data.items():
        if not data:
            continue
        marked = data[:1] == b" "
        body = data[1:] if marked else data
        if not marked and goes_on(data):
            cont.append(idx)
        if body and len(body) <= maxlen:
            first.setdefault(body, []).append(idx)
        if len(data) <= maxlen:  # inside a label a leading space is a space
            inner.setdefault(data, []).append(idx)
    seqs: list[tuple[tuple[int, ...], int, str]] = []

    def extend(word: bytes, pos: int, ids: tuple[int, ...], y: int, c: str) -> None:
        if pos == len(word):
            seqs.append((ids, y, c))
            return
        for end in range(pos + 1, len(word) + 1):
            for idx in inner.get(word[pos:end], ()):
                extend(word, end, (*ids, idx), y, c)

    spaces = _find_space_tokens(tokenizer)
    for w, y, c in spell:
        for end in range(1, len(w) + 1):
            for idx in first.get(w[:end], ()):
                extend(w, end, (idx,), y, c)
        for idx in spaces:  # " 10" spelled as a bare space token, then "1", "0"
            extend(w, 0, (idx,), y, c)
    present = {y for _, y, _ in seqs}
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
    seqs = sorted(set(seqs), key=lambda s: (scale.index(s[1]), len(s[0]), s[0]))
    return AnswerSequences(
        sequences=tuple(s for s, _, _ in seqs),
        scores=tuple(y for _, y, _ in seqs),
        surfaces=tuple(tuple(vocab.raw[i] for i in s) for s, _, _ in seqs),
        continuation=tuple(sorted(cont)),
        scale=tuple(scale),
        scripts=tuple(c for _, _, c in seqs),
        numeral_scripts=read,
    )


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
    out = set()
    for s in all_scripts():
        for d in range(10):
            b = render(d, s).encode()
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
    return _word_char(c)


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
    vocab_inv = vocabulary(tokenizer).raw
    script = dict(zip(valid.ids, valid.scripts or ("",) * len(valid.ids), strict=True))
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
        scripts=tuple(script[r[0][-1]] for r in seqs),
        numeral_scripts=valid.numeral_scripts,
    )
