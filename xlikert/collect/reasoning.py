"""Reasoning mode: sample the thought, read the answer after it exactly.

A model entry with ``reasoning = { traces = 8, max_new_tokens = 256, seed = 0 }``
thinks before it answers. For every (condition, item) the backend

1. renders the prompt for thinking (:class:`ReasoningFormat`): with a *thinking
   chat template* (one that takes ``enable_thinking`` or writes an end-of-thinking
   tag such as ``</think>``) the template's own generation prompt with
   ``enable_thinking=True``; for any other model the *chain-of-thought framing*:
   :data:`COT_INSTRUCTION` appended to the user message (on a new paragraph);
2. samples ``traces`` thoughts, each from its own random stream seeded by
   :func:`trace_seed` (the entry's ``seed``, the exact prompt text and the trace
   index), token by token at the entry's ``temperature`` and ``top_p``
   (:func:`sample_tokens`, the nucleus rule of
   :data:`xlikert.kernels.readout.DECODING_TIE_RULE`), until the model writes the
   *end marker* (``</think>``, or ``Answer:`` in the chain-of-thought framing,
   whose turn starts with :data:`COT_PREFILL`),
   ends its turn, or reaches ``max_new_tokens`` (the trace is then *truncated*);
3. closes each trace (:meth:`ReasoningFormat.closing`) and reads the exact
   next-token PMF over the scale after it, with the answer rule of every backend
   (:class:`~xlikert.collect.answers.sequences.AnswerSequences`);
4. combines the traces (:func:`_combine_traces`).

Only the thoughts are sampled: given a trace, its answer PMF is exact. The mean of
these conditional PMFs over M traces is an unbiased estimate of the answer
distribution with thinking (Rao--Blackwell); its Monte Carlo error comes from the
traces alone and is never larger than that of sampling the answers as well.
:data:`REASONING_RULE` states what the results file holds.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.codecs import decode_text, encode_text, encode_token_ids
from ..core.errors import CollectionError
from ..kernels.readout import logsumexp, nucleus_logprobs
from .foreign import Tokenizer
from .templates import PromptTemplate

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "COT_ANSWER_PREFIX",
    "COT_INSTRUCTION",
    "COT_PREFILL",
    "REASONING_DEFAULTS",
    "REASONING_RULE",
    "THINKING_SEPARATOR",
    "ReasoningFormat",
    "check_reasoning",
    "reasoning_format",
    "reasoning_provenance",
    "sample_tokens",
    "store_traces",
    "trace_seed",
    "trace_texts",
]

#: Settings of a ``reasoning`` table, with their defaults.
REASONING_DEFAULTS: Mapping[str, Any] = {
    "traces": 8,
    "max_new_tokens": 256,
    "seed": 0,
    "temperature": 1.0,
    "top_p": 1.0,
    "framing": "auto",
    "instruction": None,
    "prefill": None,
}

_FRAMINGS = ("auto", "thinking", "cot")

#: Appended to the user message (after a blank line) in the chain-of-thought framing.
#: (No placeholder such as "Answer: N": small models copy it.)
COT_INSTRUCTION = (
    "Before you answer, think it through step by step. Then give your answer on the "
    "last line as 'Answer: ' followed by your rating."
)
#: The start of the model's turn in the chain-of-thought framing (zero-shot
#: chain of thought, Kojima et al. 2022): without it, small instruction models
#: write the answer line first and reason after it, if at all.
COT_PREFILL = "Let's think step by step."
#: The answer prefix of the chain-of-thought framing: the trace ends when the model
#: writes it; a trace that does not is closed with a newline and it.
COT_ANSWER_PREFIX = "Answer:"
#: What a thinking template puts between the end-of-thinking tag and the answer when
#: the template does not show it (``enable_thinking=False`` renders no empty thought).
THINKING_SEPARATOR = "\n\n"
_THINK_TAG = re.compile(r"</(think|thinking|thought|reasoning)>")

#: What a reasoning results file holds; stored in its attrs.
REASONING_RULE = (
    "reasoning mode (models with ds.likert.attrs['models'][name]['reasoning']): "
    "for each (condition, item) "
    "M traces are sampled from the model (its thinking chat template, or the chain-of-thought "
    "framing), each closed with the answer prefix; trace_pmf is the exact next-token item PMF "
    "over the valid answers after prompt + trace + closing (renormalised), trace_valid_mass its "
    "valid mass. pmf = mean over the traces of trace_pmf (an unbiased estimate of "
    "E_trace[P(y | prompt, trace, valid)]), pmf_se = its Monte Carlo standard error "
    "(sample SD over traces / sqrt(M); NaN for M = 1); valid_mass = mean of trace_valid_mass; "
    "decoding_pmf / decoding_valid_mass = the same means of the answer token's decoding grid "
    "(the trace itself is sampled at the entry's temperature and top_p); topk_* are empty. "
    "The ratio estimate of P(y | prompt, valid) is "
    "(trace_pmf * trace_valid_mass).mean('trace') / trace_valid_mass.mean('trace')"
)


# ---------------------------------------------------------------------------- the entry
def check_reasoning(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """Validate and complete the ``reasoning`` table of a model entry.

    Parameters
    ----------
    spec
        A model entry (``name``, ``source``, ...).

    Returns
    -------
    dict or None
        Every key of :data:`REASONING_DEFAULTS` (defaults filled in, numbers
        normalised), or None when the entry has no ``reasoning``. This is what
        goes into the run's fingerprint.

    Raises
    ------
    CollectionError
        Not a table, an unknown key, ``traces`` or ``max_new_tokens`` not a
        positive integer, ``seed`` not an integer, ``temperature`` not > 0,
        ``top_p`` not in (0, 1], an unknown ``framing``, an empty ``instruction``.

    Examples
    --------
    >>> check_reasoning({"name": "m", "reasoning": {"traces": 4}})["max_new_tokens"]
    256
    >>> check_reasoning({"name": "m", "reasoning": {"trace": 4}})
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: model 'm': unknown key(s) ['trace'] in reasoning; known: ['framing', 'instruction', 'max_new_tokens', 'prefill', 'seed', 'temperature', 'top_p', 'traces']
    """
    raw = spec.get("reasoning")
    if raw is None:
        return None
    where = f"model {spec.get('name')!r}"
    if not isinstance(raw, Mapping):
        raise CollectionError(
            f"{where}: reasoning must be a table such as "
            f"{{ traces = 8, max_new_tokens = 256, seed = 0 }}, got {raw!r}"
        )
    unknown = sorted(set(raw) - set(REASONING_DEFAULTS))
    if unknown:
        raise CollectionError(
            f"{where}: unknown key(s) {unknown} in reasoning; known: {sorted(REASONING_DEFAULTS)}"
        )
    out = {**REASONING_DEFAULTS, **raw}

    def whole(key: str, low: int | None) -> int:
        v = out[key]
        if (
            isinstance(v, bool)
            or not isinstance(v, int | np.integer)
            or (low is not None and v < low)
        ):
            want = "an integer" if low is None else f"an integer >= {low}"
            raise CollectionError(f"{where}: reasoning.{key} must be {want}, got {v!r}")
        return int(v)

    out["traces"] = whole("traces", 1)
    out["max_new_tokens"] = whole("max_new_tokens", 1)
    out["seed"] = whole("seed", None)
    for key, ok, want in (
        ("temperature", lambda x: x > 0, "a number > 0"),
        ("top_p", lambda x: 0 < x <= 1, "a number in (0, 1]"),
    ):
        v = out[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise CollectionError(f"{where}: reasoning.{key} must be {want}, got {v!r}")
        if not ok(float(v)):
            raise CollectionError(f"{where}: reasoning.{key} must be {want}, got {v!r}")
        out[key] = float(v)
    if out["framing"] not in _FRAMINGS:
        raise CollectionError(
            f"{where}: reasoning.framing must be one of {list(_FRAMINGS)}, got {out['framing']!r}"
        )
    ins = out["instruction"]
    if ins is not None and not (isinstance(ins, str) and ins.strip()):
        raise CollectionError(f"{where}: reasoning.instruction must be a non-empty string")
    if out["prefill"] is not None and not isinstance(out["prefill"], str):
        raise CollectionError(
            f"{where}: reasoning.prefill must be a string ('' for none), got {out['prefill']!r}"
        )
    return out


def trace_seed(seed: int, prompt: str, trace: int) -> int:
    """The seed of one trace: a hash of the entry's seed, the exact prompt text and the index.

    The same (seed, prompt, trace) always gives the same stream, whatever the
    unit, batch or session, so a resumed run samples the same traces, and trace
    ``k`` of a run with more traces is (up to float round-off of the batch)
    trace ``k`` of a run with fewer.

    Examples
    --------
    >>> trace_seed(0, "prompt", 1) == trace_seed(0, "prompt", 1) != trace_seed(0, "prompt", 2)
    True
    >>> 0 <= trace_seed(0, "prompt", 1) < 2**63
    True
    """
    h = hashlib.sha256(f"xlikert-trace\0{int(seed)}\0{int(trace)}\0{prompt}".encode())
    return int.from_bytes(h.digest()[:8], "big") & (2**63 - 1)


# ---------------------------------------------------------------------------- the framing
@dataclass(frozen=True)
class ReasoningFormat:
    """How one model thinks and is closed: framing, end marker and closing texts.

    Attributes
    ----------
    framing
        ``"thinking"`` (the chat template's own thinking) or ``"cot"``.
    marker
        The text that ends a thought when the model writes it (``"</think>"``,
        :data:`COT_ANSWER_PREFIX`).
    after_marker
        Appended when the model wrote the marker (the template's separator
        before the answer; empty in the chain-of-thought framing).
    forced
        Appended when the model did not (it ended its turn or was cut at
        ``max_new_tokens``): a newline, the marker and ``after_marker``.
    instruction
        The chain-of-thought instruction appended to the user message (None for
        a thinking template).
    prefill
        Text put at the start of the model's turn, after the rendered prompt
        (empty for a thinking template).
    """

    framing: str
    marker: str
    after_marker: str
    forced: str
    instruction: str | None = None
    prefill: str = ""

    def closing(self, wrote_marker: bool) -> str:
        """The text appended to a trace before the answer is read.

        Examples
        --------
        >>> f = ReasoningFormat("cot", "Answer:", "", "\\nAnswer:", COT_INSTRUCTION)
        >>> f.closing(True), f.closing(False)
        ('', '\\nAnswer:')
        """
        return self.after_marker if wrote_marker else self.forced

    def user_text(self, user: str) -> str:
        """The user message sent: with the chain-of-thought instruction, or as it is."""
        return f"{user}\n\n{self.instruction}" if self.instruction else user

    def prompt(self, template: PromptTemplate, system: str, user: str) -> str:
        """The exact text the model continues with its thought.

        ``template`` is the model's
        :class:`~xlikert.collect.templates.PromptTemplate`: the thinking template
        with ``enable_thinking=True``, or the chain-of-thought framing (the
        instruction in the user message, thinking switched off, the prefill after
        the generation prompt).
        """
        thinking = self.framing == "thinking"
        text = template.render(system, self.user_text(user), thinking=thinking, reasoning=True)
        return text + self.prefill

    def closing_ids(self, tokenizer: Tokenizer) -> dict[bool, list[int]]:
        """Token ids of :meth:`closing`, for ``wrote_marker`` True and False."""
        return {
            wrote: list(tokenizer(self.closing(wrote), add_special_tokens=False)["input_ids"])
            for wrote in (True, False)
        }

    def describe(self) -> dict[str, Any]:
        """The record stored in ``ds.likert.attrs['models'][name]['reasoning_format']``."""
        d = {
            "framing": self.framing,
            "end_marker": self.marker,
            "closing_after_marker": self.after_marker,
            "closing_forced": self.forced,
        }
        if self.instruction:
            d["instruction"] = self.instruction
        if self.prefill:
            d["prefill"] = self.prefill
        return d


def _thinking_template(tokenizer: Tokenizer) -> tuple[str, str] | None:
    """(end marker, separator) of a thinking chat template, or None."""
    source = tokenizer.chat_template
    if not isinstance(source, str):
        return None
    tags = _THINK_TAG.findall(source)
    if not tags and "enable_thinking" not in source:
        return None
    msgs = [{"role": "user", "content": "x"}]
    from jinja2 import TemplateError

    try:
        on = tokenizer.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=True, enable_thinking=True
        )
        off = tokenizer.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False
        )
    except TemplateError:  # a template that needs a system turn, ...: read the tag only
        on = off = ""
    extra = off[len(on) :] if off.startswith(on) else ""
    found = _THINK_TAG.search(extra) or _THINK_TAG.search(source)
    if found is None:
        return None
    marker = found.group(0)
    sep = extra.split(marker, 1)[1] if marker in extra else THINKING_SEPARATOR
    return marker, (sep or THINKING_SEPARATOR)


def reasoning_format(tokenizer: Tokenizer, config: Mapping[str, Any], name: str) -> ReasoningFormat:
    """The :class:`ReasoningFormat` of a model for a checked ``reasoning`` table.

    ``framing = "auto"`` uses the chat template's thinking when it has one (it
    takes ``enable_thinking`` or writes a ``</think>``-like tag), else the
    chain-of-thought framing. The end marker is the tag; the separator after it
    is what the template renders after the tag for an empty thought
    (``enable_thinking=False``), else :data:`THINKING_SEPARATOR`.

    Raises
    ------
    CollectionError
        ``framing = "thinking"`` for a tokenizer without a thinking template.

    Examples
    --------
    >>> fmt = reasoning_format(qwen3_tokenizer, {"framing": "auto"}, "q")  # doctest: +SKIP
    >>> fmt.marker, fmt.after_marker  # doctest: +SKIP
    ('</think>', '\\n\\n')
    """
    framing = config.get("framing", "auto")
    think = _thinking_template(tokenizer) if framing in ("auto", "thinking") else None
    if framing == "thinking" and think is None:
        raise CollectionError(
            f"model {name!r}: reasoning.framing = 'thinking' but the tokenizer's chat template "
            "has no thinking (no enable_thinking switch and no </think>-like tag); use "
            "framing = 'cot' (the chain-of-thought framing)"
        )
    if think is not None:
        marker, sep = think
        return ReasoningFormat("thinking", marker, sep, "\n" + marker + sep)
    instruction = config.get("instruction") or COT_INSTRUCTION
    prefill = COT_PREFILL if config.get("prefill") is None else config["prefill"]
    return ReasoningFormat(
        "cot", COT_ANSWER_PREFIX, "", "\n" + COT_ANSWER_PREFIX, instruction, prefill
    )


def reasoning_provenance(
    config: Mapping[str, Any], fmt: ReasoningFormat, sampler: str
) -> dict[str, Any]:
    """The provenance keys of a model in reasoning mode: its settings, format and sampler."""
    return {
        "reasoning": dict(config),
        "reasoning_format": fmt.describe(),
        "reasoning_sampler": sampler,
    }


# ---------------------------------------------------------------------------- sampling
def sample_tokens(
    logits: np.ndarray, uniforms: np.ndarray, temperature: float = 1.0, top_p: float = 1.0
) -> np.ndarray:
    """Draw one token per row by inverting the CDF of the sampler's distribution.

    The distribution is :func:`xlikert.kernels.readout.nucleus_logprobs` over the full
    vocabulary (:data:`~xlikert.kernels.readout.DECODING_TIE_RULE`), in float64.

    Parameters
    ----------
    logits : np.ndarray
        ``(B, V)`` next-token logits.
    uniforms : np.ndarray
        ``(B,)`` numbers in [0, 1), one per row (from the row's own stream).
    temperature, top_p
        The sampler.

    Returns
    -------
    np.ndarray
        ``(B,)`` token ids: the first token whose cumulative probability exceeds
        the row's uniform.

    Examples
    --------
    >>> z = np.log([[0.5, 0.3, 0.2]])
    >>> sample_tokens(z, np.array([0.6])), sample_tokens(z, np.array([0.9]), top_p=0.8)
    (array([1]), array([1]))
    """
    z = np.asarray(logits, dtype=np.float64)
    V = z.shape[-1]
    if top_p >= 1:  # the same numbers as nucleus_logprobs' top_p = 1 branch, fewer passes
        lp = z / temperature - logsumexp(z / temperature)
    else:
        lp = nucleus_logprobs(z, np.arange(V), [temperature], [top_p])[:, 0, 0, :]
    c = np.cumsum(np.exp(lp), axis=-1)
    u = np.asarray(uniforms, dtype=np.float64) * c[:, -1]
    # the number of cumulative values <= u (c is non-decreasing): a binary search per row
    idx = np.array([np.searchsorted(c[b], u[b], side="right") for b in range(len(c))])
    # never past the last token with positive probability (round-off at the top)
    last = V - 1 - np.argmax(np.isfinite(lp)[:, ::-1], axis=-1)
    return np.minimum(idx, last).astype(np.int64)


# ---------------------------------------------------------------------------- results
def _combine_traces(pmf: np.ndarray, valid_mass: np.ndarray, *, axis: int = 1) -> dict[str, Any]:
    """``pmf``, ``pmf_se`` and ``valid_mass`` of a cell from its traces.

    Parameters
    ----------
    pmf : np.ndarray
        Renormalised item PMFs after each trace, traces along ``axis``, scores last.
    valid_mass : np.ndarray
        Valid mass after each trace (``pmf.shape`` without the score axis).
    axis : int
        The trace axis.

    Returns
    -------
    dict
        ``pmf`` (mean over traces), ``pmf_se`` (sample SD over traces with
        ``ddof=1``, divided by sqrt(M); NaN for one trace) and ``valid_mass``
        (mean over traces).

    Examples
    --------
    >>> out = _combine_traces(np.array([[[0.2, 0.8], [0.6, 0.4]]]), np.array([[1.0, 0.5]]))
    >>> out["pmf"], out["pmf_se"], out["valid_mass"]
    (array([[0.4, 0.6]]), array([[0.2, 0.2]]), array([0.75]))
    """
    pmf = np.asarray(pmf, dtype=np.float64)
    m = pmf.shape[axis]
    mean = pmf.mean(axis)
    se = pmf.std(axis, ddof=1) / math.sqrt(m) if m > 1 else np.full(mean.shape, np.nan)
    return {"pmf": mean, "pmf_se": se, "valid_mass": np.asarray(valid_mass).mean(axis)}


def store_traces(
    res: Any,
    row: int,
    read: Mapping[str, np.ndarray],
    traces: list[list[int]],
    ends: list[str],
    seeds: list[int],
    texts: list[str],
    closing: Mapping[bool, list[int]],
) -> None:
    """Write one prompt's traces and the reads after them into row ``row`` of a unit.

    Parameters
    ----------
    res : UnitResult
        The unit (with :data:`~xlikert.core.schema.TRACE_VARIABLES`).
    read
        ``pmf``, ``valid_mass``, ``decoding_pmf``, ``decoding_valid_mass`` (and
        ``nonsubstantive_mass``, when the item offers options) after each closed
        trace (traces first).
    traces, ends, seeds, texts
        Per trace: its generated token ids (an ending end-of-turn token dropped),
        how it ended (``"marker"``, ``"eos"``, ``"length"``), its seed, its text.
    closing
        :meth:`ReasoningFormat.closing_ids`: the ids appended after a trace that
        wrote the end marker (True) or did not (False).
    """

    comb = _combine_traces(read["pmf"], read["valid_mass"], axis=0)
    d = res.data
    d["pmf"][row], d["pmf_se"][row], d["valid_mass"][row] = (
        comb["pmf"], comb["pmf_se"], comb["valid_mass"]
    )  # fmt: skip
    d["decoding_pmf"][row] = read["decoding_pmf"].mean(0)
    d["decoding_valid_mass"][row] = read["decoding_valid_mass"].mean(0)
    if "nonsubstantive_mass" in read and "nonsubstantive_mass" in d:
        d["nonsubstantive_mass"][row] = read["nonsubstantive_mass"].mean(0)
    d["trace_pmf"][row] = read["pmf"]
    d["trace_valid_mass"][row] = read["valid_mass"]
    d["trace_truncated"][row] = [e == "length" for e in ends]
    d["trace_length"][row] = [len(t) + (e == "eos") for t, e in zip(traces, ends, strict=True)]
    d["trace_seed"][row] = seeds
    d["trace_text"][row] = [encode_text(t) for t in texts]
    d["trace_token_ids"][row] = [encode_token_ids(t) for t in traces]
    d["trace_closing_ids"][row] = [encode_token_ids(closing[e == "marker"]) for e in ends]


def trace_texts(ds: object) -> xr.DataArray:
    """The traces' text of a results Dataset, decompressed (same dims as ``trace_text``).

    Parameters
    ----------
    ds : xarray.Dataset
        Results of a reasoning run (a model entry with ``reasoning = {...}``): a
        ``trace_text`` variable, compressed by :func:`xlikert.core.codecs.encode_text`.

    Returns
    -------
    xarray.DataArray
        ``trace_text`` with each text decompressed (object dtype; ``""`` where a
        cell has no trace), coords and attrs kept.

    Raises
    ------
    CollectionError
        ``ds`` is not a Dataset, or holds no ``trace_text``.

    Examples
    --------
    >>> import xarray as xr
    >>> from xlikert.core.codecs import encode_text
    >>> ds = xr.Dataset({"trace_text": ("trace", [encode_text("I think 5."), ""])})
    >>> trace_texts(ds).values.tolist()
    ['I think 5.', '']

    A reasoning run's file:

    >>> ds = xl.open_results("reasoning.nc")  # doctest: +SKIP
    >>> print(trace_texts(ds).sel(model="qwen-cot", target="USA", item="1", trace=0).item())  # doctest: +SKIP
    """
    import xarray as xr

    if not isinstance(ds, xr.Dataset) or "trace_text" not in ds:
        raise CollectionError("trace_texts needs a results Dataset with a 'trace_text' variable")
    arr = np.vectorize(decode_text, otypes=[object])(ds["trace_text"].values)
    return ds["trace_text"].copy(data=arr)
