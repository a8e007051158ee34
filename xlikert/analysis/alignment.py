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
* ``lower``, ``upper`` -- the Wald interval ``estimate -+ z SE`` at ``level``,
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

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy.stats import norm

from .. import kernels
from .._version import __version__
from ..core.dims import DECODING_DIMS, factor_dims
from ..core.errors import DesignError, InputTypeError, InvalidPMFError
from ..core.io import encode_attrs, read_attrs
from ..core.validate import as_pmf, check_pmf, check_score_axis, single_chunk
from .human import human_marginal, mixture_weights
from .nonsubstantive import nonsubstantive_alignment
from .support import check_support, item_points, nominal_items, require_ordinal

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

#: The metrics of :func:`alignment` (coords of its ``metric`` dim).
METRICS: tuple[str, ...] = (
    "wasserstein",
    "representativeness",
    "total_variation",
    "jensen_shannon",
    "mean_difference",
)
#: The metrics that need ordered options: NaN for nominal items in :func:`alignment`.
ORDER_METRICS: tuple[str, ...] = ("wasserstein", "representativeness", "mean_difference")
_KERNEL_ORDER = ("wasserstein", "total_variation", "jensen_shannon", "mean_difference")
_GRID = "_metric"


def _human_parts(
    human: xr.Dataset | xr.DataArray,
) -> tuple[xr.DataArray, xr.DataArray | None, str | None]:
    """The human PMF, its sample size (``n_eff`` where weighted, else ``n``) and that name."""
    if isinstance(human, xr.DataArray):
        return human, None, None
    if not isinstance(human, xr.Dataset):
        raise InputTypeError(
            f"expected a human PMF Dataset (xl.human_pmf) or DataArray, got {type(human).__name__}"
        )
    q = as_pmf(human)
    for name in ("n_eff", "n"):
        if name in human:
            return q, human[name].astype(np.float64), name
    return q, None, None


def _has_rate(human: xr.Dataset | xr.DataArray) -> bool:
    return isinstance(human, xr.Dataset) and "nonsubstantive_rate" in human


def _check_pair(
    p: xr.DataArray, q: xr.DataArray, score_dim: Hashable, item_dim: Hashable
) -> tuple[np.ndarray, dict[Hashable, np.ndarray]]:
    """Check that the model and human PMFs can be compared.

    Returns the score values and, for shared dims whose levels come in another order,
    the model's levels (to put the human data in the model's order).
    """
    y = check_score_axis(p, score_dim)
    yq = check_score_axis(q, score_dim)
    if not np.array_equal(y, yq):
        raise InvalidPMFError(
            f"model and human PMFs are on different scales: model {score_dim!r} "
            f"{y[0]}..{y[-1]}, human {yq[0]}..{yq[-1]}"
        )
    reorder: dict[Hashable, np.ndarray] = {}
    for d in set(p.dims) & set(q.dims) - {score_dim}:
        a, b = (list(map(str, x[d].values)) if d in x.coords else None for x in (p, q))
        if a == b:
            continue
        if a is not None and b is not None and sorted(a) == sorted(b):
            reorder[d] = p[d].values
            continue
        what = "item" if d == item_dim else "level"
        only_h = [v for v in (b or []) if v not in (a or [])]
        only_m = [v for v in (a or []) if v not in (b or [])]
        raise DesignError(
            f"dim {d!r}: the human data and the model do not have the same {what}s: "
            f"human only {only_h}, model only {only_m}"
            + (" (an item the instrument/results do not have?)" if d == item_dim else "")
            + f"; select common ones with .sel({d}=[...])"
        )
    return y, reorder


def _prepare(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    score_dim: Hashable,
    item_dim: Hashable,
) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray | None, str | None, np.ndarray]:
    p = as_pmf(model)
    q, size, size_name = _human_parts(human)
    factor_dims(p, item_dim=item_dim, score_dim=score_dim, auxiliary=DECODING_DIMS)
    factor_dims(q, item_dim=item_dim, score_dim=score_dim, what="the human PMF")
    y, reorder = _check_pair(p, q, score_dim, item_dim)
    if reorder:
        q = q.sel(reorder)
        size = (
            size.sel({d: v for d, v in reorder.items() if d in size.dims})
            if size is not None
            else None
        )
    p, q = check_pmf(p, score_dim), check_pmf(q, score_dim)
    check_support(p, item_dim=item_dim, score_dim=score_dim)
    return p, q, size, size_name, y


def _order(obj: Any, p: xr.DataArray, q: xr.DataArray, item_dim: Hashable) -> Any:
    """``obj`` with dims: the model's factors, the human-only groups, item, metric."""
    first = [d for d in (*p.dims, *q.dims) if d in obj.dims and d not in (item_dim, "metric")]
    return obj.transpose(*dict.fromkeys(first), *[d for d in (item_dim, "metric") if d in obj.dims])


def _metrics(
    p: xr.DataArray, q: xr.DataArray, y: np.ndarray, score_dim: Hashable, engine: str | None
) -> xr.DataArray:
    """Kernel values along ``_metric``: 4 metrics, then their one-respondent variances."""
    p, q = (single_chunk(x.astype(np.float64), [score_dim]) for x in (p, q))
    out = xr.apply_ufunc(
        kernels.get_kernel("alignment_metrics", engine),
        p,
        q,
        xr.DataArray(y.astype(np.float64), dims=score_dim),
        xr.DataArray(np.zeros(2 * len(_KERNEL_ORDER)), dims=_GRID),
        input_core_dims=[[score_dim], [score_dim], [score_dim], [_GRID]],
        output_core_dims=[[_GRID]],
        dask="parallelized",
        output_dtypes=[np.float64],
        keep_attrs=False,
    )
    return out.drop_vars([c for c in out.coords if score_dim in getattr(out[c], "dims", ())])


def _one(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    name: str,
    score_dim: Hashable,
    item_dim: Hashable,
    engine: str | None,
) -> xr.DataArray:
    p, q, _, _, y = _prepare(model, human, score_dim, item_dim)
    if name in ORDER_METRICS:
        require_ordinal(p, name, item_dim=item_dim)
    out = _metrics(p, q, y, score_dim, engine).isel({_GRID: _KERNEL_ORDER.index(name)})
    out = _order(out, p, q, item_dim)
    out.name = name
    return out


def wasserstein(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    engine: str | None = None,
) -> xr.DataArray:
    """Wasserstein-1 distance of model and human PMFs on the ordinal scale (score units).

    ``W1 = sum_k |F_p(k) - F_q(k)|`` over the scale points ``k``, with ``F_p`` and
    ``F_q`` the two CDFs: the earth mover's distance on the integer scale.

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``) on ``score_dim``.
    human : xr.Dataset or xr.DataArray
        Human PMFs: a :func:`xlikert.human_pmf` Dataset or a PMF DataArray.
    score_dim, item_dim : keyword-only
        The score dim (consecutive integers, the same in both) and the item dim
        (the same items in both, if either has it).
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``wasserstein`` (score units), broadcast over every other dim of both inputs.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        Model and human PMFs on different score axes, or an invalid PMF.
    DesignError
        A dim both have with different items or levels (naming them), or a dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([0.5, 0.5, 0.0], dims="score", coords={"score": [1, 2, 3]})
    >>> float(xl.wasserstein(p, p.roll(score=1)))
    1.0
    """
    return _one(model, human, "wasserstein", score_dim, item_dim, engine)


def representativeness(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    engine: str | None = None,
) -> xr.DataArray:
    """OpinionQA representativeness ``1 - W1 / (K - 1)``, ``K`` the number of scale points.

    1 for identical PMFs, 0 for all mass at opposite ends of the scale
    (Santurkar et al. 2023).

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``) on ``score_dim``.
    human : xr.Dataset or xr.DataArray
        Human PMFs: a :func:`xlikert.human_pmf` Dataset or a PMF DataArray.
    score_dim, item_dim : keyword-only
        The score dim (consecutive integers, the same in both) and the item dim
        (the same items in both, if either has it).
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``representativeness`` in [0, 1], broadcast over every other dim of both inputs.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        Model and human PMFs on different score axes, or an invalid PMF.
    DesignError
        A dim both have with different items or levels (naming them), or a dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([1.0, 0.0, 0.0], dims="score", coords={"score": [1, 2, 3]})
    >>> float(xl.representativeness(p, p.roll(score=2)))    # opposite ends
    0.0
    """
    w1 = wasserstein(model, human, score_dim=score_dim, item_dim=item_dim, engine=engine)
    out = 1.0 - w1 / (item_points(as_pmf(model), item_dim=item_dim, score_dim=score_dim) - 1)
    out.name = "representativeness"
    return out


def total_variation(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    engine: str | None = None,
) -> xr.DataArray:
    """Total variation distance of model and human PMFs, in [0, 1].

    ``TV = 1/2 sum_k |p_k - q_k|``.

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``) on ``score_dim``.
    human : xr.Dataset or xr.DataArray
        Human PMFs: a :func:`xlikert.human_pmf` Dataset or a PMF DataArray.
    score_dim, item_dim : keyword-only
        The score dim (consecutive integers, the same in both) and the item dim
        (the same items in both, if either has it).
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``total_variation``, broadcast over every other dim of both inputs.

    Raises
    ------
    InvalidPMFError
        Model and human PMFs on different score axes, or an invalid PMF.
    DesignError
        A dim both have with different items or levels (naming them), or a dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([0.5, 0.5, 0.0], dims="score", coords={"score": [1, 2, 3]})
    >>> float(xl.total_variation(p, p.roll(score=1)))
    0.5
    """
    return _one(model, human, "total_variation", score_dim, item_dim, engine)


def jensen_shannon(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    engine: str | None = None,
) -> xr.DataArray:
    """Jensen-Shannon divergence of model and human PMFs, in bits.

    With log base 2 it lies in [0, 1]; it is the divergence, not its square root
    (the JS distance).

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``) on ``score_dim``.
    human : xr.Dataset or xr.DataArray
        Human PMFs: a :func:`xlikert.human_pmf` Dataset or a PMF DataArray.
    score_dim, item_dim : keyword-only
        The score dim (consecutive integers, the same in both) and the item dim
        (the same items in both, if either has it).
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``jensen_shannon`` (bits), broadcast over every other dim of both inputs.

    Raises
    ------
    InvalidPMFError
        Model and human PMFs on different score axes, or an invalid PMF.
    DesignError
        A dim both have with different items or levels (naming them), or a dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([1.0, 0.0], dims="score", coords={"score": [1, 2]})
    >>> float(xl.jensen_shannon(p, p.roll(score=1)))         # disjoint supports
    1.0
    """
    return _one(model, human, "jensen_shannon", score_dim, item_dim, engine)


def mean_difference(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    engine: str | None = None,
) -> xr.DataArray:
    """Difference of the means of model and human PMFs, model minus humans (score units).

    ``E_p[y] - E_q[y]``.

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``) on ``score_dim``.
    human : xr.Dataset or xr.DataArray
        Human PMFs: a :func:`xlikert.human_pmf` Dataset or a PMF DataArray.
    score_dim, item_dim : keyword-only
        The score dim (consecutive integers, the same in both) and the item dim
        (the same items in both, if either has it).
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``mean_difference`` (score units), broadcast over every other dim of both inputs.

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    InvalidPMFError
        Model and human PMFs on different score axes, or an invalid PMF.
    DesignError
        A dim both have with different items or levels (naming them), or a dim
        with a name xlikert reserves (:mod:`xlikert.core.dims`).
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([0.5, 0.5, 0.0], dims="score", coords={"score": [1, 2, 3]})
    >>> float(xl.mean_difference(p.roll(score=1), p))
    1.0
    """
    return _one(model, human, "mean_difference", score_dim, item_dim, engine)


def _ceiling(
    q: xr.DataArray, size: xr.DataArray, y: np.ndarray, score_dim: Hashable, engine: str | None
) -> xr.DataArray:
    q = single_chunk(q.astype(np.float64), [score_dim])
    out = xr.apply_ufunc(
        kernels.get_kernel("noise_ceiling", engine),
        q,
        xr.DataArray(y.astype(np.float64), dims=score_dim),
        size,
        xr.DataArray(np.zeros(len(_KERNEL_ORDER)), dims=_GRID),
        input_core_dims=[[score_dim], [score_dim], [], [_GRID]],
        output_core_dims=[[_GRID]],
        dask="parallelized",
        output_dtypes=[np.float64],
        keep_attrs=False,
    )
    return out.drop_vars([c for c in out.coords if score_dim in getattr(out[c], "dims", ())])


def _by_metric(four: xr.DataArray, n_points: xr.DataArray, kind: str) -> xr.DataArray:
    """The 4 kernel metrics along ``_metric`` -> the 5 :data:`METRICS` along ``metric``.

    ``kind`` is ``"value"`` (representativeness ``1 - W1/(K - 1)``) or ``"se"`` (its SE
    ``SE(W1)/(K - 1)``); ``K`` is each item's own number of points.
    """
    parts = dict(zip(_KERNEL_ORDER, [four.isel({_GRID: i}) for i in range(4)], strict=True))
    scaled = parts["wasserstein"] / (n_points - 1)
    parts["representativeness"] = scaled if kind == "se" else 1.0 - scaled
    return xr.concat([parts[m] for m in METRICS], dim="metric").assign_coords(metric=list(METRICS))


def noise_ceiling(
    human: xr.Dataset,
    *,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    engine: str | None = None,
) -> xr.DataArray:
    """Expected alignment of two independent human samples of the same size (no Monte Carlo).

    For each group (and item) with PMF ``q`` and ``N`` respondents (``n_eff``
    when weighted): the expected Wasserstein-1, representativeness, total
    variation, Jensen-Shannon divergence (bits) and ``|mean difference|``
    between two independent samples of ``N`` respondents from ``q``. See
    :mod:`xlikert.analysis.alignment` for which are exact and which approximations are used.

    Parameters
    ----------
    human : xr.Dataset
        A human PMF Dataset with its sample size (``n``, or ``n_eff`` when
        weighted): :func:`xlikert.human_pmf` and friends.
    score_dim, item_dim : keyword-only
        Names of the score and item dims.
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        ``ceiling`` with dims ``(*groups, item, metric)``; attrs name the
        sample size used and the methods.

    Raises
    ------
    DesignError
        ``human`` without a sample size (a bare PMF), or a dim with a name
        xlikert reserves (:mod:`xlikert.core.dims`).
    InvalidPMFError
        A malformed score axis or an invalid PMF.
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import pandas as pd, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"q": [1, 2] * 50}), ["q"], scale=(1, 2))
    >>> c = xl.noise_ceiling(h).sel(item="q")
    >>> round(float(c.sel(metric="total_variation")), 4)    # E|X - X'| / 100, X ~ Bin(100, 1/2)
    0.0563
    """
    q, size, size_name = _human_parts(human)
    if size is None:
        raise DesignError(
            "the noise ceiling needs the human sample size: pass xl.human_pmf's Dataset"
        )
    y = check_score_axis(q, score_dim)
    factor_dims(q, item_dim=item_dim, score_dim=score_dim, what="the human PMF")
    k = item_points(q, item_dim=item_dim, score_dim=score_dim)
    out = _by_metric(_ceiling(q, size, y, score_dim, engine), k, "value")
    out = _order(out, q, q, item_dim)
    out.name = "ceiling"
    out.attrs = encode_attrs({"sample_size": size_name, **_METHODS})
    return out


_METHODS = {
    "se_method": "delta method on the multinomial covariance (diag q - q q')/N of the human PMF "
    "(N = n, or Kish n_eff when weighted); the model PMF is exact",
    "interval_method": "Wald: estimate -+ z SE, clipped to the metric's range",
    "ceiling_method": "expected metric between two independent human samples of size N from q: "
    "W1, TV and representativeness exact for integer N (binomial Gini mean difference), normal "
    "approximation for non-integer N; JS second order (K+ - 1)/(4 N ln 2); |mean difference| "
    "normal 2 SD/sqrt(pi N)",
    "js_log_base": 2,
    "representativeness": "1 - W1/(K - 1), K = number of points of the item's own scale "
    "(OpinionQA)",
}


def alignment(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset,
    *,
    level: float = 0.95,
    score_dim: Hashable = "score",
    item_dim: Hashable = "item",
    engine: str | None = None,
) -> xr.Dataset:
    """Every alignment metric of model vs human PMFs, with its SE, interval and noise ceiling.

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs (or a results Dataset: its ``pmf``); item PMFs, composites
        or mixtures, on the same score axis as ``human``.
    human : xr.Dataset
        A human PMF Dataset (:func:`xlikert.human_pmf`,
        :func:`xlikert.human_composite`, :func:`xlikert.human_marginal`) with
        ``n`` (and ``n_eff`` when weighted).
    level : keyword-only
        Coverage of the interval.
    score_dim, item_dim : keyword-only
        Names of the score and item dims.
    engine : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.Dataset
        Variables ``estimate``, ``se``, ``lower``, ``upper``, ``ceiling`` with
        dims (every dim of both inputs but ``score``, ``metric``); ``metric``
        holds :data:`METRICS`. Attrs name the methods (``se_method``,
        ``interval_method``, ``ceiling_method``, ``js_log_base``, ...).
        Representativeness divides by each item's own ``K - 1`` (item coordinate
        ``n_points`` where the items have their own scales, else the attr).
        For nominal items (item coordinate ``nominal``) the metrics that need an
        order (:data:`ORDER_METRICS`) are NaN and the attr ``nominal_items`` names
        them. When ``model`` is a results Dataset with ``nonsubstantive_mass`` and
        ``human`` counts non-substantive answers, the ``nonsubstantive_*``
        variables of :func:`xlikert.analysis.nonsubstantive.nonsubstantive_alignment`
        (model minus human rates, with the human binomial SE) are added on an
        ``option`` dim.

    Raises
    ------
    InvalidPMFError
        Different score axes, or an invalid PMF.
    DesignError
        Dims shared by both with different items or levels (naming them).

    Examples
    --------
    >>> import pandas as pd, xarray as xr, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"q": [1, 2, 2, 3] * 25}), ["q"], scale=(1, 3))
    >>> m = xr.DataArray([[0.25, 0.5, 0.25]], dims=("item", "score"),
    ...                  coords={"item": ["q"], "score": [1, 2, 3]})
    >>> a = xl.alignment(m, h).sel(item="q", metric="wasserstein")
    >>> float(a.estimate), round(float(a.ceiling), 3)      # a perfect model, and two samples
    (0.0, 0.098)
    """
    if not 0 < level < 1:
        raise DesignError(f"level must be in (0, 1), got {level!r}")
    p, q, size, size_name, y = _prepare(model, human, score_dim, item_dim)
    if size is None:
        raise DesignError("alignment needs the human sample size: pass xl.human_pmf's Dataset")
    k = item_points(p, item_dim=item_dim, score_dim=score_dim)
    raw = _metrics(p, q, y, score_dim, engine)
    estimate = _by_metric(raw.isel({_GRID: slice(0, 4)}), k, "value")
    se = _by_metric(np.sqrt(raw.isel({_GRID: slice(4, 8)}) / size), k, "se")
    z = float(norm.ppf(0.5 + level / 2))
    metric = {"metric": list(METRICS)}
    lo_bound = xr.DataArray([0.0, 0.0, 0.0, 0.0, -np.inf], dims="metric", coords=metric)
    hi_bound = xr.concat(
        [k - 1.0, *(xr.DataArray(v) for v in (1.0, 1.0, 1.0, np.inf))], dim="metric"
    ).assign_coords(metric)
    ds = xr.Dataset(
        {
            "estimate": estimate,
            "se": se,
            "lower": np.maximum(estimate - z * se, lo_bound),
            "upper": np.minimum(estimate + z * se, hi_bound),
            "ceiling": _by_metric(_ceiling(q, size, y, score_dim, engine), k, "value"),
        }
    )
    nominal = nominal_items(p, item_dim=item_dim)
    if nominal:
        ordered = xr.DataArray([m in ORDER_METRICS for m in METRICS], dims="metric", coords=metric)
        ds = ds.where(~(p.coords["nominal"].reset_coords(drop=True) & ordered))
    ds = _order(ds, p, q, item_dim)
    ds["estimate"].attrs["long_name"] = "alignment of the model PMF with the human PMF"
    ds["se"].attrs["long_name"] = "standard error from the human sample (delta method)"
    ds["ceiling"].attrs["long_name"] = "expected value for two independent human samples of size N"
    ds.attrs = {
        **_METHODS,
        "level": level,
        "sample_size": size_name,
        "history": f"xlikert {__version__}: alignment",
    }
    if k.ndim:
        ds = ds.assign_coords(n_points=k)
    else:
        ds.attrs["n_points"] = int(k)
    if isinstance(model, xr.Dataset) and {"nonsubstantive_mass", "valid_mass"} <= set(model):
        ns = nonsubstantive_alignment(model, human, level=level) if _has_rate(human) else None
        ds = ds if ns is None else ds.merge(ns, compat="override")
    if nominal:
        ds.attrs["nominal_items"] = nominal
        ds.attrs["nominal_note"] = (
            f"{', '.join(ORDER_METRICS)} need ordered options: NaN for the nominal items"
        )
    return encode_attrs(ds)


def silicon_population(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset,
    *,
    dim: Hashable | Sequence[Hashable] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """The model's PMF mixed over persona factors with the human groups' counts (a silicon sample).

    The model's persona factors are dims named like the human group attributes
    (e.g. ``party``, ``education``) with the same levels; the mixture over
    ``dim`` (default: every human group) weights each persona by the
    respondents of that group (the sum of their survey weights when weighted),
    per item, so it matches the human marginal :func:`xlikert.human_marginal`
    over the same ``dim``. Mixtures are means: ``sum_g w_g p_g / sum_g w_g``.

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs whose persona factors are named like the human groups (or a
        results Dataset: its ``pmf``).
    human : xr.Dataset
        A human PMF Dataset (:func:`xlikert.human_pmf`): its counts, or sums of
        survey weights, are the mixture weights.
    dim : keyword-only
        The persona factors to mix over;
        default every human group.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.

    Returns
    -------
    xr.DataArray
        ``pmf``, the silicon population's PMF: the dims of ``model`` less ``dim``;
        the attr ``silicon_mixture_over`` names them.

    Raises
    ------
    DesignError
        A dim of ``dim`` that is not a human group, or model and human PMFs with
        different items or levels on a shared dim.
    InvalidPMFError
        Model and human PMFs on different score axes.
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import pandas as pd, xarray as xr, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"g": ["a", "b", "b"], "q": [1, 2, 2]}), ["q"],
    ...                  scale=(1, 2), by=["g"])
    >>> m = xr.DataArray([[[1.0, 0.0]], [[0.0, 1.0]]], dims=("g", "item", "score"),
    ...                  coords={"g": ["a", "b"], "item": ["q"], "score": [1, 2]})
    >>> xl.silicon_population(m, h).values.tolist()           # 1/3 a, 2/3 b
    [[0.3333333333333333, 0.6666666666666666]]
    """
    p = as_pmf(model)
    q, _, _ = _human_parts(human)
    _check_pair(p, q, score_dim, item_dim)
    w = mixture_weights(human).astype(np.float64)
    groups = [d for d in w.dims if d != item_dim]
    dims = groups if dim is None else [dim] if isinstance(dim, str) else list(dim)
    for d in dims:
        if d not in groups:
            raise DesignError(f"{d!r} is not a group of the human data; its groups: {groups}")
    out = (p * w).sum(dims) / w.sum(dims)
    out.attrs = encode_attrs({**read_attrs(p), "silicon_mixture_over": [str(d) for d in dims]})
    out.name = "pmf"
    return out.transpose(..., *[d for d in (item_dim, score_dim) if d in out.dims])


def _label(cell: dict[Hashable, Any], groups: list[Hashable]) -> str:
    parts = [f"{g}={cell[g]}" for g in groups if g in cell]
    return ", ".join(parts) if parts else "all respondents"


def alignment_table(model: xr.DataArray, human: xr.Dataset, by: Hashable) -> pd.DataFrame:
    """Alignment of each ``by`` level (e.g. model) with the human population, each attribute's
    subgroups and (with several attributes) each cell: tidy rows with estimate, interval, ceiling.

    The model's persona factors named like the human groups are mixed with the human counts
    (:func:`silicon_population`); a model without them is compared as it is.

    Returns
    -------
    pandas.DataFrame
        Columns ``by``, ``group`` (``"party=D, edu=hi"``, or ``"all respondents"``),
        ``item``, ``metric``, ``estimate``, ``se``, ``lower``, ``upper``, ``ceiling``.
    """
    groups = [d for d in human["n"].dims if d != "item"]  # the human groups (kept or pooled)
    targets: list[tuple[list[Hashable], xr.Dataset, xr.DataArray]] = [
        (groups, human_marginal(human), silicon_population(model, human))
    ]
    for g in groups if len(groups) > 1 else []:
        rest = [d for d in groups if d != g]
        targets.append(
            (rest, human_marginal(human, dim=rest), silicon_population(model, human, dim=rest))
        )
    if groups:
        targets.append(([], human, model))
    frames = []
    for mixed, h, m in targets:
        a = alignment(m, h)
        df = a[["estimate", "lower", "upper", "se", "ceiling"]].to_dataframe().reset_index()
        kept = [g for g in groups if g not in mixed]
        df.insert(1, "group", [_label(row, kept) for row in df[kept].to_dict("records")])
        frames.append(df.drop(columns=kept))
    out = pd.concat(frames, ignore_index=True)
    keep = [by, "group", "item", "metric", "estimate", "se", "lower", "upper", "ceiling"]
    return out[[c for c in keep if c in out.columns]]
