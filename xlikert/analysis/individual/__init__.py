"""One respondent at a time: the model's exact PMF scored against each person's answer.

A silicon sample with a persona per respondent (factor ``respondent``, one level per
row of a survey table) gives, for every person and item, the model's exact
distribution over the item's answers. :func:`individual_scores` scores it against
the answer the person gave:

=======================  ==========================================================
``answer_probability``   the probability the model gives to the person's answer
``log_score``            its natural log (0 is perfect; ``-inf`` where it is 0)
``rps``                  the ranked probability score of an ordinal item,
                         ``sum_k (F_k - O_k)^2 / (K - 1)`` over the item's own ``K``
                         points (0 perfect, 1 worst); NaN for a nominal item and
                         for a non-substantive answer
``brier``                ``sum_c (q_c - o_c)^2`` over the item's answers (0..2)
``mode_correct``         1 when the person's answer is the model's most probable
                         one; ``1/m`` when it is one of ``m`` tied modes (the
                         accuracy of a random tie-break; a uniform guess scores
                         ``1/C``)
=======================  ==========================================================

The answers of an item are its own points (``score_min..score_max``) and the
non-substantive options it offers ("Don't know", "Refused"; the results file's
``option`` dim): the model's answer distribution is
``pmf * valid_mass / A`` on the points and ``nonsubstantive_mass / A`` on the options,
``A = valid_mass + sum nonsubstantive_mass`` (failures left out, as a survey's
rate is among the respondents who answered; :func:`xlikert.nonsubstantive_rate`).
So a "Don't know" is scored against the model's "Don't know" mass, and a
substantive answer against its points' share of the answers. The RPS is conditional
on a substantive answer: it is computed on ``pmf``, the item's points only.

These scores are exact on the model's side: they carry no sampling error of the
model. The humans are a sample: :func:`individual_summary` averages them over the
respondents, per item and per group, with the standard error of a mean over
respondents, and compares them with three baselines -- the population's marginal
PMF (the shares of the answers in the whole table), the group persona's PMF (a
results file of group personas, read at each respondent's group) and a uniform
answer -- as skill scores ``(S - S_b) / (S_perfect - S_b)`` (``1 - L / L_b`` for a
loss) with delta-method standard errors of the paired means. A retest of the same
people gives the test-retest ceiling (the share who gave the same answer twice) and
the model's accuracy over it (Park et al. 2024).

The package, one topic a module:

* :mod:`.answers` -- the answers checked and decoded (:func:`respondent_answers`) and
  the model's answer distribution (:func:`answer_distribution`);
* :mod:`.scores` -- :func:`individual_scores` (:data:`INDIVIDUAL_SCORES`);
* :mod:`.summary` -- :func:`individual_summary` (:data:`BASELINES`).

Examples
--------
>>> import pandas as pd, xarray as xr
>>> from xlikert.analysis.individual import individual_scores
>>> res = xr.Dataset({"pmf": (("respondent", "item", "score"), [[[0.7, 0.2, 0.1]],
...                                                            [[0.1, 0.1, 0.8]]])},
...                  coords={"respondent": ["a", "b"], "item": ["q"], "score": [1, 2, 3]})
>>> s = individual_scores(res, pd.DataFrame({"q": [1, 2]}, index=["a", "b"]))
>>> s.answer_probability.values.ravel().tolist(), s.mode_correct.values.ravel().tolist()
([0.7, 0.1], [1.0, 0.0])
>>> [round(float(v), 3) for v in s.rps.values.ravel()]
[0.05, 0.325]
"""

from __future__ import annotations

from .answers import answer_distribution, respondent_answers
from .scores import INDIVIDUAL_SCORES, individual_scores
from .summary import BASELINES, individual_summary

__all__ = [
    "BASELINES",
    "INDIVIDUAL_SCORES",
    "answer_distribution",
    "individual_scores",
    "individual_summary",
    "respondent_answers",
]
