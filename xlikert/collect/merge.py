"""Combine the shard files of a ``--shard i/n`` run into one results file."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np
import xarray as xr

from .._version import __version__
from ..errors import CollectionError
from ..schema import (
    BOUND_VARIABLES,
    NONSUBSTANTIVE_BOUND_VARIABLES,
    NONSUBSTANTIVE_VARIABLES,
    TRACE_VARIABLES,
    VARIABLES,
)
from ..validate import describe_cells

__all__ = ["merge_shards"]


def merge_shards(
    paths: Sequence[str | os.PathLike], output: str | os.PathLike | None = None
) -> xr.Dataset:
    """Merge shard files (each with a ``computed`` mask) into one complete Dataset.

    Raises
    ------
    CollectionError
        When the shards come from different runs, overlap (a cell computed twice),
        or leave cells missing; the message names files and cells.

    Examples
    --------
    >>> ds = merge_shards(["part1.nc", "part2.nc"], "results.nc")  # doctest: +SKIP
    """
    if not paths:
        raise CollectionError("merge needs at least one shard file")
    from ..io import encode_attrs, open_results, read_attrs

    parts = []
    for p in paths:
        try:
            parts.append(open_results(p))
        except (OSError, ValueError) as exc:
            raise CollectionError(f"cannot read shard {p}: {exc}") from exc
    for p, ds in zip(paths, parts, strict=True):
        if "computed" not in ds:
            raise CollectionError(
                f"{p} is not a shard file (no 'computed' variable; run with --shard i/n)"
            )
    base = parts[0]
    runs = {
        str(p): ds.attrs.get("xlikert_run_fingerprint") for p, ds in zip(paths, parts, strict=True)
    }
    if len(set(runs.values())) > 1:
        groups: dict = {}
        for p, f in runs.items():
            groups.setdefault(f, []).append(p)
        raise CollectionError(
            "shards come from runs with different configurations (prompts, models, scale or "
            "options such as the answer rule or dtype): "
            + "; ".join(f"{files}" for files in groups.values())
            + " each share one; rerun the odd shard(s) with the same command"
        )
    for p, ds in zip(paths[1:], parts[1:], strict=True):
        if ds.sizes != base.sizes or any(
            not np.array_equal(ds[d].values, base[d].values) for d in base.dims if d in base.coords
        ):
            raise CollectionError(
                f"shard {p} has different dims/coords from {paths[0]}: different runs?"
            )
        if ds.attrs.get("shard", "").split("/")[-1] != base.attrs.get("shard", "").split("/")[-1]:
            raise CollectionError(
                f"shard {p} ({ds.attrs.get('shard')}) and {paths[0]} ({base.attrs.get('shard')}) split the work differently"
            )
    count = sum(ds["computed"].astype(int) for ds in parts)
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
    if bool((count == 0).any()):
        raise CollectionError(
            f"shards are incomplete: missing cells at {describe_cells(count == 0)}; "
            "run the missing shard(s) and merge again"
        )
    out = base.drop_vars("computed").copy()
    for ds in parts[1:]:
        mask = ds["computed"]
        optional = (
            *BOUND_VARIABLES, *NONSUBSTANTIVE_VARIABLES, *NONSUBSTANTIVE_BOUND_VARIABLES,
            *TRACE_VARIABLES,
        )  # fmt: skip
        for v in (*VARIABLES, *(b for b in optional if b in out)):
            out[v] = xr.where(mask, ds[v], out[v], keep_attrs=True).transpose(*base[v].dims)
    models: dict = {}
    for ds in parts:  # a shard records the models it loaded
        for name, info in (read_attrs(ds).get("models") or {}).items():
            if info and not models.get(name):
                models[name] = info
    out.attrs["models"] = {str(m): models.get(str(m), {}) for m in out["model"].values}
    out.attrs.pop("shard", None)
    if runs[str(paths[0])]:  # the merged file is what the unsharded run would have made
        out.attrs["xlikert_fingerprint"] = runs[str(paths[0])]
    out.attrs["merged_from"] = json.dumps([os.fspath(p) for p in paths])
    out.attrs["history"] = "\n".join(
        [
            *(ds.attrs.get("history", "") for ds in parts),
            f"xlikert {__version__} merge of {len(parts)} shards",
        ]
    )
    out = encode_attrs(out)
    if output is not None:
        from .runner import write_atomic

        write_atomic(out, output)
    return out
