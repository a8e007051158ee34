"""The ``.likert`` accessor on DataArray and Dataset: one line per method, delegation only.

Examples
--------
>>> import xlikert as xl
>>> pmf = xl.datasets.synthetic_pmf({"model": 2, "target": 2}, n_items=3)
>>> pmf.likert.composite().dims
('model', 'target', 'score')
>>> sorted(pmf.likert.decompose().children)
['grand', 'model', 'model:target', 'target']
"""

from __future__ import annotations

import importlib
from typing import Any

import xarray as xr

# by module path: ``xlikert.consensus`` the attribute is the function, not the module
_consensus = importlib.import_module("xlikert.consensus")
_constraint = importlib.import_module("xlikert.constraint")
_construct = importlib.import_module("xlikert.construct")
_io = importlib.import_module("xlikert.io")

__all__ = ["LikertDataArrayAccessor", "LikertDatasetAccessor"]


class _Likert:
    def __init__(self, obj: xr.DataArray | xr.Dataset) -> None:
        self._obj = obj

    def composite(self, *args: Any, **kwargs: Any) -> xr.DataArray:
        """See :func:`xlikert.composite`."""
        return _construct.composite(self._obj, *args, **kwargs)

    def decompose(self, *args: Any, **kwargs: Any) -> xr.DataTree:
        """See :func:`xlikert.decompose`."""
        return _construct.decompose(self._obj, *args, **kwargs)

    def contrast(self, *args: Any, **kwargs: Any) -> xr.DataArray:
        """See :func:`xlikert.contrast`."""
        return _construct.contrast(self._obj, *args, **kwargs)

    def trend(self, *args: Any, **kwargs: Any) -> xr.DataArray:
        """See :func:`xlikert.trend`."""
        return _construct.trend(self._obj, *args, **kwargs)

    def summarize(self, *args: Any, **kwargs: Any) -> xr.Dataset:
        """See :func:`xlikert.summarize`."""
        return _construct.summarize(self._obj, *args, **kwargs)

    def grand_mixture(self, *args: Any, **kwargs: Any) -> xr.DataArray:
        """See :func:`xlikert.grand_mixture`."""
        return _construct.grand_mixture(self._obj, *args, **kwargs)

    def marginal_slice(self, *args: Any, **kwargs: Any) -> xr.DataArray:
        """See :func:`xlikert.marginal_slice`."""
        return _construct.marginal_slice(self._obj, *args, **kwargs)

    def consensus(self, *args: Any, **kwargs: Any) -> Any:
        """See :func:`xlikert.consensus`."""
        return _consensus.consensus(self._pmf, *args, **kwargs)

    def tastle_consensus(self, *args: Any, **kwargs: Any) -> Any:
        """See :func:`xlikert.tastle_consensus`."""
        return _consensus.tastle_consensus(self._pmf, *args, **kwargs)

    def dissension(self, *args: Any, **kwargs: Any) -> Any:
        """See :func:`xlikert.dissension`."""
        return _consensus.dissension(self._pmf, *args, **kwargs)

    def entropy(self, *args: Any, **kwargs: Any) -> Any:
        """See :func:`xlikert.entropy`."""
        return _consensus.entropy(self._pmf, *args, **kwargs)

    def to_netcdf(self, path: Any) -> Any:
        """See :func:`xlikert.to_netcdf`."""
        return _io.to_netcdf(self._obj, path)


@xr.register_dataarray_accessor("likert")
class LikertDataArrayAccessor(_Likert):
    """``da.likert``: the xlikert functions with ``da`` as the PMF argument."""

    @property
    def _pmf(self) -> xr.DataArray:
        return self._obj


@xr.register_dataset_accessor("likert")
class LikertDatasetAccessor(_Likert):
    """``ds.likert``: the xlikert functions on ``ds.pmf``, plus :func:`xlikert.failure_rate`."""

    @property
    def _pmf(self) -> xr.DataArray:
        return self._obj["pmf"]

    def failure_rate(self, *args: Any, **kwargs: Any) -> Any:
        """See :func:`xlikert.failure_rate`."""
        return _constraint.failure_rate(self._obj, *args, **kwargs)
