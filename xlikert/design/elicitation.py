"""The design of elicitation: how the model's answer is read, as a crossed factor.

How an answer is elicited is a factor, ``elicitation`` (:data:`ELICITATION_DIM`),
crossed with every other factor and kept on the results' axes. Its levels
(:data:`ELICITATIONS`):

``first_token``
    The exact PMF of the reply's first token (the paper's reading; the default
    without the factor: a file without it is unchanged).
``prefix``
    The model's turn starts with a given text (the run's ``answer_prefix``,
    e.g. ``"My answer is"``) and the PMF is read right after it. Exact.
``greedy``
    The model's greedy reply up to ``reply_tokens`` tokens; the answer it writes
    under the run's parsing rule (``answer_parse``, :data:`ANSWER_PARSE_RULES`: the
    default :data:`ANSWER_PARSE_RULE`, or the stricter :data:`STANDALONE_PARSE_RULE`), and the exact PMF at the position where it
    writes it (the in-text PMF, after the model's own preamble). A reply without
    an answer is flagged.
``own_words``
    The distribution of the first answer the model writes in a reply sampled at
    ``own_words_temperature`` and ``own_words_top_p`` up to ``reply_tokens``
    tokens, as an exact mixture over reply prefixes (pruned only under a certified
    bound; :mod:`xlikert.collect.own_words`); the mass of replies without an answer
    is its own variable, ``no_answer_mass``.
``stated``
    A stated distribution, labelled as such: the prompt adds the run's
    ``stated_instruction`` (naming the options), the model's greedy reply (up to
    ``stated_tokens`` tokens) is read under :data:`STATED_PARSE_RULE` (JSON or
    ``option: percent`` lines) and the renormalised numbers are the PMF; the reply, the
    numbers, their raw sum and the parse status (:data:`STATED_STATUSES`) are stored, and
    a reply that does not parse has no PMF (:mod:`xlikert.collect.stated`).

The factor changes no prompt text of the design (``stated`` adds its instruction at
collection): what changes is how the answer is read, so the collection reads each level
of a cell on its own (:mod:`xlikert.collect.elicitation`).

Examples
--------
>>> check_elicitation_levels(["first_token", "greedy"])
('first_token', 'greedy')
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.dims import ELICITATION_DIM
from ..core.errors import DesignError

__all__ = [
    "ANSWER_PARSES",
    "ANSWER_PARSE_RULE",
    "ANSWER_PARSE_RULES",
    "DEFAULT_STATED_INSTRUCTION",
    "ELICITATIONS",
    "ELICITATION_DIM",
    "STANDALONE_PARSE_RULE",
    "STATED_PARSE_RULE",
    "STATED_STATUSES",
    "check_elicitation_levels",
    "stated_instruction_problem",
]

#: Its levels; ``first_token`` is the reading without the factor.
ELICITATIONS = ("first_token", "prefix", "greedy", "own_words", "stated")

#: The instruction of the ``stated`` level (``[collect] stated_instruction``); ``{options}``
#: is replaced by the cell's answer labels.
DEFAULT_STATED_INSTRUCTION = (
    "Instead of one answer, say how likely you would be to give each answer. Reply with "
    "only a JSON object that maps each option to the probability, in percent, that you "
    "would choose it. Options: {options}."
)

#: The parse statuses of a stated reply, and what each means.
STATED_STATUSES = {
    "ok": "every option has a number >= 0 and their sum is > 0: pmf = numbers / sum",
    "missing_options": "some options have a number, others none: no pmf",
    "not_a_distribution": "no option has a number, or a number is negative, or all are 0: no pmf",
    "no_reply": "the reply is empty (only white space): no pmf",
}

#: How a stated reply is read (stored with every file that has the level).
STATED_PARSE_RULE = (
    "JSON first: each '{' of the reply, in order, starts a candidate object up to its "
    "matching '}'; the first that json.loads reads as an object is used, its keys matched to "
    "the option labels (compared stripped and case-folded), its values numbers or text "
    "holding a number (a '%' sign and white space allowed). Otherwise lines: each line "
    "'label: number', 'label = number' or 'label - number' (a leading bullet, quotes or "
    "white space allowed, a '%' after the number allowed), the first line of each label "
    "counting. Failing both (a JSON object cut short), each quoted pair '\"label\": number' "
    "of the reply, the first of each label counting. Keys or lines that are not option labels are not read; the order of the "
    "options is free. The numbers are stored as written (percent or fraction alike) with "
    "their raw sum; the PMF is the numbers divided by their sum"
)


#: How an answer is found in a reply; stored with every file that has the factor.
ANSWER_PARSE_RULE = (
    "the answer of a reply is the first token in it that is a valid answer token under the "
    "run's one-token rule (a token whose surface form is an answer label, with an optional "
    "leading space or word marker); a bare space followed by a digit is read at the digit. The "
    "reply is the model's turn up to reply_tokens tokens, ending early at an end-of-turn "
    "token. A reply in which no such token occurs has no answer (flagged; its mass is "
    "no_answer_mass). Misreadings: a model restating the scale ('on a scale of 1-7') answers "
    "its first number; a two-digit code or a word label is not read by this rule (those runs "
    "refuse greedy and own_words)"
)

#: The stricter rule (``answer_parse = "standalone"``): an answer is a number on its own.
STANDALONE_PARSE_RULE = (
    "the answer of a reply is the first token in it that is a valid answer token under the "
    "run's one-token rule and stands alone in the reply's text: it is not glued to a letter or "
    "digit before it (no space between: 'Q1', 'x5'), nor to one after it ('1st', '10'), it "
    "does not end a range or fraction ('1-7', '1 to 7', '1/7': the text before it ends with a "
    "digit and '-', '–', '—', '/' or 'to'), and it does not start one (the text after it "
    "starts, after spaces, with one of those and a digit) and is not part of a decimal ('1.5'). Read on the "
    "reply's text, the tokens decoded one by one. So a model restating the scale ('on a "
    "scale of 1 to 7, I choose 5') answers 5, not 1. The reply ends as under first_valid; a "
    "reply in which no such token occurs has no answer. Read by greedy only (own_words "
    "would need the text after the token, which the reply tree does not read yet)"
)

#: The parsing rules a run may choose (its ``answer_parse`` option, part of the key of
#: every cell it parses), each stored with the file as ``answer_parse_rule``.
ANSWER_PARSE_RULES = {"first_valid": ANSWER_PARSE_RULE, "standalone": STANDALONE_PARSE_RULE}

#: Their names; ``first_valid`` is the default.
ANSWER_PARSES = tuple(ANSWER_PARSE_RULES)


def stated_instruction_problem(text: object) -> str | None:
    """What is wrong with a ``stated`` instruction (None: nothing): it must be a non-empty
    text that names the options with ``{options}`` (the cell's answer labels go there).

    Examples
    --------
    >>> stated_instruction_problem("Options: {options}.") is None
    True
    >>> stated_instruction_problem("Give a JSON object of percents.")
    "must name the options with {options} (the cell's answer labels are put there), got 'Give a JSON object of percents.'"
    """
    if not isinstance(text, str) or not text.strip():
        return f"must be a non-empty text naming the options with {{options}}, got {text!r}"
    if "{options}" not in text:
        return (
            "must name the options with {options} (the cell's answer labels are put there), "
            f"got {text!r}"
        )
    return None


def check_elicitation_levels(levels: Sequence[str], where: str = "") -> tuple[str, ...]:
    """The levels of an elicitation factor, checked.

    Parameters
    ----------
    levels : sequence of str
        The level names, each one of :data:`ELICITATIONS`, none twice.
    where : str, optional
        Where they come from, for the message.

    Returns
    -------
    tuple of str
        The levels, in the order given.

    Raises
    ------
    DesignError
        An unknown or repeated level, or none.

    Examples
    --------
    >>> check_elicitation_levels(["greedy", "chat"])
    Traceback (most recent call last):
    ...
    xlikert.core.errors.DesignError: factor 'elicitation': unknown level(s) ['chat']; its levels are ['first_token', 'prefix', 'greedy', 'own_words', 'stated']
    """
    at = f"{where}: " if where else ""
    if isinstance(levels, str) or not all(isinstance(v, str) for v in levels):
        raise DesignError(f"{at}factor {ELICITATION_DIM!r}: levels must be a list of names")
    out = tuple(levels)
    bad = [v for v in out if v not in ELICITATIONS]
    if bad:
        raise DesignError(
            f"{at}factor {ELICITATION_DIM!r}: unknown level(s) {bad}; its levels are "
            f"{list(ELICITATIONS)}"
        )
    if not out or len(set(out)) < len(out):
        raise DesignError(f"{at}factor {ELICITATION_DIM!r}: give each level once, got {list(out)}")
    return out
