"""The ``.likert`` accessor on DataArray and Dataset: one line per method, delegation only.

Each method has the signature of the function it calls, less the first
argument: ``da.likert.consensus(tol=1e-6)`` is ``xl.consensus(da, tol=1e-6)``.
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

import os
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from .analysis import alignment as _align
from .analysis import consensus as _consensus
from .analysis import constraint as _constraint
from .analysis import construct as _construct
from .analysis import human as _human
from .analysis import reliability as _reliability
from .analysis.keying import Subscale
from .core import io as _io
from .kernels import DEFAULT_MAX_CELLS

__all__ = ["LikertDataArrayAccessor", "LikertDatasetAccessor"]

_Dims = Hashable | Sequence[Hashable] | None


class _Likert:
    def __init__(self, obj: xr.DataArray | xr.Dataset) -> None:
        self._obj = obj

    def composite(
        self,
        *,
        item_dim: Hashable = "item",
        score_dim: Hashable = "score",
        reflect: bool = True,
        subscale: Subscale = "subscale",
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.composite`."""
        return _construct.composite(
            self._obj,
            item_dim=item_dim,
            score_dim=score_dim,
            reflect=reflect,
            subscale=subscale,
            engine=engine,
        )

    def decompose(
        self,
        *,
        factors: _Dims = None,
        max_order: int | None = None,
        item_dim: Hashable = "item",
        score_dim: Hashable = "score",
        reflect: bool = True,
        subscale: Subscale = "subscale",
        engine: str | None = None,
        progress: bool | None = None,
    ) -> xr.DataTree:
        """See :func:`xlikert.decompose`."""
        return _construct.decompose(
            self._obj,
            factors=factors,
            max_order=max_order,
            item_dim=item_dim,
            score_dim=score_dim,
            reflect=reflect,
            subscale=subscale,
            engine=engine,
            progress=progress,
        )

    def contrast(
        self,
        dim: Hashable,
        a: Any = None,
        b: Any = None,
        *,
        item_dim: Hashable = "item",
        score_dim: Hashable = "score",
        reflect: bool = True,
        subscale: Subscale = "subscale",
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.contrast`."""
        return _construct.contrast(
            self._obj,
            dim,
            a,
            b,
            item_dim=item_dim,
            score_dim=score_dim,
            reflect=reflect,
            subscale=subscale,
            engine=engine,
        )

    def trend(
        self,
        dim: Hashable,
        values: Any = None,
        *,
        item_dim: Hashable = "item",
        score_dim: Hashable = "score",
        reflect: bool = True,
        subscale: Subscale = "subscale",
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.trend`."""
        return _construct.trend(
            self._obj,
            dim,
            values,
            item_dim=item_dim,
            score_dim=score_dim,
            reflect=reflect,
            subscale=subscale,
            engine=engine,
        )

    def summarize(self, *, dim: Hashable = "effect") -> xr.Dataset:
        """See :func:`xlikert.summarize`."""
        return _construct.summarize(self._obj, dim=dim)

    def grand_mixture(
        self, *, factors: _Dims = None, item_dim: Hashable = "item", score_dim: Hashable = "score"
    ) -> xr.DataArray:
        """See :func:`xlikert.grand_mixture`."""
        return _construct.grand_mixture(
            self._obj, factors=factors, item_dim=item_dim, score_dim=score_dim
        )

    def marginal_slice(
        self,
        by: Hashable | Sequence[Hashable],
        *,
        factors: _Dims = None,
        item_dim: Hashable = "item",
        score_dim: Hashable = "score",
    ) -> xr.DataArray:
        """See :func:`xlikert.marginal_slice`."""
        return _construct.marginal_slice(
            self._obj, by, factors=factors, item_dim=item_dim, score_dim=score_dim
        )

    def consensus_bounds(
        self,
        *,
        item_dim: Hashable | None = "item",
        score_dim: Hashable = "score",
        tol: float = 1e-4,
        max_cells: int = DEFAULT_MAX_CELLS,
        engine: str | None = None,
    ) -> xr.Dataset:
        """See :func:`xlikert.consensus_bounds`."""
        return _consensus.consensus_bounds(
            self._obj,
            item_dim=item_dim,
            score_dim=score_dim,
            tol=tol,
            max_cells=max_cells,
            engine=engine,
        )

    def consensus(
        self,
        *,
        item_dim: Hashable | None = "item",
        score_dim: Hashable = "score",
        tol: float = 1e-4,
        max_cells: int = DEFAULT_MAX_CELLS,
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.consensus`."""
        return _consensus.consensus(
            self._obj,
            item_dim=item_dim,
            score_dim=score_dim,
            tol=tol,
            max_cells=max_cells,
            engine=engine,
        )

    def dissension_bounds(
        self,
        *,
        item_dim: Hashable | None = "item",
        score_dim: Hashable = "score",
        tol: float = 1e-4,
        max_cells: int = DEFAULT_MAX_CELLS,
        engine: str | None = None,
    ) -> xr.Dataset:
        """See :func:`xlikert.dissension_bounds`."""
        return _consensus.dissension_bounds(
            self._obj,
            item_dim=item_dim,
            score_dim=score_dim,
            tol=tol,
            max_cells=max_cells,
            engine=engine,
        )

    def dissension(
        self,
        *,
        item_dim: Hashable | None = "item",
        score_dim: Hashable = "score",
        tol: float = 1e-4,
        max_cells: int = DEFAULT_MAX_CELLS,
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.dissension`."""
        return _consensus.dissension(
            self._obj,
            item_dim=item_dim,
            score_dim=score_dim,
            tol=tol,
            max_cells=max_cells,
            engine=engine,
        )

    def tastle_consensus(self, *, score_dim: Hashable = "score") -> xr.DataArray:
        """See :func:`xlikert.tastle_consensus`."""
        return _consensus.tastle_consensus(self._obj, score_dim=score_dim)

    def entropy(
        self, *, item_dim: Hashable | None = "item", score_dim: Hashable = "score"
    ) -> xr.DataArray:
        """See :func:`xlikert.entropy`."""
        return _consensus.entropy(self._obj, item_dim=item_dim, score_dim=score_dim)

    def alignment(
        self,
        human: xr.Dataset,
        *,
        level: float = 0.95,
        score_dim: Hashable = "score",
        item_dim: Hashable = "item",
        engine: str | None = None,
    ) -> xr.Dataset:
        """See :func:`xlikert.alignment`."""
        return _align.alignment(
            self._obj, human, level=level, score_dim=score_dim, item_dim=item_dim, engine=engine
        )

    def wasserstein(
        self,
        human: xr.Dataset | xr.DataArray,
        *,
        score_dim: Hashable = "score",
        item_dim: Hashable = "item",
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.wasserstein`."""
        return _align.wasserstein(
            self._obj, human, score_dim=score_dim, item_dim=item_dim, engine=engine
        )

    def representativeness(
        self,
        human: xr.Dataset | xr.DataArray,
        *,
        score_dim: Hashable = "score",
        item_dim: Hashable = "item",
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.representativeness`."""
        return _align.representativeness(
            self._obj, human, score_dim=score_dim, item_dim=item_dim, engine=engine
        )

    def total_variation(
        self,
        human: xr.Dataset | xr.DataArray,
        *,
        score_dim: Hashable = "score",
        item_dim: Hashable = "item",
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.total_variation`."""
        return _align.total_variation(
            self._obj, human, score_dim=score_dim, item_dim=item_dim, engine=engine
        )

    def jensen_shannon(
        self,
        human: xr.Dataset | xr.DataArray,
        *,
        score_dim: Hashable = "score",
        item_dim: Hashable = "item",
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.jensen_shannon`."""
        return _align.jensen_shannon(
            self._obj, human, score_dim=score_dim, item_dim=item_dim, engine=engine
        )

    def mean_difference(
        self,
        human: xr.Dataset | xr.DataArray,
        *,
        score_dim: Hashable = "score",
        item_dim: Hashable = "item",
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.mean_difference`."""
        return _align.mean_difference(
            self._obj, human, score_dim=score_dim, item_dim=item_dim, engine=engine
        )

    def silicon_population(
        self,
        human: xr.Dataset,
        *,
        dim: _Dims = None,
        item_dim: Hashable = "item",
        score_dim: Hashable = "score",
    ) -> xr.DataArray:
        """See :func:`xlikert.silicon_population`."""
        return _align.silicon_population(
            self._obj, human, dim=dim, item_dim=item_dim, score_dim=score_dim
        )

    def reliability(
        self,
        *,
        dim: Hashable | Sequence[Hashable],
        item_dim: Hashable = "item",
        score_dim: Hashable = "score",
        reflect: bool = True,
        subscale: Subscale = "subscale",
    ) -> xr.Dataset:
        """See :func:`xlikert.reliability`."""
        return _reliability.reliability(
            self._obj,
            dim=dim,
            item_dim=item_dim,
            score_dim=score_dim,
            reflect=reflect,
            subscale=subscale,
        )

    def to_netcdf(self, path: str | os.PathLike) -> Path:
        """See :func:`xlikert.to_netcdf`."""
        return _io.to_netcdf(self._obj, path)

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

    def failure_rate(self, *, atol: float = _constraint.VALID_MASS_ATOL) -> xr.DataArray:
        """See :func:`xlikert.failure_rate`."""
        return _constraint.failure_rate(self._obj, atol=atol)

    def human_marginal(self, *, dim: _Dims = None, item_dim: Hashable = "item") -> xr.Dataset:
        """See :func:`xlikert.human_marginal` (``ds`` a human PMF Dataset)."""
        return _human.human_marginal(self._obj, dim=dim, item_dim=item_dim)

    def noise_ceiling(
        self,
        *,
        score_dim: Hashable = "score",
        item_dim: Hashable = "item",
        engine: str | None = None,
    ) -> xr.DataArray:
        """See :func:`xlikert.noise_ceiling` (``ds`` a human PMF Dataset)."""
        return _align.noise_ceiling(
            self._obj, score_dim=score_dim, item_dim=item_dim, engine=engine
        )
