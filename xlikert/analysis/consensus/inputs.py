"""The checks and preparation of item PMFs that every Consensus function shares."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import xarray as xr

from ...core.dims import CORE_DIMS, DECODING_DIMS, factor_dims
from ...core.errors import DesignError, InvalidPMFError, XlikertError
from ...core.validate import as_pmf, check_item_dim, check_pmf, check_score_axis, is_lazy
from ..support import check_support, require_ordinal, support_bounds

__all__ = ["layer_attrs", "one_scale", "prepare_consensus"]


def _scale(pmf: xr.DataArray, score_dim: Hashable) -> np.ndarray:
    """Validated scale values as float64; the scale needs two points for ``d_max > 0``."""
    y = check_score_axis(pmf, score_dim).astype(np.float64)
    if y.size < 2:
        raise InvalidPMFError(
            f"score coordinate {score_dim!r} holds a single value {y.tolist()}; Consensus "
            "needs a scale of at least two points (d_max = y_max - y_min > 0)"
        )
    return y


def prepare_consensus(
    pmf: xr.DataArray | xr.Dataset, item_dim: Hashable | None, score_dim: Hashable
) -> tuple[xr.DataArray, np.ndarray]:
    pmf = as_pmf(pmf)
    # extra dims are carried along: the decoding grid too, and items when item_dim is None
    factor_dims(pmf, item_dim=item_dim, score_dim=score_dim, auxiliary=[*DECODING_DIMS, *CORE_DIMS])
    pmf = check_pmf(pmf, score_dim)
    y = _scale(pmf, score_dim)
    if item_dim is not None:
        if item_dim == score_dim:
            raise XlikertError(f"item_dim and score_dim are both {item_dim!r}")
        check_item_dim(pmf, item_dim)
    if pmf.dtype != np.float64:
        pmf = pmf.astype(np.float64)
    if is_lazy(pmf):
        core = {score_dim: -1} if item_dim is None else {item_dim: -1, score_dim: -1}
        pmf = pmf.chunk(core)
    return pmf, y


def one_scale(
    pmf: xr.DataArray | xr.Dataset, item_dim: Hashable, score_dim: Hashable
) -> xr.DataArray:
    """The items on their common scale (Multivariate Consensus has one ``d_max``).

    Raises where an item is nominal or the items have different supports.
    """
    pmf = as_pmf(pmf)
    require_ordinal(pmf, "Multivariate Consensus", item_dim=item_dim)
    if "score_min" not in pmf.coords and "score_max" not in pmf.coords:
        return pmf
    check_support(pmf, item_dim=item_dim, score_dim=score_dim)
    lo, hi = (
        np.unique(b.values) for b in support_bounds(pmf, item_dim=item_dim, score_dim=score_dim)
    )
    if lo.size > 1 or hi.size > 1:
        ids = (
            [str(v) for v in np.atleast_1d(pmf[item_dim].values)] if item_dim in pmf.coords else []
        )
        spans = [
            f"{i}: {a}..{b}"
            for i, a, b in zip(
                ids,
                *(np.atleast_1d(c.values) for c in (pmf.score_min, pmf.score_max)),
                strict=False,
            )
        ]
        raise DesignError(
            "Multivariate Consensus needs the items of a condition on one scale (one d_max); "
            f"these items have their own: {spans}; compute it per group of items with the "
            "same scale, or use tastle_consensus per item"
        )
    return pmf.sel({score_dim: slice(int(lo[0]), int(hi[0]))})


def layer_attrs(pmf: xr.DataArray, **extra: Any) -> dict[Any, Any]:
    attrs = dict(pmf.attrs)
    attrs.update(extra)
    return attrs
