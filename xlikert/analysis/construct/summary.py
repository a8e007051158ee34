"""Summaries of effect PMFs: E, SD, SNR and dPD (:func:`summarize`).

The tidy table of a decomposition (:func:`~xlikert.summary_table`) and the construct
stage's other tables are in :mod:`xlikert.analysis.construct.tables`.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import xarray as xr

from ...core.dims import AUXILIARY_DIMS, CORE_DIMS, factor_dims
from ...core.errors import InvalidPMFError
from ...core.validate import (
    as_pmf,
)

__all__ = ["SNR_RTOL", "summarize"]


#: An effect with ``SD <= SNR_RTOL * max|support|`` counts as deterministic (paper:
#: SNR = +inf if E != 0, 0 if E == 0); ``|E|`` below the same bound counts as 0. The
#: bound is relative, so SNR does not depend on the units of the support.
SNR_RTOL = 1e-9


def _summary_numpy(
    p: np.ndarray, z: np.ndarray, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """E, SD, SNR, dPD of PMFs ``p`` (..., n) on support ``z`` (n)."""
    p = np.asarray(p, dtype=np.float64)
    mean = p @ z
    var = np.einsum("...n,...n->...", p, (z - mean[..., None]) ** 2)
    sd = np.sqrt(np.clip(var, 0.0, None))
    det = sd <= tol
    with np.errstate(divide="ignore", invalid="ignore"):
        snr = np.where(det, np.where(np.abs(mean) > tol, np.inf, 0.0), np.abs(mean) / sd)
    dpd = np.maximum(p[..., z > 0].sum(-1), p[..., z < 0].sum(-1))
    return mean, sd, snr, dpd


def summarize(x: xr.DataArray | xr.Dataset, *, dim: Hashable = "effect") -> xr.Dataset:
    """E, SD, SNR and dPD of PMFs along ``dim``.

    The paper's summaries of an effect (:ref:`eq-effect-summaries`).
    ``SNR = |E| / SD``; where ``SD <= SNR_RTOL * max|z|`` the effect is
    deterministic and SNR is ``+inf`` if ``|E|`` exceeds the same bound, else 0.
    ``dPD = max(P(Z > 0), P(Z < 0))``.

    Parameters
    ----------
    x : xr.DataArray or xr.Dataset
        PMFs along ``dim`` with a numeric coordinate (``effect``, ``score``,
        ``slope``, ...), or a Dataset with such a ``pmf`` (a decomposition node).
        Other dims are carried along.
    dim : keyword-only
        The support dim.

    Returns
    -------
    xr.Dataset
        ``E``, ``SD``, ``SNR`` and ``dPD`` with the dims of ``x`` less ``dim``;
        each carries its ``long_name`` and formula in its attrs.

    Raises
    ------
    InvalidPMFError
        ``dim`` missing or without a numeric coordinate.
    DesignError
        Another dim named like one of xlikert's variables (``E``, ``SD``, ...;
        :mod:`xlikert.core.dims`), which the output would overwrite.

    Examples
    --------
    >>> import xarray as xr, xlikert as xl
    >>> p = xr.DataArray([0.99, 0.01], dims="effect", coords={"effect": [1, 100]})
    >>> s = xl.summarize(p)
    >>> round(float(s.E), 2), round(float(s.SD), 2), round(float(s.SNR), 2), float(s.dPD)
    (1.99, 9.85, 0.2, 1.0)
    """
    p = as_pmf(x)
    if dim not in p.dims:
        raise InvalidPMFError(f"PMF has no dimension {dim!r}; its dims are {tuple(p.dims)}")
    factor_dims(p, item_dim=None, score_dim=dim, auxiliary=[*CORE_DIMS, *AUXILIARY_DIMS])
    if dim not in p.coords or not np.issubdtype(p[dim].dtype, np.number):
        raise InvalidPMFError(f"dimension {dim!r} needs a numeric coordinate (the support values)")
    z = np.asarray(p[dim].values, dtype=np.float64)
    tol = SNR_RTOL * float(np.max(np.abs(z))) if z.size else 0.0
    outs = xr.apply_ufunc(
        _summary_numpy,
        p,
        kwargs={"z": z, "tol": tol},
        input_core_dims=[[dim]],
        output_core_dims=[[], [], [], []],
        dask="parallelized",
        output_dtypes=[np.float64] * 4,
        keep_attrs=False,
    )
    ds = xr.Dataset(dict(zip(["E", "SD", "SNR", "dPD"], outs, strict=True)))
    ds["E"].attrs = {"long_name": "expected effect", "formula": "sum_z z P(z)"}
    ds["SD"].attrs = {"long_name": "predictive standard deviation"}
    ds["SNR"].attrs = {
        "long_name": "signal-to-noise ratio |E|/SD",
        "convention": f"SD <= {SNR_RTOL:g}*max|z|: +inf if E != 0 else 0",
    }
    ds["dPD"].attrs = {"long_name": "discrete probability of direction max(P(>0), P(<0))"}
    return ds
