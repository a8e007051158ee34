"""The ``.likert`` accessor on DataArray and Dataset: delegation only.

The methods are built from the one list of the public API, :data:`xlikert.api.API`
(by :func:`xlikert.api.accessor_method`): each has the signature and the docstring of
the function it calls, less the first argument: ``da.likert.consensus(tol=1e-6)`` is
``xl.consensus(da, tol=1e-6)``.
On a Dataset the functions read its ``pmf`` (:func:`xlikert.failure_rate` its
``valid_mass``), as they do when called directly.

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

from typing import Any

import xarray as xr

from . import api
from .core import io as _io

__all__ = ["LikertDataArrayAccessor", "LikertDatasetAccessor"]


class _Likert:
    def __init__(self, obj: xr.DataArray | xr.Dataset) -> None:
        self._obj = obj

    @property
    def attrs(self) -> dict[Any, Any]:
        """The attrs with their JSON text decoded (provenance as structure); see :func:`xlikert.core.io.read_attrs`."""
        return _io.read_attrs(self._obj)


@xr.register_dataarray_accessor("likert")
class LikertDataArrayAccessor(_Likert):
    """``da.likert``: the xlikert functions with ``da`` as the PMF argument."""


@xr.register_dataset_accessor("likert")
class LikertDatasetAccessor(_Likert):
    """``ds.likert``: the xlikert functions on the results ``ds``, plus :func:`xlikert.failure_rate`."""


for _cls, _owner in ((LikertDataArrayAccessor, "DataArray"), (LikertDatasetAccessor, "Dataset")):
    for _name, _fn in api.accessor_methods(_owner).items():  # type: ignore[arg-type]
        setattr(_cls, _name, api.accessor_method(_fn))
