"""Combine the shard files of a ``--shard i/n`` run into one results file.

Each shard file holds every cell's arrays, a ``computed`` mask of the cells it
provides, and ``attrs["shard"] = "i/n"``. :func:`merge_shards` checks that the
files come from one run (one configuration, one split), names a shard that is
missing or given twice, takes each cell from the shard that computed it, and
writes the file the unsharded run would have written: the same numbers, bit for
bit, since every shard computed its units in the same batches.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import xarray as xr

from ..._version import __version__
from ...core.dims import MODEL_DIM
from ...core.errors import CollectionError
from ...core.schema import (
    BOUND_VARIABLES,
    CELL_VARIABLES,
    CONTEXT_VARIABLES,
    ELICITATION_VARIABLES,
    NONSUBSTANTIVE_BOUND_VARIABLES,
    NONSUBSTANTIVE_VARIABLES,
    SCRIPT_BOUND_VARIABLES,
    SCRIPT_VARIABLES,
    TRACE_VARIABLES,
    VARIABLES,
)
from ...core.validate import describe_cells
from ..record import describe_models

__all__ = ["merge_shards"]


def _read(paths: Sequence[str | os.PathLike]) -> list[xr.Dataset]:
    from ...core.io import open_results

    parts = []
    for p in paths:
        try:
            ds = open_results(p)
        except (OSError, ValueError) as exc:
            raise CollectionError(f"cannot read shard {p}: {exc}") from exc
        if "computed" not in ds:
            raise CollectionError(
                f"{p} is not a shard file (no 'computed' variable; run with --shard i/n)"
            )
        parts.append(ds)
    return parts


def _check_one_run(paths: Sequence[str | os.PathLike], parts: list[xr.Dataset]) -> None:
    """Same configuration, same dims and coords, same number of shards."""
    runs = {
        str(p): ds.attrs.get("xlikert_run_fingerprint") for p, ds in zip(paths, parts, strict=True)
    }
    if len(set(runs.values())) > 1:
        groups: dict[object, list[str]] = {}
        for name, f in runs.items():
            groups.setdefault(f, []).append(name)
        raise CollectionError(
            "shards come from runs with different configurations (prompts, models, scale or "
            "options such as the answer rule or dtype): "
            + "; ".join(f"{files}" for files in groups.values())
            + " each share one; rerun the odd shard(s) with the same command"
        )
    base = parts[0]
    for p, ds in zip(paths[1:], parts[1:], strict=True):
        if ds.sizes != base.sizes or any(
            not np.array_equal(ds[d].values, base[d].values) for d in base.dims if d in base.coords
        ):
            raise CollectionError(
                f"shard {p} has different dims/coords from {paths[0]}: different runs?"
            )
        if ds.attrs.get("shard", "").split("/")[-1] != base.attrs.get("shard", "").split("/")[-1]:
            raise CollectionError(
                f"shard {p} ({ds.attrs.get('shard')}) and {paths[0]} "
                f"({base.attrs.get('shard')}) split the work differently"
            )


def _computed_count(parts: list[xr.Dataset]) -> xr.DataArray:
    """How many of the shards computed each cell (the sum of their ``computed`` flags)."""
    return cast(xr.DataArray, sum(ds["computed"].astype(int) for ds in parts))


def _check_shards(paths: Sequence[str | os.PathLike], parts: list[xr.Dataset]) -> None:
    """Every shard i of n once: name the shards given twice and those missing."""
    by_shard: dict[str, list[str]] = {}
    for p, ds in zip(paths, parts, strict=True):
        by_shard.setdefault(str(ds.attrs.get("shard", "?")), []).append(str(p))
    twice = {s: files for s, files in by_shard.items() if len(files) > 1}
    if twice:
        raise CollectionError(
            "shards overlap: "
            + "; ".join(
                f"shard {s} is given {len(f)} times ({', '.join(f)})" for s, f in twice.items()
            )
            + "; give each shard's file once"
        )
    n = str(parts[0].attrs.get("shard", "/")).split("/")[-1]
    if n.isdigit():
        missing = [f"{i}/{n}" for i in range(1, int(n) + 1) if f"{i}/{n}" not in by_shard]
        if missing:
            raise CollectionError(
                f"shards are incomplete: shard(s) {', '.join(missing)} missing (run them with "
                f"--shard {missing[0]} ...); missing cells at "
                f"{describe_cells(_computed_count(parts) == 0)}"
            )


def _merged_attrs(
    out: xr.Dataset, paths: Sequence[str | os.PathLike[str]], parts: list[xr.Dataset], run: object
) -> None:
    from ...core.io import read_attrs

    models: dict = {}
    sources: dict[str, dict[str, Any]] = {}
    for ds in parts:  # a shard records the models it loaded, and the cells it reused
        attrs = read_attrs(ds)
        for name, info in (attrs.get("models") or {}).items():
            if info and not models.get(name):
                models[name] = info
        for label, src in (attrs.get("reuse_sources") or {}).items():
            have = sources.setdefault(label, {**src, "cells": 0})
            have["cells"] += int(src.get("cells", 0))
    out.attrs["models"] = {str(m): models.get(str(m), {}) for m in out[MODEL_DIM].values}
    describe_models(out)
    out.attrs.pop("shard", None)
    if run:  # the merged file is what the unsharded run would have made
        out.attrs["xlikert_fingerprint"] = run
    for key in ("cells_computed", "cells_copied", "cells_reused"):
        if all(key in ds.attrs for ds in parts):
            out.attrs[key] = int(sum(int(ds.attrs[key]) for ds in parts))
    if any("reuse_sources" in ds.attrs for ds in parts):
        out.attrs["reuse_sources"] = sources
    out.attrs["merged_from"] = json.dumps([os.fspath(p) for p in paths])
    out.attrs["history"] = "\n".join(
        [
            *(ds.attrs.get("history", "") for ds in parts),
            f"xlikert {__version__} merge of {len(parts)} shards",
        ]
    )


def _copy_twins(
    out: xr.Dataset, parts: list[xr.Dataset], count: xr.DataArray, names: Sequence[str]
) -> tuple[int, xr.DataArray]:
    """Fill the cells no shard computed whose key a computed cell has (a cell whose prompt
    is another's, computed once by the shard that held the first; the shard that holds the
    cell stored its key): their numbers are that cell's, as in an unsharded run. Returns how
    many were copied and the updated count."""
    if "cell_key" not in out:
        return 0, count
    dims = out["cell_key"].dims
    count = count.transpose(*dims).copy()
    keys = out["cell_key"].values.astype(str).ravel()
    for ds in parts:  # the keys of the cells a shard holds but did not compute
        theirs = ds["cell_key"].transpose(*dims).values.astype(str).ravel()
        keys = np.where(keys == "", theirs, keys)
    have = count.values.ravel() > 0
    first: dict[str, int] = {}
    for i in np.flatnonzero(have):
        first.setdefault(keys[i], int(i))
    pairs = [(int(i), first[keys[i]]) for i in np.flatnonzero(~have) if keys[i] in first]
    if not pairs:
        return 0, count
    dst, src = (np.asarray(x) for x in zip(*pairs, strict=True))
    for v in names:
        var = out[v].transpose(*dims, ...)
        arr = var.values.copy()
        flat = arr.reshape(keys.size, -1)
        flat[dst] = flat[src]
        out[v] = var.copy(data=arr).transpose(*out[v].dims)
    out["cell_key"].values = keys.reshape(out["cell_key"].shape)
    count.values.reshape(-1)[dst] = 1
    return len(pairs), count


def _pad_histories(parts: list[xr.Dataset]) -> list[xr.Dataset]:
    """The shards with their ``history`` dims padded (with fill) to the longest: each holds
    as many histories as the most any item of its own conversations read."""
    n = max((ds.sizes.get("history", 0) for ds in parts), default=0)
    out = []
    for ds in parts:
        have = ds.sizes.get("history", 0)
        if have < n:
            padded = {}
            for name, spec in CONTEXT_VARIABLES.items():
                if name in ds and "history" in spec.dims:
                    var, tail = ds[name], len(spec.dims) - 1
                    lead = var.shape[: var.ndim - tail - 1]
                    arr = spec.full((*lead, n, *var.shape[var.ndim - tail :]))
                    where: tuple[Any, ...] = (..., slice(0, have), *(slice(None),) * tail)
                    arr[where] = var.values
                    padded[name] = (var.dims, arr.astype(str) if spec.is_text else arr, var.attrs)
            ds = ds.drop_vars(list(padded)).assign(padded)
        out.append(ds)
    return out


def merge_shards(
    paths: Sequence[str | os.PathLike], output: str | os.PathLike | None = None
) -> xr.Dataset:
    """Merge shard files (each with a ``computed`` mask) into one complete Dataset.

    The shards are the outputs of one run split with ``shard="i/n"`` (``xlikert run
    --shard i/n``); the merge is the file an unsharded run writes (see
    :doc:`/cluster`). Cells a shard did not compute but whose key another cell
    shares (identical prompts) are copied.

    Parameters
    ----------
    paths : sequence of str or os.PathLike
        The shard files, every part of the run once, in any order.
    output : str or os.PathLike, optional
        Where to write the merged results (netCDF, written to a temporary file and
        renamed); none where omitted.

    Returns
    -------
    xarray.Dataset
        The merged results, without the ``computed`` mask; its attrs are those
        of the unsharded run (no ``shard``; the run's fingerprint, each model's
        provenance, ``cells_computed``, ``cells_copied`` and ``cells_reused``
        summed over the shards).

    Raises
    ------
    CollectionError
        When no file is given, the shards come from different runs, a shard is
        given twice or is missing (naming it), or cells overlap or are missing; the
        message names files and cells.

    Examples
    --------
    >>> merge_shards([])
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: merge needs at least one shard file

    After ``xlikert run study.toml --shard 1/2 -o part1.nc`` and ``--shard 2/2 -o
    part2.nc``:

    >>> ds = merge_shards(["part1.nc", "part2.nc"], "results.nc")  # doctest: +SKIP
    """
    if not paths:
        raise CollectionError("merge needs at least one shard file")
    from ...core.io import encode_attrs

    parts = _pad_histories(_read(paths))
    _check_one_run(paths, parts)
    _check_shards(paths, parts)
    count = _computed_count(parts)
    if bool((count > 1).any()):
        who = [
            str(p)
            for p, ds in zip(paths, parts, strict=True)
            if bool((ds["computed"] & (count > 1)).any())
        ]
        raise CollectionError(
            f"shards overlap: cells computed more than once at {describe_cells(count > 1)} "
            f"(files {who})"
        )
    base = parts[0]
    out = base.drop_vars("computed").copy()
    optional = (
        *BOUND_VARIABLES, *NONSUBSTANTIVE_VARIABLES, *NONSUBSTANTIVE_BOUND_VARIABLES,
        *SCRIPT_VARIABLES, *SCRIPT_BOUND_VARIABLES, *TRACE_VARIABLES, *CELL_VARIABLES, *CONTEXT_VARIABLES,
        *ELICITATION_VARIABLES,
    )  # fmt: skip
    names = [*VARIABLES, *(v for v in optional if v in out)]
    for ds in parts[1:]:
        mask = ds["computed"]
        for v in names:
            out[v] = xr.where(mask, ds[v], out[v], keep_attrs=True).transpose(*base[v].dims)
    copied, count = _copy_twins(out, parts, count, names)
    if bool((count == 0).any()):
        raise CollectionError(
            f"shards are incomplete: missing cells at {describe_cells(count == 0)}; "
            "run the missing shard(s) and merge again"
        )
    _merged_attrs(out, paths, parts, base.attrs.get("xlikert_run_fingerprint"))
    if "cells_copied" in out.attrs:
        out.attrs["cells_copied"] = int(out.attrs["cells_copied"]) + copied
    out = encode_attrs(out)
    if output is not None:
        from .session import write_results_file

        write_results_file(out, output)
    return out
