"""The run-wide collection options, validated once: :class:`CollectOptions`.

Every model of a results file shares them (the scale, the answer labels, the
decoding grid, the top-k listing, the unit of saved progress); a model entry may
not set them (:func:`~xlikert.collect.entries.check_entry_keys` says so, naming the key). They come from
:func:`xlikert.collect.collect`'s keywords, an experiment file's ``[collect]``
table or ``xlikert run`` flags (flag > table > default), and are validated when
built, before any model loads. The defaults live here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import CollectionError, LabelMappingError
from ..design.elicitation import ANSWER_PARSES, DEFAULT_STATED_INSTRUCTION
from ..kernels.readout import DEFAULT_TEMPERATURES, DEFAULT_TOP_PS
from .answers.numerals import NUMERAL_MODES, rule_scripts
from .answers.numerals import scripts as all_scripts
from .entries import check_dtype

__all__ = [
    "DEFAULT_TEMPERATURES",
    "DEFAULT_TOP_PS",
    "ELICITATION_OPTIONS",
    "EXECUTORS",
    "CollectOptions",
    "labels_key",
]

#: The options of the elicitation factor (:mod:`xlikert.collect.elicitation`): they enter a
#: cell's key only where it is read by a level that uses them.
ELICITATION_OPTIONS = (
    "answer_prefix", "reply_tokens", "answer_parse", "own_words_temperature", "own_words_top_p",
    "own_words_tol", "own_words_max_passes", "stated_instruction", "stated_tokens",
)  # fmt: skip

#: Where a run's units are computed (:mod:`xlikert.collect.run.executor`); the numbers do
#: not depend on it.
EXECUTORS = ("in_process", "ray")


def labels_key(labels: Sequence[str] | None, scale: Sequence[int]) -> str:
    """A label set as a model's provenance names it (``valid_tokens_by_labels``,
    ``answers_by_labels``): the labels joined by spaces, the scale's digits for None.

    Examples
    --------
    >>> labels_key(("A", "B", "C"), (1, 2, 3)), labels_key(None, (1, 2, 3))
    ('A B C', '1 2 3')
    """
    return " ".join(labels or map(str, scale))


def _fail(where: str, message: str) -> CollectionError:
    return CollectionError(f"{where}: {message}" if where else message)


def _is_int(v: object) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _is_real(v: object) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(
        v, bool | np.bool_
    )


def _grid(name: str, value: Any, where: str, ok, rule: str) -> tuple[float, ...]:
    """A decoding-grid axis: one number or a non-empty sequence of distinct numbers."""
    values = [value] if _is_real(value) else value
    if isinstance(values, str | bytes) or not hasattr(values, "__iter__"):
        raise _fail(where, f"{name} must be a number or a list of numbers, got {value!r}")
    values = list(values)
    if not values:
        raise _fail(where, f"{name} is empty; give at least one value ({rule})")
    bad = [v for v in values if not (_is_real(v) and math.isfinite(v) and ok(float(v)))]
    if bad:
        raise _fail(where, f"{name} must hold finite numbers {rule}; got {bad[0]!r} in {values}")
    out = tuple(float(v) for v in values)
    if len(set(out)) < len(out):
        raise _fail(where, f"{name} repeats a value: {list(out)} (each is a coordinate)")
    return out


@dataclass(frozen=True)
class CollectOptions:
    """Run-wide settings every backend reads, validated when built.

    Every default lives here (the decoding grid's, beside its rule:
    :data:`~xlikert.kernels.readout.DEFAULT_TEMPERATURES` and
    :data:`~xlikert.kernels.readout.DEFAULT_TOP_PS`);
    :func:`~xlikert.collect.collect` takes an instance (``options=``) and/or the same
    names as keywords, ``xlikert run`` as flags, and an experiment file as its
    ``[collect]`` table (:meth:`from_mapping`). Model entries may set ``device``,
    ``dtype``, ``device_map`` and ``trust_remote_code`` for themselves (where their
    backend knows them); the others (:data:`~xlikert.collect.entries.RUN_WIDE_OPTIONS`) are the run's.

    Attributes
    ----------
    scale
        Scale values (distinct integers, increasing); None: the prompts' scale.
    top_k
        Raw top-k tokens stored per prompt (``topk_token``, ``topk_logprob``), >= 1.
    temperatures, top_ps
        The decoding grid (``decoding_pmf``): temperatures finite and > 0, top-p
        values in (0, 1]; a single number is a grid of one.
    split_space
        Count answers whose leading space is a token of its own exactly (False:
        the paper's one-token rule).
    prefix_cache
        Reuse the system prompt's KV cache (transformers; checked at run time).
    batch_size
        Prompts per forward pass (an integer >= 1) or ``"auto"``.
    chunk_size
        Prompts per unit (the unit of saved progress), >= 1.
    device, dtype, device_map, trust_remote_code
        Defaults for model entries that do not set them (in-process backends).
    answer_labels
        The answer label of each score, in score order (a response format,
        :mod:`xlikert.design.formats`), then of each non-substantive option
        (``nonsubstantive``); ``""`` where the item has no such point or option
        (an item with its own options); None: the scores' digits. Every answer
        rule above reads these labels and puts each one's probability on its
        score (or option). :func:`~xlikert.collect.collect` sets it per level of
        a format factor, and per item, from the prompts' ``answer_label`` and
        ``option_label``.
    nonsubstantive
        The non-substantive options ("Don't know", ...) of the results'
        ``option`` axis; default none (:func:`~xlikert.collect.collect` takes
        them from the prompts' ``option`` coord).
    tol
        Sequential administration (:mod:`xlikert.collect.context`): the certified
        error asked of every item's PMF, ``|returned - exact| <= tol``; 0 (the
        default) reads every answer history of positive probability (exact).
    max_passes
        Sequential administration: the forward passes one conversation may spend;
        spent before ``tol`` is met, the bound reached is stored (never a smaller one).
    numerals
        The numeral rule (:mod:`xlikert.collect.answers.numerals`): ``"any"`` (the default)
        counts a number written in any decimal script the tokenizer knows (ASCII,
        full-width, Arabic-Indic, Devanagari, ...) as that number; ``"shown"`` only in
        the scripts of the answer labels the prompt shows (the ASCII digits without a
        format). Part of every cell's key.
    max_answer_positions
        The most tokens the multi-token rule may teacher-force per prompt: the tokens of
        every spelling of every answer label (a word label in a large vocabulary may be
        spelled in tens of thousands of ways: "Strongly disagree" ... "Strongly agree" in
        Qwen 2.5's, 51,699 spellings). Counted before anything is read; more is refused,
        naming the labels (answer with codes or letters instead). Not part of the key: it
        refuses, it does not change a number. The transformers backend reads a prompt's
        answers by the walk (``answer_tol``) and needs no listing: there it applies only to
        the paths that still list the spellings (sequential administration, the reasoning
        mode, the other backends).
    answer_tol
        Answers of several tokens (word labels, numbers of several digits) read by the
        certified walk over the labels' spellings (:mod:`xlikert.collect.answers.walk`,
        transformers backend): the walk stops once every answer's mass, the valid mass and
        the decoding grid's masses are certified within ``answer_tol``; 0 reads every
        spelling of positive probability (exact). Part of every cell's key.
    answer_max_passes
        The walk's budget: the most next-token reads (trie nodes) per prompt; spent before
        ``answer_tol`` is met, the bound reached is stored (``answer_tol_met`` 0) and the
        run says so. Part of every cell's key.
    answer_prefix
        The elicitation level ``prefix`` (:mod:`xlikert.design.elicitation`): the text
        the model's turn starts with; the answer is read right after it.
    reply_tokens
        The levels ``greedy`` and ``own_words``: the most tokens of a reply (its cap).
    answer_parse
        The levels ``greedy`` and ``own_words``: how the answer of a reply is found
        (:data:`~xlikert.design.elicitation.ANSWER_PARSE_RULES`): ``"first_valid"`` (the
        default: the first valid answer token) or ``"standalone"`` (the first that stands
        alone: not part of a word, a range such as "1-7" or a decimal; greedy only). Part
        of the key of every cell it parses (where not the default).
    own_words_temperature, own_words_top_p
        The level ``own_words``: the sampler whose first written answer is measured.
    own_words_tol, own_words_max_passes
        The level ``own_words``: the certified error asked of every cell
        (``|returned - exact| <= tol`` for ``pmf``, ``valid_mass`` and
        ``no_answer_mass``; 0: every reply prefix read) and the forward passes one cell
        may spend; the bound reached is stored, never a smaller one.
    stated_instruction, stated_tokens
        The level ``stated``: the instruction added to the user's text (it must name the
        options with ``{options}``, where the cell's answer labels are put) and the most
        tokens of the reply that states the distribution.
    executor
        Where the units are computed (:mod:`xlikert.collect.run.executor`):
        ``"in_process"`` (the default: one model at a time in this process) or ``"ray"``
        (model replicas as actors of a Ray cluster, :mod:`xlikert.collect.run.cluster`).
        Not part of any key: the results file is the same.
    ray_address
        The executor ``"ray"``: the cluster, ``"auto"`` (the one running here, as ``ray
        start`` left it), ``"local"`` (one started on this machine for the run) or
        ``host:port`` of its head.
    replicas
        The executor ``"ray"``: replicas of each model; None (the default): as many as
        the cluster has room for, at most one per unit.

    Raises
    ------
    CollectionError
        A value out of range or of the wrong type, naming the field.

    Examples
    --------
    >>> CollectOptions(top_ps=0.9).top_ps
    (0.9,)
    >>> CollectOptions(top_ps=(0.0, 1.0))
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: top_ps must hold finite numbers in (0, 1]; got 0.0 in [0.0, 1.0]
    """

    scale: tuple[int, ...] | None = None
    top_k: int = 20
    temperatures: tuple[float, ...] = DEFAULT_TEMPERATURES
    top_ps: tuple[float, ...] = DEFAULT_TOP_PS
    split_space: bool = True
    prefix_cache: bool = True
    batch_size: int | str = "auto"
    chunk_size: int = 64
    device: str | None = None
    dtype: str | None = None
    device_map: str | None = None
    trust_remote_code: bool = False
    answer_labels: tuple[str, ...] | None = None
    nonsubstantive: tuple[str, ...] = ()
    tol: float = 0.0
    max_passes: int = 10_000
    numerals: str = "any"
    max_answer_positions: int = 20_000
    answer_tol: float = 1e-6
    answer_max_passes: int = 4096
    answer_prefix: str = "My answer is"
    reply_tokens: int = 32
    answer_parse: str = "first_valid"
    own_words_temperature: float = 1.0
    own_words_top_p: float = 1.0
    own_words_tol: float = 1e-3
    own_words_max_passes: int = 256
    stated_instruction: str = DEFAULT_STATED_INSTRUCTION
    stated_tokens: int = 128
    executor: str = "in_process"
    ray_address: str = "auto"
    replicas: int | None = None

    def __post_init__(self) -> None:
        self._validate("")

    def _validate(self, where: str) -> None:
        put = functools.partial(object.__setattr__, self)
        if self.scale is not None:
            scale = list(self.scale) if not isinstance(self.scale, str | bytes) else None
            if scale is None or not all(_is_int(v) for v in scale):
                raise _fail(where, f"scale must be a list of integers, got {self.scale!r}")
            if len(scale) < 2 or any(b <= a for a, b in itertools.pairwise(scale)):
                raise _fail(where, f"scale must hold at least two increasing integers, got {scale}")
            put("scale", tuple(int(v) for v in scale))
        if not (_is_int(self.top_k) and self.top_k >= 1):
            raise _fail(where, f"top_k must be an integer >= 1, got {self.top_k!r}")
        put("top_k", int(self.top_k))
        put("temperatures", _grid("temperatures", self.temperatures, where,
                                  lambda t: t > 0, "> 0"))  # fmt: skip
        put("top_ps", _grid("top_ps", self.top_ps, where, lambda p: 0 < p <= 1, "in (0, 1]"))
        for name in ("split_space", "prefix_cache", "trust_remote_code"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise _fail(where, f"{name} must be true or false, got {getattr(self, name)!r}")
            put(name, bool(getattr(self, name)))
        bs = self.batch_size
        if not (bs == "auto" or (_is_int(bs) and int(bs) >= 1)):
            raise _fail(where, f"batch_size must be an integer >= 1 or 'auto', got {bs!r}")
        put("batch_size", bs if bs == "auto" else int(bs))
        if not (_is_int(self.chunk_size) and self.chunk_size >= 1):
            raise _fail(where, f"chunk_size must be an integer >= 1, got {self.chunk_size!r}")
        put("chunk_size", int(self.chunk_size))
        for name in ("device", "dtype", "device_map"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise _fail(where, f"{name} must be a string, got {getattr(self, name)!r}")
        if self.dtype is not None:
            check_dtype(self.dtype, where)
        names = self.nonsubstantive
        if isinstance(names, str | bytes) or not all(isinstance(x, str) and x for x in names):
            raise _fail(where, f"nonsubstantive must be a list of option labels, got {names!r}")
        if len(set(names)) < len(names):
            raise _fail(where, f"nonsubstantive repeats an option: {list(names)}")
        put("nonsubstantive", tuple(names))
        if self.answer_labels is not None:
            put("answer_labels", self._checked_labels(where))
        self._validate_answers(where, put)
        self._validate_elicitation(where, put)
        self._validate_executor(where, put)

    def _validate_answers(self, where: str, put: Any) -> None:
        """The certified readers' tolerances and budgets (sequential trees, the labels'
        walk, a listing's cap) and the numeral rule."""
        tol = self.tol
        if isinstance(tol, bool) or not isinstance(tol, int | float | np.number):
            raise _fail(where, f"tol must be a number >= 0 (0: exact), got {tol!r}")
        if not (math.isfinite(tol) and tol >= 0):
            raise _fail(where, f"tol must be a finite number >= 0 (0: exact), got {tol!r}")
        put("tol", float(tol))
        for name in ("max_passes", "max_answer_positions", "answer_max_passes"):
            v = getattr(self, name)
            if not (_is_int(v) and v >= 1):
                raise _fail(where, f"{name} must be an integer >= 1, got {v!r}")
            put(name, int(v))
        at = self.answer_tol
        if not (_is_real(at) and math.isfinite(at) and at >= 0):
            raise _fail(where, f"answer_tol must be a finite number >= 0 (0: exact), got {at!r}")
        put("answer_tol", float(at))
        if self.numerals not in NUMERAL_MODES:
            raise _fail(
                where, f"numerals must be one of {list(NUMERAL_MODES)}, got {self.numerals!r}"
            )

    def _validate_executor(self, where: str, put) -> None:
        """The options of the executor (where units are computed, not what they hold)."""
        if self.executor not in EXECUTORS:
            raise _fail(where, f"executor must be one of {list(EXECUTORS)}, got {self.executor!r}")
        if not (isinstance(self.ray_address, str) and self.ray_address.strip()):
            raise _fail(
                where,
                "ray_address must be 'auto', 'local' or host:port of a Ray cluster's head, "
                f"got {self.ray_address!r}",
            )
        if self.replicas is not None:
            if not (_is_int(self.replicas) and self.replicas >= 1):
                raise _fail(where, f"replicas must be an integer >= 1, got {self.replicas!r}")
            put("replicas", int(self.replicas))

    def _validate_elicitation(self, where: str, put) -> None:
        """The options of the elicitation factor."""
        if not isinstance(self.answer_prefix, str) or not self.answer_prefix.strip():
            raise _fail(
                where, f"answer_prefix must be a non-empty text, got {self.answer_prefix!r}"
            )
        if self.answer_parse not in ANSWER_PARSES:
            raise _fail(
                where,
                f"answer_parse must be one of {list(ANSWER_PARSES)}, got {self.answer_parse!r}",
            )
        if not isinstance(self.stated_instruction, str) or "{options}" not in (
            self.stated_instruction
        ):
            raise _fail(
                where,
                "stated_instruction must name the options with {options} (the cell's answer "
                f"labels are put there), got {self.stated_instruction!r}",
            )
        for name in ("reply_tokens", "own_words_max_passes", "stated_tokens"):
            v = getattr(self, name)
            if not (_is_int(v) and v >= 1):
                raise _fail(where, f"{name} must be an integer >= 1, got {v!r}")
            put(name, int(v))
        t, p, tol = self.own_words_temperature, self.own_words_top_p, self.own_words_tol
        if not (_is_real(t) and math.isfinite(t) and t > 0):
            raise _fail(where, f"own_words_temperature must be a finite number > 0, got {t!r}")
        if not (_is_real(p) and 0 < p <= 1):
            raise _fail(where, f"own_words_top_p must be a number in (0, 1], got {p!r}")
        if not (_is_real(tol) and math.isfinite(tol) and tol >= 0):
            raise _fail(
                where, f"own_words_tol must be a finite number >= 0 (0: exact), got {tol!r}"
            )
        put("own_words_temperature", float(t))
        put("own_words_top_p", float(p))
        put("own_words_tol", float(tol))

    def elicitation_settings(self, level: str) -> dict[str, Any]:
        """The options an elicitation level reads (what enters its cells' keys).

        Parameters
        ----------
        level : str
            An elicitation level (:data:`xlikert.design.elicitation.ELICITATIONS`).

        Returns
        -------
        dict of str to Any
            The option names and values the level reads (none for ``first_token``).

        Examples
        --------
        >>> CollectOptions().elicitation_settings("greedy")
        {'reply_tokens': 32}
        >>> CollectOptions().elicitation_settings("first_token")
        {}
        """
        if level == "prefix":
            return {"answer_prefix": self.answer_prefix}
        # the default parsing rule is left out: the keys of cells read before the option
        parse = {} if self.answer_parse == "first_valid" else {"answer_parse": self.answer_parse}
        if level == "greedy":
            return {"reply_tokens": self.reply_tokens, **parse}
        if level == "stated":
            return {"stated_instruction": self.stated_instruction,
                    "stated_tokens": self.stated_tokens}  # fmt: skip
        if level == "own_words":
            skip = ("answer_prefix", "answer_parse", "stated_instruction", "stated_tokens")
            return {**{k: getattr(self, k) for k in ELICITATION_OPTIONS if k not in skip}, **parse}
        return {}

    def _checked_labels(self, where: str) -> tuple[str, ...]:
        """The answer labels: distinct non-empty strings, one per scale value and option,
        ``""`` where the item has no such point or option."""
        labels = self.answer_labels
        if (
            labels is None
            or isinstance(labels, str | bytes)
            or not all(isinstance(x, str) for x in labels)
        ):
            raise _fail(where, f"answer_labels must be a list of strings, got {labels!r}")
        labels = tuple(labels)
        given = [x for x in labels if x]
        n_scores = len(labels) - len(self.nonsubstantive)
        bad = [x for x in given if not x.strip() or x != x.strip()]
        dup = sorted({x for x in given if given.count(x) > 1})
        wrong = self.scale is not None and n_scores != len(self.scale)
        few = sum(1 for x in labels[:n_scores] if x) < 2
        if bad or dup or wrong or few:
            options = f" and the options {list(self.nonsubstantive)}" if self.nonsubstantive else ""
            why = next(
                text
                for flag, text in (
                    (bad, f"blank or padded labels {bad}"),
                    (dup, f"repeated labels {dup}"),
                    (wrong, f"{len(labels)} labels for the {len(self.scale or ())} scale "
                            f"values {list(self.scale or ())}{options}"),
                    (few, "fewer than two points labelled"),
                )
                if flag
            )  # fmt: skip
            raise LabelMappingError(
                (f"{where}: " if where else "")
                + f"answer_labels {list(labels)} are not a bijection onto the scale: {why}"
            )
        return labels

    @property
    def labels_by_score(self) -> dict[int, str] | None:
        """Score -> answer label of the points answered (None: the digits of every point).

        Raises
        ------
        CollectionError
            Answer labels are set but the scale is not known yet.

        Examples
        --------
        >>> CollectOptions(scale=(1, 2, 3), answer_labels=("A", "B", "C")).labels_by_score
        {1: 'A', 2: 'B', 3: 'C'}
        >>> CollectOptions(scale=(1, 2, 3), answer_labels=("", "B", "C")).labels_by_score
        {2: 'B', 3: 'C'}
        >>> CollectOptions().labels_by_score is None
        True
        """
        if self.answer_labels is None:
            return None
        scale = self.known_scale
        return {y: x for y, x in zip(scale, self.answer_labels, strict=False) if x}

    @property
    def numeral_scripts(self) -> tuple[str, ...] | None:
        """The scripts the numeral rule counts for these labels (None: every script).

        Examples
        --------
        >>> CollectOptions(numerals="shown").numeral_scripts
        ('ascii',)
        >>> CollectOptions(scale=(1, 2), answer_labels=("١", "٢"), numerals="shown").numeral_scripts
        ('arabic-indic',)
        >>> CollectOptions().numeral_scripts is None
        True
        """
        return rule_scripts(self.numerals, self.labels_by_score)

    @property
    def nonsubstantive_labels(self) -> tuple[str, ...]:
        """The answer label of each non-substantive option (``""``: not offered).

        Examples
        --------
        >>> opts = CollectOptions(scale=(1, 2), nonsubstantive=("Don't know", "Refused"))
        >>> opts.replace(answer_labels=("1", "2", "8", "")).nonsubstantive_labels
        ('8', '')
        """
        if self.answer_labels is None:
            return ("",) * len(self.nonsubstantive)
        return self.answer_labels[len(self.answer_labels) - len(self.nonsubstantive) :]

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """The option names, in declaration order.

        Returns
        -------
        tuple of str
            The names :meth:`from_mapping`, :meth:`replace` and
            :func:`~xlikert.collect.collect` take.

        Examples
        --------
        >>> CollectOptions.fields()[:4]
        ('scale', 'top_k', 'temperatures', 'top_ps')
        """
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_mapping(
        cls,
        mapping: Mapping[str, Any] | None,
        *,
        where: str = "",
        base: CollectOptions | None = None,
    ) -> CollectOptions:
        """Options from a mapping of field names (an experiment's ``[collect]`` table).

        Parameters
        ----------
        mapping : mapping of str to Any or None
            Field name -> value; None or empty gives ``base`` (or the defaults).
        where : str, default ""
            What the mapping is, for error messages (e.g. ``"exp.toml [collect]"``).
        base : CollectOptions, optional
            Options the mapping overrides (default: the defaults).

        Returns
        -------
        CollectOptions
            The options, validated.

        Raises
        ------
        CollectionError
            An unknown key (naming it and the valid keys) or a bad value, prefixed
            by ``where``.

        Examples
        --------
        >>> CollectOptions.from_mapping({"top_ps": [0.9, 1.0]}, where="exp.toml [collect]").top_ps
        (0.9, 1.0)
        >>> CollectOptions.from_mapping({"top_p": 0.9}, where="exp.toml [collect]")
        Traceback (most recent call last):
        ...
        xlikert.core.errors.CollectionError: exp.toml [collect]: unknown key(s) ['top_p'] (did you mean 'top_ps'?); valid keys: scale, top_k, temperatures, top_ps, split_space, prefix_cache, batch_size, chunk_size, device, dtype, device_map, trust_remote_code, answer_labels, nonsubstantive, tol, max_passes, numerals, max_answer_positions, answer_tol, answer_max_passes, answer_prefix, reply_tokens, answer_parse, own_words_temperature, own_words_top_p, own_words_tol, own_words_max_passes, stated_instruction, stated_tokens, executor, ray_address, replicas
        """
        mapping = dict(mapping or {})
        if not all(isinstance(k, str) for k in mapping):
            raise _fail(where, f"keys must be option names, got {list(mapping)}")
        valid = cls.fields()
        unknown = [k for k in mapping if k not in valid]
        if unknown:
            close = difflib.get_close_matches(unknown[0], valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise _fail(where, f"unknown key(s) {unknown}{hint}; valid keys: {', '.join(valid)}")
        start = base if base is not None else cls()
        values = {**{k: getattr(start, k) for k in valid}, **mapping}
        out = object.__new__(cls)
        for k, v in values.items():
            object.__setattr__(out, k, v)
        out._validate(where)
        return out

    def replace(self, where: str = "", **changes: Any) -> CollectOptions:
        """A copy with ``changes`` (option names), validated like :meth:`from_mapping`.

        Parameters
        ----------
        where : str, default ""
            What the changes are, for error messages (e.g. ``"--top-k"``).
        **changes : Any
            Option name -> new value.

        Returns
        -------
        CollectOptions
            A new instance; ``self`` is unchanged.

        Raises
        ------
        CollectionError
            An unknown name or a bad value, prefixed by ``where``.

        Examples
        --------
        >>> CollectOptions().replace(top_k=5).top_k
        5
        >>> CollectOptions().replace(where="--top-k", top_k=0)
        Traceback (most recent call last):
        ...
        xlikert.core.errors.CollectionError: --top-k: top_k must be an integer >= 1, got 0
        """
        return type(self).from_mapping(changes, where=where, base=self)

    @property
    def known_scale(self) -> tuple[int, ...]:
        """:attr:`scale`, known: what a model reads with once it is open.

        Raises
        ------
        CollectionError
            The scale is not known yet (None: ``collect()`` takes it from the prompts).

        Examples
        --------
        >>> CollectOptions(scale=(1, 2, 3)).known_scale
        (1, 2, 3)
        """
        if self.scale is None:
            raise CollectionError("options have no scale yet (collect() takes it from the prompts)")
        return self.scale

    @property
    def sizes(self) -> dict[str, int]:
        """Lengths of the per-cell dims of a :class:`~xlikert.collect.record.UnitResult`.

        Raises
        ------
        CollectionError
            The scale is not known yet.

        Examples
        --------
        >>> CollectOptions(scale=(1, 2, 3), top_k=5, top_ps=(0.9, 1.0)).sizes
        {'score': 3, 'rank': 5, 'temperature': 4, 'top_p': 2, 'option': 0, 'script': 66}
        """
        return {
            "score": len(self.known_scale),
            "rank": self.top_k,
            "temperature": len(self.temperatures),
            "top_p": len(self.top_ps),
            "option": len(self.nonsubstantive),
            "script": len(all_scripts()),
        }

    @property
    def coords(self) -> dict[str, Any]:
        """Coordinates of the per-cell dims of the results Dataset (and ``option``).

        ``option`` is there when the run has non-substantive options.

        Raises
        ------
        CollectionError
            The scale is not known yet.

        Examples
        --------
        >>> CollectOptions(scale=(1, 2, 3), top_k=2, temperatures=(1.0,)).coords["rank"]
        array([1, 2])
        >>> CollectOptions(scale=(1, 2), nonsubstantive=("Don't know",)).coords["option"]
        array(["Don't know"], dtype='<U10')
        """
        out = {
            "score": np.asarray(self.known_scale, dtype=np.int64),
            "rank": np.arange(1, self.top_k + 1),
            "temperature": np.asarray(self.temperatures),
            "top_p": np.asarray(self.top_ps),
            "script": np.asarray(all_scripts(), dtype=str),
        }
        if self.nonsubstantive:
            out["option"] = np.asarray(self.nonsubstantive, dtype=str)
        return out

    def fingerprinted(self) -> dict[str, Any]:
        """The settings that change the numbers (not the batch size or the device).

        The run's fingerprint adds ``chunk_size`` (it fixes the units) and the scale.

        Returns
        -------
        dict of str to Any
            ``top_k``, ``temperatures``, ``top_ps``, ``dtype``, ``prefix_cache``,
            ``split_space``, ``numerals`` and, where set, ``answer_labels`` and ``nonsubstantive``
            (JSON-ready values).

        Examples
        --------
        >>> sorted(CollectOptions(batch_size=8).fingerprinted())
        ['dtype', 'numerals', 'prefix_cache', 'split_space', 'temperatures', 'top_k', 'top_ps']
        """
        out = {
            "top_k": self.top_k,
            "temperatures": list(self.temperatures),
            "top_ps": list(self.top_ps),
            "dtype": self.dtype,
            "prefix_cache": self.prefix_cache,
            "split_space": self.split_space,
            "numerals": self.numerals,
        }
        if self.answer_labels is not None:
            out["answer_labels"] = list(self.answer_labels)
        if self.nonsubstantive:
            out["nonsubstantive"] = list(self.nonsubstantive)
        return out
