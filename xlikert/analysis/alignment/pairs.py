"""The model and human PMFs paired: their checks, the alignment kernel, the metric names."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import xarray as xr

from ...core.dims import DECODING_DIMS, factor_dims
from ...core.errors import DesignError, InputTypeError, InvalidPMFError
from ...core.validate import as_pmf, check_pmf, check_score_axis, single_chunk
from ...kernels import get_kernel
from ..support import check_support, require_ordinal

__all__ = [
    "GRID",
    "KERNEL_ORDER",
    "METRICS",
    "ORDER_METRICS",
    "check_pair",
    "has_rate",
    "human_parts",
    "kernel_metrics",
    "one_metric",
    "order_dims",
    "prepare_alignment",
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
KERNEL_ORDER = ("wasserstein", "total_variation", "jensen_shannon", "mean_difference")
GRID = "_metric"


def human_parts(
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


def has_rate(human: xr.Dataset | xr.DataArray) -> bool:
    return isinstance(human, xr.Dataset) and "nonsubstantive_rate" in human


def check_pair(
    p: xr.DataArray, q: xr.DataArray, score_dim: Hashable, item_dim: Hashable
) -> tuple[np.ndarray, dict[Hashable, np.ndarray]]:
    """Check that the model and human PMFs can be compared.

    Returns the score values and, for shared dims whose levels come in another order,
    the model's levels (to put the human data in the model's order).
    """
    y = check_score_axis(p, score_dim)
    yq = check_score_axis(q, score_dim)
    if not np.array_equal(y, yq):
        raise InvalidPMFError(_scale_mismatch(y, yq, score_dim))
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


def _scale_mismatch(y: np.ndarray, yq: np.ndarray, score_dim: Hashable) -> str:
    """The message of a model and a human PMF on different score axes, with the fix.

    Examples
    --------
    >>> import numpy as np
    >>> print(_scale_mismatch(np.arange(0, 9), np.arange(1, 4), "score"))
    model and human PMFs are on different scales: model 'score' 0..8, human 1..3; \
read the human answers on each item's own scale with human_pmf(..., instrument=...) \
(or scale={item: (min, max)}), or compare on the human scale with \
model.sel(score=slice(1, 3)) (an item's PMF is zero off its own scale)
    """
    (lo, hi), (qlo, qhi) = (int(y[0]), int(y[-1])), (int(yq[0]), int(yq[-1]))
    head = (
        f"model and human PMFs are on different scales: model {score_dim!r} {lo}..{hi}, "
        f"human {qlo}..{qhi}; read the human answers on each item's own scale with "
        "human_pmf(..., instrument=...) (or scale={item: (min, max)}), or compare on "
    )
    if set(yq.tolist()) <= set(y.tolist()):
        return head + (
            f"the human scale with model.sel({score_dim}=slice({qlo}, {qhi})) (an item's "
            "PMF is zero off its own scale)"
        )
    if set(y.tolist()) <= set(yq.tolist()):
        return head + f"the model's scale with human.sel({score_dim}=slice({lo}, {hi}))"
    return head + "one scale: the human PMF's, built with the results' scale"


def prepare_alignment(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    score_dim: Hashable,
    item_dim: Hashable,
) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray | None, str | None, np.ndarray]:
    p = as_pmf(model)
    q, size, size_name = human_parts(human)
    factor_dims(p, item_dim=item_dim, score_dim=score_dim, auxiliary=DECODING_DIMS)
    factor_dims(q, item_dim=item_dim, score_dim=score_dim, what="the human PMF")
    y, reorder = check_pair(p, q, score_dim, item_dim)
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


def order_dims(obj: Any, p: xr.DataArray, q: xr.DataArray, item_dim: Hashable) -> Any:
    """``obj`` with dims: the model's factors, the human-only groups, item, metric."""
    first = [d for d in (*p.dims, *q.dims) if d in obj.dims and d not in (item_dim, "metric")]
    return obj.transpose(*dict.fromkeys(first), *[d for d in (item_dim, "metric") if d in obj.dims])


def kernel_metrics(
    p: xr.DataArray, q: xr.DataArray, y: np.ndarray, score_dim: Hashable, kernels: str | None
) -> xr.DataArray:
    """Kernel values along ``_metric``: 4 metrics, then their one-respondent variances."""
    p, q = (single_chunk(x.astype(np.float64), [score_dim]) for x in (p, q))
    out = xr.apply_ufunc(
        get_kernel("alignment_metrics", kernels),
        p,
        q,
        xr.DataArray(y.astype(np.float64), dims=[score_dim]),
        xr.DataArray(np.zeros(2 * len(KERNEL_ORDER)), dims=GRID),
        input_core_dims=[[score_dim], [score_dim], [score_dim], [GRID]],
        output_core_dims=[[GRID]],
        dask="parallelized",
        output_dtypes=[np.float64],
        keep_attrs=False,
    )
    result: xr.DataArray = out.drop_vars(
        [c for c in out.coords if score_dim in getattr(out[c], "dims", ())]
    )
    return result


def one_metric(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset | xr.DataArray,
    name: str,
    score_dim: Hashable,
    item_dim: Hashable,
    kernels: str | None,
) -> xr.DataArray:
    p, q, _, _, y = prepare_alignment(model, human, score_dim, item_dim)
    if name in ORDER_METRICS:
        require_ordinal(p, name, item_dim=item_dim)
    out = kernel_metrics(p, q, y, score_dim, kernels).isel({GRID: KERNEL_ORDER.index(name)})
    out = order_dims(out, p, q, item_dim)
    out.name = name
    result: xr.DataArray = out
    return result
