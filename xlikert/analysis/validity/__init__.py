"""Validity: which reading of the model is closest to the people.

xlikert reads a model's answer several ways, each a level of the ``elicitation`` factor
(first token, answer prefix, greedy reply, own words, stated; design notes, section 9).
:func:`validity` sets every level against the same respondents:

* per cell (model, condition, group, item): the Wasserstein-1 distance, the total
  variation and the Jensen-Shannon divergence (bits) of the model PMF to the human PMF,
  each with the humans' standard error: the delta method on the multinomial covariance
  ``(diag q - q q') / N`` of the human PMF ``q`` (the model's PMFs are exact);
* per pair of levels: the difference of their distances with a **paired** SE: both are
  read against the same ``q``, so the delta method runs on the difference of the two
  gradients, which is smaller than the two SEs combined as if independent;
* per condition: the means over the items every level answers, with an SE that is an
  upper bound (the items' human PMFs come from the same people, whose correlation across
  items the PMFs do not hold);
* the closest level per metric, the runner-up, and ``closest_z``: the lead over the
  runner-up in SEs of their paired difference, with ``closest_probability = Phi(z)``;
* with a ``respondent`` factor and the people's answers: each level's individual scores
  (log score, RPS, Brier; :mod:`xlikert.analysis.individual`) averaged per person over the
  items, their means over the people, the skill over the population marginal, and the
  paired differences between levels over the same people.

The package, one topic a module:

* :mod:`.core` -- the numpy cores (distances with gradients, the delta method, paired
  means and skills, the closest level);
* :mod:`.distances` -- the human-PMF side;
* :mod:`.people` -- the respondent side;
* :mod:`.compare` -- :func:`validity`.

Examples
--------
>>> import pandas as pd, xarray as xr, xlikert as xl
>>> h = xl.human_pmf(pd.DataFrame({"q": [1, 2, 2, 3] * 25}), ["q"], scale=(1, 3))
>>> pmf = xr.DataArray([[[0.25, 0.5, 0.25]], [[0.6, 0.3, 0.1]]],
...                    dims=("elicitation", "item", "score"),
...                    coords={"elicitation": ["stated", "first_token"], "item": ["q"],
...                            "score": [1, 2, 3]})
>>> xl.validity(pmf, h).closest.values.tolist()
['stated', 'stated', 'stated']
"""

from __future__ import annotations

from .compare import VALIDITY_METHODS, validity
from .core import DISTANCES
from .people import RESPONDENT_SCORES

__all__ = ["DISTANCES", "RESPONDENT_SCORES", "VALIDITY_METHODS", "validity"]
