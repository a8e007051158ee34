"""Input checks shared by every layer.

Each check raises a subclass of :class:`~xlikert.core.errors.XlikertError` whose
message names the problem and the offending coordinates. For Dask-backed input
the checks that need the values (NaN, sign, normalisation) are built into the
graph: :func:`check_pmf` returns the array wrapped so that every block is
checked when it is computed, so the input stays lazy and bad input still
raises, naming the cells (pass ``compute=True`` to check at once).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np
import xarray as xr

from .errors import DesignError, InputTypeError, InvalidPMFError

__all__ = [
    "PMF_ATOL",
    "as_pmf",
    "check_fully_crossed",
    "check_item_dim",
    "check_levels",
    "check_pmf",
    "check_score_axis",
    "describe_cells",
    "is_lazy",
    "squeeze_constant_factors",
]

#: Absolute tolerance on ``|sum(pmf) - 1|`` accepted by :func:`check_pmf`.
PMF_ATOL = 1e-6


def is_lazy(obj: xr.DataArray) -> bool:
    """True when ``obj`` is backed by a Dask array."""
    return obj.chunks is not None


def single_chunk(obj: xr.DataArray, dims: Iterable[Hashable]) -> xr.DataArray:
    """``obj`` with each of ``dims`` in one Dask chunk (a kernel's core dims); in-memory
    input is returned as it is.

    Examples
    --------
    >>> import xarray as xr, numpy as np
    >>> da = xr.DataArray(np.ones((4, 3)), dims=("model", "score")).chunk({"score": 1})
    >>> single_chunk(da, ["score"]).chunks
    ((4,), (3,))
    """
    if is_lazy(obj):
        return obj.chunk({d: -1 for d in dims if d in obj.dims})
    return obj


def as_pmf(obj: xr.DataArray | xr.Dataset, var: str = "pmf") -> xr.DataArray:
    """The PMF DataArray of ``obj``: itself, or a results Dataset's ``var`` (``pmf``).

    Every public analysis function reads its input through this, so each takes
    a DataArray or a results Dataset alike.

    Raises
    ------
    InvalidPMFError
        A Dataset without ``var``.
    InputTypeError
        Neither a DataArray nor a Dataset (an :class:`XlikertError` and a ``TypeError``).

    Examples
    --------
    >>> pmf = xr.DataArray([[0.5, 0.5]], dims=("item", "score"), name="pmf")
    >>> as_pmf(pmf.to_dataset()).dims
    ('item', 'score')
    >>> as_pmf(pmf.values)
    Traceback (most recent call last):
    ...
    xlikert.core.errors.InputTypeError: expected an xarray.DataArray of PMFs or a results Dataset with a 'pmf' variable, got ndarray
    """
    if isinstance(obj, xr.Dataset):
        if var not in obj.data_vars:
            raise InvalidPMFError(
                f"Dataset has no {var!r} variable (variables: {sorted(map(str, obj.data_vars))}); "
                f"pass a results Dataset or the {var} DataArray itself"
            )
        return obj[var]
    if not isinstance(obj, xr.DataArray):
        raise InputTypeError(
            f"expected an xarray.DataArray of PMFs or a results Dataset with a {var!r} "
            f"variable, got {type(obj).__name__}"
        )
    return obj


def describe_cells(mask: xr.DataArray, max_show: int = 5) -> str:
    """Format the coordinates where boolean ``mask`` is True, e.g. ``model='a', item='3'``.

    Examples
    --------
    >>> m = xr.DataArray([False, True], dims="model", coords={"model": ["a", "b"]})
    >>> describe_cells(m)
    "model='b'"
    """
    mask = mask.compute() if is_lazy(mask) else mask
    idx = np.argwhere(np.asarray(mask.values))
    cells = []
    for row in idx[:max_show]:
        parts = []
        for dim, i in zip(mask.dims, row, strict=True):
            val = mask[dim].values[i] if dim in mask.coords else i
            val = val.item() if hasattr(val, "item") else val
            parts.append(f"{dim}={val!r}")
        cells.append(", ".join(parts) if parts else "(scalar)")
    more = len(idx) - max_show
    text = "; ".join(f"[{c}]" if len(idx) > 1 else c for c in cells)
    if more > 0:
        text += f"; ... and {more} more"
    return text


def check_score_axis(pmf: xr.DataArray | xr.Dataset, score_dim: Hashable = "score") -> np.ndarray:
    """Check that ``score_dim`` exists and its coordinate holds consecutive integers.

    Returns the integer score values.
    """
    if score_dim not in pmf.dims:
        raise InvalidPMFError(
            f"PMF has no score dimension {score_dim!r}; its dims are {tuple(pmf.dims)}. "
            "Pass score_dim=... to name it."
        )
    if pmf.sizes[score_dim] == 0:
        raise InvalidPMFError(f"score dimension {score_dim!r} has length 0")
    if score_dim not in pmf.coords:
        raise InvalidPMFError(
            f"score dimension {score_dim!r} has no coordinate; assign the scale values, "
            f"e.g. pmf.assign_coords({score_dim}=range(1, 8))"
        )
    values = np.asarray(pmf[score_dim].values)
    try:
        as_float = values.astype(float)
    except (TypeError, ValueError):
        raise InvalidPMFError(
            f"score coordinate {score_dim!r} must hold integers, got {values.tolist()}"
        ) from None
    if not np.all(np.isfinite(as_float)) or not np.all(as_float == np.round(as_float)):
        raise InvalidPMFError(
            f"score coordinate {score_dim!r} must hold integers, got {values.tolist()}"
        )
    ints = as_float.astype(np.int64)
    if ints.size > 1 and not np.all(np.diff(ints) == 1):
        raise InvalidPMFError(
            f"score coordinate {score_dim!r} must be consecutive increasing integers "
            f"(e.g. 1..7), got {ints.tolist()}"
        )
    return ints


def check_pmf(
    pmf: xr.DataArray,
    score_dim: Hashable = "score",
    *,
    atol: float = PMF_ATOL,
    compute: bool = False,
) -> xr.DataArray:
    """Validate a PMF DataArray and return it unchanged.

    Checks the score axis (:func:`check_score_axis`), then that no mass is NaN
    or negative and that every PMF sums to 1 within ``atol``. A Dask-backed
    ``pmf`` (unless ``compute=True``) is returned wrapped, lazily: each block is
    checked when it is computed, and the same errors are raised then. Use the
    returned array.

    Raises
    ------
    InvalidPMFError
        Naming the problem and the offending coordinates.

    Examples
    --------
    >>> pmf = xr.DataArray([[0.5, 0.5], [0.2, 0.7]], dims=("item", "score"),
    ...                    coords={"item": ["a", "b"], "score": [1, 2]})
    >>> check_pmf(pmf)
    Traceback (most recent call last):
    ...
    xlikert.core.errors.InvalidPMFError: PMF does not sum to 1 (tolerance 1e-06) at item='b' (sum 0.9)
    """
    if not isinstance(pmf, xr.DataArray):
        raise InputTypeError(f"expected an xarray.DataArray of PMFs, got {type(pmf).__name__}")
    check_score_axis(pmf, score_dim)
    if is_lazy(pmf) and not compute:
        whole = pmf.chunk({score_dim: -1})  # a block must hold whole PMFs to check their sums
        return xr.map_blocks(
            _checked_block, whole, kwargs={"score_dim": score_dim, "atol": atol}, template=whole
        )
    values = pmf.compute() if is_lazy(pmf) else pmf
    nan = values.isnull()
    if bool(nan.any()):
        raise InvalidPMFError(
            f"PMF holds NaN mass at {describe_cells(nan.any([score_dim]))} "
            "(a missing cell? every condition and item needs a PMF)"
        )
    neg = values < 0
    if bool(neg.any()):
        raise InvalidPMFError(f"PMF holds negative mass at {describe_cells(neg.any([score_dim]))}")
    total = values.sum([score_dim])
    bad = abs(total - 1.0) > atol
    if bool(bad.any()):
        first = (
            float(total.where(bad).stack(_c=[...]).dropna("_c")[0]) if total.ndim else float(total)
        )
        raise InvalidPMFError(
            f"PMF does not sum to 1 (tolerance {atol:g}) at {describe_cells(bad)} (sum {first:.6g})"
        )
    return pmf


def _checked_block(block: xr.DataArray, score_dim: Hashable, atol: float) -> xr.DataArray:
    """One Dask block of a PMF array, checked by :func:`check_pmf` (runs at compute time)."""
    check_pmf(block, score_dim, atol=atol, compute=True)
    return block


def check_item_dim(pmf: xr.DataArray, item_dim: Hashable = "item") -> None:
    """Check that ``item_dim`` exists and is not empty."""
    if item_dim not in pmf.dims:
        raise InvalidPMFError(
            f"PMF has no item dimension {item_dim!r}; its dims are {tuple(pmf.dims)}"
        )
    if pmf.sizes[item_dim] == 0:
        raise InvalidPMFError(f"item dimension {item_dim!r} has length 0: no items to score")


def check_levels(obj: xr.DataArray, dims: Iterable[Hashable], min_levels: int = 2) -> None:
    """Check that every factor in ``dims`` exists and has at least ``min_levels`` levels."""
    for dim in dims:
        if dim not in obj.dims:
            raise DesignError(f"factor {dim!r} is not a dimension; dims are {tuple(obj.dims)}")
        n = obj.sizes[dim]
        if n < min_levels:
            levels = obj[dim].values.tolist() if dim in obj.coords else list(range(n))
            raise DesignError(
                f"factor {dim!r} has {n} level(s) {levels}; an effect needs at least {min_levels}"
            )


def squeeze_constant_factors(
    obj: xr.DataArray, factors: Sequence[Hashable]
) -> tuple[xr.DataArray, list[Hashable], dict[str, Any]]:
    """Squeeze the factors of ``obj`` that have one level: they are held constant.

    A factor with a single level has no effect to estimate; it is kept as a
    scalar coordinate of the result rather than refused, so a one-model run
    analyses like any other.

    Returns
    -------
    obj, factors, constant
        ``obj`` with the one-level factors squeezed (their level kept as a
        scalar coordinate), the factors that vary, in their order, and
        ``{factor: level}`` of the constant ones (for the output's attrs).

    Raises
    ------
    DesignError
        A factor with no level at all.

    Examples
    --------
    >>> pmf = xr.DataArray([[[0.5, 0.5]], [[0.2, 0.8]]], dims=("target", "model", "score"),
    ...                    coords={"model": ["qwen"], "target": ["USA", "China"]})
    >>> out, varying, constant = squeeze_constant_factors(pmf, ["target", "model"])
    >>> out.dims, varying, constant
    (('target', 'score'), ['target'], {'model': 'qwen'})
    """
    for dim in factors:
        if obj.sizes[dim] == 0:
            raise DesignError(f"factor {dim!r} has no level: no data to analyse")
    constant = [d for d in factors if obj.sizes[d] == 1]
    levels = {str(d): _scalar(obj[d].values[0]) if d in obj.coords else 0 for d in constant}
    return obj.squeeze(constant), [d for d in factors if d not in constant], levels


def _scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def check_fully_crossed(
    pmf: xr.DataArray, factors: Sequence[Hashable], score_dim: Hashable = "score"
) -> None:
    """Check that every cell of the cross of ``factors`` holds data (no NaN blocks).

    A cell is missing when all its mass is NaN, as happens after
    ``xr.combine_by_coords`` or ``reindex`` of an incomplete design. Dask input
    is not inspected here: :func:`check_pmf` reports its NaN cells when they are
    computed.
    """
    if is_lazy(pmf):
        return
    missing = pmf.isnull().all([score_dim])
    other = [d for d in missing.dims if d not in factors]
    if other:
        missing = missing.any(other)
    if bool(missing.any()):
        raise DesignError(
            "design is not fully crossed: missing cells at "
            f"{describe_cells(missing)}; every combination of {list(factors)} needs data"
        )
