"""netCDF round trip of results Datasets and decomposition DataTrees.

Files are written with the ``netcdf4`` engine, atomically (a temporary file in
the target directory, then :func:`os.replace`), so an interrupted write never
leaves a truncated file behind. Attribute values netCDF cannot hold (bool,
None, dict, nested or mixed lists) are stored as JSON strings prefixed with
:data:`JSON_MARKER` and decoded on reading, so attrs round-trip.

Examples
--------
>>> import xlikert as xl
>>> pmf = xl.datasets.synthetic_pmf({"model": 2}, n_items=2)
>>> xl.to_netcdf(pmf.to_dataset(), "results.nc")       # doctest: +SKIP
>>> ds = xl.open_results("results.nc")                 # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .errors import ConfigError, InputTypeError

__all__ = ["JSON_MARKER", "decode_attrs", "open_decomposition", "open_results", "to_netcdf"]

#: Prefix of attribute strings that hold a JSON-encoded value.
JSON_MARKER = "xlikert-json:"
_ENGINE = "netcdf4"


def _needs_json(value: Any) -> bool:
    if value is None or isinstance(value, bool | np.bool_ | dict | Mapping):
        return True
    if isinstance(value, str):
        return value.startswith(JSON_MARKER)
    if isinstance(value, list | tuple):
        if len(value) <= 1:  # netCDF reads a one-element list back as a scalar
            return True
        kinds = {type(v) for v in value}
        numeric = all(
            isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
            for v in value
        )
        strings = all(isinstance(v, str) for v in value)
        return not (numeric or strings) or len(kinds) > 1
    if isinstance(value, np.ndarray):
        return value.dtype == bool or value.dtype == object or value.ndim > 1
    return False


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _encode_attrs(attrs: Mapping[Any, Any]) -> dict[Any, Any]:
    out = {}
    for key, value in attrs.items():
        if _needs_json(value):
            out[key] = JSON_MARKER + json.dumps(_jsonable(value))
        elif isinstance(value, tuple):
            out[key] = list(value)
        else:
            out[key] = value
    return out


def _decode_attrs(attrs: Mapping[Any, Any]) -> dict[Any, Any]:
    out = {}
    for key, value in attrs.items():
        if isinstance(value, str) and value.startswith(JSON_MARKER):
            value = json.loads(value[len(JSON_MARKER) :])
        elif isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "US":
            value = value.tolist()
        out[key] = value
    return out


def _map_attrs(ds: xr.Dataset, fn) -> xr.Dataset:
    ds = ds.copy(deep=False)
    ds.attrs = fn(ds.attrs)
    for name in ds.variables:
        ds[name].attrs = fn(ds[name].attrs)
    return ds


def _encode_tree(tree: xr.DataTree) -> xr.DataTree:
    nodes = {
        node.path: _map_attrs(node.to_dataset(inherit=False), _encode_attrs)
        for node in tree.subtree
    }
    return xr.DataTree.from_dict(nodes, name=tree.name)


def decode_attrs(ds: xr.Dataset) -> xr.Dataset:
    """The Dataset with its JSON-encoded attrs (``xlikert-json:...``) decoded, on every variable.

    For a results file opened with plain ``xr.open_dataset``; :func:`open_results`
    does this itself. Decoding is idempotent.

    Examples
    --------
    >>> import xarray as xr
    >>> ds = xr.Dataset(attrs={"models": JSON_MARKER + '{"m": {"dtype": "float32"}}'})
    >>> decode_attrs(ds).attrs["models"]
    {'m': {'dtype': 'float32'}}
    """
    return _map_attrs(ds, _decode_attrs)


def _decode_tree(tree: xr.DataTree) -> xr.DataTree:
    nodes = {node.path: decode_attrs(node.to_dataset(inherit=False)) for node in tree.subtree}
    return xr.DataTree.from_dict(nodes, name=tree.name)


def to_netcdf(obj: xr.Dataset | xr.DataArray | xr.DataTree, path: str | os.PathLike) -> Path:
    """Write a Dataset, DataArray or DataTree to netCDF4, atomically, attrs preserved.

    Parameters
    ----------
    obj
        Results Dataset (e.g. item PMFs), a DataArray (stored as a one-variable
        Dataset named after it, ``"pmf"`` if unnamed) or a :func:`~xlikert.decompose` tree.
    path
        Target file; its directory must exist. An existing file is replaced
        only once the new one is complete.

    Returns
    -------
    pathlib.Path
        The written path.

    Examples
    --------
    >>> import xlikert as xl
    >>> dec = xl.decompose(xl.datasets.synthetic_pmf({"model": 2}, n_items=2))
    >>> xl.to_netcdf(dec, "dec.nc")                      # doctest: +SKIP
    PosixPath('dec.nc')
    """
    path = Path(path)
    if not path.parent.exists():
        raise ConfigError(
            f"cannot write {str(path)!r}: directory {str(path.parent)!r} does not exist"
        )
    if isinstance(obj, xr.DataArray):
        obj = obj.to_dataset(name=obj.name if obj.name is not None else "pmf")
    if isinstance(obj, xr.DataTree):
        encoded: xr.Dataset | xr.DataTree = _encode_tree(obj)
    elif isinstance(obj, xr.Dataset):
        encoded = _map_attrs(obj, _encode_attrs)
    else:
        raise InputTypeError(
            f"cannot write {type(obj).__name__} to netCDF; pass a Dataset, DataArray or DataTree"
        )
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        encoded.to_netcdf(tmp, engine=_ENGINE, mode="w")
        # mkstemp creates the file 0600; give it the permissions a plain open() would.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _check_file(path: str | os.PathLike) -> Path:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no such netCDF file: {str(path)!r}")
    return path


def _unreadable(path: Path, exc: Exception) -> ConfigError:
    return ConfigError(
        f"cannot read {str(path)!r} as a netCDF4 file ({type(exc).__name__}: {exc}); "
        "is it an xlikert results or decomposition file?"
    )


def open_results(path: str | os.PathLike) -> xr.Dataset:
    """Read a results Dataset fully into memory (the file is closed on return).

    Raises
    ------
    ConfigError
        No such file, or a file that netCDF4 cannot read (the message names it).

    Examples
    --------
    >>> import xlikert as xl
    >>> ds = xl.open_results("results.nc")              # doctest: +SKIP
    """
    path = _check_file(path)
    try:
        with xr.open_dataset(path, engine=_ENGINE) as ds:
            ds = ds.load()
    except (OSError, ValueError) as exc:  # not netCDF, truncated, unreadable
        raise _unreadable(path, exc) from exc
    return decode_attrs(ds)


def open_decomposition(path: str | os.PathLike) -> xr.DataTree:
    """Read a :func:`~xlikert.decompose` tree fully into memory (file closed on return).

    Examples
    --------
    >>> import xlikert as xl
    >>> dec = xl.open_decomposition("dec.nc")           # doctest: +SKIP
    >>> xl.summary_table(dec)                           # doctest: +SKIP
    """
    path = _check_file(path)
    try:
        with xr.open_datatree(path, engine=_ENGINE) as tree:
            tree = tree.load()
    except (OSError, ValueError) as exc:
        raise _unreadable(path, exc) from exc
    return _decode_tree(tree)
