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
from .numerals import NUMERAL_RULE, digit_script, read_numeral, write_numeral
from .numerals import scripts as all_scripts
from .sequences import AnswerSequences, one_token_answers
from .tokens import (
    MARKERS,
    ValidTokens,
    answer_words,
    find_label_tokens,
    label_note,
    needs_sequences,
    number_labels,
    number_values,
    read_scripts,
)
from .vocabulary import vocabulary

__all__ = [
    "ANSWER_RULE",
    "ONE_TOKEN_RULE",
    "SPACED_ANSWER_RULE",
    "WORD_ANSWER_RULE",
    "answer_rule",
]

_SPACE_FORMS = (" ", "▁", "Ġ", "<0x20>")


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
    if needs_sequences(scale, labels):
        answers = _find_answer_sequences(
            tokenizer, scale, labels, scripts=scripts, max_positions=max_positions
        )
    else:
        try:
            valid = find_label_tokens(tokenizer, scale, labels, scripts=scripts)
        except CollectionError:  # no single token for some label: every spelling
            answers = _find_answer_sequences(
                tokenizer, scale, labels, scripts=scripts, max_positions=max_positions
            )
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
        rule = "multi-token (exact, teacher forced): " + what
    elif answers.is_one_token:
        rule = ONE_TOKEN_RULE
    else:
        rule = "one token or split space (exact, same pass): " + SPACED_ANSWER_RULE
    if answers.numeral_scripts:
        rule += f"; numbers in the scripts {', '.join(answers.numeral_scripts)}: " + NUMERAL_RULE
    return valid, replace(answers, layout=layout), rule


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


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
    the labels' own scripts always read; :mod:`xlikert.collect.answers.numerals`).

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
    words = answer_words(scale, labels)
    numbers = number_labels(words)
    read: tuple[str, ...] = ()
    spell: list[tuple[bytes, int, str]] = []  # (text, score, script)
    if numbers:
        read = read_scripts(tokenizer, scripts, numbers)
        for y, n in number_values(numbers).items():
            spell += [(write_numeral(n, c).encode(), y, c) for c in read]
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
    if max_positions is not None:
        _check_spelling_cost(tokenizer, spell, first, inner, len(spaces), max_positions)
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
            f"{missing}{label_note(labels, missing)} and no multi-token spelling of them "
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
    return _word_char(c)


# ---------------------------------------------------------------------------- split space
def _find_space_tokens(tokenizer: Tokenizer) -> tuple[int, ...]:
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
    spaces = _find_space_tokens(tokenizer)
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
