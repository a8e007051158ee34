"""Alignment of model PMFs with human PMFs, with the human side's sampling error.

The model PMF ``p`` is exact; the human PMF ``q`` is estimated from ``N``
respondents (:mod:`xlikert.analysis.human`). On a scale of ``K`` consecutive integer
points (an item's scale or a composite's support):

* ``wasserstein`` -- ``W1 = sum_k |F_p(k) - F_q(k)|``, the earth mover's distance
  on the ordinal scale (score units);
* ``representativeness`` -- ``1 - W1 / (K - 1)`` (Santurkar et al. 2023,
  OpinionQA), 1 for identical PMFs, 0 for all mass at opposite ends;
* ``total_variation`` -- ``1/2 sum |p - q|``;
* ``jensen_shannon`` -- the Jensen-Shannon divergence in **bits** (log base 2,
  so it lies in [0, 1]; not its square root, the JS distance);
* ``mean_difference`` -- ``E_p[y] - E_q[y]`` (model minus humans).

Every function takes the model PMF first and the human PMF second, broadcasts
over every other dim by name (a model's persona factors meet the human groups
of the same name; levels must match), and takes ``score_dim`` (and
``item_dim``) keyword-only. Item PMFs, composites and mixtures are all PMFs on
a score axis, so all work alike.

:func:`alignment` adds, per metric, the human side's sampling error and the
noise ceiling:

* ``se`` -- the delta method on the multinomial covariance
  ``(diag q - q q') / N``: ``SE^2 = (sum_j q_j g_j^2 - (sum_j q_j g_j)^2) / N``
  with ``g`` the gradient of the metric in ``q`` (:mod:`xlikert.kernels.alignment`);
  ``N`` is ``n``, or Kish's ``n_eff`` for weighted samples. Where the metric is
  not differentiable (``p`` and ``q`` CDFs touching) the SE is that of the
  one-sided derivative and understates the error; the estimate is also biased
  upwards for small ``N`` (a distance is never negative);
* ``lower``, ``upper`` -- the Wald interval ``estimate -+ z SE`` at ``confidence``,
  clipped to the metric's range;
* ``ceiling`` -- the expected value of the metric between two independent human
  samples of the same size ``N`` from ``q``: what a second survey of the same
  population would reach. Exact for ``W1``, ``TV`` (and so representativeness)
  when ``N`` is an integer; the normal approximation for a non-integer
  ``n_eff``; second order for ``JS``; normal for ``|mean difference|``. No Monte
  Carlo.

:func:`silicon_population` mixes a model's persona PMFs with the human groups'
counts (or weights), so the model's population answer is compared with the
human marginal (:func:`xlikert.human_marginal`). :func:`alignment_table` tabulates
the alignment with the whole population, each attribute's subgroups and each cell.

The package, one topic a module:

* :mod:`.pairs` -- the checks pairing a model PMF with a human PMF, the
  alignment kernel and the metric names (:data:`METRICS`, ``ORDER_METRICS``);
* :mod:`.metrics` -- :func:`wasserstein`, :func:`representativeness`,
  :func:`total_variation`, :func:`jensen_shannon`, :func:`mean_difference`;
* :mod:`.estimate` -- :func:`alignment` (estimate, SE, interval, ceiling) and
  :func:`noise_ceiling`;
* :mod:`.population` -- :func:`silicon_population` and :func:`alignment_table`.

Examples
--------
>>> import numpy as np, pandas as pd, xarray as xr, xlikert as xl
>>> rng = np.random.default_rng(0)
>>> t = pd.DataFrame({"party": rng.choice(["D", "R"], 400), "q": rng.integers(1, 6, 400)})
>>> human = xl.human_pmf(t, ["q"], scale=(1, 5), by=["party"])
>>> model = xl.datasets.synthetic_pmf({"model": 2}, n_items=1, scale=(1, 5)).assign_coords(item=["q"])
>>> a = xl.alignment(model, human)
>>> a.estimate.dims, a.metric.values.tolist()[:2]
(('model', 'party', 'item', 'metric'), ['wasserstein', 'representativeness'])
"""

from __future__ import annotations

from .estimate import alignment, noise_ceiling
from .metrics import (
    jensen_shannon,
    mean_difference,
    representativeness,
    total_variation,
    wasserstein,
)
from .pairs import METRICS
from .population import alignment_table, silicon_population

__all__ = [
    "METRICS",
    "alignment",
    "alignment_table",
    "jensen_shannon",
    "mean_difference",
    "noise_ceiling",
    "representativeness",
    "silicon_population",
    "total_variation",
    "wasserstein",
]
