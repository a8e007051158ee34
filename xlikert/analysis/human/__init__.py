"""Human responses in: survey respondents' answer distributions as xlikert PMFs.

A human PMF is a Dataset on the model's axes (design notes, section 1)::

    pmf        (*groups, item, score)   share of the answering respondents per score
    n          (*groups, item)          respondents who answered (the multinomial size)
    n_missing  (*groups, item)          respondents of the group who did not answer
    n_eff      (*groups, item)          with survey weights: Kish's effective sample size
    weight     (*groups, item)          with survey weights: the sum of the weights

Each group attribute (party, education band, ...) is a dim with the attribute's
levels, so a human PMF broadcasts against a model PMF whose persona factors have
the same names and levels (:mod:`xlikert.analysis.alignment`).

* :func:`human_pmf` -- from a tidy table, one row per respondent;
* :func:`human_pmf_from_counts` -- from respondent counts ``(*groups, item, score)``;
* :func:`human_marginal` -- pool groups (the population, or one attribute's subgroups);
* :func:`human_vs_llm` -- published human samples (:func:`xlikert.datasets.human_baseline`)
  beside each model's composite score.

Nothing is dropped silently: a missing answer (NaN, or a code listed in
``missing``) is counted in ``n_missing``; a code outside the scale, a
respondent without a group attribute, a bad weight, or a group with no
respondents is a :class:`~xlikert.core.errors.DesignError` naming the column and the value.

The package, one topic a module:

* :mod:`.inputs` -- the checks and readings of survey tables, scales and codes;
* :mod:`.survey` -- :func:`human_pmf` and :func:`human_composite`, from a table;
* :mod:`.counts` -- :func:`human_pmf_from_counts`;
* :mod:`.marginal` -- :func:`mixture_weights` and :func:`human_marginal`;
* :mod:`.baseline` -- :func:`human_vs_llm`.

Examples
--------
>>> import pandas as pd, xlikert as xl
>>> table = pd.DataFrame({"party": ["D", "D", "R", "R", "R"],
...                       "q1": [1, 2, 3, 3, None]})
>>> h = xl.human_pmf(table, ["q1"], scale=(1, 3), by=["party"])
>>> h.pmf.sel(item="q1").values.tolist()
[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]
>>> h.n.values.ravel().tolist(), h.n_missing.values.ravel().tolist()
([2, 2], [0, 1])
"""

from __future__ import annotations

from ...core.dims import HUMAN_VARIABLES
from .baseline import human_vs_llm
from .counts import human_pmf_from_counts
from .marginal import human_marginal, mixture_weights
from .survey import human_composite, human_pmf

__all__ = [
    "HUMAN_VARIABLES",
    "human_composite",
    "human_marginal",
    "human_pmf",
    "human_pmf_from_counts",
    "human_vs_llm",
    "mixture_weights",
]
