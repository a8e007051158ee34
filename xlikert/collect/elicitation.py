"""The elicitation factor in a collection run: each level of a cell read as it says.

A prompts Dataset asks for it with a factor named ``elicitation``
(:data:`~xlikert.design.elicitation.ELICITATION_DIM`), whose levels
(:data:`~xlikert.design.elicitation.ELICITATIONS`) say how the answer is read:

* ``first_token``: as without the factor (:meth:`Model.score <xlikert.collect.protocol.Model.score>`);
* ``prefix``: the prompt's token ids followed by the model's turn opened with the run's
  ``answer_prefix`` (the rendered prompt's text, then the prefix, tokenised together:
  what a chat template renders for an assistant message that is continued), the
  answer read right after it, exactly, under the run's answer rule;
* ``greedy``: the greedy reply up to ``reply_tokens`` tokens
  (:meth:`~xlikert.collect.protocol.ElicitingModel.greedy_reply`), its answer under
  :data:`~xlikert.design.elicitation.ANSWER_PARSE_RULE` (:func:`parse_answer`), and
  the exact PMF after the prompt and the reply's tokens before that answer (the
  in-text PMF), under the run's answer rule;
* ``own_words``: the distribution of the first answer of a sampled reply
  (:mod:`xlikert.collect.own_words`);
* ``stated``: the distribution the model states in its greedy reply to the prompt with
  the run's ``stated_instruction`` (:mod:`xlikert.collect.stated`).

Each level of a condition is its own unit of work (:class:`Elicitations` tells the
runner each cell's level), and a cell's key hashes its level and the settings the
level reads (:data:`ELICITATION_KEY`), so every level resumes, shards and is reused
like every run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from ..core.codecs import encode_token_ids
from ..core.errors import CollectionError, ElicitationLevelError
from ..core.schema import (
    BOUND_VARIABLES,
    ELICITATION_SETTING_ATTRS,
    ELICITATION_VARIABLES,
    NONSUBSTANTIVE_BOUND_VARIABLES,
    WALK_VARIABLES,
)
from ..design.elicitation import (
    ANSWER_PARSE_RULES,
    ANSWER_PARSES,
    ELICITATION_DIM,
    ELICITATIONS,
    STATED_PARSE_RULE,
    STATED_STATUSES,
    stated_instruction_problem,
)
from .options import CollectOptions
from .own_words import (
    MAX_CHILDREN,
    OWN_WORDS_BOUND_RULE,
    REPLY_TREE_RULE,
    ROUND,
    WORD_REPLY_RULE,
    answer_token_scores,
    parse_label,
    reply_trie,
    score_own_words,
)
from .progress import CellProgressFn
from .protocol import (
    AnswerArrays,
    ConversationModel,
    ElicitingBackend,
    ElicitingModel,
    Model,
    Sent,
    ServerElicitingModel,
    backend_module,
    backend_of,
    eliciting_model,
)
from .record import UnitResult
from .stated import score_stated, stated_options

__all__ = [
    "ELICITATION_KEY",
    "Elicitations",
    "check_elicitation_backends",
    "elicitation_attrs",
    "elicitation_sent",
    "parse_answer",
    "score_elicited",
]

#: The request key of a cell read by a level other than ``first_token``: its level, the
#: settings the level reads and the prompt's token ids (or request) are hashed together.
ELICITATION_KEY = "xlikert-elicitation-1"

#: The levels that write a reply (the model must be an :class:`ElicitingModel`).
REPLY_LEVELS = ("greedy", "own_words", "stated")

#: The levels other than ``first_token`` a model in reasoning mode reads (transformers backend):
#: ``stated``, from the greedy reply with its thought (:func:`~xlikert.collect.stated.score_stated`).
REASONING_LEVELS = ("stated",)


@dataclass
class Elicitations:
    """The elicitation level of each flat cell of a run (in the order of ``user``'s values).

    Attributes
    ----------
    levels : list of str
        One level per flat cell.
    instructions : list of str or None
        The ``stated`` instruction of each flat cell where the prompts carry one (their
        ``stated_instruction``: the experiment's, in each cell's language); None: every
        cell reads the run's ``stated_instruction``.
    """

    levels: list[str]
    instructions: list[str] | None = None

    @classmethod
    def of(cls, user: xr.DataArray, prompts: xr.Dataset | None = None) -> Elicitations | None:
        """The levels of a run's cells (None: no elicitation factor, every cell first-token),
        and the prompts' ``stated_instruction`` of each cell where they carry one.

        Raises
        ------
        CollectionError
            Unknown levels, naming them and the known ones; a ``stated_instruction`` of
            the prompts that does not name the options (``{options}``).
        """
        if ELICITATION_DIM not in user.dims:
            return None
        names = [str(v) for v in user[ELICITATION_DIM].values]
        bad = [v for v in names if v not in ELICITATIONS]
        if bad:
            raise CollectionError(
                f"factor {ELICITATION_DIM!r}: unknown level(s) {bad}; its levels are "
                f"{list(ELICITATIONS)}"
            )
        axis = user.dims.index(ELICITATION_DIM)
        index = np.indices(user.shape)[axis].ravel()
        return cls([names[i] for i in index], _instructions(user, prompts))

    def level(self, cell: int) -> str:
        """The level of one flat cell."""
        return self.levels[int(cell)]

    def options_of(self, cell: int, options: CollectOptions) -> CollectOptions:
        """The options a cell is read with: ``options``, with the cell's own ``stated``
        instruction where it is a ``stated`` cell of prompts that carry one."""
        if self.instructions is None or self.level(cell) != "stated":
            return options
        said = self.instructions[int(cell)]
        if said == options.stated_instruction:
            return options
        return options.replace(stated_instruction=said)

    @property
    def used(self) -> list[str]:
        """The levels the run reads, in the order of :data:`ELICITATIONS`."""
        have = set(self.levels)
        return [lv for lv in ELICITATIONS if lv in have]


def _instructions(user: xr.DataArray, prompts: xr.Dataset | None) -> list[str] | None:
    """The prompts' ``stated_instruction`` broadcast to the cells of ``user``, each checked."""
    if prompts is None or "stated_instruction" not in prompts.data_vars:
        return None
    said = prompts["stated_instruction"]
    extra = [d for d in said.dims if d not in user.dims]
    if extra:
        raise CollectionError(
            f"the prompts' stated_instruction has dims {extra} that their user prompts lack"
        )
    texts = [str(x) for x in said.broadcast_like(user).transpose(*user.dims).values.ravel()]
    for text in dict.fromkeys(texts):
        bad = stated_instruction_problem(text)
        if bad is not None:
            raise CollectionError(f"the prompts' stated_instruction {bad}")
    return texts


def check_elicitation_backends(
    models: Sequence[dict[str, Any]], elicitations: Elicitations, options: CollectOptions
) -> None:
    """Every model can read every level the run asks for, checked before anything loads.

    Each backend says which levels it reads with its ``check_elicitation(spec, levels)``
    (the in-process backends read every level; an OpenAI-compatible server ``prefix``,
    ``greedy`` and ``stated``); a backend without that function reads ``first_token`` only.

    Raises
    ------
    ElicitationLevelError
        A backend asked for a level it cannot read (a server asked for ``own_words``),
        naming the model, the level and the backend.
    CollectionError
        A model in reasoning mode asked for a level other than ``stated``
        (:data:`REASONING_LEVELS`) or on a backend other than transformers; ``own_words`` with a parsing rule other than
        ``first_valid``; an answer rule that ``greedy`` or ``own_words`` cannot
        parse (non-substantive options). Each names the model and the level.
    """
    used = [lv for lv in elicitations.used if lv != "first_token"]
    if not used:
        return
    for spec in models:
        backend, name = backend_of(spec), spec["name"]
        backend_impl = backend_module(spec)
        if not isinstance(backend_impl, ElicitingBackend):
            raise ElicitationLevelError(
                f"model {name!r}: the elicitation level(s) {used} are not read by its backend "
                f"{backend!r}. Use the transformers or vllm backend, or elicitation = "
                "['first_token']"
            )
        backend_impl.check_elicitation(spec, tuple(used))
        if spec.get("reasoning"):
            _check_reasoning_levels(name, backend, used)
    if "own_words" in used and options.answer_parse != "first_valid":
        raise CollectionError(
            f"answer_parse = {options.answer_parse!r} reads the text after an answer token; "
            "the reply tree of own_words reads each answer at its token and does not yet: use "
            "answer_parse = 'first_valid' for own_words (the stricter rule for greedy in a run "
            "of its own)"
        )
    if set(used) & set(REPLY_LEVELS) and options.nonsubstantive:
        raise CollectionError(
            f"the elicitation levels {[v for v in used if v in REPLY_LEVELS]} parse the "
            f"answer token of a reply (answer_parse_rule); the run's non-substantive options "
            f"{list(options.nonsubstantive)} are not read by that rule yet: drop them or "
            "these levels"
        )


def _check_reasoning_levels(name: str, backend: str, used: Sequence[str]) -> None:
    """A model in reasoning mode reads :data:`REASONING_LEVELS` on the transformers backend."""
    other = [lv for lv in used if lv not in REASONING_LEVELS]
    if other:
        raise CollectionError(
            f"model {name!r}: the elicitation level(s) {other} do not combine with reasoning "
            "mode (an entry with reasoning = {...}) yet: a model in reasoning mode reads "
            f"{list(REASONING_LEVELS)} (the stated reply after its thought). Read {other} "
            "with an entry of the same model without reasoning"
        )
    if backend != "transformers":
        raise CollectionError(
            f"model {name!r}: the elicitation level(s) {list(used)} of a model in reasoning "
            f"mode are read on the transformers backend only, not {backend!r}: use "
            "backend = 'transformers' for this entry"
        )


def elicitation_sent(level: str, sent: Sent, options: CollectOptions) -> Sent:
    """What determines a cell of ``level``: the prompt's token ids (or request) as they are
    for ``first_token``, else those with the level and the settings it reads
    (:data:`ELICITATION_KEY`).

    Examples
    --------
    >>> elicitation_sent("first_token", [1, 2], CollectOptions())
    [1, 2]
    >>> elicitation_sent("prefix", [1, 2], CollectOptions())
    {'xlikert-elicitation-1': {'level': 'prefix', 'settings': {'answer_prefix': 'My answer is'}, 'sent': [1, 2]}}
    """
    if level == "first_token":
        return sent
    plain = sent if isinstance(sent, dict) else [int(x) for x in np.asarray(sent).ravel()]
    return {
        ELICITATION_KEY: {
            "level": level,
            "settings": options.elicitation_settings(level),
            "sent": plain,
        }
    }


def parse_answer(
    reply: Sequence[Any],
    token_score: Mapping[Any, int],
    *,
    texts: Sequence[str] | None = None,
    rule: str = "first_valid",
) -> tuple[int, int] | None:
    """The answer of a reply under a parsing rule
    (:data:`~xlikert.design.elicitation.ANSWER_PARSE_RULES`).

    Parameters
    ----------
    reply : sequence
        The reply's tokens (ids, or, from a server without ids, the keys it lists).
    token_score : mapping
        Each valid answer token's score (the run's one-token rule).
    texts : sequence of str, optional
        Each token's text (``"standalone"`` reads them).
    rule : str
        ``"first_valid"`` (the first valid answer token) or ``"standalone"`` (the first
        one that stands alone in the text:
        :data:`~xlikert.design.elicitation.STANDALONE_PARSE_RULE`).

    Returns
    -------
    tuple of (int, int) or None
        ``(position, score)`` of the answer token; None where the reply writes none.

    Examples
    --------
    >>> parse_answer([7, 8, 3, 4], {3: 1, 4: 2})
    (2, 1)
    >>> parse_answer([7, 8], {3: 1}) is None
    True
    >>> texts = ["Scale", " 1", "-", "7", ":", " 5"]
    >>> digits = {1: 1, 3: 7, 5: 5}
    >>> parse_answer(range(6), digits, texts=texts), parse_answer(range(6), digits,
    ...     texts=texts, rule="standalone")
    ((1, 1), (5, 5))
    """
    if rule not in ANSWER_PARSES:
        raise CollectionError(f"answer_parse must be one of {list(ANSWER_PARSES)}, got {rule!r}")
    if rule == "standalone" and (texts is None or len(texts) != len(reply)):
        raise CollectionError("the standalone parsing rule reads each reply token's text")
    for t, tok in enumerate(reply):
        y = token_score.get(tok)
        if y is None:
            continue
        if rule == "standalone" and not _stands_alone(texts, t):  # type: ignore[arg-type]
            continue
        return t, int(y)
    return None


#: Before an answer's digits: a letter or digit glued to it, a decimal, the end of a range/fraction.
_GLUED_BEFORE = re.compile(r"(?:\w|\d[.,]|\d\s*(?:[-\u2013\u2014/]|to)\s*)$")
#: After an answer's digits: a letter or digit glued to it, a range/fraction, a decimal.
_GLUED_AFTER = re.compile(r"(?:\w|\s*(?:[-\u2013\u2014/]|to)\s*\d|[.,]\d)")


def _stands_alone(texts: Sequence[str], t: int) -> bool:
    """Whether the answer token ``t`` stands alone in the reply's text (the ``standalone``
    parsing rule, :data:`~xlikert.design.elicitation.STANDALONE_PARSE_RULE`).

    Examples
    --------
    >>> _stands_alone(["I", " choose", " 5", "."], 2)
    True
    >>> _stands_alone([" 1", " to", " 7"], 0), _stands_alone([" 1", " to", " 7"], 2)
    (False, False)
    >>> _stands_alone(["Q", "1"], 1), _stands_alone([" 1", "st"], 0), _stands_alone([" 1", ".5"], 0)
    (False, False, False)
    """
    token = texts[t]
    lead = token[: len(token) - len(token.lstrip())]
    before = "".join(texts[:t]) + lead
    return not (_GLUED_BEFORE.search(before) or _GLUED_AFTER.match("".join(texts[t + 1 :])))


def score_elicited(
    model: Model,
    prompts: Sequence[tuple[str, str]],
    level: str,
    options: CollectOptions,
    labels: Sequence[str] | None = None,
    progress: CellProgressFn | None = None,
) -> UnitResult:
    """Read one unit of prompts under an elicitation level other than ``first_token``.

    Parameters
    ----------
    model : Model
        The loaded model: an :class:`~xlikert.collect.protocol.ElicitingModel` (in process),
        or a :class:`~xlikert.collect.protocol.ServerElicitingModel` (a server, which reads
        the levels its own way).
    prompts : sequence of (str, str)
        The unit's ``(system, user)`` prompts.
    level : str
        ``prefix``, ``greedy``, ``own_words`` or ``stated``.
    options : CollectOptions
        The run's options (``answer_prefix``, ``reply_tokens``, the own-words sampler,
        ``stated_instruction``, ``stated_tokens``).
    labels : sequence of str, optional
        ``stated``: the answer label of each score of ``options.scale`` (``""`` where the
        item has no such point; default the scores' digits).
    progress : callable, optional
        Told the passes, bound, unread mass and time of each own-words prompt as it is
        read (:mod:`xlikert.collect.progress`).

    Returns
    -------
    UnitResult
        One row per prompt: ``pmf``, ``valid_mass``, ``decoding_*`` as read (NaN
        where a greedy reply writes no answer), ``prompt_text`` and
        ``prompt_token_ids`` (what the PMF was read after), and
        :data:`~xlikert.core.schema.ELICITATION_VARIABLES`.
    """
    if level not in ELICITATIONS or level == "first_token":
        raise CollectionError(
            f"score_elicited reads prefix, greedy, own_words or stated, got {level!r}"
        )
    if isinstance(model, ServerElicitingModel):  # a server reads its own way
        if level == "stated":  # the labels: stated's only (a server without it takes none)
            return model.score_elicited(prompts, level, options, labels)
        return model.score_elicited(prompts, level, options)
    model = eliciting_model(model, level)
    template = model.template
    texts = [template.render(s, u) for s, u in prompts]
    res = _empty(len(prompts), model.options, traces=_traces(model))
    if level == "prefix":
        texts = [t + options.answer_prefix for t in texts]
        encoded = [template.encode(t) for t in texts]
        out = _read(model, encoded, _session("prefix", texts))
        _fill(res, range(len(texts)), out, model.options.sizes)
        res.data["prompt_text"][:] = texts
        res.data["prompt_token_ids"][:] = [encode_token_ids(e) for e in encoded]
        return res
    if level == "stated":
        return score_stated(model, prompts, *stated_options(options, labels), options, res)
    if level == "own_words":
        encoded = [template.encode(t) for t in texts]
        return score_own_words(model, texts, encoded, options, res, progress=progress)
    return _greedy(model, texts, [template.encode(t) for t in texts], options, res)


def _traces(model: object) -> int:
    """Traces per prompt of a model in reasoning mode (0: not): a stated cell samples none,
    its trace variables keep their fill values, but its unit has the model's trace dim."""
    return int((getattr(model, "reasoning", None) or {}).get("traces", 0))


def _empty(n: int, options: CollectOptions, traces: int = 0) -> UnitResult:
    res = UnitResult.empty(n, options.sizes, traces=traces)
    for name, var in ELICITATION_VARIABLES.items():
        res.data[name] = var.full((n,))
    return res


def _read(model: ConversationModel, contexts: list[list[int]], session: str) -> AnswerArrays:
    """The readout after each context (one pass each; nothing kept between them);
    ``session``: the unit's own name (vLLM: its prefix-cache salt)."""
    reader = model.context_reader(session)
    try:
        return reader.read(contexts, keep=[False] * len(contexts))
    finally:
        reader.close()


def _session(level: str, texts: Sequence[str]) -> str:
    """A unit's own reader name: its level and its prompts' texts, NUL-separated (so that a
    reader that caches, vLLM's, shares nothing with other units)."""
    return "\0".join([level, *texts])


def _fill(
    res: UnitResult, rows: Sequence[int], out: AnswerArrays, sizes: Mapping[str, int]
) -> None:
    """Copy a readout into the rows of ``res``; one read by the labels' walk brings its
    certified bounds and record (:data:`~xlikert.core.schema.WALK_VARIABLES`), added to
    ``res`` (the rows not read keep their fill values: not walked)."""
    rows = list(rows)
    if "answer_passes" in out and not res.walked:
        walk = UnitResult.empty(len(res.data["pmf"]), sizes, walk=True).data
        res.data.update({k: v for k, v in walk.items() if k not in res.data})
    keys = ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass", "nonsubstantive_mass",
            *BOUND_VARIABLES, *NONSUBSTANTIVE_BOUND_VARIABLES, *WALK_VARIABLES)  # fmt: skip
    for key in keys:
        if key in out and key in res.data:
            res.data[key][rows] = out[key]


def _greedy(
    model: ElicitingModel, texts: list[str], encoded: list[list[int]], options: CollectOptions,
    res: UnitResult,
) -> UnitResult:  # fmt: skip
    """The greedy replies, their answers (a word label's at its first token,
    :data:`~xlikert.collect.own_words.WORD_REPLY_RULE`) and the in-text PMFs."""
    trie = reply_trie(model)
    scores = answer_token_scores(model) if trie is None else {}
    tok = model.tokenizer
    contexts, rows = [], []
    for b, ids in enumerate(encoded):
        reply, end = model.greedy_reply(ids, options.reply_tokens)
        d = res.data
        d["reply_text"][b] = tok.decode(reply, skip_special_tokens=False)
        d["reply_token_ids"][b] = encode_token_ids(reply)
        d["reply_end"][b] = end
        found = (
            parse_label(reply, trie)
            if trie is not None
            else parse_answer(reply, scores, texts=[tok.decode([i]) for i in reply],
                              rule=options.answer_parse)
        )  # fmt: skip
        d["prompt_text"][b] = texts[b]
        d["prompt_token_ids"][b] = encode_token_ids(ids)
        if found is None:
            d["reply_answered"][b] = 0
            continue
        t, y = found
        d["reply_answered"][b] = 1
        d["reply_answer"][b] = y
        d["reply_answer_position"][b] = t
        ctx = list(ids) + list(reply[:t])
        d["prompt_text"][b] = texts[b] + tok.decode(reply[:t], skip_special_tokens=False)
        d["prompt_token_ids"][b] = encode_token_ids(ctx)
        contexts.append(ctx)
        rows.append(b)
    if contexts:
        _fill(res, rows, _read(model, contexts, _session("greedy", texts)), model.options.sizes)
    return res


def elicitation_attrs(options: CollectOptions, elicitations: Elicitations) -> dict[str, Any]:
    """The attrs of a results file with an elicitation factor: the parsing rule and the
    settings of the levels it reads."""
    out: dict[str, Any] = {"answer_parse": options.answer_parse,
                           "answer_parse_rule": ANSWER_PARSE_RULES[options.answer_parse],
                           "elicitation_levels": elicitations.used}  # fmt: skip
    for level in elicitations.used:
        for k, v in options.elicitation_settings(level).items():
            out[ELICITATION_SETTING_ATTRS[k]] = v
    if "stated" in elicitations.used:
        out.update(stated_parse_rule=STATED_PARSE_RULE,
                   stated_statuses=json.dumps(STATED_STATUSES))  # fmt: skip
    if "own_words" in elicitations.used:
        out.update(reply_tree_rule=REPLY_TREE_RULE, own_words_bound_rule=OWN_WORDS_BOUND_RULE,
                   own_words_max_children=MAX_CHILDREN, own_words_round=ROUND)  # fmt: skip
    if {"greedy", "own_words"} & set(elicitations.used):
        out["word_reply_rule"] = WORD_REPLY_RULE
    return out
