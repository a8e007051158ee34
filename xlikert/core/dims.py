"""The one registry of dimension roles: which names are xlikert's own, and what is a factor.

Every array xlikert reads or writes has named dims in one of three roles:

* **core** dims, :data:`CORE_DIMS` -- ``item`` (the items of a condition) and
  ``score`` (the scale values, or the composite-score support);
* **auxiliary** dims, :data:`AUXILIARY_DIMS` -- dims xlikert itself creates or
  reads with a fixed meaning (``rank`` of the top-k tokens, the decoding grid
  ``temperature`` x ``top_p``, the ``effect`` support of an effect PMF, the
  budgets ``n`` of a sampling table, ...);
* **factors** -- every other dim (``model``, ``target``, ``prompt`` -- the design card's
  prompt-framing factor --, ...).

xlikert also writes variables next to the factor coordinates (``pmf``,
``valid_mass``, ``E``, ``SD``, ``lower``, ...) and table columns next to batch
dims (``term``, ``level``, ...; together :data:`VARIABLE_NAMES`): a factor of
the same name would replace them without a word. Together these names are
:data:`RESERVED_NAMES`, and **a factor may not take one of them**, nor a name
that starts with ``_`` (the analysis's private working dims) or holds ``:`` or
``/`` (they join factor names into the names of interaction terms).

Where the rule is enforced:

* the experiment loader (:func:`xlikert.design.load_experiment`) rejects such a
  factor, naming the file and the factor;
* every public analysis function (construct, sampling, plot, report) reads its
  factors with :func:`factor_dims`, which raises
  :class:`~xlikert.core.errors.DesignError` naming the dim, its role and the fix
  when an input dim other than the function's core dims (and the auxiliary
  dims the function is documented to carry) has a reserved name. The functions
  that only carry extra dims along (``composite``, ``consensus``, ``entropy``,
  ...) check the same way, and accept the decoding grid
  (:data:`DECODING_DIMS`), so they work on ``decoding_pmf`` too.

So a reserved name never turns into a raw xarray error, a silently dropped
variable or an empty table: it is an error that says what to rename.

Dimension arguments: one meaning per name
-----------------------------------------
Every public function (``xl.*``, ``xl.sampling.*``, ``xl.plot.*``, the
``.likert`` accessor) names its dimension arguments by what the operation does
with them, as xarray's ``.mean(dim)``, xskillscore and flox do:

* ``dim`` -- the dims an operation **reduces**: mixes over, averages over,
  pools over, draws respondents from, or runs along. They are gone from the
  result. ``human_marginal(h, dim="edu")`` pools over education,
  ``silicon_population(pmf, h, dim=...)`` mixes the personas over it,
  ``reliability(pmf, dim="persona")`` draws the respondents from the personas,
  ``standard_error(pmf, dim="target")`` averages the estimator over targets,
  ``comonotone_contrast(pmf, alpha, dim=...)`` mixes the blocks,
  ``summarize(x, dim="effect")`` reduces a PMF's support to E, SD, SNR, dPD,
  ``contrast(pmf, dim, a, b)`` and ``trend(pmf, dim)`` run along a factor.
* ``by`` -- the dims an operation **keeps as groups**: the levels of a marginal
  slice (``marginal_slice(pmf, by="target")``, every other factor mixed over),
  the rows of a table (``sampling_se_table(pmf, by="model")``,
  ``decoding_bias_table(bias, by=...)``), the respondents' group columns of
  ``human_pmf(table, items, by=["party"])``, the strips or lines of a figure
  (``plot.failure_rate(fr, by=...)``).
* ``factors`` -- the **design's factors** of an analysis of the design
  (``decompose``, ``grand_mixture``, ``marginal_slice``, ``flip_probability``,
  ``effect_means``, ``effect_variances``): default every dim that is not a core
  or auxiliary dim (:func:`factor_dims`); any other dim is a **batch dim**,
  carried along (one analysis per batch cell, a column in a table).
* core dims by their role: ``item_dim``, ``score_dim``, ``effect_dim``,
  ``term_dim``, ``trace_dim``, ``token_dim``, each with its one default.

Figures place their factors with matplotlib's and xarray's plotting names
(``x``, ``hue``, ``row``, ``col``, ``facet``).

Where a function picks a factor by default (the rows of a table, the x axis of
a figure, the report's first factor), it prefers :data:`MODEL_DIM`, the factor
the collection layer makes of an experiment's models, and otherwise takes the
first factor in dim order: no other factor name is written into the analysis,
report or plot code.

The collection layer uses the auxiliary names ``rank``, ``temperature``,
``top_p`` and ``trace`` (:data:`COLLECTION_DIMS`) and the variable names of
:data:`RESULT_VARIABLES` (the results schema, :mod:`xlikert.core.schema`).

Examples
--------
>>> import xarray as xr
>>> from xlikert.core import dims
>>> pmf = xr.DataArray([[[0.5, 0.5]]], dims=("model", "item", "score"))
>>> dims.factor_dims(pmf)
['model']
>>> dims.check_factor_name("temperature", where="factor 'temperature'")
Traceback (most recent call last):
...
xlikert.core.errors.DesignError: factor 'temperature': the name 'temperature' is reserved by xlikert (auxiliary dim: decoding temperature of the temperature x top-p grid); rename the factor (e.g. 'temperature_level')
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from types import MappingProxyType

import xarray as xr

from . import schema
from .errors import DesignError

__all__ = [
    "ADMINISTRATION_DIM",
    "AUXILIARY_DIMS",
    "COLLECTION_DIMS",
    "CORE_DIMS",
    "DECODING_DIMS",
    "ELICITATION_DIM",
    "HUMAN_VARIABLES",
    "MODEL_DIM",
    "OTHER_ITEM_DIM",
    "OTHER_SCORE_DIM",
    "RESERVED_NAMES",
    "RESULT_VARIABLES",
    "SUBSCALE_DIM",
    "TABLE_COLUMNS",
    "VARIABLE_NAMES",
    "check_factor_name",
    "factor_dims",
    "preferred_factor",
    "reserved_role",
]

#: The factor the collection layer makes of an experiment's ``[[models]]`` (one level per
#: model). Tables, figures and the report prefer it as their rows, x axis or first factor.
MODEL_DIM = "model"
#: The factor that says how the items of a condition are asked: ``isolated`` (one prompt
#: per item) or ``sequential`` (earlier items and answers in the conversation).
ADMINISTRATION_DIM = "administration"
#: The factor that says how the answer is read: ``first_token`` (the default), ``prefix``,
#: ``greedy`` or ``own_words`` (:mod:`xlikert.design.elicitation`).
ELICITATION_DIM = "elicitation"
#: The dim of per-subscale composites (and the item coordinate naming each item's subscale).
SUBSCALE_DIM = "subscale"
#: The second item and score dims of a pairwise joint (sequential administration).
OTHER_ITEM_DIM = "other_item"
OTHER_SCORE_DIM = "other_score"

#: Core dims of an item PMF: name -> role.
CORE_DIMS: Mapping[str, str] = MappingProxyType(
    {
        "item": "core dim: the items of a condition",
        "score": "core dim: the scale values (or the composite-score support)",
    }
)

#: Dims xlikert creates or reads with a fixed meaning: name -> role.
AUXILIARY_DIMS: Mapping[str, str] = MappingProxyType(
    {
        "rank": "rank of the stored top-k raw tokens",
        "temperature": "decoding temperature of the temperature x top-p grid",
        "top_p": "decoding top-p of the temperature x top-p grid",
        "trace": "reasoning traces sampled before the answer (reasoning mode)",
        "token": "valid tokens of xl.item_pmf_from_tokens",
        SUBSCALE_DIM: "subscales of xl.subscale_composites",
        "effect": "support of an effect PMF (xl.decompose, xl.contrast)",
        "slope": "support of a trend PMF (xl.trend)",
        "pair": "pairs of levels of xl.contrast and xl.validity",
        "term": "terms of xl.comonotone_contrast",
        "n": "sampling budgets of xl.sampling",
        "metric": "alignment metrics of xl.alignment and xl.validity (wasserstein, ...)",
        OTHER_ITEM_DIM: "the second item of a pairwise joint (sequential administration)",
        OTHER_SCORE_DIM: "the second item's score of a pairwise joint (sequential administration)",
        "history": "answer histories of a conversation's history tree (sequential administration)",
        "option": "non-substantive answer options (Don't know, Refused) of nonsubstantive_mass",
        "script": "decimal numeral scripts (ascii, fullwidth, arabic-indic, ...) of script_mass",
        "baseline": "baselines of the individual skill scores (population, group persona, uniform)",
    }
)

#: The decoding grid: auxiliary dims that PMF functions carry along (``decoding_pmf``).
DECODING_DIMS: tuple[str, ...] = ("temperature", "top_p")
#: Auxiliary dims the collection layer creates.
COLLECTION_DIMS: tuple[str, ...] = ("rank", "temperature", "top_p", "trace")

#: Variables of a results file (collection) and of a prompts Dataset (design):
#: derived from the results schema (:mod:`xlikert.core.schema`).
RESULT_VARIABLES: tuple[str, ...] = schema.RESULT_VARIABLES
#: Variables and tree nodes the analysis writes next to factor coordinates.
ANALYSIS_VARIABLES: tuple[str, ...] = (
    "E",
    "SD",
    "SNR",
    "dPD",
    "consensus",
    "dissension",
    "tastle_consensus",
    "entropy",
    "lower",
    "upper",
    "error",
    "mean",
    "var",
    "se",
    "bias",
    "failure_rate",
    "grand",
    "estimate",
    "ceiling",
    "alpha",
    "omega",
    "item_total",
    "loading",
    "joint",
    "inter_item_correlation",
    "carry_over",
    "answer_probability",
    "answer_score",
    "answer_option",
    "human_estimate",
    "human_se",
    "human_lower",
    "human_upper",
    "effective_n",
    "ppi_lambda",
    "log_score",
    "rps",
    "brier",
    "mode_correct",
    "skill",
    "skill_se",
    "baseline_estimate",
    "retest_agreement",
    "retest_agreement_se",
    "normalized_accuracy",
    "normalized_accuracy_se",
    # xl.validity
    "difference",
    "difference_se",
    "overall",
    "overall_se",
    "overall_difference",
    "overall_difference_se",
    "items_compared",
    "cells_unanswered",
    "closest",
    "runner_up",
    "closest_z",
    "closest_probability",
    "individual",
    "individual_se",
    "individual_difference",
    "individual_difference_se",
    "skill_difference",
    "skill_difference_se",
    "respondents_compared",
    "level_a",
    "level_b",
)
#: Variables of a human PMF Dataset beside ``pmf`` (:func:`xlikert.human_pmf`).
HUMAN_VARIABLES: tuple[str, ...] = (
    "n_missing",
    "n_eff",
    "weight",
    "n_nonsubstantive",
    "nonsubstantive_weight",
    "nonsubstantive_rate",
    "n_answered",
)
#: Columns of the tidy tables (``summary_table``, ``flip_probability``) next to batch dims.
TABLE_COLUMNS: tuple[str, ...] = ("term", "level", "order", "p_flip")
#: Every variable name a factor coordinate would clash with: name -> role.
VARIABLE_NAMES: Mapping[str, str] = MappingProxyType(
    {
        **{v: "a column of the analysis tables" for v in TABLE_COLUMNS},
        **{v: "a variable of a results file" for v in RESULT_VARIABLES},
        **{v: "a variable of a human PMF Dataset (xl.human_pmf)" for v in HUMAN_VARIABLES},
        **{
            v: "a variable (or decomposition node) of the analysis output"
            for v in ANALYSIS_VARIABLES
        },
    }
)

#: Every name a factor may not take: name -> role.
RESERVED_NAMES: Mapping[str, str] = MappingProxyType(
    {
        **VARIABLE_NAMES,
        **{k: f"auxiliary dim: {v}" for k, v in AUXILIARY_DIMS.items()},
        **CORE_DIMS,
    }
)


def reserved_role(name: Hashable) -> str | None:
    """Why ``name`` cannot be a factor, or None when it can.

    Parameters
    ----------
    name : hashable
        A dim name.

    Returns
    -------
    str or None
        The role that reserves the name (as :data:`RESERVED_NAMES` states it), a
        reason for a private or joining name, or None for a valid factor name.

    Examples
    --------
    >>> reserved_role("n")
    'auxiliary dim: sampling budgets of xl.sampling'
    >>> reserved_role("_block")
    "private working dim of the analysis (names starting with '_')"
    >>> reserved_role("model") is None
    True
    """
    if not isinstance(name, str):
        return None
    if name in RESERVED_NAMES:
        return RESERVED_NAMES[name]
    if name.startswith("_"):
        return "private working dim of the analysis (names starting with '_')"
    if ":" in name or "/" in name:
        return "':' and '/' join factor names into interaction terms ('model:target')"
    return None


def check_factor_name(name: Hashable, where: str) -> None:
    """Raise :class:`~xlikert.core.errors.DesignError` if ``name`` may not name a factor.

    Parameters
    ----------
    name : hashable
        The factor's name.
    where : str
        How the message starts: where the name was found (e.g. ``"factor 'n'"``
        or ``"file.toml: factor 'n'"``).

    Raises
    ------
    DesignError
        ``name`` is reserved (:func:`reserved_role`), naming the role and a new name.

    Examples
    --------
    >>> check_factor_name("target", where="factor 'target'")  # fine: returns None
    >>> check_factor_name("a:b", where="factor 'a:b'")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.DesignError: factor 'a:b': the name 'a:b' is reserved by xlikert (':' and '/' join factor names into interaction terms ('model:target')); rename the factor (e.g. 'a_b_level')
    """
    role = reserved_role(name)
    if role is None:
        return
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in str(name)).strip("_") or "factor"
    raise DesignError(
        f"{where}: the name {name!r} is reserved by xlikert ({role}); "
        f"rename the factor (e.g. {safe + '_level'!r})"
    )


def _as_list(dims: Hashable | Iterable[Hashable] | None) -> list[Hashable]:
    if dims is None:
        return []
    if isinstance(dims, str) or not isinstance(dims, Iterable):
        return [dims]
    return list(dims)


def factor_dims(
    obj: xr.DataArray | xr.Dataset,
    factors: Hashable | Sequence[Hashable] | None = None,
    *,
    item_dim: Hashable | None = "item",
    score_dim: Hashable | None = "score",
    auxiliary: Iterable[Hashable] = (),
    what: str = "the PMF",
) -> list[Hashable]:
    """The factors of ``obj``, in its dim order; every other dim checked against the registry.

    A dim of ``obj`` is a factor unless it is a core dim (``item_dim``,
    ``score_dim``) or one of the ``auxiliary`` dims the caller handles. With
    ``factors`` given, only those are factors and the remaining dims are batch
    dims. A factor or batch dim whose name is reserved (:func:`reserved_role`)
    raises, so a name that would clash with xlikert's own dims or variables
    never reaches xarray.

    Parameters
    ----------
    obj : xr.DataArray or xr.Dataset
        The input array (or Dataset: its dims).
    factors : hashable or sequence of hashable, optional
        The factors to use; default every dim that is not core or auxiliary.
    item_dim, score_dim : hashable or None, keyword-only
        The core dims (None when the input has none, e.g. a Consensus array).
    auxiliary : iterable of hashable, keyword-only
        Auxiliary dims the caller carries or reduces (e.g. ``("n",)`` for a
        standard-error table); they are neither factors nor checked.
    what : str, keyword-only
        How the message names ``obj``.

    Returns
    -------
    list
        The factor dims in the order of ``obj.dims``.

    Raises
    ------
    DesignError
        A given factor is not a dim or is a core/auxiliary dim, or a factor or
        batch dim has a reserved name.

    Examples
    --------
    >>> import xarray as xr
    >>> se = xr.DataArray([[1.0, 0.1]], dims=("model", "n"))
    >>> factor_dims(se, item_dim=None, score_dim=None, auxiliary=["n"], what="the SE")
    ['model']
    >>> factor_dims(se, item_dim=None, score_dim=None, what="the SE")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.DesignError: dim 'n' of the SE: the name 'n' is reserved by xlikert (auxiliary dim: sampling budgets of xl.sampling); rename the factor (e.g. 'n_level')
    """
    all_dims = list(obj.dims)
    core = [d for d in (item_dim, score_dim) if d is not None]
    skip = set(core) | set(auxiliary)
    if factors is None:
        chosen = [d for d in all_dims if d not in skip]
    else:
        chosen = _as_list(factors)
        for f in chosen:
            if f not in all_dims:
                raise DesignError(
                    f"factor {f!r} is not a dimension of {what}; its dims are {tuple(all_dims)}"
                )
            if f in skip:
                kind = "a core" if f in core else "an auxiliary"
                raise DesignError(f"{f!r} is {kind} dimension of {what}, not a factor")
    for d in all_dims:
        if d not in skip:
            check_factor_name(d, where=f"dim {d!r} of {what}")
    return [d for d in all_dims if d in chosen]


def preferred_factor(
    factors: Sequence[Hashable], want: Hashable | None = None, exclude: Iterable[Hashable] = ()
) -> Hashable | None:
    """The factor a table or figure groups by: ``want``, else the model factor, else the first.

    ``want`` if given, else :data:`MODEL_DIM`, else the first factor (in the order
    given) not in ``exclude``; None when there is none.

    Parameters
    ----------
    factors : sequence of hashable
        The factors, in order.
    want : hashable, optional
        The factor the caller asked for.
    exclude : iterable of hashable
        Factors not to choose (e.g. one already on another axis).

    Returns
    -------
    hashable or None
        The chosen factor.

    Raises
    ------
    DesignError
        ``want`` is not one of ``factors``.

    Examples
    --------
    >>> preferred_factor(["target", "model"])
    'model'
    >>> preferred_factor(["target", "prompt"]), preferred_factor(["model"], exclude=["model"])
    ('target', None)
    >>> preferred_factor(["model", "target"], "target")
    'target'
    """
    if want is not None:
        if want not in factors:
            raise DesignError(f"{want!r} is not a factor; factors are {list(factors)}")
        return want
    free = [f for f in factors if f not in set(exclude)]
    if MODEL_DIM in free:
        return MODEL_DIM
    return free[0] if free else None
