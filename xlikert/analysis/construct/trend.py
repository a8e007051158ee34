"""The per-unit trend effect of an ordered factor (:ref:`eq-trend-mixture`)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import xarray as xr

from ...core.dims import SUBSCALE_DIM, factor_dims
from ...core.errors import DesignError
from ...core.validate import (
    as_pmf,
    check_fully_crossed,
    check_levels,
    single_chunk,
)
from ..keying import Subscale
from ..support import require_ordinal
from .composite import to_composite
from .effects import blocked_contrast, trim_support

__all__ = ["trend"]

_TERM = "_term"


def _trend_values(s: xr.DataArray, dim: Hashable, values: Any) -> np.ndarray:
    if values is None:
        if dim in s.coords and np.issubdtype(s[dim].dtype, np.number):
            v = s[dim].values
        else:
            cands = [
                c
                for c in s.coords
                if c != dim and s[c].dims == (dim,) and np.issubdtype(s[c].dtype, np.number)
            ]
            if len(cands) != 1:
                raise DesignError(
                    f"factor {dim!r} has no numeric coordinate to order it by "
                    f"(numeric coords along it: {cands}); pass values=<coord name or numbers>"
                )
            v = s[cands[0]].values
    elif isinstance(values, str):
        if values not in s.coords or s[values].dims != (dim,):
            raise DesignError(f"values={values!r} is not a 1-D coordinate along {dim!r}")
        v = s[values].values
    else:
        v = np.asarray(values)
    v = np.asarray(v, dtype=np.float64)
    if v.shape != (s.sizes[dim],):
        raise DesignError(f"need one value per level of {dim!r} ({s.sizes[dim]}), got {v.shape}")
    if not np.all(np.isfinite(v)):
        raise DesignError(f"trend values of {dim!r} must be finite, got {v.tolist()}")
    if np.unique(v).size != v.size:
        raise DesignError(f"trend values of {dim!r} must be distinct, got {v.tolist()}")
    return v


def _scatter_trend(d: np.ndarray, inv: np.ndarray, weights: np.ndarray, n_out: int) -> np.ndarray:
    """Mix local-difference PMFs ``d`` (..., step, effect) onto the slope grid."""
    batch = d.shape[:-2]
    flat = (d * weights[:, None]).reshape(-1, inv.size)
    out = np.zeros((flat.shape[0], n_out))
    for row in range(flat.shape[0]):
        out[row] = np.bincount(inv, weights=flat[row], minlength=n_out)
    return out.reshape(*batch, n_out)


def trend(
    pmf: xr.DataArray | xr.Dataset,
    dim: Hashable,
    values: Any = None,
    *,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
    reflect: bool = True,
    subscale: Subscale = SUBSCALE_DIM,
    kernels: str | None = None,
) -> xr.DataArray:
    """Per-unit trend ``gamma_c`` over an ordered numeric factor (:ref:`eq-trend-mixture`).

    Levels are sorted by their numeric values ``v_1 < ... < v_L`` (uneven spacing
    allowed). For each adjacent pair the paired local difference
    ``S(v_{l+1}, lambda_-c) ⊖ S(v_l, lambda_-c)`` is mixed over blocks
    (the paper's local differences), rescaled by ``1/delta_l`` (the local
    slopes) and the local slopes are mixed with weights ``delta_l / (v_L - v_1)``
    (the per-unit trend; appendix "Trend Effects"). ``E[gamma_c]`` is the secant
    slope of the marginal means (the paper's secant-slope identity).

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        Item PMFs (composed first) or composite PMFs, or a results Dataset
        (its ``pmf``).
    dim : hashable
        The ordered factor.
    values : sequence of float or str, optional
        Numbers per level, or the name of a numeric coordinate along ``dim``.
        Default: ``dim``'s own coordinate if numeric, else the only numeric
        non-index coordinate along it (e.g. ``model_size``).
    item_dim, score_dim : keyword-only
        Names of the item and score dims.
    reflect, subscale : keyword-only
        How item PMFs are composed (:func:`composite`); a ``subscale`` dim is
        carried along (one trend per subscale), never mixed over.
    kernels : keyword-only
        ``"numba"`` (default) or ``"numpy"``.

    Returns
    -------
    xr.DataArray
        PMF on the float coordinate ``slope`` (support points ``z / delta_l``;
        equal floating-point values are merged exactly).

    Raises
    ------
    NominalItemError
        A nominal item (options without an order), naming it.
    DesignError
        ``dim`` not a factor or with fewer than two levels, trend values that
        are missing, not one finite number per level or not distinct, a design
        that is not fully crossed, or a dim with a name xlikert reserves.
    InvalidPMFError
        An invalid PMF (negative or NaN mass, not summing to 1).

    Examples
    --------
    >>> import xlikert as xl
    >>> pmf = xl.datasets.synthetic_pmf({"model": 3, "target": 2}, n_items=3)
    >>> pmf = pmf.assign_coords(model_size=("model", [1.0, 4.0, 12.0]))
    >>> g = xl.trend(pmf, "model")
    >>> g.dims, bool(abs(g.sum() - 1) < 1e-12)
    (('slope',), True)
    """
    require_ordinal(as_pmf(pmf), "trend", item_dim=item_dim)
    s = to_composite(pmf, item_dim, score_dim, kernels, reflect, subscale)
    factor_dims(s, dim, item_dim=item_dim, score_dim=score_dim, auxiliary=[SUBSCALE_DIM])
    check_levels(s, [dim], min_levels=2)
    v = _trend_values(s, dim, values)
    order = np.argsort(v, kind="stable")
    v = v[order]
    delta = np.diff(v)
    weights = delta / (v[-1] - v[0])
    others = [d for d in s.dims if d not in (dim, score_dim, SUBSCALE_DIM)]
    check_fully_crossed(s, [d for d in s.dims if d != score_dim], score_dim)
    s = s.drop_vars([c for c in s.coords if dim in s[c].dims])
    hi = xr.DataArray(order[1:], dims="_step")
    lo = xr.DataArray(order[:-1], dims="_step")
    terms = xr.concat([s.isel({dim: hi}), s.isel({dim: lo})], dim=_TERM).transpose(
        "_step", *others, ..., _TERM, score_dim
    )
    d = blocked_contrast(terms, [1, -1], others, score_dim, "effect", kernels, trim=False)
    d = single_chunk(d, ["_step", "effect"])  # the scatter mixes every step
    z = d["effect"].values.astype(np.float64)
    slopes = z[None, :] / delta[:, None]
    support, inv = np.unique(slopes.ravel(), return_inverse=True)
    out = xr.apply_ufunc(
        _scatter_trend,
        d.drop_vars("effect"),
        kwargs={"inv": inv.ravel(), "weights": weights, "n_out": support.size},
        input_core_dims=[["_step", "effect"]],
        output_core_dims=[["slope"]],
        dask="parallelized",
        output_dtypes=[np.float64],
        dask_gufunc_kwargs={"output_sizes": {"slope": support.size}},
    )
    out = trim_support(out.assign_coords(slope=support), "slope")
    out.attrs = {"dim": str(dim), "values": v.tolist()}
    out.name = "pmf"
    return out
