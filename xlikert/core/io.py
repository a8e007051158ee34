"""netCDF round trip of results Datasets and decomposition DataTrees.

Files are written with the ``netcdf4`` engine, atomically (:func:`atomic_write`: a
temporary file in the target directory, then :func:`os.replace`), so an interrupted
write never leaves a truncated file behind. :func:`atomic_write` is the package's one
atomic write: results, saved progress and the offline zoo's files all go through it.

Attribute values netCDF cannot hold (bool, None, dict, nested or mixed lists,
one-element lists) are kept as JSON text prefixed with :data:`JSON_MARKER`, in
memory as on disk: every Dataset and DataTree xlikert returns (``collect``,
:func:`open_results`, the analysis) is netCDF-ready as it stands, so
``ds.to_netcdf(path)`` and ``xr.open_dataset(path)`` work as for any xarray
object. The structure is read back with :func:`read_attrs` (or the accessor,
``ds.likert.attrs``); :func:`decode_attrs` gives a Dataset with decoded attrs.

Examples
--------
>>> import xlikert as xl
>>> pmf = xl.datasets.synthetic_pmf({"model": 2}, n_items=2)
>>> xl.to_netcdf(pmf.to_dataset(), "results.nc")       # doctest: +SKIP
>>> ds = xl.open_results("results.nc")                 # doctest: +SKIP
>>> ds.likert.attrs["models"]["qwen"]["revision"]      # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, cast, overload

import numpy as np
import xarray as xr

from .errors import ConfigError, InputTypeError

#: An object whose attrs :func:`encode_attrs` and :func:`decode_attrs` map.
_Obj = TypeVar("_Obj", bound=xr.Dataset | xr.DataArray | xr.DataTree)

__all__ = [
    "JSON_MARKER",
    "atomic_write",
    "decode_attrs",
    "encode_attrs",
    "open_decomposition",
    "open_results",
    "read_attrs",
    "to_netcdf",
]

#: Prefix of attribute strings that hold a JSON-encoded value.
JSON_MARKER = "xlikert-json:"
_ENGINE: Literal["netcdf4"] = "netcdf4"


def _needs_json(value: Any) -> bool:
    if value is None or isinstance(value, bool | np.bool_ | dict | Mapping):
        return True
    if isinstance(value, str):
        return False  # text, JSON-encoded or not, is stored as it is
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


def _encode(attrs: Mapping[Any, Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in attrs.items():
        if _needs_json(value):
            out[key] = JSON_MARKER + json.dumps(_jsonable(value))
        elif isinstance(value, tuple):
            out[key] = list(value)
        else:
            out[key] = value
    return out


def _decode(attrs: Mapping[Any, Any]) -> dict[Any, Any]:
    out = {}
    for key, value in attrs.items():
        if isinstance(value, str) and value.startswith(JSON_MARKER):
            value = json.loads(value[len(JSON_MARKER) :])
        elif isinstance(value, np.ndarray) and value.ndim == 1:  # netCDF's lists
            value = value.tolist()
        out[key] = value
    return out


def _map_attrs(obj: _Obj, fn: Callable[[Mapping[Any, Any]], dict[Any, Any]]) -> _Obj:
    """``obj`` (Dataset, DataArray or DataTree) with ``fn`` applied to every attrs mapping."""
    if isinstance(obj, xr.DataTree):
        # each node's Dataset carries its attrs (the root's too) into the new tree
        nodes = {node.path: _map_attrs(node.to_dataset(inherit=False), fn) for node in obj.subtree}
        return xr.DataTree.from_dict(nodes, name=obj.name)  # type: ignore[return-value]
    new = obj.copy(deep=False)
    new.attrs = fn(new.attrs)
    variables = new.coords if isinstance(new, xr.DataArray) else new.variables
    for name in variables:
        new[name].attrs = fn(new[name].attrs)
    return cast(_Obj, new)


@overload
def encode_attrs(obj: _Obj) -> _Obj: ...
@overload
def encode_attrs(obj: Mapping[Any, Any]) -> dict[Any, Any]: ...
def encode_attrs(
    obj: xr.Dataset | xr.DataArray | xr.DataTree | Mapping[Any, Any],
) -> xr.Dataset | xr.DataArray | xr.DataTree | dict[Any, Any]:
    """``obj`` with attrs netCDF can hold: structured values become JSON text.

    Every attrs mapping (the object's, each variable's and coordinate's, each
    tree node's; or ``obj`` itself when it is a mapping, returned as a dict) is
    encoded: dicts, bools, None, nested, mixed and one-element lists become
    ``JSON_MARKER + json``; text and numbers stay as they are. Encoding is
    idempotent; :func:`read_attrs` and :func:`decode_attrs` undo it.

    Parameters
    ----------
    obj : xr.Dataset, xr.DataArray, xr.DataTree or mapping
        The object whose attrs to encode, or an attrs mapping itself.

    Returns
    -------
    xr.Dataset, xr.DataArray, xr.DataTree or dict
        A copy of ``obj`` with encoded attrs (a dict for a mapping).

    Examples
    --------
    >>> import xarray as xr
    >>> ds = encode_attrs(xr.Dataset(attrs={"models": {"m": {"dtype": "float32"}}, "n": 3}))
    >>> ds.attrs["models"], ds.attrs["n"]
    ('xlikert-json:{"m": {"dtype": "float32"}}', 3)
    >>> read_attrs(ds)["models"]["m"]["dtype"]
    'float32'
    """
    if isinstance(obj, xr.Dataset | xr.DataArray | xr.DataTree):  # a Dataset is a Mapping too
        return _map_attrs(obj, _encode)
    return _encode(obj)


def read_attrs(obj: xr.Dataset | xr.DataArray | xr.DataTree) -> dict[Any, Any]:
    """The attrs of ``obj`` with JSON text decoded into structure (a new dict).

    Works on encoded and decoded attrs alike, so code that reads provenance
    (``read_attrs(ds)["models"][name]``) does not care where ``ds`` came from.

    Parameters
    ----------
    obj : xr.Dataset, xr.DataArray or xr.DataTree
        The object whose own attrs to read.

    Returns
    -------
    dict
        A new dict of the attrs, JSON text decoded.

    Examples
    --------
    >>> import xarray as xr
    >>> read_attrs(xr.Dataset(attrs={"flags": JSON_MARKER + "[true]", "title": "t"}))
    {'flags': [True], 'title': 't'}
    """
    return _decode(obj.attrs)


def decode_attrs(ds: xr.Dataset) -> xr.Dataset:
    """The Dataset with its JSON-encoded attrs (``xlikert-json:...``) decoded, on every variable.

    The result holds Python structure in its attrs: write it with
    :func:`to_netcdf` (which encodes again), not with ``ds.to_netcdf``.
    Decoding is idempotent.

    Parameters
    ----------
    ds : xr.Dataset
        A Dataset with encoded attrs (as read from a file).

    Returns
    -------
    xr.Dataset
        A copy with the attrs of the Dataset and of every variable decoded.

    Examples
    --------
    >>> import xarray as xr
    >>> ds = xr.Dataset(attrs={"models": JSON_MARKER + '{"m": {"dtype": "float32"}}'})
    >>> decode_attrs(ds).attrs["models"]
    {'m': {'dtype': 'float32'}}
    """
    return _map_attrs(ds, _decode)


def to_netcdf(obj: xr.Dataset | xr.DataArray | xr.DataTree, path: str | os.PathLike[str]) -> Path:
    """Write a Dataset, DataArray or DataTree to netCDF4, atomically, attrs preserved.

    Parameters
    ----------
    obj : xr.Dataset, xr.DataArray or xr.DataTree
        Results Dataset (e.g. item PMFs), a DataArray (stored as a one-variable
        Dataset named after it, ``"pmf"`` if unnamed) or a :func:`~xlikert.decompose` tree.
    path : str or os.PathLike
        Target file; its directory must exist. An existing file is replaced
        only once the new one is complete.

    Returns
    -------
    pathlib.Path
        The written path.

    Raises
    ------
    ConfigError
        The target's directory does not exist.
    InputTypeError
        ``obj`` is not a Dataset, DataArray or DataTree.

    Examples
    --------
    >>> import tempfile, xlikert as xl
    >>> dec = xl.decompose(xl.datasets.synthetic_pmf({"model": 2}, n_items=2))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = xl.to_netcdf(dec, f"{tmp}/dec.nc")
    ...     sorted(xl.open_decomposition(path).children)
    ['grand', 'model']
    """
    path = Path(path)
    if not path.parent.exists():
        raise ConfigError(
            f"cannot write {str(path)!r}: directory {str(path.parent)!r} does not exist"
        )
    if isinstance(obj, xr.DataArray):
        obj = obj.to_dataset(name=obj.name if obj.name is not None else "pmf")
    if isinstance(obj, xr.DataTree | xr.Dataset):
        encoded = encode_attrs(obj)
    else:
        raise InputTypeError(
            f"cannot write {type(obj).__name__} to netCDF; pass a Dataset, DataArray or DataTree"
        )
    with atomic_write(path) as tmp:
        encoded.to_netcdf(tmp, engine=_ENGINE, mode="w")
    return path


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], *, folder: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path`` that becomes ``path`` when the block succeeds.

    What is written under ``path`` is whole or absent. The block writes to the
    temporary path (hidden, in the target's folder, unique to this process and
    call; created by the writer, so with the permissions a plain ``open`` gives).
    When the block ends without an error, a file is flushed to disk
    (:func:`os.fsync`) and moved onto ``path`` with :func:`os.replace` (atomic on one
    filesystem): an existing ``path`` is replaced only then. On any error (an
    interrupt included) the temporary file or folder is removed and ``path`` is left
    as it was.

    Parameters
    ----------
    path : str or os.PathLike
        The target; its folder must exist.
    folder : bool, keyword-only
        The block makes a folder at the temporary path (it creates it); an existing
        folder at ``path`` is removed just before the new one takes its place.

    Yields
    ------
    pathlib.Path
        The temporary path to write.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with atomic_write(Path(tmp) / "a.txt") as part:
    ...         _ = part.write_text("whole")
    ...     sorted(p.name for p in Path(tmp).iterdir())
    ['a.txt']
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        yield tmp
        if folder:
            shutil.rmtree(path, ignore_errors=True)
        else:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def _check_file(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no such netCDF file: {str(path)!r}")
    return path


def _unreadable(path: Path, exc: Exception) -> ConfigError:
    return ConfigError(
        f"cannot read {str(path)!r} as a netCDF4 file ({type(exc).__name__}: {exc}); "
        "is it an xlikert results or decomposition file?"
    )


def open_results(path: str | os.PathLike[str]) -> xr.Dataset:
    """Read a results Dataset fully into memory (the file is closed on return).

    The Dataset is the one :func:`xlikert.collect.collect` returned: attrs as
    netCDF holds them (structure as JSON text; read it with :func:`read_attrs`
    or ``ds.likert.attrs``), so ``ds.to_netcdf`` works on it.

    Parameters
    ----------
    path : str or os.PathLike
        A results file written by ``xlikert run``, :func:`xlikert.collect.collect`
        or :func:`to_netcdf`.

    Returns
    -------
    xr.Dataset
        The results, loaded; attrs as stored (JSON text).

    Raises
    ------
    ConfigError
        No such file, or a file that netCDF4 cannot read (the message names it).

    Examples
    --------
    >>> import tempfile, xlikert as xl
    >>> ds = xl.datasets.synthetic_results(n_items=3)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     back = xl.open_results(xl.to_netcdf(ds, f"{tmp}/results.nc"))
    >>> back.pmf.dims
    ('model', 'target', 'item', 'score')
    """
    path = _check_file(path)
    try:
        with xr.open_dataset(path, engine=_ENGINE) as ds:
            ds = ds.load()
    except (OSError, ValueError) as exc:  # not netCDF, truncated, unreadable
        raise _unreadable(path, exc) from exc
    return ds


def open_decomposition(path: str | os.PathLike[str]) -> xr.DataTree:
    """Read a :func:`~xlikert.decompose` tree fully into memory (file closed on return).

    Parameters
    ----------
    path : str or os.PathLike
        A file written by :func:`to_netcdf` (or ``DataTree.to_netcdf``) from a
        decomposition.

    Returns
    -------
    xr.DataTree
        The tree, loaded: :func:`~xlikert.summary_table` reads it as it reads
        the tree :func:`~xlikert.decompose` returned.

    Raises
    ------
    ConfigError
        No such file, or a file that netCDF4 cannot read (the message names it).

    Examples
    --------
    >>> import tempfile, xlikert as xl
    >>> dec = xl.decompose(xl.datasets.synthetic_pmf({"model": 2}, n_items=2))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     back = xl.open_decomposition(xl.to_netcdf(dec, f"{tmp}/dec.nc"))
    >>> xl.summary_table(back).term.tolist()
    ['grand', 'model', 'model']
    """
    path = _check_file(path)
    try:
        with xr.open_datatree(path, engine=_ENGINE) as tree:
            tree = tree.load()
    except (OSError, ValueError) as exc:
        raise _unreadable(path, exc) from exc
    return tree
