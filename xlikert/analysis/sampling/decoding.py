"""Decoding bias: what sampling at a temperature and top-p would have shifted.

:func:`decoding_bias` is the bias of the expected composite under each point of
the stored temperature x top-p grid (``decoding_pmf``, computed at collection on
the full vocabulary) against the exact PMF, and :func:`correlation` relates it to
Consensus (paper appendix "Cost of Monte Carlo sampling", decoding bias);
:func:`xlikert.analysis.sampling.tables.decoding_bias_table` tabulates both. Closed forms
of the exact PMFs; nothing is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np
import xarray as xr

from ...core.dims import DECODING_DIMS, factor_dims
from ...core.errors import InvalidPMFError
from ...core.validate import (
    as_pmf,
    check_pmf,
)
from .moments import composite_moments

__all__ = ["correlation", "decoding_bias"]


# --------------------------------------------------------------------------- decoding
def decoding_bias(
    ds: xr.Dataset | xr.DataArray,
    *,
    native: Mapping[str, float] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Bias of the expected composite under each stored decoding setting.

    ``bias(T, p) = E_{T,p}[S] - E_native[S]`` per condition, in composite-score
    units, where the expectation uses ``decoding_pmf`` (the item PMF a sampler
    would see under temperature ``T`` and top-p ``p``). Native is ``T = 1``,
    ``top-p = 1`` on the grid if stored, else the results' ``pmf``. Where the
    nucleus of some item keeps no valid token (its ``decoding_pmf`` is all NaN),
    a sampler never produces a valid composite: the bias there is NaN and
    ``attrs["n_undefined"]`` counts such cells.

    Parameters
    ----------
    ds : xr.Dataset or xr.DataArray
        Results Dataset with ``decoding_pmf`` ``(*factors, item, temperature,
        top_p, score)`` (and ``pmf``), or the ``decoding_pmf`` DataArray itself
        (then the native setting must be on its grid).
    native : keyword-only
        The reference setting, default ``{"temperature": 1.0, "top_p": 1.0}``.
    item_dim, score_dim : keyword-only
        Names of the item and score dimensions.

    Returns
    -------
    xr.DataArray
        ``bias`` with dims ``(*factors, temperature, top_p)``.

    Examples
    --------
    >>> from xlikert.datasets import synthetic_pmf
    >>> pmf = synthetic_pmf({"model": 2}, n_items=3)
    >>> grid = pmf.expand_dims(temperature=[0.5, 1.0], top_p=[0.9, 1.0]).copy()
    >>> ds = xr.Dataset({"pmf": pmf, "decoding_pmf": grid})
    >>> float(abs(decoding_bias(ds)).max())
    0.0
    """
    if isinstance(ds, xr.DataArray):
        ds = ds.to_dataset(name="decoding_pmf")
    if "decoding_pmf" not in ds:
        raise InvalidPMFError(
            "results hold no 'decoding_pmf' (temperature x top-p grid); collect with a "
            "decoding grid to measure decoding bias"
        )
    grid = as_pmf(ds, "decoding_pmf")
    for d in DECODING_DIMS:
        if d not in grid.dims:
            raise InvalidPMFError(f"decoding_pmf has no {d!r} dimension; dims are {grid.dims}")
    factor_dims(grid, item_dim=item_dim, score_dim=score_dim, auxiliary=DECODING_DIMS)
    # A setting whose nucleus keeps no valid token for some item (the collector
    # stores decoding_valid_mass = 0 and an all-NaN PMF) never yields a valid
    # composite: its bias is undefined, reported as NaN and counted in the attrs.
    # Partly-NaN PMFs are malformed and still fail check_pmf.
    undefined = grid.isnull().all([score_dim]).any([item_dim])
    filled = check_pmf(grid.where(~undefined, 1.0 / grid.sizes[score_dim]), score_dim)
    native = dict(native or {"temperature": 1.0, "top_p": 1.0})
    expected = composite_moments(filled, item_dim=item_dim, score_dim=score_dim)["mean"]
    expected = expected.where(~undefined)
    t_ok = np.isclose(grid["temperature"].values, native["temperature"])
    p_ok = np.isclose(grid["top_p"].values, native["top_p"])
    if t_ok.any() and p_ok.any():
        ref = expected.isel(temperature=int(np.argmax(t_ok)), top_p=int(np.argmax(p_ok)), drop=True)
    elif "pmf" in ds:
        ref = composite_moments(ds["pmf"], item_dim=item_dim, score_dim=score_dim)["mean"]
    else:
        raise InvalidPMFError(
            f"native setting {native} is not on the decoding grid and the results hold no 'pmf'"
        )
    out = expected - ref
    out.name = "bias"
    # A server in top-k mode measures only part of the grid: its decoding_valid_mass is
    # NaN (not measured), where 0 means "measured, no valid token in the nucleus".
    unmeasured = undefined & False
    if "decoding_valid_mass" in ds:
        unmeasured = ds["decoding_valid_mass"].isnull().any([item_dim]) & undefined
    out.attrs = {
        "long_name": "decoding bias of the expected composite",
        "units": "composite-score points",
        "n_undefined": int((undefined & ~unmeasured).sum()),
        "n_unmeasured": int(unmeasured.sum()),
        "undefined": "NaN where some item keeps no valid token in the nucleus "
        "(n_undefined) or the setting was not measured (n_unmeasured)",
    }
    return out


def correlation(x: xr.DataArray, y: xr.DataArray) -> dict[str, float]:
    """Pearson ``r`` across all cells of two aligned arrays, with its p-value.

    Parameters
    ----------
    x, y : xr.DataArray
        Two arrays on the same dims (``y`` is transposed to ``x``'s order).

    Returns
    -------
    dict
        ``{"r": r, "p": p, "n": n}``: the correlation, its two-sided p-value
        (SciPy; NaN without it) and the number of cells; ``r`` and ``p`` are NaN
        for fewer than 3 cells or a constant array.

    Examples
    --------
    >>> c = correlation(xr.DataArray([1.0, 2.0, 3.0]), xr.DataArray([2.0, 4.0, 7.0]))
    >>> round(c["r"], 3), c["n"]
    (0.993, 3)
    """
    a = np.asarray(x.values, dtype=float).ravel()
    b = np.asarray(y.transpose(*x.dims).values, dtype=float).ravel()
    n = a.size
    if n < 3 or np.std(a) == 0 or np.std(b) == 0:
        return {"r": math.nan, "p": math.nan, "n": n}
    r = float(np.corrcoef(a, b)[0, 1])
    try:
        from scipy import stats as _st

        p = float(_st.pearsonr(a, b).pvalue)
    except ImportError:  # pragma: no cover
        p = math.nan
    return {"r": r, "p": p, "n": n}
