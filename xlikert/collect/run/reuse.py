"""Reusing cells: the earlier numbers of every cell whose key a run needs, copied.

A run looks up the key of each of its cells (:mod:`xlikert.collect.run.identity`) in

* its output's saved progress (:class:`ProgressSource`): its own units of an
  interrupted session, and the units of other configurations run on the same output;
* earlier results files (:class:`ResultsSource`): those given with ``reuse=``
  (``--reuse``), and the output it replaces under ``overwrite=True``.

The first source holding a key gives the cell; its arrays are copied as they were
stored (float64 and text, bit for bit) into the new file, whose ``reused_from``
names the source of every reused cell. A key does not hold the run's ``score`` or
``option`` axis, so a source may lie on other axes: its values are placed on the
run's by score and option name (:func:`place`: zero off the item's support, NaN for
an option the item does not offer). A results file written before cells had keys
cannot be matched: named with ``reuse=`` it is an error, as the output it is a
warning. One keyed by an earlier rule (:data:`~.identity.KEY_FORMAT`) is read, and
its cells are computed again, said so (:func:`shortfall`). Where a run finds fewer
cells in a results file than it holds, :func:`shortfall` says why, per model:
another identity, other settings, cells this run does not ask, other answer labels,
other non-substantive options or another prompt.
"""

from __future__ import annotations

import json
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
from .identity import KEY_FORMAT, key_format, key_labels
from .store import PartialStore

__all__ = ["ProgressSource", "ResultsSource", "Reuse", "open_source", "place", "shortfall"]

#: A run's or a source's per-cell axes that keys do not hold: ``score`` and ``option``.
Axes = dict[str, list[Any]]

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
                self.levels = {d: [str(v) for v in ds[d].values] if d in ds.coords else []
                               for d in self.dims}  # fmt: skip
                self._axes: Axes = {
                    "score": [int(y) for y in ds["score"].values] if "score" in ds else [],
                    "option": [str(o) for o in ds["option"].values] if "option" in ds else [],
                }
        except (OSError, ValueError) as exc:
            raise CollectionError(f"cannot read {self.path} to reuse its cells: {exc}") from exc
        from ...core.io import read_attrs

        self.models: dict[str, dict[str, Any]] = (
            read_attrs(xr.Dataset(attrs=self.attrs)).get("models") or {}
        )
        #: Model name -> the key rule its cells were keyed by (``""``: none recorded).
        self.formats = {name: key_format(info.get("cell_identity"))
                        for name, info in self.models.items()}  # fmt: skip

    def keyed(self) -> Iterable[tuple[str, Any]]:
        """``(key, row)`` of the cells keyed by today's rule (others match no key)."""
        today = {n for n, f in self.formats.items() if f == KEY_FORMAT}
        return ((k, i) for i, k in enumerate(self._keys) if k and self._model[i] in today)

    def model_names(self) -> list[str]:
        """The models the file holds cells of (its ``model`` levels, and those it records)."""
        return sorted({*self.formats, *(str(m) for m in np.unique(self._model))})

    def rows_of(self, name: str) -> list[int]:
        """The keyed rows of model ``name`` (any key rule)."""
        return [i for i, k in enumerate(self._keys) if k and self._model[i] == name]

    def key_of(self, row: int) -> str:
        return str(self._keys[row])

    def axes(self, row: Any) -> Axes:
        """The ``score`` and ``option`` axes the row's arrays lie on (the file's)."""
        return self._axes

    def coords(self, row: int) -> dict[str, str]:
        """The row's level of each dim of ``cell_key`` (``model`` first)."""
        at = np.unravel_index(row, [len(self.levels[d]) for d in self.dims])
        return {str(d): self.levels[d][i] for d, i in zip(self.dims, at, strict=True)}

    def key_labels(self, row: int) -> tuple[str, ...]:
        """The row's answer labels as today's key holds them (:func:`~.identity.key_labels`),
        from the file's ``answer_label`` and ``option_label`` (the digits of its ``score``
        axis where it has none)."""
        if not hasattr(self, "_labels"):
            with xr.open_dataset(self.path, engine="netcdf4") as ds:
                self._labels = [ds[v].load() if v in ds else None
                                for v in ("answer_label", "option_label")]  # fmt: skip
        at, got = self.coords(row), []
        for var in self._labels:
            if var is not None:
                sel = {d: at[d] for d in var.dims if d in at}
                got += [str(x) for x in np.asarray(var.sel(sel).values).ravel()]
        scores, options = self._axes["score"], self._axes["option"]
        return key_labels(scores, options if self._labels[1] is not None else [], got or None)

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

    def axes(self, row: Any) -> Axes:
        """The ``score`` and ``option`` axes of the run that saved the row's unit."""
        got = self._unit(row)
        extra = got[1] if got else {}
        return {"score": [int(y) for y in extra.get("axis_score", [])],
                "option": [str(o) for o in extra.get("axis_option", [])]}  # fmt: skip

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


def place(arr: np.ndarray, dims: Sequence[str], source: Axes, run: Axes, name: str) -> np.ndarray:
    """A reused variable's values (cell axis first, then ``dims``) placed from a source's
    ``score`` and ``option`` axes on the run's, by score and by option name.

    A run's score the source's axis lacks is off the cell's item's support (its key holds
    the item's points): 0, or NaN where the source's values over ``score`` are all NaN (not
    measured, e.g. a decoding setting not read). A run's option the source lacks is not
    offered: NaN.

    Raises
    ------
    CollectionError
        A source value off the run's axes that is neither 0 nor NaN (the keys did not hold
        the cell's support or options: a bug).

    Examples
    --------
    >>> pmf = np.array([[0.0, 0.25, 0.75, 0.0]])
    >>> place(pmf, ("score",), {"score": [0, 1, 2, 3]}, {"score": [1, 2, 3, 4, 5]}, "pmf")
    array([[0.25, 0.75, 0.  , 0.  , 0.  ]])
    """
    out = np.asarray(arr)
    for axis in ("score", "option"):
        if axis not in dims or list(source.get(axis, [])) == list(run.get(axis, [])):
            continue
        at = 1 + list(dims).index(axis)
        src, dst = list(source.get(axis, [])), list(run.get(axis, []))
        moved = np.moveaxis(out, at, -1).astype(np.float64)
        lost = [i for i, v in enumerate(src) if v not in dst]
        held = moved[..., lost]
        if lost and not (np.isnan(held) | (held == 0)).all():
            raise CollectionError(
                f"internal error: reused {name} holds values at {axis} "
                f"{[src[i] for i in lost]}, which its cell's key says it does not offer; "
                "please report it (run without --reuse meanwhile)"
            )
        fill: Any = np.nan
        if axis == "score":
            fill = np.where(np.isfinite(moved).any(axis=-1, keepdims=True), 0.0, np.nan)
        placed = np.broadcast_to(fill, (*moved.shape[:-1], len(dst))).copy()
        for i, v in enumerate(src):
            if v in dst:
                placed[..., dst.index(v)] = moved[..., i]
        out = np.moveaxis(placed, -1, at)
    return out


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
        self, traces: Sequence[int], sizes: Mapping[str, int], *, elicitation: bool = False,
        axes: Axes | None = None,
    ) -> list[tuple[int, UnitResult]]:  # fmt: skip
        """The found cells as :class:`UnitResult` rows, one per (model, source, mode, axes)
        (``elicitation``: with :data:`~xlikert.core.schema.ELICITATION_VARIABLES`), placed
        on the run's ``axes`` (:func:`place`; None: the sources' are the run's)."""
        groups: dict[tuple[Any, ...], list[tuple[int, Any]]] = {}
        for (mi, j), (si, row) in self.found.items():
            src = self.sources[si]
            lies = json.dumps(src.axes(row)) if axes is not None else "{}"
            groups.setdefault((mi, si, src.mode(row), lies), []).append((j, row))
        out = []
        for (mi, si, mode, lies), cells in groups.items():
            table = variable_table(bounded=mode == "topk", traces=traces[mi],
                                   nonsubstantive=sizes.get("option", 0) > 0,
                                   scripts=sizes.get("script", 0) > 0,
                                   elicitation=elicitation)  # fmt: skip
            got = self.sources[si].take([row for _, row in cells], list(table))
            n, data = len(cells), {}
            for name, var in table.items():
                shape = (n, *({**sizes, "trace": traces[mi]}[d] for d in var.dims))
                arr = got.get(name)
                if arr is not None and axes is not None and {"score", "option"} & set(var.dims):
                    arr = place(arr, var.dims, json.loads(lies), axes, name)
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


# ---------------------------------------------------------------------------- why fewer
#: Why a results file's cell was not reused, in words (:func:`shortfall`).
REASONS = {
    "rule": "keyed by an earlier rule ({}): its cells are computed again",
    "identity": "another model identity ({})",
    "settings": "other settings ({})",
    "model": "a model this run does not have",
    "not_asked": "cells this run does not ask (items or levels it does not have)",
    "labels": "other answer labels",
    "options": "other non-substantive options",
    "prompt": "another prompt (the token ids or request sent)",
}


def _changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """``key: old -> new`` for each key whose value differs (at most 4 named)."""
    diff = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
    said = [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in diff[:4]]
    return ", ".join(said + ([f"{len(diff) - 4} more"] if len(diff) > 4 else []))


def shortfall(source: ResultsSource, run: RunCells) -> dict[str, dict[str, int]]:
    """Why the keyed cells of ``source`` that none of the run's keys match were not reused:
    model name -> reason (:data:`REASONS`, filled in) -> cells; empty when every one was.

    A model keyed by an earlier rule, or with another identity or other settings, gives
    one reason for all its cells; otherwise each cell is placed on the run by its levels
    and compared: not asked, other answer labels, other options, another prompt.
    """
    out: dict[str, dict[str, int]] = {}
    anyone = {k for keys in run.keys.values() for k in keys.values()}
    for name in source.model_names():
        today = source.formats.get(name) == KEY_FORMAT
        # the run's model of that name, or any (a model renamed: its cells are found by key)
        found = set(run.keys[name].values()) if name in run.keys else anyone
        missed = [r for r in source.rows_of(name) if not today or source.key_of(r) not in found]
        if missed:
            out[name] = _why(source, run, name, missed)
    return out


def _why(source: ResultsSource, run: RunCells, name: str, missed: list[int]) -> dict[str, int]:
    """The reasons of one model's cells of ``source`` that were not matched."""
    fmt = source.formats.get(name, "")
    if name not in run.keys:
        return {REASONS["model"]: len(missed)}
    if fmt != KEY_FORMAT:
        return {REASONS["rule"].format(fmt or "none recorded"): len(missed)}
    theirs = (source.models.get(name) or {}).get("cell_identity") or {}
    ours = run.identity.get(name) or {}
    for part, what in (("model", "identity"), ("options", "settings")):
        if theirs.get(part) != ours.get(part):
            changes = _changes(theirs.get(part) or {}, ours.get(part) or {})
            return {REASONS[what].format(changes): len(missed)}
    counts: dict[str, int] = {}
    for row in missed:
        j = run.locate(source.coords(row))
        if j is None:
            why = "not_asked"
        else:
            mine, file = run.labels(j), source.key_labels(row)
            points = [x for x in file if x.split("=", 1)[0].lstrip("-").isdigit()]
            ours_points = [x for x in mine if x.split("=", 1)[0].lstrip("-").isdigit()]
            why = "labels" if points != ours_points else "options" if file != mine else "prompt"
        counts[REASONS[why]] = counts.get(REASONS[why], 0) + 1
    return counts


class RunCells:
    """What :func:`shortfall` reads of a run: per model name its cells' keys and the
    identity they hash; a cell by its levels; a cell's answer labels as its key holds them.

    Parameters
    ----------
    keys
        Model name -> ``cell -> key``.
    identity
        Model name -> its ``cell_identity`` (:meth:`~.identity.RunKeys.identity`).
    user
        The run's ``user`` prompts (its dims and levels place a file's cell).
    labels
        ``cell -> answer labels`` (:func:`~.identity.key_labels`).
    """

    def __init__(
        self,
        keys: Mapping[str, Mapping[int, str]],
        identity: Mapping[str, dict[str, Any] | None],
        user: xr.DataArray,
        labels: Any,
    ):
        self.keys, self.identity, self.labels = dict(keys), dict(identity), labels
        self.dims = tuple(str(d) for d in user.dims)
        self.shape = tuple(user.shape)
        self.index = {d: {str(v): i for i, v in enumerate(user[d].values)}
                      for d in self.dims if d in user.coords}  # fmt: skip

    def locate(self, coords: Mapping[str, str]) -> int | None:
        """The run's cell at a file cell's levels (None: the run does not ask it)."""
        if set(coords) - {MODEL_DIM} != set(self.dims):
            return None
        found = [self.index.get(d, {}).get(coords[d]) for d in self.dims]
        at = [i for i in found if i is not None]
        if len(at) < len(found):
            return None
        return int(np.ravel_multi_index(at, self.shape))
