"""Reusing cells: the earlier numbers of every cell whose key a run needs, copied.

A run looks up the key of each of its cells (:mod:`xlikert.collect.run.identity`) in

* its output's saved progress (:class:`ProgressSource`): its own units of an
  interrupted session, and the units of other configurations run on the same output;
* earlier results files (:class:`ResultsSource`): those given with ``reuse=``
  (``--reuse``), and the output it replaces under ``overwrite=True``.

The first source holding a key gives the cell; its arrays are copied as they were
stored (float64 and text, bit for bit) into the new file, whose ``reused_from``
names the source of every reused cell. A results file written before cells had
keys cannot be matched: named with ``reuse=`` it is an error, as the output it is
a warning.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ...core.dims import MODEL_DIM
from ...core.errors import CollectionError
from ...core.schema import TRACE_VARIABLES, variable_table
from ..record import UnitResult
from .store import PartialStore

__all__ = ["ProgressSource", "ResultsSource", "Reuse", "open_source"]

#: Where a cell's numbers are: (source index, the source's row).
Where = tuple[int, Any]


class ResultsSource:
    """The keyed cells of an earlier results file (read lazily: keys first, rows as needed).

    Raises
    ------
    CollectionError
        The file cannot be read, or holds no ``cell_key`` (an older xlikert).
    """

    kind = "results file"

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.name = str(path)
        try:
            with xr.open_dataset(self.path, engine="netcdf4") as ds:
                if "cell_key" not in ds:
                    raise CollectionError(
                        f"{self.path} holds no cell keys (written by an xlikert older than cell "
                        "identities): its cells cannot be matched to this run's, so nothing can "
                        "be reused from it"
                    )
                self.dims = tuple(ds["cell_key"].dims)
                keys = ds["cell_key"]
                if "computed" in ds:  # a shard file: the cells another shard computes are empty
                    keys = keys.where(ds["computed"].astype(bool), "")
                self._keys = keys.transpose(*self.dims).values.astype(str).ravel()
                self._model = np.broadcast_to(
                    np.asarray(ds[MODEL_DIM].values, dtype=str).reshape(
                        -1, *[1] * (len(self.dims) - 1)
                    ),
                    ds["cell_key"].shape,
                ).ravel()
                self.attrs = dict(ds.attrs)
        except (OSError, ValueError) as exc:
            raise CollectionError(f"cannot read {self.path} to reuse its cells: {exc}") from exc
        from ...core.io import read_attrs

        self.models: dict[str, dict[str, Any]] = (
            read_attrs(xr.Dataset(attrs=self.attrs)).get("models") or {}
        )

    def keyed(self) -> Iterable[tuple[str, Any]]:
        return ((k, i) for i, k in enumerate(self._keys) if k)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path.resolve()),
                **{k: self.attrs[k] for k in ("xlikert_fingerprint", "date_created")
                   if k in self.attrs}}  # fmt: skip

    def info(self, row: int) -> dict[str, Any]:
        return dict(self.models.get(str(self._model[row])) or {})

    def mode(self, row: int) -> str:
        return "topk" if self.info(row).get("mode") == "topk" else "exact"

    def label(self, row: int) -> str:
        return self.name

    def take(self, rows: Sequence[Any], names: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored arrays of ``rows`` (cell axis first) for each variable of ``names``."""
        out = {}
        idx = np.asarray(rows, dtype=np.int64)
        with xr.open_dataset(self.path, engine="netcdf4") as ds:
            for name in names:
                if name in ds:
                    var = ds[name].transpose(*self.dims, ...)
                    out[name] = var.values.reshape(-1, *var.shape[len(self.dims) :])[idx]
        return out


class ProgressSource:
    """The keyed cells of the units other configurations saved in an output's progress folder
    (this configuration's own units resume as units: :meth:`PartialStore.own_units`)."""

    kind = "saved progress"

    def __init__(self, store: PartialStore):
        self.store = store
        self.name = f"{store.path} (saved progress of another configuration)"
        self._rows: list[tuple[Path, int]] = []
        self._index: list[tuple[str, int]] = []
        for f, keys, _ in store.keyed_units():
            for i, k in enumerate(keys):
                self._index.append((str(k), len(self._rows)))
                self._rows.append((f, i))
        self._cache: dict[Path, tuple[UnitResult, dict[str, np.ndarray]] | None] = {}

    def keyed(self) -> Iterable[tuple[str, Any]]:
        return self._index

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.store.path.resolve())}

    def _unit(self, row: int) -> tuple[UnitResult, dict[str, np.ndarray]] | None:
        f = self._rows[row][0]
        if f not in self._cache:
            self._cache[f] = self.store.read_unit(f)
        return self._cache[f]

    def info(self, row: int) -> dict[str, Any]:
        got = self._unit(row)
        digest = str(got[1].get("model_digest", "")) if got else ""
        return dict(self.store.load_model(digest) or {})

    def mode(self, row: int) -> str:
        got = self._unit(row)
        return got[0].mode if got else "exact"

    def label(self, row: int) -> str:
        return self.name

    def take(self, rows: Sequence[Any], names: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, list[np.ndarray]] = {}
        for row in rows:
            got = self._unit(row)
            if got is None:
                raise CollectionError(f"saved unit {self._rows[row][0]} became unreadable")
            data, i = got[0].data, self._rows[row][1]
            for name in names:
                if name in data:
                    out.setdefault(name, []).append(data[name][i])
        return {k: np.stack(v) for k, v in out.items()}


def _no_options(arr: np.ndarray, name: str, source: str) -> None:
    """A source's ``nonsubstantive_mass`` on another ``option`` axis: the cells' keys say
    they offer no option (a cell that offers one is keyed by the whole axis), so every
    value is NaN and the run's fill stands in.

    Raises
    ------
    CollectionError
        A value that is not NaN (the keys did not hold the options: a bug).
    """
    if not np.isnan(np.asarray(arr, dtype=np.float64)).all():
        raise CollectionError(
            f"internal error: cells reused from {source} hold {name} on another option axis; "
            "please report it (run without --reuse meanwhile)"
        )
    return None


def open_source(path: str | os.PathLike, *, required: bool) -> ResultsSource | None:
    """A results file to reuse cells from; None (with a warning) for an unkeyed file that was
    not asked for by name.

    Raises
    ------
    CollectionError
        ``required`` and the file cannot be read or holds no keys.
    """
    try:
        return ResultsSource(path)
    except CollectionError as exc:
        if required:
            raise CollectionError(f"--reuse {path}: {exc}") from None
        import warnings

        warnings.warn(f"{exc}; its cells are recomputed", UserWarning, stacklevel=4)
        return None


class Reuse:
    """The cells a run finds in its sources, and their arrays as units.

    Parameters
    ----------
    sources
        In order of preference (the first that holds a key gives the cell).
    """

    def __init__(self, sources: Sequence[Any]):
        self.sources = list(sources)
        self._where: dict[str, Where] = {}
        for si, src in enumerate(self.sources):
            for key, row in src.keyed():
                self._where.setdefault(key, (si, row))
        #: (model, cell) -> where its numbers are
        self.found: dict[tuple[int, int], Where] = {}

    def __bool__(self) -> bool:
        return bool(self._where)

    def lookup(self, mi: int, keys: Mapping[int, str]) -> int:
        """Find the cells of model ``mi`` by key; returns how many were found."""
        hits = {(mi, j): self._where[k] for j, k in keys.items() if k in self._where}
        self.found.update(hits)
        return len(hits)

    def cells(self, mi: int) -> list[int]:
        return [j for m, j in self.found if m == mi]

    def label(self, mi: int, j: int) -> str:
        si, row = self.found[(mi, j)]
        return self.sources[si].label(row)

    def modes(self, mi: int) -> dict[str, str]:
        """Mode -> a source label, of the model's found cells."""
        out: dict[str, str] = {}
        for (m, _), (si, row) in self.found.items():
            if m == mi:
                out.setdefault(
                    self.sources[si].mode(row), self.sources[si].label(row) or "saved progress"
                )
        return out

    def info(self, mi: int) -> dict[str, Any] | None:
        """The provenance recorded with the model's found cells (its first source's)."""
        for (m, _), (si, row) in self.found.items():
            if m == mi and (info := self.sources[si].info(row)):
                return info
        return None

    def units(
        self, traces: Sequence[int], sizes: Mapping[str, int], *, elicitation: bool = False
    ) -> list[tuple[int, UnitResult]]:
        """The found cells as :class:`UnitResult` rows, one per (model, source, mode)
        (``elicitation``: with :data:`~xlikert.core.schema.ELICITATION_VARIABLES`)."""
        groups: dict[tuple[int, int, str], list[tuple[int, Any]]] = {}
        for (mi, j), (si, row) in self.found.items():
            groups.setdefault((mi, si, self.sources[si].mode(row)), []).append((j, row))
        out = []
        for (mi, si, mode), cells in groups.items():
            table = variable_table(bounded=mode == "topk", traces=traces[mi],
                                   nonsubstantive=sizes.get("option", 0) > 0,
                                   scripts=sizes.get("script", 0) > 0,
                                   elicitation=elicitation)  # fmt: skip
            got = self.sources[si].take([row for _, row in cells], list(table))
            n, data = len(cells), {}
            for name, var in table.items():
                shape = (n, *({**sizes, "trace": traces[mi]}[d] for d in var.dims))
                arr = got.get(name)
                if arr is not None and "option" in var.dims and arr.shape != shape:
                    _no_options(arr, name, self.sources[si].label(cells[0][1]))
                    arr = None
                if arr is None:
                    arr = var.full(shape)
                elif name in TRACE_VARIABLES and "trace" in var.dims:
                    arr = arr[:, : traces[mi]]  # the file's trace dim may be longer
                data[name] = arr
            r = UnitResult(data, mode, np.asarray([j for j, _ in cells], dtype=np.int64))
            r.check(n, {**sizes, "trace": traces[mi]})
            out.append((mi, r))
        return out

    def describe(self) -> dict[str, dict[str, Any]]:
        """Each source that gave cells: what it is and how many cells it gave."""
        counts: dict[str, int] = {}
        first: dict[str, int] = {}
        for si, row in self.found.values():
            label = self.sources[si].label(row)
            if label:
                counts[label] = counts.get(label, 0) + 1
                first.setdefault(label, si)
        return {label: {**self.sources[first[label]].describe(), "cells": n}
                for label, n in counts.items()}  # fmt: skip
