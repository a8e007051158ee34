"""The answer rule: which token spellings of a scale value count, found on the tokens' bytes.

:func:`answer_rule` picks the rule for a tokenizer: the one-token rule, the
split-space rule (a bare space token, then a digit token without a marker:
:data:`SPACED_ANSWER_RULE`) or every multi-token spelling with a stop check
(:data:`ANSWER_RULE`, :data:`WORD_ANSWER_RULE`), matched on the tokens' bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from ...core.errors import CollectionError
from ..foreign import Tokenizer
from .layout import answer_codes
from .numerals import NUMERAL_RULE, read_numeral
from .sequences import AnswerSequences, one_token_answers
from .tokens import (
    MARKERS,
    ValidTokens,
    answer_words,
    find_label_tokens,
    label_note,
    needs_sequences,
)
from .trie import LabelTrie, find_space_tokens, spelling_pieces
from .vocabulary import vocabulary
from .walk import WALK_RULE

__all__ = [
    "ANSWER_RULE",
    "ONE_TOKEN_RULE",
    "SPACED_ANSWER_RULE",
    "WORD_ANSWER_RULE",
    "answer_rule",
]

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


def answer_rule(
    tokenizer: Tokenizer,
    scale: Sequence[int],
    *,
    split_space: bool = True,
    labels: Mapping[int, str] | None = None,
    nonsubstantive: Sequence[str] | None = None,
    scripts: Collection[str] | None = None,
    max_positions: int | None = None,
    walk: bool = False,
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
    answers, read apart from the points (:mod:`xlikert.collect.answers.layout`). A label
    that is a number is read in every numeral script of ``scripts`` (None: every
    script the tokenizer knows; the labels' own scripts always;
    :data:`~xlikert.collect.answers.numerals.NUMERAL_RULE`).

    ``max_positions`` (None: no limit) caps the token positions the multi-token rule
    teacher-forces per prompt (the tokens of every spelling): counted before any spelling
    is listed, so labels spelled in millions of ways are refused at once.

    ``walk`` (a backend that reads answers by the certified walk,
    :mod:`xlikert.collect.answers.walk`): a multi-token rule carries its labels' trie
    (:attr:`AnswerSequences.trie`) and is not refused for its spellings' number; they are
    listed only where they fit ``max_positions`` (for the paths that read the list), else
    the rule has none (``sequences == ()``) and only the walk reads it.

    Raises
    ------
    CollectionError
        When some answer has no spelling at all.
    AnswerLabelError
        When the spellings hold more than ``max_positions`` tokens, naming the labels.
    """
    codes, by_code, layout = answer_codes(scale, labels, nonsubstantive)
    plain = layout is None and labels is None
    labels = None if plain else by_code
    scale = list(codes)
    words = not all(read_numeral(str(by_code[v])) for v in scale)
    several = functools.partial(
        _walked_sequences if walk else _find_answer_sequences,
        tokenizer, scale, labels, scripts=scripts, max_positions=max_positions,
    )  # fmt: skip
    if needs_sequences(scale, labels):
        answers = several()
    else:
        try:
            valid = find_label_tokens(tokenizer, scale, labels, scripts=scripts)
        except CollectionError:  # no single token for some label: every spelling
            answers = several()
        else:
            answers = (_spaced_answers(tokenizer, valid) if split_space else None) or (
                one_token_answers(valid)
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
        how = "certified walk: " + WALK_RULE if answers.trie else "exact, teacher forced"
        rule = f"multi-token ({how}): " + what
    elif answers.is_one_token:
        rule = ONE_TOKEN_RULE
    else:
        rule = "one token or split space (exact, same pass): " + SPACED_ANSWER_RULE
    if answers.numeral_scripts:
        rule += f"; numbers in the scripts {', '.join(answers.numeral_scripts)}: " + NUMERAL_RULE
    return valid, replace(answers, layout=layout), rule


def _find_answer_sequences(
    tokenizer: Tokenizer,
    scale: Sequence[int],
    labels: Mapping[int, str] | None = None,
    *,
    scripts: Collection[str] | None = None,
    max_positions: int | None = None,
) -> AnswerSequences:
    """Enumerate every token spelling of every scale value (see :data:`ANSWER_RULE`).

    Spellings are matched on the tokens' bytes
    (:func:`~xlikert.collect.answers.vocabulary.token_bytes`), so a character the tokenizer
    splits between tokens (an Arabic-Indic digit in Qwen's vocabulary is two byte
    tokens) is spelled as it is written. A label that is a number is spelled in
    every numeral script read (``scripts``; None: those the tokenizer knows, with
    the labels' own scripts always read; :mod:`xlikert.collect.answers.numerals`). The
    spellings are the leaves of the labels' trie (:mod:`xlikert.collect.answers.trie`),
    listed from the same :class:`~xlikert.collect.answers.trie.SpellingPieces`.

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
    p = spelling_pieces(tokenizer, scale, labels, scripts=scripts)
    spell = list(zip(p.words, p.codes, p.scripts, strict=True))
    seqs: list[tuple[tuple[int, ...], int, str]] = []

    def extend(word: bytes, pos: int, ids: tuple[int, ...], y: int, c: str) -> None:
        if pos == len(word):
            seqs.append((ids, y, c))
            return
        for end in range(pos + 1, len(word) + 1):
            for idx in p.inner.get(word[pos:end], ()):
                extend(word, end, (*ids, idx), y, c)

    if max_positions is not None:
        _check_spelling_cost(tokenizer, spell, p.first, p.inner, len(p.spaces), max_positions)
    for w, y, c in spell:
        for end in range(1, len(w) + 1):
            for idx in p.first.get(w[:end], ()):
                extend(w, end, (idx,), y, c)
        for idx in p.spaces:  # " 10" spelled as a bare space token, then "1", "0"
            extend(w, 0, (idx,), y, c)
    _check_spelled(tokenizer, scale, labels, {y for _, y, _ in seqs})
    seqs = sorted(set(seqs), key=lambda s: (scale.index(s[1]), len(s[0]), s[0]))
    raw = vocabulary(tokenizer).raw
    return AnswerSequences(
        sequences=tuple(s for s, _, _ in seqs),
        scores=tuple(y for _, y, _ in seqs),
        surfaces=tuple(tuple(raw[i] for i in s) for s, _, _ in seqs),
        continuation=p.continuation,
        scale=tuple(scale),
        scripts=tuple(c for _, _, c in seqs),
        numeral_scripts=p.numeral_scripts,
    )


def _walked_sequences(
    tokenizer: Tokenizer,
    scale: range | list[int],
    labels: Mapping[int, str] | None = None,
    *,
    scripts: Collection[str] | None = None,
    max_positions: int | None = None,
) -> AnswerSequences:
    """The multi-token rule for a backend that walks the labels' trie: the trie attached,
    every answer checked to have some spelling (counted, not listed), and the spellings
    listed only where they hold at most ``max_positions`` tokens (else none)."""
    scale = [int(v) for v in scale]
    p = spelling_pieces(tokenizer, scale, labels, scripts=scripts)
    cost = {
        (w, y): _spelling_cost(w, p.first, p.inner, len(p.spaces))
        for w, y in zip(p.words, p.codes, strict=True)
    }
    _check_spelled(tokenizer, scale, labels, {y for (_, y), (n, _) in cost.items() if n})
    trie = LabelTrie(p, tuple(scale))
    if max_positions is None or sum(t for _, t in cost.values()) <= max_positions:
        listed = _find_answer_sequences(tokenizer, scale, labels, scripts=scripts)
        return replace(listed, trie=trie)
    return AnswerSequences(
        sequences=(), scores=(), surfaces=(), continuation=p.continuation,
        scale=tuple(scale), numeral_scripts=p.numeral_scripts, trie=trie,
    )  # fmt: skip


def _check_spelled(
    tokenizer: Tokenizer, scale: list[int], labels: Mapping[int, str] | None, present: set[int]
) -> None:
    """Refuse, naming them, the answers of ``scale`` that no token sequence spells."""
    missing = [v for v in scale if v not in present]
    if missing:
        words = answer_words(scale, labels)
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise CollectionError(
            f"tokenizer {name!r} has no single-token surface form for scale value(s) "
            f"{missing}{label_note(labels, missing)} and no multi-token spelling of them "
            "either (looked for token sequences spelling "
            f"{sorted({repr(w) for w, v in words.items() if v in missing})} with an optional "
            "leading ' ', '▁' or 'Ġ')"
        )


def _spelling_cost(
    word: bytes, first: Mapping[bytes, Sequence[int]], inner: Mapping[bytes, Sequence[int]],
    n_spaces: int,
) -> tuple[int, int]:  # fmt: skip
    """``(spellings, tokens)``: how many token sequences spell ``word`` under the
    multi-token rule (a first token from ``first``, which strips one leading space, or one
    of ``n_spaces`` bare space tokens; then tokens from ``inner``) and how many tokens they
    hold together, counted without listing them (dynamic programming over byte positions).

    Examples
    --------
    >>> first = inner = {b"a": [1], b"b": [2], b"ab": [3]}
    >>> _spelling_cost(b"ab", first, inner, n_spaces=1)  # a|b, ab, each after a space too
    (4, 8)
    """
    n = len(word)
    ways, toks = [0] * (n + 1), [0] * (n + 1)  # completions from each byte position
    ways[n] = 1
    for pos in range(n - 1, -1, -1):
        for end in range(pos + 1, n + 1):
            k = len(inner.get(word[pos:end], ()))
            if k:
                ways[pos] += k * ways[end]
                toks[pos] += k * (toks[end] + ways[end])
    total, tokens = n_spaces * ways[0], n_spaces * (toks[0] + ways[0])
    for end in range(1, n + 1):
        k = len(first.get(word[:end], ()))
        total += k * ways[end]
        tokens += k * (toks[end] + ways[end])
    return total, tokens


def _check_spelling_cost(
    tokenizer: Tokenizer, spell: list[tuple[bytes, int, str]], first, inner, n_spaces: int,
    limit: int,
) -> None:  # fmt: skip
    """Refuse answers whose spellings hold more than ``limit`` tokens, naming the labels."""
    from ...core.errors import AnswerLabelError

    cost = {w: _spelling_cost(w, first, inner, n_spaces) for w, _, _ in spell}
    tokens = sum(t for _, t in cost.values())
    if tokens <= limit:
        return
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    worst = sorted(cost.items(), key=lambda kv: -kv[1][1])[:3]
    shown = ", ".join(f"{w.decode(errors='replace')!r} ({n:,} spellings)" for w, (n, _) in worst)
    raise AnswerLabelError(
        f"the answer labels are spelled in too many ways by tokenizer {name!r}: {shown}; "
        f"the multi-token rule reads every spelling, {tokens:,} teacher-forced tokens per "
        f"prompt, more than max_answer_positions={limit:,}. Answer with codes or letters "
        '([scale] answers = "codes" or "letters", or a response format), use shorter '
        "labels, or raise max_answer_positions ([collect] or collect(...))"
    )


# ---------------------------------------------------------------------------- split space
def _spaced_answers(tokenizer: Tokenizer, valid: ValidTokens) -> AnswerSequences | None:
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
    spaces = find_space_tokens(tokenizer)
    bare = [
        (i, s, y)
        for i, s, y in zip(valid.ids, valid.surfaces, valid.scores, strict=True)
        if s[:1] not in MARKERS[1:]
    ]
    if not spaces or not bare:
        return None
    vocab_inv = vocabulary(tokenizer).raw
    script = dict(zip(valid.ids, valid.scripts or ("",) * len(valid.ids), strict=True))
    seqs: list[tuple[tuple[int, ...], int, tuple[str, ...]]] = [
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
