"""Exact reliability of an instrument over a population of conditions (``xl.reliability``).

The package is ``xlikert.analysis.reliability``; the name ``xlikert.reliability`` is the
function. :mod:`.coefficients` holds the coefficients of a covariance matrix (numpy),
:mod:`.population` the exact population of conditions (:func:`reliability`),
:mod:`.tables` the table of ``xlikert reliability`` and the report (:func:`reliability_table`).

Cronbach's α, McDonald's ω (one-factor model) and corrected item–total
correlations, computed from the exact item PMFs, with no sampling.

The population
--------------
The respondents are the conditions spanned by the dims ``dim`` (e.g.
personas, or targets × framings), each with equal weight: a respondent is a
condition ``c`` drawn uniformly, who then answers every item from that
condition's PMFs. Items are asked in separate prompts, so given the condition
the answers are independent, and every moment of the population is exact:

* ``Var(X_k) = mean_c Var(y | c, k) + var_c E(y | c, k)`` (within plus between),
* ``Cov(X_j, X_k) = cov_c(E(y | c, j), E(y | c, k))`` for ``j != k``,

where ``mean_c``, ``var_c`` and ``cov_c`` are over the conditions with equal
weights and divide by their number ``C`` (the population moments, the limit of
a sample of ``N -> inf`` respondents: the same mixture as
:func:`xlikert.grand_mixture`). α, ω and the item–total correlations are
invariant to a common scale of the covariance matrix ``Σ``, so the denominator
convention (``C`` or ``C - 1``, ``N`` or ``N - 1`` for a sample) does not change
them; ``Σ`` is the population covariance. Every remaining dim (e.g. ``model``)
indexes a separate population.

The coefficients, from ``Σ`` of the ``K`` items of a (sub)scale
-----------------------------------------------------------------
* ``alpha = K / (K - 1) * (1 - tr Σ / 1'Σ1)`` (Cronbach's α of the sum score);
* ``item_total``: correlation of each item with the sum of the *other* items
  of its (sub)scale (corrected item–total correlation);
* ``omega = (Σ_k λ_k)² / ((Σ_k λ_k)² + Σ_k ψ_k)`` (McDonald's ω total of the
  sum score), from a one-factor model fitted by maximum likelihood to the
  correlation matrix (the objective of R's ``factanal``, uniquenesses bounded
  below by :data:`UNIQUENESS_BOUND`; ML is scale-invariant, so this is the ML fit
  to ``Σ`` as well). The standardized loadings ``λ*_k`` are the output
  ``loading``; ω uses them on the items' own scale, ``λ_k = sd_k λ*_k``,
  ``ψ_k = sd_k² (1 - λ*_k²)``, so it is about the same unweighted sum as α. With
  ``K = 2`` items a one-factor model is not identified; ω then takes the
  symmetric solution ``λ*_1 = λ*_2 = sqrt(r)``.

Reverse-keyed items are reflected first and each subscale is its own scale,
as in :func:`xlikert.composite`.

Examples
--------
>>> import xlikert as xl
>>> pmf = xl.datasets.synthetic_pmf({"model": 2, "target": 5}, n_items=4)
>>> rel = xl.reliability(pmf, dim="target")
>>> sorted(rel.data_vars), rel.alpha.dims
(['alpha', 'item_total', 'loading', 'omega'], ('model',))
"""

from __future__ import annotations

from .coefficients import (
    UNIQUENESS_BOUND,
    cronbach_alpha,
    item_covariance,
    item_rest_correlation,
    mcdonald_omega,
    one_factor_ml,
)
from .population import CONVENTION, ZERO_VARIANCE_RTOL, reliability
from .tables import RELIABILITY_COLUMNS, default_respondents, reliability_table

__all__ = [
    "CONVENTION",
    "RELIABILITY_COLUMNS",
    "UNIQUENESS_BOUND",
    "ZERO_VARIANCE_RTOL",
    "cronbach_alpha",
    "default_respondents",
    "item_covariance",
    "item_rest_correlation",
    "mcdonald_omega",
    "one_factor_ml",
    "reliability",
    "reliability_table",
]
