"""The demo experiment's prompts as the benchmarks feed them to a model.

Not part of the ``xlikert`` package; the scripts (and ``_vllm_child.py``, in the vLLM
venv) import it as a sibling module. xarray and xlikert are imported when called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def demo_prompts(targets: int | None = None, items: int | None = None):
    """The demo experiment's prompts (CETSCALE x 4 targets x 17 items); with ``targets``
    or ``items``, the first that many only."""
    from xlikert.design import load_experiment

    prompts = load_experiment("demo").build_prompts()
    if targets:
        prompts = prompts.isel(target=slice(targets))
    if items:
        prompts = prompts.isel(item=slice(items))
    return prompts


def prompt_pairs(
    prompts, order: Sequence[str] | None = ("target", "item")
) -> list[tuple[str, str]]:
    """``(system, user)`` of every prompt, flattened in the dimension ``order`` (target-major,
    the order of a results Dataset's ``target, item`` cells); ``None``: as broadcast."""
    import xarray as xr

    system, user = xr.broadcast(prompts["system"], prompts["user"])
    if order is not None:
        system, user = system.transpose(*order), user.transpose(*order)
    return list(zip(map(str, system.values.ravel()), map(str, user.values.ravel()), strict=True))


def by_system(
    pairs: Sequence[tuple[str, Any]], encoded: Sequence[list[int]]
) -> list[list[list[int]]]:
    """The token ids ``encoded`` of the prompts ``pairs``, one group per system prompt
    (the groups :func:`_flops.useful_flops` counts the shared prefix of once)."""
    groups: dict[str, list[list[int]]] = {}
    for (system, _), ids in zip(pairs, encoded, strict=True):
        groups.setdefault(system, []).append(ids)
    return list(groups.values())


def target_major(da):
    """A results variable's ``(target, item)`` cells of its first model, flattened
    target-major: the order of :func:`prompt_pairs`."""
    if "model" in da.dims:
        da = da.isel(model=0)
    return da.transpose("target", "item").values.ravel()
