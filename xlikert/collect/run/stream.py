"""Units kept on disk, not in memory: what lets a run's memory stay flat in its cells.

A run with an output saves each finished unit to its progress folder
(:class:`~.store.PartialStore`); :class:`StoredUnit` then stands for it in the
session: its cells, mode and the names and shapes of its arrays, each array read
from the unit's file only when asked for. :func:`~xlikert.collect.record.assemble`
with ``block_cells`` builds the results Dataset of such units as dask arrays that
:func:`write_streamed` writes block by block, reading the units a block at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import xarray as xr

from ..record import UnitResult

__all__ = ["BLOCK_CELLS", "StoredArrays", "StoredUnit", "write_streamed"]

#: Cells per block of the streamed results file (the rows read from the units at a time).
BLOCK_CELLS = 2048


class StoredArrays(Mapping[str, np.ndarray]):
    """The arrays of a saved unit file, each read from it when asked for (not kept).

    Parameters
    ----------
    path : path
        The unit's ``.npz`` file (:meth:`~.store.PartialStore.save_unit`).
    shapes : mapping of str to tuple
        The shape of each of the unit's variables (its names: the mapping's keys).
    """

    def __init__(self, path: str | os.PathLike, shapes: Mapping[str, tuple[int, ...]]):
        self.path, self.shapes = Path(path), dict(shapes)

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.shapes:
            raise KeyError(name)
        with np.load(self.path) as z:
            return np.asarray(z[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self.shapes)

    def __len__(self) -> int:
        return len(self.shapes)


class StoredUnit(UnitResult):
    """A finished unit whose arrays stay in its saved file (:class:`StoredArrays`).

    Examples
    --------
    >>> import tempfile
    >>> sizes = {"score": 5, "rank": 3, "temperature": 1, "top_p": 1}
    >>> r = UnitResult.empty(2, sizes)
    >>> r.cells = np.array([4, 7])
    >>> path = Path(tempfile.mkdtemp()) / "u.npz"
    >>> np.savez(path, **r.to_arrays())
    >>> s = StoredUnit.of(r, path)
    >>> s.shape("pmf"), s.traces, s.bounded, bool(np.isnan(s.data["pmf"]).all())
    ((2, 5), 0, False, True)
    """

    @classmethod
    def of(cls, result: UnitResult, path: str | os.PathLike) -> StoredUnit:
        """The unit ``result``, saved at ``path``, standing there instead of in memory."""
        shapes = {k: tuple(np.shape(v)) for k, v in result.data.items()}
        return cls(StoredArrays(path, shapes), result.mode, result.cells)  # type: ignore[arg-type]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.data.shapes[name]  # type: ignore[attr-defined]


def write_streamed(ds: xr.Dataset, path: str | os.PathLike, write) -> xr.Dataset:
    """Write ``ds`` (dask-backed: ``assemble(..., block_cells=...)``) with ``write`` one
    block at a time, and open the written file lazily (its data read when used).

    ``write(ds, path)`` is the atomic writer (:func:`~.session.write_atomic`); dask runs
    in this thread, so one block is in memory at a time.
    """
    import dask

    with dask.config.set(scheduler="synchronous"):
        write(ds, path)
    return _open_lazily(path)


class _Text:
    """A per-cell text variable of a netCDF file (xarray's lazy, undecoded variable),
    decoded as xarray decodes it (vlen strings to fixed-width unicode of the variable's
    widest value), block by block, through xarray's own file handle and locks."""

    def __init__(self, raw: xr.Variable, dtype: np.dtype):
        self.raw, self.dtype, self.shape, self.ndim = raw, dtype, raw.shape, raw.ndim

    def __getitem__(self, key) -> np.ndarray:
        return np.asarray(self.raw[key].values, dtype=object).astype(self.dtype)


def _open_lazily(path: str | os.PathLike, block_cells: int = BLOCK_CELLS) -> xr.Dataset:
    """A results file opened lazily: nothing of its per-cell variables is read until used.

    ``xr.open_dataset`` reads every text variable whole when it opens a file (to decode
    its variable-length strings to fixed-width unicode); here the per-cell text variables
    (dims ``model``, the factors, ...) are dask arrays of blocks decoded the same way when
    read, so the values and attrs are those of :func:`xlikert.core.io.open_results`. No
    file handle stays open (xarray reopens the file when a variable is read;
    ``ds.close()`` closes it).
    """
    import dask.array as da
    from xarray.backends import NetCDF4DataStore

    path = Path(path)
    store = NetCDF4DataStore.open(path)
    found: dict[str, tuple[xr.Variable, np.dtype]] = {}
    for k, v in store.get_variables().items():
        if not (v.dtype == object and v.ndim >= 2 and v.dims[0] == "model"
                and "_FillValue" not in v.attrs):  # fmt: skip
            continue
        step = _step(v.shape, block_cells)
        width = 1  # the widest value, as xarray's decoding finds it
        for i in range(0, v.shape[1], step):
            block = np.asarray(v[:, i : i + step].values, dtype=object).astype(str)
            width = max(width, block.itemsize // 4)
        found[k] = (v, np.dtype(f"<U{width}"))
    ds = xr.open_dataset(store, drop_variables=list(found))
    for k, (v, dtype) in found.items():
        chunks = (1, _step(v.shape, block_cells), *v.shape[2:])
        name = f"_open_lazily-{path}-{k}-{os.stat(path).st_mtime_ns}"
        data = da.from_array(_Text(v, dtype), chunks=chunks, asarray=False, name=name)
        attrs = dict(v.attrs)
        coords = str(attrs.pop("coordinates", "")).split()  # CF: decoded into coords
        ds[k] = xr.Variable(v.dims, data, attrs)
        ds = ds.set_coords([c for c in coords if c in ds.data_vars])
    store.close()  # no handle held: reopened when a variable is read
    ds.set_close(store.close)  # ds.close() closes it again
    return ds


def _step(shape: tuple[int, ...], block_cells: int) -> int:
    """Levels of the first factor per block of about ``block_cells`` cells."""
    per = int(np.prod(shape[2:], dtype=np.int64))
    return max(1, block_cells // max(per, 1))
