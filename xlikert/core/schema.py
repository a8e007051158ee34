"""The results schema: every variable a results file holds, with its dims, fill value
and codec, written once.

A results file (the docs' data-model page) is a Dataset whose variables have dims
``(model, *factors, item, *per_cell_dims)``. The per-cell dims and everything
else about each variable are in one table per group:

* :data:`VARIABLES` -- always present (``pmf``, ``valid_mass``, the prompt and its
  token ids, the top-k tokens, the decoding grid);
* :data:`BOUND_VARIABLES` -- certified intervals, when some cell was only bounded
  (a top-k server);
* :data:`NONSUBSTANTIVE_VARIABLES` -- the mass of each non-substantive answer ("Don't
  know"), on an ``option`` dim, when some item offers one (and
  :data:`NONSUBSTANTIVE_BOUND_VARIABLES`, its certified intervals);
* :data:`TRACE_VARIABLES` -- reasoning mode, on a ``trace`` dim;
* :data:`PROMPT_VARIABLES` -- the prompts Dataset the design writes and a shard's
  ``computed`` mask;
* :data:`ITEM_SCALE_VARIABLES` -- each item's own scale (support, nominal flag, answer and
  point labels, non-substantive options), when the items have their own;
* :data:`CELL_VARIABLES` -- each cell's identity key and where its numbers came
  from (:mod:`xlikert.collect.run.identity`), written by the runner.

Every other list of result variables (:data:`xlikert.core.dims.RESULT_VARIABLES`, the
records the backends fill, the merge of shard files) is derived from these tables.
Text that holds token ids or trace texts is compressed by the codecs of
:mod:`xlikert.core.codecs` (:func:`~xlikert.core.codecs.encode_token_ids`,
:func:`~xlikert.core.codecs.encode_text`), so a netCDF file stays small and
plain ``xr.open_dataset`` reads it.

Examples
--------
>>> from xlikert.core import schema
>>> schema.VARIABLES["pmf"].dims
('score',)
>>> "trace_pmf" in schema.RESULT_VARIABLES
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "BOUND_VARIABLES",
    "CELL_VARIABLES",
    "CONTEXT_VARIABLES",
    "ELICITATION_SETTING_ATTRS",
    "ELICITATION_VARIABLES",
    "INSTRUMENT_LANGUAGES_ATTR",
    "ITEM_SCALE_VARIABLES",
    "LANGUAGE_FACTOR_ATTR",
    "NONSUBSTANTIVE_BOUND_VARIABLES",
    "NONSUBSTANTIVE_VARIABLES",
    "N_CONDITIONS_ATTR",
    "PROMPT_VARIABLES",
    "RESPONDENT_DIMS_ATTR",
    "RESULT_VARIABLES",
    "SAMPLED_VARIABLES",
    "SCALE_LABELS_BY_LANGUAGE_ATTR",
    "SCRIPT_BOUND_VARIABLES",
    "SEQUENTIAL_MAX_PASSES_ATTR",
    "SEQUENTIAL_TOL_ATTR",
    "TRACE_VARIABLES",
    "VARIABLES",
    "WALK_VARIABLES",
    "Variable",
    "variable_table",
]


@dataclass(frozen=True)
class Variable:
    """A per-cell result variable: its dims after the cell dims, fill value, attrs and dtype."""

    dims: tuple[str, ...]
    fill: Any
    attrs: Mapping[str, str] = field(default_factory=dict)
    dtype: str = "float64"

    @property
    def is_text(self) -> bool:
        """Whether the variable holds text (its fill value is a string).

        Returns
        -------
        bool
            True for text variables (stored as object arrays of str in memory).

        Examples
        --------
        >>> VARIABLES["prompt_text"].is_text, VARIABLES["pmf"].is_text
        (True, False)
        """
        return isinstance(self.fill, str)

    def full(self, shape: tuple[int, ...]) -> np.ndarray:
        """An array of ``shape`` filled with the fill value.

        Parameters
        ----------
        shape : tuple of int
            The array's shape: the cells (or prompts), then the variable's :attr:`dims`.

        Returns
        -------
        numpy.ndarray
            Of the variable's ``dtype``, or of dtype object for text.

        Examples
        --------
        >>> VARIABLES["valid_mass"].full((2,))
        array([nan, nan])
        >>> VARIABLES["topk_token"].full((1, 2))
        array([['', '']], dtype=object)
        """
        return np.full(shape, self.fill, dtype=object if self.is_text else self.dtype)


_NAN = float("nan")

#: Variables of every unit, in the order of the results file.
VARIABLES: dict[str, Variable] = {
    "pmf": Variable(
        ("score",),
        _NAN,
        {
            "long_name": "item PMF over valid answers (renormalised)",
            "description": "sum over each score's valid answers of P_raw, divided by valid_mass",
        },
    ),
    "valid_mass": Variable(
        (),
        _NAN,
        {
            "long_name": "valid mass",
            "description": "sum of P_raw over valid answers; 1 - failure rate",
        },
    ),
    "prompt_text": Variable(
        (), "", {"description": "exact text sent to the model (after templating)"}
    ),
    "prompt_token_ids": Variable(
        (),
        "",
        {
            "description": "the token ids the model read (the prompt_text as the backend "
            "tokenised it), compressed: 'int32+zlib+base64:' + base64(zlib(int32 "
            "little-endian)); read with xlikert.collect.read_sequence(ds, ...); empty where "
            "the backend sent text, not ids (OpenAI-compatible servers)"
        },
    ),
    "topk_token": Variable(
        ("rank",),
        "",
        {
            "description": "the tokens of highest probability, as text: each token's bytes "
            "read as UTF-8, a token that holds an incomplete UTF-8 sequence (a character split "
            "between tokens) with those bytes escaped ('\\xe4\\xb8'); a server that names "
            "tokens by text: its text (xlikert.collect.answers.vocabulary)"
        },
    ),
    "topk_token_id": Variable(
        ("rank",),
        -1,
        {
            "description": "the vocabulary ids of topk_token; -1 where unknown (a server that "
            "names tokens by text) or past the listing"
        },
        "int64",
    ),
    "topk_logprob": Variable(
        ("rank",), _NAN, {"description": "natural-log probability over the full vocabulary"}
    ),
    "decoding_pmf": Variable(
        ("temperature", "top_p", "score"),
        _NAN,
        {"description": "set per file from each model's decoding_rule (see assemble)"},
    ),
    "decoding_valid_mass": Variable(
        ("temperature", "top_p"),
        _NAN,
        {"description": "valid mass inside the nucleus / nucleus mass (NaN: not measured)"},
    ),
}

_BOUND_ATTRS = {"description": "certified bound; equal to the stored value where it is exact"}

#: Certified intervals, present when some unit was only bounded (top-k servers).
BOUND_VARIABLES: dict[str, Variable] = {
    "pmf_lower": Variable(("score",), _NAN, _BOUND_ATTRS),
    "pmf_upper": Variable(("score",), _NAN, _BOUND_ATTRS),
    "valid_mass_lower": Variable((), _NAN, _BOUND_ATTRS),
    "valid_mass_upper": Variable((), _NAN, _BOUND_ATTRS),
}


#: Reasoning mode (:mod:`xlikert.collect.reasoning`): present when some model entry
#: has ``reasoning``; the ``trace`` dim is as long as the largest ``traces``.
TRACE_VARIABLES: dict[str, Variable] = {
    "pmf_se": Variable(
        ("score",),
        _NAN,
        {
            "long_name": "Monte Carlo standard error of pmf (reasoning mode)",
            "description": "sample SD of trace_pmf over the traces (ddof=1) / sqrt(M); NaN for "
            "M = 1; 0 for models not in reasoning mode (their pmf is exact)",
        },
    ),
    "trace_pmf": Variable(
        ("trace", "score"),
        _NAN,
        {
            "long_name": "exact item PMF after one sampled trace (renormalised)",
            "description": "next-token PMF over valid answers after prompt + trace + closing; "
            "NaN where the model has no such trace",
        },
    ),
    "trace_valid_mass": Variable(
        ("trace",), _NAN, {"description": "valid mass after prompt + trace + closing"}
    ),
    "trace_truncated": Variable(
        ("trace",),
        -1,
        {"description": "1: cut at max_new_tokens; 0: ended by the model; -1: no such trace"},
        "int8",
    ),
    "trace_length": Variable(
        ("trace",),
        -1,
        {"description": "tokens the model generated in the trace; -1: none"},
        "int64",
    ),
    "trace_seed": Variable(
        ("trace",),
        -1,
        {"description": "seed of the trace's random stream (xlikert.collect.reasoning.trace_seed)"},
        "int64",
    ),
    "trace_text": Variable(
        ("trace",),
        "",
        {
            "description": "the trace's text as generated (special tokens kept), compressed: "
            "'zlib+base64:' + base64(zlib(utf-8)); read with xlikert.collect.trace_texts(ds)"
        },
    ),
    "trace_token_ids": Variable(
        ("trace",),
        "",
        {
            "description": "the trace's token ids as sampled (an ending end-of-turn token "
            "dropped), compressed like prompt_token_ids; the answer was read after "
            "prompt_token_ids + trace_token_ids + trace_closing_ids "
            "(xlikert.collect.read_sequence): retokenising the joined texts may merge tokens "
            "across the boundaries"
        },
    ),
    "trace_closing_ids": Variable(
        ("trace",),
        "",
        {"description": "token ids of the closing appended after the trace, compressed alike"},
    ),
}

_SEQ = "; NaN (or fill) where the cell was administered in isolation"

#: Variables of the cells administered sequentially (:mod:`xlikert.collect.context`):
#: the certified bound, the item's position in its conversation, the pairwise joints and
#: the history tree of each item (``history``: the histories read, padded with fill).
CONTEXT_VARIABLES: dict[str, Variable] = {
    "context_error": Variable((), _NAN, {"description": "certified bound on |pmf - exact| and "
        "|valid_mass - exact| of a sequentially administered cell, and on its decoding_pmf "
        "and decoding_valid_mass (0: every history read, exact)" + _SEQ}),
    "context_unexplored": Variable((), _NAN, {"description": "probability of the histories "
        "of this item not read (pruned), U_j" + _SEQ}),
    "context_position": Variable((), -1, {"description": "0-based position at which the "
        "item was asked in its conversation; -1 where administered in isolation"}, "int64"),
    "context_passes": Variable((), -1, {"description": "forward passes its conversation "
        "spent (histories read); -1 where administered in isolation"}, "int64"),
    "context_tol_met": Variable((), -1, {"description": "1 where the certified error of its "
        "conversation met tol within max_passes, 0 where the budget was spent first (the "
        "bound reached is stored); -1 where administered in isolation"}, "int64"),
    "context_joint": Variable(("other_item", "score", "other_score"), _NAN, {"description":
        "joint PMF P(item = score, other_item = other_score) within the conversation "
        "(certified: see context_joint_error); where items offer non-substantive options, "
        "the cells of the substantive answers of both (the rest of the joint's mass is on "
        "answers with an option)" + _SEQ}),
    "context_joint_error": Variable(("other_item",), _NAN, {"description": "certified bound "
        "on every cell of context_joint" + _SEQ}),
    "history_answers": Variable(("history",), "", {"description": "a history read: the "
        "scores of the earlier answers (a non-substantive answer by its option's name), in "
        "the order asked, comma-separated ('' for the first item, and past the histories "
        "read)"}),
    "history_probability": Variable(("history",), _NAN, {"description": "P(h), the "
        "probability of the history: the product of the earlier answers' PMFs along it"}),
    "history_pmf": Variable(("history", "score"), _NAN, {"description": "the item's PMF "
        "given the history (renormalised over the valid answers)"}),
    "history_valid_mass": Variable(("history",), _NAN, {"description": "the item's valid "
        "mass given the history (its failure mass is 1 - this, less its non-substantive "
        "mass)"}),
    "history_nonsubstantive_mass": Variable(("history", "option"), _NAN, {"description":
        "the mass of each non-substantive option given the history (NaN where the item does "
        "not offer it); present where some item offers one"}),
}  # fmt: skip

_ELI = "; fill where the cell's elicitation level is not {}"

#: Variables of the elicitation factor (:mod:`xlikert.design.elicitation`): the greedy
#: reply and the answer it writes, the own-words reading's "no answer" mass and bound.
ELICITATION_VARIABLES: dict[str, Variable] = {
    "reply_text": Variable((), "", {"description": "the model's greedy reply up to "
        "reply_tokens tokens (an ending end-of-turn token left out)" + _ELI.format("greedy or stated")}),
    "reply_token_ids": Variable((), "", {"description": "the reply's token ids, compressed "
        "like prompt_token_ids" + _ELI.format("greedy or stated")}),
    "reply_end": Variable((), "", {"description": "how the reply ended: 'eos' (an "
        "end-of-turn token) or 'length' (reply_tokens reached); a stated reply after a thought "
        "(reasoning mode) that never ended: 'thought_eos' or 'thought_length' (the thought's "
        "budget reached before its end marker)" + _ELI.format("greedy or stated")}),
    "reply_answered": Variable((), -1, {"description": "1 where the reply writes an answer "
        "(answer_parse_rule), 0 where it writes none (pmf and valid_mass then NaN); -1 where "
        "the cell's elicitation level is not greedy"}, "int64"),
    "reply_answer": Variable((), _NAN, {"description": "the score the reply writes "
        "(answer_parse_rule); NaN where it writes none" + _ELI.format("greedy")}),
    "reply_answer_position": Variable((), -1, {"description": "0-based position in the reply "
        "of the answer token: pmf is read after the prompt and the reply's tokens before it "
        "(prompt_token_ids); -1 where none or not greedy"}, "int64"),
    "no_answer_mass": Variable((), _NAN, {"description": "probability that the sampled reply "
        "writes no answer (ends, or reaches reply_tokens, without one); pmf is the first "
        "answer's distribution given one is written, valid_mass the probability of one"
        + _ELI.format("own_words")}),
    "elicitation_error": Variable((), _NAN, {"description": "certified bound on |pmf - exact|, "
        "|valid_mass - exact| and |no_answer_mass - exact| (0: every reply prefix read, exact)"
        + _ELI.format("own_words")}),
    "elicitation_passes": Variable((), -1, {"description": "forward passes the cell's reply "
        "tree spent (reply prefixes read); -1 where not own_words"}, "int64"),
    "elicitation_tol_met": Variable((), -1, {"description": "1 where the certified error met "
        "own_words_tol within own_words_max_passes, 0 where the budget was spent first (the "
        "bound reached is stored); -1 where not own_words"}, "int64"),
    "stated_status": Variable((), "", {"description": "how the stated reply parsed "
        "(stated_parse_rule): ok, missing_options, not_a_distribution or no_reply; pmf only "
        "where ok" + _ELI.format("stated")}),
    "stated_numbers": Variable((), "", {"description": "the numbers the stated reply gives "
        "the options, as written (a JSON object label -> number)" + _ELI.format("stated")}),
    "stated_sum": Variable((), _NAN, {"description": "the raw sum of the stated numbers "
        "(pmf is the numbers divided by it)" + _ELI.format("stated")}),
}  # fmt: skip

_WALK = "; fill where the cell's answers were not read by the walk"

#: Variables of the cells whose word answers were read by the certified walk over the
#: labels' spellings (:mod:`xlikert.collect.answers.walk`); their ``pmf`` and ``valid_mass``
#: intervals are the bound variables (``pmf_lower``, ...).
WALK_VARIABLES: dict[str, Variable] = {
    "answer_error": Variable((), _NAN, {"description": "certified bound on |pmf - exact| "
        "(its interval: pmf_lower, pmf_upper) and on |mass - exact| of valid_mass, "
        "nonsubstantive_mass, script_mass and decoding_valid_mass: the unread mass of the "
        "labels' trie (0: every spelling read, exact)" + _WALK}),
    "answer_passes": Variable((), -1, {"description": "next-token reads (trie nodes) the "
        "walk spent on the cell; -1 where not walked"}, "int64"),
    "answer_tol_met": Variable((), -1, {"description": "1 where answer_error met answer_tol "
        "within answer_max_passes, 0 where the budget was spent first (the bound reached is "
        "stored); -1 where not walked"}, "int64"),
    "canonical_pmf": Variable(("score",), _NAN, {"description": "the PMF over the item's "
        "points of each label's canonical tokenization alone (the tokens the tokenizer "
        "gives the label, no stop check), renormalised: what lm-evaluation-harness and "
        "PsyBORGS compute" + _WALK}),
    "canonical_valid_mass": Variable((), _NAN, {"description": "the summed probability of "
        "the points' canonical tokenizations (beside valid_mass: the mass the other "
        "spellings carry)" + _WALK}),
}  # fmt: skip

#: The variables that carry Monte Carlo error in a reasoning file (for the models in
#: reasoning mode); everything else is exact given the traces.
SAMPLED_VARIABLES = (
    "pmf", "pmf_se", "valid_mass", "nonsubstantive_mass", "decoding_pmf", "decoding_valid_mass"
)  # fmt: skip


#: Non-substantive answers ("Don't know", "Refused"): present when some item offers one.
#: Their exact mass is measured beside ``pmf``, which stays over the substantive options;
#: failure rate = 1 - valid_mass - the sum of nonsubstantive_mass over ``option``.
NONSUBSTANTIVE_VARIABLES: dict[str, Variable] = {
    "nonsubstantive_mass": Variable(
        ("option",),
        _NAN,
        {
            "long_name": "non-substantive mass",
            "description": "sum of P_raw over the answers that mean each non-substantive option; "
            "NaN where the item does not offer the option",
        },
    ),
}
#: Their certified intervals, beside :data:`BOUND_VARIABLES` (top-k servers).
NONSUBSTANTIVE_BOUND_VARIABLES: dict[str, Variable] = {
    "nonsubstantive_mass_lower": Variable(("option",), _NAN, _BOUND_ATTRS),
    "nonsubstantive_mass_upper": Variable(("option",), _NAN, _BOUND_ATTRS),
}


#: Numbers in any script (:mod:`xlikert.collect.answers.numerals`): each answer's mass per numeral
#: script, so a reader sees "shown full-width, answered ASCII". Present when the run's
#: options give a ``script`` axis (every decimal script of the Unicode version used).
SCRIPT_VARIABLES: dict[str, Variable] = {
    "script_mass": Variable(
        ("script",),
        _NAN,
        {
            "long_name": "valid mass per numeral script",
            "description": "sum of P_raw over the answers of the item's points written in each "
            "decimal script (ascii, fullwidth, arabic-indic, ...; the file's numeral_rule); "
            "over the scripts read it sums to valid_mass where every point's label is a "
            "number; in top-k mode the listed mass of each script (its certified interval: "
            "script_mass_lower, script_mass_upper); NaN for a script the rule did not read "
            "(numerals = 'shown', or a script the tokenizer has no number token for), for "
            "word labels and where the backend does not measure it (reasoning, sequential "
            "cells)",
        },
    ),
}

#: Certified intervals of each script's mass, present when some unit was only bounded.
SCRIPT_BOUND_VARIABLES: dict[str, Variable] = {
    "script_mass_lower": Variable(("script",), _NAN, _BOUND_ATTRS),
    "script_mass_upper": Variable(("script",), _NAN, _BOUND_ATTRS),
}


@dataclass(frozen=True)
class ItemScaleVariable:
    """A variable of a results file (and a prompts Dataset) recording each item's own scale."""

    dims: tuple[str, ...]
    description: str


#: Each item's own scale (its response options), recorded when the items have their own (an item with its
#: own scale, a nominal item, non-substantive options, answers other than the codes;
#: the results schema). ``score`` is then the union of the items' points; ``<format>`` is
#: the format factor's dim when there is one. Absent: every item is ordinal on the file's
#: whole ``score`` axis.
ITEM_SCALE_VARIABLES: dict[str, ItemScaleVariable] = {
    "score_min": ItemScaleVariable(
        ("item",), "the item's lowest point: its support is score_min..score_max"
    ),
    "score_max": ItemScaleVariable(
        ("item",), "the item's highest point: its support is score_min..score_max"
    ),
    "nominal": ItemScaleVariable(("item",), "True where the item's options have no order"),
    "answer_label": ItemScaleVariable(
        ("<format>", "item", "score"),
        "the answer label that means each point of the item (per format level); '' off its support",
    ),
    "score_label": ItemScaleVariable(
        ("item", "score"), "the label of each point of the item; '' where none"
    ),
    "option_label": ItemScaleVariable(
        ("<format>", "item", "option"),
        "the answer label that means each non-substantive option (per format level); '' where the "
        "item does not offer it",
    ),
}

#: Variables of the prompts Dataset (the design) and of a shard file, beside the cells'.
PROMPT_VARIABLES: dict[str, Variable] = {
    "system": Variable((), "", {"description": "system message sent"}),
    "user": Variable((), "", {"description": "user message sent"}),
    "stated_instruction": Variable(
        (),
        "",
        {
            "description": "the instruction the elicitation level stated adds to the user "
            "message ({options}: the cell's answer labels); the experiment's, in each language"
        },
    ),
    "computed": Variable(
        (), False, {"description": "True where this shard computed the cell"}, "bool"
    ),
}

#: Each cell's identity and the origin of its numbers: the runner writes them beside the
#: backend's variables, so reuse across files is auditable (:mod:`xlikert.collect.run.identity`).
CELL_VARIABLES: dict[str, Variable] = {
    "cell_key": Variable(
        (),
        "",
        {
            "description": "sha256 of what determines the cell's numbers: the model's identity "
            "(attrs models[name]['cell_identity']), the options that change stored values, "
            "the answer labels and the exact token ids read (or the exact request sent to a "
            "server); cells with equal keys are never computed twice "
            "(xlikert.collect.run.identity.KEY_RULE); empty where no cell was collected"
        },
    ),
    "reused_from": Variable(
        (),
        "",
        {
            "description": "where the cell's numbers were copied from: a key of the file's "
            "reuse_sources attribute (an earlier results file or saved progress); empty: "
            "computed by this run"
        },
    ),
}

#: Every variable name of a results file or a prompts Dataset, and the item
#: coordinates ``reverse_keyed`` and those of :data:`ITEM_SCALE_VARIABLES` (a factor must not
#: take any of them).
RESULT_VARIABLES: tuple[str, ...] = (
    *VARIABLES,
    *BOUND_VARIABLES,
    *NONSUBSTANTIVE_VARIABLES,
    *NONSUBSTANTIVE_BOUND_VARIABLES,
    *SCRIPT_VARIABLES,
    *TRACE_VARIABLES,
    *PROMPT_VARIABLES,
    *ITEM_SCALE_VARIABLES,
    *CELL_VARIABLES,
    *CONTEXT_VARIABLES,
    *ELICITATION_VARIABLES,
    *WALK_VARIABLES,
    "reverse_keyed",
)

# The attributes of a results file (and of the tables made from it) that the report and
# the command line read back, each named once: the module that writes one and those that
# read it use these names.

#: The language factor's name (a prompts Dataset with a factor of kind ``language``;
#: :mod:`xlikert.design.prompts`).
LANGUAGE_FACTOR_ATTR = "language_factor"
#: JSON: language -> score -> label, the scale's labels in every language.
SCALE_LABELS_BY_LANGUAGE_ATTR = "scale_labels_by_language"
#: JSON: language -> where its text comes from (the instrument's translations).
INSTRUMENT_LANGUAGES_ATTR = "instrument_languages"

#: The attr of each setting an elicitation level reads (a field of
#: :class:`~xlikert.collect.options.CollectOptions`, written by
#: :func:`xlikert.collect.elicitation.elicitation_attrs`): setting -> attr.
ELICITATION_SETTING_ATTRS: dict[str, str] = {
    "answer_prefix": "elicitation_answer_prefix",
    "reply_tokens": "elicitation_reply_tokens",
    "answer_parse": "elicitation_answer_parse",
    "own_words_temperature": "own_words_temperature",
    "own_words_top_p": "own_words_top_p",
    "own_words_tol": "own_words_tol",
    "own_words_max_passes": "own_words_max_passes",
    "stated_instruction": "elicitation_stated_instruction",
    "stated_tokens": "elicitation_stated_tokens",
}

#: The certified bound and the forward-pass budget of the sequentially administered cells
#: (:mod:`xlikert.collect.context.administration`).
SEQUENTIAL_TOL_ATTR = "sequential_tol"
SEQUENTIAL_MAX_PASSES_ATTR = "sequential_max_passes"

#: A reliability table's respondents: the factors whose conditions are the respondents,
#: and the number of those conditions (:mod:`xlikert.analysis.reliability`).
RESPONDENT_DIMS_ATTR = "respondent_dims"
N_CONDITIONS_ATTR = "n_conditions"


def variable_table(
    *,
    bounded: bool = False,
    traces: int = 0,
    context: bool = False,
    nonsubstantive: bool = False,
    scripts: bool = False,
    elicitation: bool = False,
    walk: bool = False,
) -> dict[str, Variable]:
    """The variables of one unit or results file, by name.

    :data:`VARIABLES`, plus :data:`BOUND_VARIABLES` when ``bounded``, plus
    :data:`TRACE_VARIABLES` when ``traces`` > 0, plus
    :data:`CONTEXT_VARIABLES` when ``context`` (sequential administration), plus
    :data:`NONSUBSTANTIVE_VARIABLES` (and :data:`NONSUBSTANTIVE_BOUND_VARIABLES`
    when ``bounded``) when ``nonsubstantive``, plus :data:`SCRIPT_VARIABLES` (and
    :data:`SCRIPT_BOUND_VARIABLES` when ``bounded``) when ``scripts``.

    Parameters
    ----------
    bounded : bool, default False
        Whether the PMFs are certified intervals (a top-k readout): adds the bound
        variables (``pmf_lower``, ``pmf_upper``, ...).
    traces : int, default 0
        Reasoning traces per cell: any number above 0 adds the trace variables.
    context : bool, default False
        Whether the cells were asked in one conversation (sequential
        administration): adds the context variables (the certified bound, the
        pairwise joints, every history read).
    nonsubstantive : bool, default False
        Whether some item offers non-substantive options: adds ``nonsubstantive_mass``
        on the ``option`` dim.
    scripts : bool, default False
        Whether the run has a ``script`` axis: adds :data:`SCRIPT_VARIABLES`
        (``script_mass``), and with ``bounded`` its intervals.
    elicitation : bool, default False
        Whether the run has an elicitation factor: adds :data:`ELICITATION_VARIABLES`
        (the greedy reply and its answer, the own-words "no answer" mass and bound).
    walk : bool, default False
        Whether some cell's word answers were read by the walk: adds
        :data:`WALK_VARIABLES` (its bound, passes, and the canonical reading).

    Returns
    -------
    dict of str to Variable
        Each variable's name and its :class:`Variable` (dims, fill value, attrs, dtype).

    Examples
    --------
    >>> list(variable_table(bounded=True))[-1]
    'valid_mass_upper'
    >>> list(variable_table(bounded=True, nonsubstantive=True))[-1]
    'nonsubstantive_mass_upper'
    """
    return {
        **VARIABLES,
        **(BOUND_VARIABLES if bounded else {}),
        **(NONSUBSTANTIVE_VARIABLES if nonsubstantive else {}),
        **(NONSUBSTANTIVE_BOUND_VARIABLES if bounded and nonsubstantive else {}),
        **(SCRIPT_VARIABLES if scripts else {}),
        **(SCRIPT_BOUND_VARIABLES if bounded and scripts else {}),
        **(TRACE_VARIABLES if traces else {}),
        **(
            {k: v for k, v in CONTEXT_VARIABLES.items() if nonsubstantive or "option" not in v.dims}
            if context
            else {}
        ),
        **(ELICITATION_VARIABLES if elicitation else {}),
        **(WALK_VARIABLES if walk else {}),
    }
