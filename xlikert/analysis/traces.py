"""The trace-sampling error of any summary of a reasoning results file.

In reasoning mode (:mod:`xlikert.collect.reasoning`) the item PMF of a model is
the mean over M sampled thoughts of the exact answer PMF after each one
(``trace_pmf``); it carries Monte Carlo error from the thoughts alone. Every
analysis runs on ``pmf`` unchanged (mixtures are means), and
:func:`trace_se` gives any summary its standard error by the delete-one
jackknife over the ``trace`` dim: the summary is recomputed M times, each time
with one trace index left out of every reasoning cell, and

``SE = sqrt((M - 1) / M * sum_t (theta_(-t) - mean_t theta_(-t))^2)``.

For a summary linear in the PMFs (an item PMF, the composite mean) this is the
usual sample SD over traces divided by sqrt(M); for the others (SD, SNR, dPD,
effects) it is the jackknife's first-order approximation. Cells of models not in
reasoning mode are exact and stay fixed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..core.dims import MODEL_DIM
from ..core.errors import InputTypeError, InvalidPMFError, XlikertError
from ..core.validate import as_pmf, describe_cells

__all__ = ["trace_se"]

_JK = "_jackknife"


def _traces_of(
    pmf: xr.DataArray | xr.Dataset, trace_dim: Hashable, score_dim: Hashable
) -> tuple[xr.DataArray, xr.DataArray, int]:
    """(pmf, trace PMFs, M): the exact/mean PMF, the traces (NaN where none), traces per cell."""
    if isinstance(pmf, xr.Dataset):
        if "trace_pmf" not in pmf:
            raise InvalidPMFError(
                "the results hold no 'trace_pmf': no model was collected in reasoning mode "
                "(their numbers are exact; there is no trace-sampling error)"
            )
        mean, tp = as_pmf(pmf), pmf["trace_pmf"]
    elif isinstance(pmf, xr.DataArray):
        if trace_dim not in pmf.dims:
            raise InvalidPMFError(
                f"trace PMFs need a {trace_dim!r} dim; dims are {tuple(pmf.dims)} (pass the "
                "results Dataset to use its pmf and trace_pmf)"
            )
        tp = pmf
        mean = None
    else:
        raise InputTypeError(
            f"expected a results Dataset or a trace_pmf DataArray, got {type(pmf).__name__}"
        )
    if trace_dim not in tp.dims or score_dim not in tp.dims:
        raise InvalidPMFError(
            f"trace_pmf needs dims {trace_dim!r} and {score_dim!r}; it has {tuple(tp.dims)}"
        )
    present = tp.notnull().all([score_dim])  # (..., trace)
    n = present.sum([trace_dim])
    counts = sorted({int(v) for v in np.unique(n.values)} - {0})
    if len(counts) > 1:
        by: list[Hashable] = [d for d in n.dims if d == MODEL_DIM] or list(n.dims[:1])
        if by:
            per = n.max([d for d in n.dims if d not in by])
            who = ", ".join(
                f"{k}: {int(v)}" for k, v in zip(per[by[0]].values, per.values, strict=True)
            )
        else:  # pragma: no cover - a 0-d count cannot disagree with itself
            who = str(counts)
        raise XlikertError(
            f"the reasoning cells have different numbers of traces ({who}); the jackknife "
            "leaves out one trace index of every cell at a time: select models with one M"
        )
    m = counts[0] if counts else 0
    first = present.isel({trace_dim: slice(m)}).all([trace_dim]) | (n == 0)
    if not bool(first.all()):
        raise XlikertError(
            f"traces must fill the first positions of {trace_dim!r}; they do not at "
            f"{describe_cells(~first)}"
        )
    if mean is None:
        if bool((n == 0).any()):
            raise InvalidPMFError(
                f"cells without traces at {describe_cells(n == 0)}: pass the results Dataset, "
                "whose pmf holds their exact PMF"
            )
        mean = tp.isel({trace_dim: slice(m)}).mean([trace_dim])
    return mean, tp.isel({trace_dim: slice(m)}), m


def _leave_one_trace_out(
    pmf: xr.DataArray | xr.Dataset,
    trace: int,
    *,
    trace_dim: Hashable = "trace",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """The item PMFs with trace ``trace`` left out of every reasoning cell.

    Parameters
    ----------
    pmf
        A results Dataset with ``pmf`` and ``trace_pmf`` (cells without traces
        keep their exact ``pmf``), or a ``trace_pmf`` DataArray.
    trace
        The trace index left out, ``0 <= trace < M``.
    trace_dim, score_dim : keyword-only
        Names of the trace and score dims.

    Returns
    -------
    xr.DataArray
        Shaped like ``pmf``: the mean over the other M - 1 traces.

    Examples
    --------
    >>> import xarray as xr
    >>> tp = xr.DataArray([[0.2, 0.8], [0.6, 0.4], [0.4, 0.6]], dims=("trace", "score"),
    ...                   coords={"score": [1, 2]})
    >>> _leave_one_trace_out(tp, 0).values
    array([0.5, 0.5])
    """
    mean, tp, m = _traces_of(pmf, trace_dim, score_dim)
    if not 0 <= trace < m:
        raise XlikertError(f"trace must be in 0..{m - 1}, got {trace}")
    return _loo(mean, tp, m, trace, trace_dim, score_dim)


def _loo(
    mean: xr.DataArray, tp: xr.DataArray, m: int, t: int, trace_dim: Hashable,
    score_dim: Hashable,
) -> xr.DataArray:  # fmt: skip
    has = tp.notnull().all([score_dim]).any([trace_dim])
    rest = (tp.sum([trace_dim]) - tp.isel({trace_dim: t}, drop=True)) / (m - 1)
    out: xr.DataArray = xr.where(has, rest, mean).transpose(*mean.dims)  # type: ignore[no-untyped-call]
    out.attrs = dict(mean.attrs)
    out.name = mean.name
    result: xr.DataArray = out
    return result


def _combine(values: list[Any], m: int) -> Any:
    factor = (m - 1) / m
    first = values[0]
    if isinstance(first, xr.DataArray | xr.Dataset):
        stack = xr.concat(values, dim=_JK, coords="minimal", compat="override")
        shift = stack - stack.isel({_JK: 0})  # exactly 0 where nothing varies
        return np.sqrt(factor * ((shift - shift.mean(_JK)) ** 2).sum(_JK))
    if isinstance(first, pd.DataFrame):
        cols = first.select_dtypes("number").columns
        out = first.copy()
        out[cols] = _se(np.stack([v[cols].to_numpy(dtype=float) for v in values]), factor)
        return out
    if isinstance(first, pd.Series):
        out = first.astype(float)
        out[:] = _se(np.stack([v.to_numpy(dtype=float) for v in values]), factor)
        return out
    return _se(np.asarray(values, dtype=float), factor)


def _se(arr: np.ndarray, factor: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        shift = arr - arr[:1]  # exactly 0 where nothing varies
        result: np.ndarray = np.sqrt(factor * ((shift - shift.mean(0)) ** 2).sum(0))
        return result


def trace_se(
    pmf: xr.DataArray | xr.Dataset,
    fn: Callable[[xr.DataArray], Any],
    *,
    trace_dim: Hashable = "trace",
    score_dim: Hashable = "score",
) -> Any:
    """Trace-sampling standard error of any summary, by the jackknife over traces.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        A reasoning results Dataset (its ``pmf`` and ``trace_pmf``; cells of
        models not in reasoning mode are exact), or a ``trace_pmf`` DataArray
        in which every cell has traces.
    fn : callable
        The summary: item PMFs ``(*factors, item, score)`` -> a DataArray, a
        Dataset, a pandas DataFrame/Series (numeric columns get the SE, the
        others are kept) or numbers. E.g. ``xl.composite``, or
        ``lambda p: xl.summary_table(xl.decompose(p))``.
    trace_dim, score_dim : keyword-only
        Names of the trace and score dims.

    Returns
    -------
    Same type as ``fn``'s output
        The standard error of each number ``fn(pmf)`` returns: 0 where only
        exact cells enter it, NaN with one trace per cell.

    Raises
    ------
    InvalidPMFError
        No ``trace_pmf`` (nothing was sampled), or a DataArray without traces in
        some cell.
    XlikertError
        Reasoning cells with different numbers of traces (select models with
        one M first).

    Examples
    --------
    >>> import xlikert as xl
    >>> ds = xl.open_results("reasoning.nc")  # doctest: +SKIP
    >>> e = lambda p: xl.summarize(xl.composite(p), dim="score")["E"]
    >>> e(ds), xl.trace_se(ds, e)  # doctest: +SKIP
    >>> xl.trace_se(ds, lambda p: xl.summary_table(xl.decompose(p)))  # doctest: +SKIP
    """
    if not callable(fn):
        raise InputTypeError(f"fn must be a function of the item PMFs, got {type(fn).__name__}")
    mean, tp, m = _traces_of(pmf, trace_dim, score_dim)
    if m == 0:  # every cell exact
        return _combine([fn(mean), fn(mean)], 2)
    if m == 1:
        out = _combine([fn(mean), fn(mean)], 2)
        return out * math.nan if not isinstance(out, pd.DataFrame) else _nan_frame(out)
    values = [fn(_loo(mean, tp, m, t, trace_dim, score_dim)) for t in range(m)]
    return _combine(values, m)


def _nan_frame(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    num = out.select_dtypes("number").columns
    out[num] = np.nan
    return out
