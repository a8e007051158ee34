"""What a sampling study would have paid: standard errors, sign flips, decoding bias.

The exact PMFs are the ground truth; this module computes, *analytically*, what
a researcher who estimated the same quantities from ``N`` sampled answers per
condition would have got (paper appendix "Cost of Monte Carlo sampling"):

- :func:`composite_moments` -- exact mean and variance of one sampled composite
  answer per condition (items are context-isolated, hence independent, so
  ``Var(S) = sum_k Var(Y_k)``);
- :func:`standard_error` -- SE of the ``N``-sample mean, ``SD(S)/sqrt(N)``;
- :func:`effect_coefficients`, :func:`effect_means` -- the exact sum-to-zero
  contrast behind every factorial parameter (main effects and interactions of
  every order);
- :func:`flip_probability`, :func:`flip_table` -- chance that the sampled
  estimate of a parameter has the wrong sign, binned by effect size;
- :func:`decoding_bias`, :func:`decoding_bias_table` -- bias of the expected
  composite under the stored temperature x top-p grid, and its correlation
  with Consensus.

No function here draws a random number: every result is a closed form of the
exact PMFs. Simulation appears only in the tests that check these formulas.

The composite is the instrument's (:func:`xlikert.composite`): reverse-keyed
items are reflected first and, for an instrument with subscales, every result
has a ``subscale`` dim (a column in the tables): standard errors, effects and
biases of each subscale's composite, never of their sum. ``reflect=False``
and ``subscale=None`` opt out.

Flip probabilities use the normal approximation to the estimator
(:ref:`eq-flip-prob`) with the *exact* mean and variance of the estimator. Why not the
exact law: the estimator is a weighted sum of ``N x (#conditions)`` lattice
variables with weights of different denominators, so its exact distribution
has millions of atoms at realistic budgets and would need FFT convolutions
whose round-off is as large as the small tail probabilities of interest. Each
condition's sample mean already averages ``N`` composite draws, each itself a
sum of ``K`` independent items, so the central limit approximation is very
accurate in the regime where flips matter (the tests check it against
simulation for ``N`` as small as 10).
"""

from __future__ import annotations

from .decoding import correlation, decoding_bias
from .flips import (
    DEFAULT_EFFECT_BINS,
    effect_coefficients,
    effect_means,
    effect_variances,
    flip_probability,
)
from .moments import DEFAULT_BUDGETS, composite_moments, mixture_moments, standard_error
from .tables import decoding_bias_table, flip_table, sampling_se_table

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_EFFECT_BINS",
    "composite_moments",
    "correlation",
    "decoding_bias",
    "decoding_bias_table",
    "effect_coefficients",
    "effect_means",
    "effect_variances",
    "flip_probability",
    "flip_table",
    "mixture_moments",
    "sampling_se_table",
    "standard_error",
]
