"""The elicitation level ``stated``: the model states a probability for each option.

The cell's prompt is the user's text, a blank line and the run's ``stated_instruction``
with ``{options}`` replaced by the cell's answer labels (``", "``-joined, in score
order). The model's greedy reply (up to ``stated_tokens`` tokens) is parsed under
:data:`~xlikert.design.elicitation.STATED_PARSE_RULE` (:func:`parse_stated`), and stored per cell: the reply
(``reply_text``, ``reply_token_ids``, ``reply_end``), the parsed numbers as a JSON object
label -> number (``stated_numbers``), their raw sum (``stated_sum``), the parse status
(``stated_status``, :data:`~xlikert.design.elicitation.STATED_STATUSES`) and, where it is ``ok``, the renormalised
PMF (``pmf``). A reply that does not parse has no PMF: it is counted by its status, not
dropped. ``valid_mass`` is 1 where the reply states a distribution over the options
(status ``ok``: all its stated mass is on them) and NaN where it does not, as a greedy
reply without an answer: no token mass is read.

Examples
--------
>>> parse_stated('{"1": 20, "2": 30, "3": 50}', ["1", "2", "3"]).pmf.tolist()
[0.2, 0.3, 0.5]
>>> parse_stated("1: 20%\\n3: 50%", ["1", "2", "3"]).status
'missing_options'
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.codecs import encode_token_ids
from ..core.errors import CollectionError
from .record import UnitResult

__all__ = [
    "StatedReading",
    "parse_stated",
    "parse_stated_reply",
    "score_stated",
    "stated_options",
    "stated_user",
    "write_stated",
]

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_LINE = re.compile(
    r"^\s*(?:[-*\u2022]\s+)?[\"'`]?(?P<label>[^:=\"'`\n]+?)[\"'`]?\s*(?:[:=]|\s-\s|\s\u2013\s)\s*"
    rf"(?P<num>{_NUMBER})\s*%?\s*[,;.]?\s*$"
)

_PAIR = re.compile(rf"\"(?P<label>[^\"\n]+)\"\s*:\s*\"?\s*(?P<num>{_NUMBER})")


@dataclass(frozen=True)
class StatedReading:
    """A parsed stated reply: its status, each option's number (NaN: none), the raw sum of
    the numbers found and the PMF (None unless ``ok``)."""

    status: str
    numbers: np.ndarray
    raw_sum: float
    pmf: np.ndarray | None

    def numbers_json(self, labels: Sequence[str]) -> str:
        """The numbers as a JSON object label -> number (options without one left out)."""
        return json.dumps(
            {lb: float(x) for lb, x in zip(labels, self.numbers, strict=True) if np.isfinite(x)},
            ensure_ascii=False,
        )


def stated_user(user: str, instruction: str, labels: Sequence[str]) -> str:
    """The user's text with the instruction after a blank line, ``{options}`` filled.

    Examples
    --------
    >>> stated_user("Q?", "Options: {options}.", ["1", "2"])
    'Q?\\n\\nOptions: 1, 2.'
    """
    return f"{user}\n\n{instruction.replace('{options}', ', '.join(labels))}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        m = re.fullmatch(rf"\s*({_NUMBER})\s*%?\s*", value)
        return float(m.group(1)) if m else None
    return None


def _json_object(text: str) -> dict | None:
    """The first ``{...}`` of ``text`` that parses as a JSON object (balanced braces)."""
    for start in (i for i, c in enumerate(text) if c == "{"):
        depth = 0
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                try:
                    obj = json.loads(text[start : end + 1])
                except ValueError:
                    break
                if isinstance(obj, dict):
                    return obj
                break
    return None


def _found(reply: str, keys: dict[str, int]) -> dict[int, float]:
    """Option index -> number, from the JSON object or else the lines."""
    out: dict[int, float] = {}
    obj = _json_object(reply)
    if obj is not None:
        for k, v in obj.items():
            i, x = keys.get(str(k).strip().casefold()), _number(v)
            if i is not None and x is not None and i not in out:
                out[i] = x
        if out:
            return out
    for line in reply.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        i = keys.get(m.group("label").strip().casefold())
        if i is not None and i not in out:
            out[i] = float(m.group("num"))
    if not out:  # an object cut short (the reply's cap): its quoted pairs
        for m in _PAIR.finditer(reply):
            i = keys.get(m.group("label").strip().casefold())
            if i is not None and i not in out:
                out[i] = float(m.group("num"))
    return out


def parse_stated(reply: str, labels: Sequence[str]) -> StatedReading:
    """A stated reply read under :data:`~xlikert.design.elicitation.STATED_PARSE_RULE`.

    Parameters
    ----------
    reply : str
        The model's reply text.
    labels : sequence of str
        The options' answer labels, in score order.

    Returns
    -------
    StatedReading
        Its status (:data:`~xlikert.design.elicitation.STATED_STATUSES`), numbers, raw sum
        and PMF.

    Examples
    --------
    >>> r = parse_stated("Sure! ```json\\n{\\"2\\": \\"60%\\", \\"1\\": \\"40%\\"}\\n```", ["1", "2"])
    >>> r.status, r.numbers.tolist(), r.raw_sum, r.pmf.tolist()
    ('ok', [40.0, 60.0], 100.0, [0.4, 0.6])
    >>> parse_stated("I cannot say.", ["1", "2"]).status
    'not_a_distribution'
    """
    n = len(labels)
    numbers = np.full(n, np.nan)
    if not reply.strip():
        return StatedReading("no_reply", numbers, float("nan"), None)
    keys = {str(lb).strip().casefold(): i for i, lb in enumerate(labels)}
    for i, x in _found(reply, keys).items():
        numbers[i] = x
    have = np.isfinite(numbers)
    raw_sum = float(numbers[have].sum()) if have.any() else float("nan")
    if not have.any() or (numbers[have] < 0).any() or raw_sum <= 0:
        return StatedReading("not_a_distribution", numbers, raw_sum, None)
    if not have.all():
        return StatedReading("missing_options", numbers, raw_sum, None)
    return StatedReading("ok", numbers, raw_sum, numbers / raw_sum)


def parse_stated_reply(
    reply: str, labels: Sequence[str], marker: str | None = None
) -> StatedReading:
    """A stated reply read after its thought: :func:`parse_stated` of the text after the
    first ``marker`` (the reasoning format's end of thought); status ``no_reply`` where the
    reply never writes it (the thought did not end). ``marker=None``: the whole reply.

    Examples
    --------
    >>> reply = 'Maybe {"1": 90, "2": 10}? No.</think>\\n\\n{"1": 30, "2": 70}'
    >>> parse_stated_reply(reply, ["1", "2"], "</think>").pmf.tolist()
    [0.3, 0.7]
    >>> parse_stated_reply('{"1": 90, "2": 10} and on', ["1", "2"], "</think>").status
    'no_reply'
    """
    if marker is None:
        return parse_stated(reply, labels)
    if not marker or marker not in reply:
        return StatedReading("no_reply", np.full(len(labels), np.nan), float("nan"), None)
    return parse_stated(reply.split(marker, 1)[1], labels)


def stated_options(options: Any, labels: Sequence[str] | None) -> tuple[list[str], list[int]]:
    """The options a ``stated`` cell names: the answer label and score of each point of
    ``options.scale`` that ``labels`` gives (``""``: off the item's support; default the
    scores' digits).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> stated_options(SimpleNamespace(scale=[1, 2, 3]), ["Yes", "", "No"])
    (['Yes', 'No'], [1, 3])
    >>> stated_options(SimpleNamespace(scale=[1, 2]), None)
    (['1', '2'], [1, 2])
    """
    axis = [int(y) for y in options.scale or ()]
    shown = list(labels or [str(y) for y in axis])[: len(axis)]
    pairs = [(lb, y) for lb, y in zip(shown, axis, strict=True) if lb]
    return [lb for lb, _ in pairs], [y for _, y in pairs]


def write_stated(
    res: UnitResult, b: int, reply: str, labels: Sequence[str], scores: Sequence[int],
    options: Any, marker: str | None = None,
) -> StatedReading:  # fmt: skip
    """Parse row ``b``'s reply text (special tokens left out; after the thought's end
    ``marker`` where there is one, :func:`parse_stated_reply`) and write its reading:
    ``stated_status``, ``stated_numbers``, ``stated_sum``, ``valid_mass`` and, where it
    is ``ok``, ``pmf`` (on ``options.scale``; and its certified bounds, equal to it, in a
    bounded unit: a stated PMF is read exactly)."""
    axis = [int(y) for y in options.scale]
    where = [axis.index(int(y)) for y in scores]
    reading = parse_stated_reply(reply, labels, marker)
    d = res.data
    d["stated_status"][b] = reading.status
    d["stated_numbers"][b] = reading.numbers_json(labels)
    d["stated_sum"][b] = reading.raw_sum
    d["valid_mass"][b] = np.nan if reading.pmf is None else 1.0
    if reading.pmf is not None:
        d["pmf"][b] = 0.0
        d["pmf"][b, where] = reading.pmf
        for lo_hi in ("pmf_lower", "pmf_upper"):
            if lo_hi in d:
                d[lo_hi][b] = d["pmf"][b]
        for lo_hi in ("valid_mass_lower", "valid_mass_upper"):
            if lo_hi in d:
                d[lo_hi][b] = 1.0
    return reading


def score_stated(
    model: Any, prompts: Sequence[tuple[str, str]], labels: Sequence[str], scores: Sequence[int],
    options: Any, res: UnitResult,
) -> UnitResult:  # fmt: skip
    """Ask each prompt for a stated distribution over ``labels`` (of ``scores``), write the
    greedy reply and read it (:func:`parse_stated`); ``res`` is filled in place.

    A model in reasoning mode (``model.format`` set) is asked in its reasoning format (the
    thinking template, or the chain-of-thought instruction after the stated one and the
    prefill) and thinks first, greedily, up to its ``reasoning.max_new_tokens``; its reply
    then runs ``stated_tokens`` more tokens after the end marker and is read after it
    (:func:`parse_stated_reply`). A thought that does not end is ``no_reply``; its
    ``reply_end`` says how it stopped (``thought_eos``, ``thought_length``)."""
    template, tok = model.template, model.tokenizer
    fmt = getattr(model, "format", None)
    if fmt is not None and not hasattr(model, "greedy_thought_reply"):
        raise CollectionError(
            f"model {model.name!r}: its backend does not write a stated reply after a thought "
            "(reasoning mode); use the transformers backend"
        )
    d = res.data
    for b, (system, user) in enumerate(prompts):
        asked = stated_user(user, options.stated_instruction, labels)
        text = (
            template.render(system, asked) if fmt is None else fmt.prompt(template, system, asked)
        )
        ids = template.encode(text)
        d["prompt_text"][b] = text
        d["prompt_token_ids"][b] = encode_token_ids(ids)
        if fmt is None:
            reply, end = model.greedy_reply(ids, options.stated_tokens)
            said = tok.decode(reply, skip_special_tokens=True)
        else:
            reply, end, k = model.greedy_thought_reply(ids, options.stated_tokens)
            if k is None:  # the thought did not end: nothing after it to read
                end, said = f"thought_{end}", ""
            else:
                said = tok.decode(reply[:k], skip_special_tokens=False) + tok.decode(
                    reply[k:], skip_special_tokens=True
                )
        d["reply_text"][b] = tok.decode(reply, skip_special_tokens=False)
        d["reply_token_ids"][b] = encode_token_ids(reply)
        d["reply_end"][b] = end
        marker = None if fmt is None else fmt.marker
        write_stated(res, b, said, labels, scores, options, marker)
    return res
