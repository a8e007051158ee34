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
from xarray.backends import BackendArray
from xarray.core import indexing

from ...core.dims import MODEL_DIM
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

    ``write(ds, path)`` is the atomic writer (:func:`~.session.write_results_file`); dask runs
    in this thread, so one block is in memory at a time.
    """
    import dask

    with dask.config.set(scheduler="synchronous"):
        write(ds, path)
    return _open_lazily(path)


def _stamp(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns, st.st_size


class _Cells(BackendArray):
    """One per-cell variable of a results file, read when indexed (xarray's lazy
    indexing, as ``xr.open_dataset`` gives): the variable as xarray decodes it, or
    (``text``) xarray's undecoded variable-length strings decoded as xarray decodes
    them (to fixed-width unicode of the variable's widest value), through xarray's own
    file handle and locks. A file changed since it was opened is refused by name: its
    values are not this Dataset's."""

    def __init__(self, var: xr.Variable, path: Path, stamp, dtype: np.dtype, text: bool):
        self.var, self.path, self.stamp, self.text = var, path, stamp, text
        self.shape, self.dtype = var.shape, np.dtype(dtype)

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._read
        )

    def _read(self, key: tuple) -> np.ndarray:
        from ...core.errors import CollectionError

        if not self.path.is_file() or _stamp(self.path) != self.stamp:
            raise CollectionError(
                f"the results file {self.path} was replaced or changed after collect returned "
                "this Dataset (which reads it lazily); open it again (xl.open_results), or "
                "load() a Dataset before its file is written again"
            )
        values = self.var[key].values
        return np.asarray(values, dtype=object).astype(self.dtype) if self.text else values


def _open_lazily(path: str | os.PathLike, block_cells: int = BLOCK_CELLS) -> xr.Dataset:
    """A results file opened lazily: nothing of its per-cell variables is read until used.

    The per-cell variables (dims ``model``, the factors, ...) are read when indexed or
    used, as ``xr.open_dataset`` reads a variable (numpy arrays, no dask): the values
    and attrs are those of :func:`xlikert.core.io.open_results`. (``xr.open_dataset``
    alone would read every text variable whole, to decode its variable-length strings
    to fixed-width unicode; here the part read is decoded the same way.) Nothing read
    is kept (``.load()`` keeps it). No file handle stays open (xarray reopens the file
    for a read; ``ds.close()`` closes it); a read after the file was replaced raises
    :class:`~xlikert.core.errors.CollectionError`.

    Why no handle is held: a held handle would make HDF5 refuse ``ds.to_netcdf(path)``
    over this very file (which now truncates it before its values are read: write it
    with :func:`xlikert.to_netcdf`), but netCDF-C 4.10.1 (netCDF4 1.7.5, HDF5 2.2.0)
    crashes the process when the same file is held open, a second handle reads a
    variable-length string variable and is closed, and the file is opened twice more
    (measured with plain ``netCDF4.Dataset`` calls on a two-variable file): the reuse of
    a results file in the same process opens it that way.
    """
    from xarray.backends import NetCDF4DataStore

    path = Path(path)
    stamp = _stamp(path)
    store = NetCDF4DataStore.open(path)
    text: dict[str, tuple[xr.Variable, np.dtype, list[str]]] = {}
    for k, v in store.get_variables().items():
        if not (v.dtype == object and v.ndim >= 2 and v.dims[0] == MODEL_DIM
                and "_FillValue" not in v.attrs):  # fmt: skip
            continue
        step = _step(v.shape, block_cells)
        width = 1  # the widest value, as xarray's decoding finds it (read block by block)
        for i in range(0, v.shape[1], step):
            block = np.asarray(v[:, i : i + step].values, dtype=object).astype(str)
            width = max(width, block.itemsize // 4)
        attrs = dict(v.attrs)
        coords = str(attrs.pop("coordinates", "")).split()  # CF: decoded into coords
        # v._data: the backend's lazily indexed array (v.data would read it whole)
        text[k] = (xr.Variable(v.dims, v._data, attrs), np.dtype(f"<U{width}"), coords)
    ds = xr.open_dataset(store, drop_variables=list(text), cache=False)
    cells: dict[str, tuple[xr.Variable, np.dtype, list[str]]] = {
        str(k): (v.variable, v.dtype, []) for k, v in ds.data_vars.items()
             if v.ndim >= 2 and v.dims[0] == MODEL_DIM}  # fmt: skip
    for k in set(ds.variables) - set(cells):  # the rest is small: read now, kept
        ds[k].load()
    for k, (v, dtype, coords) in {**cells, **text}.items():
        data = indexing.LazilyIndexedArray(_Cells(v, path, stamp, dtype, text=k in text))
        ds[k] = xr.Variable(v.dims, data, dict(v.attrs), dict(v.encoding))
        ds = ds.set_coords([c for c in coords if c in ds.data_vars])
    store.close()  # no handle held: xarray reopens the file when a variable is read
    ds.set_close(store.close)  # ds.close() closes it again
    return ds


def _step(shape: tuple[int, ...], block_cells: int) -> int:
    """Levels of the first factor per block of about ``block_cells`` cells."""
    per = int(np.prod(shape[2:], dtype=np.int64))
    return max(1, block_cells // max(per, 1))
