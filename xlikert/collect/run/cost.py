"""The cost of a study before it runs, and what a run spent: ``xlikert plan``.

:func:`cost_plan` keys a study's cells as :func:`~xlikert.collect.collect` does (only
tokenizers load), looks them up in the output and the ``reuse`` files, and counts, per
model, what is left to compute:

* ``passes``: forward passes (one prompt read) known exactly: one per cell read at the
  first token or after a prefix; ``passes_max``: their upper bound, adding the reply cap
  per ``greedy`` cell, ``own_words_max_passes`` per ``own_words`` cell and ``max_passes``
  per conversation (sequential administration) where those read more than one;
* ``prompt_tokens``: the tokens of every prompt to compute, as the model reads them
  (exact); ``tokens_max``: an upper bound of every token read, assuming a pass beyond a
  cell's first reads only its new tokens from its parent's cache (the own-words and
  history trees do): one reply token per own-words or greedy pass, the longest item
  prompt of the conversation per history pass;
* ``flops``: 2 x parameters x ``tokens_max`` (a forward pass's multiply-adds; the
  parameters counted from the weights' headers, none loaded), and
* ``seconds``: ``tokens_max`` at a stated throughput (prompt tokens per second of one
  replica): given, or measured by a short probe on this machine (:func:`_probe_throughput`,
  which loads the model).

:func:`cost_spent` reads the same counts from a results file (its computed cells), so a
projection can be set beside what a run spent; a run does so itself as it ends
(:class:`~.tally.RunCost`: the projection of the cells it had to compute, beside the cells,
passes, prompt tokens and scoring seconds it spent).
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ...core.dims import MODEL_DIM
from ..options import CollectOptions
from ..protocol import backend_module
from .tally import count_units, n_ids, spent_counts

__all__ = ["COLUMNS", "cost_plan", "cost_spent"]

#: The columns of :func:`cost_plan` (and of :func:`cost_spent`, less the projection's).
COLUMNS = ("cells", "found", "to_compute", "passes", "passes_max", "prompt_tokens",
           "tokens_max", "parameters", "flops", "tokens_per_second", "seconds")  # fmt: skip

FLOPS_RULE = "2 x parameters x tokens (forward pass only)"
TOKENS_RULE = (
    "every prompt's tokens, plus, for each pass beyond a cell's first, its new "
    "tokens only (read from its parent's cache): one reply token per greedy or own-words "
    "pass, the longest item prompt of the conversation per history pass"
)


def cost_plan(
    prompts: xr.Dataset,
    models: Sequence[dict[str, Any] | str] | dict[str, Any] | str,
    output: str | os.PathLike | None = None,
    *,
    options: CollectOptions | None = None,
    reuse: Sequence[str | os.PathLike] = (),
    tokens_per_second: float | dict[str, float] | None = None,
    probe: int = 0,
    **overrides: Any,
) -> pd.DataFrame:
    """The cost of a study per model, before it runs (only tokenizers load).

    For each model: the cells, those already found, and the passes, tokens, FLOPs and
    time left to compute (each count's rule: :mod:`xlikert.collect.run.cost`).

    Parameters
    ----------
    prompts : xarray.Dataset
        As :func:`~xlikert.collect.collect` takes them.
    models : str, dict or sequence of str or dict
        As :func:`~xlikert.collect.collect` takes them.
    output : str or os.PathLike, optional
        The run's output: its cells are found (a finished file, or one ``--overwrite``
        would replace).
    options : CollectOptions, optional
        The run's settings, as :func:`~xlikert.collect.collect` takes them.
    reuse : sequence of str or os.PathLike, default ()
        Earlier results files whose cells are found.
    tokens_per_second : float or dict of str to float, optional
        The throughput of one replica in prompt tokens per second (one number, or one per
        model name); the projection's assumption.
    probe : int, default 0
        Measure the throughput of each model without one given on this machine: load it
        and time whole units of the plan, spread over it, holding at least ``probe``
        prompts (:func:`_probe_units`, :func:`_probe_throughput`).
    **overrides : Any
        Fields of :class:`~xlikert.collect.options.CollectOptions` by name.

    Returns
    -------
    pandas.DataFrame
        One row per model, :data:`COLUMNS`; ``attrs["assumptions"]`` states the rules.

    Raises
    ------
    CollectionError
        What :func:`~xlikert.collect.collect` refuses, before anything loads.

    Examples
    --------
    >>> from xlikert.design import load_experiment
    >>> exp = load_experiment("demo")
    >>> df = cost_plan(exp.build_prompts(), exp.models, tokens_per_second=2000)  # doctest: +SKIP
    >>> df[["cells", "to_compute", "prompt_tokens", "flops", "seconds"]]  # doctest: +SKIP
    """
    from .checked import check_run
    from .runner import Plan, reuse_sources, run_keys
    from .session import Session

    run = check_run(prompts, models, output, options=options, overrides=overrides,
                    shard=None, reuse=reuse)  # fmt: skip
    plan = Plan(run)
    keys = run_keys(run, plan)
    session = Session(run, plan, keys, progress=False)
    sources = reuse_sources(run, plan, overwrite=True)
    finished = isinstance(sources, xr.Dataset)
    if not isinstance(sources, xr.Dataset):
        session.find(sources)
    rows, how = {}, {}
    for mi, spec in enumerate(run.models):
        todo = [] if finished else session.todo(mi)
        row = count_units(plan, run.options, keys, mi, [c for _, c in todo])
        row["cells"] = sum(len(c) for m, _, c in plan.units if m == mi)
        row["found"] = row["cells"] - row["to_compute"]
        row["parameters"] = _parameters(keys.inputs(mi))
        rate, how[spec["name"]] = _rate(spec, tokens_per_second, probe, run, plan, keys, mi)
        row["tokens_per_second"] = rate
        rows[spec["name"]] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df["flops"] = 2.0 * df["parameters"] * df["tokens_max"]
    df["seconds"] = df["tokens_max"] / df["tokens_per_second"]
    df = df[list(COLUMNS)]
    df.index.name = MODEL_DIM
    df.attrs["assumptions"] = {"flops": FLOPS_RULE, "tokens_max": TOKENS_RULE,
                               "seconds": "tokens_max / tokens_per_second, one replica",
                               "tokens_per_second": how}  # fmt: skip
    return df


def _parameters(inputs: Any) -> float:
    """The model's parameter count from its weight files' headers (safetensors; nothing
    loaded); NaN where the files are not on this machine."""
    folder = getattr(getattr(inputs, "prepared", None), "folder", None)
    if folder is None or not Path(folder).is_dir():
        return float("nan")
    total = 0
    for f in sorted(Path(folder).glob("*.safetensors")):
        with open(f, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
        total += sum(int(np.prod(v["shape"])) for k, v in header.items() if k != "__metadata__")
    return float(total) if total else float("nan")


def _rate(spec: dict[str, Any], given: float | dict[str, float] | None, probe: int, run: Any,
          plan: Any, keys: Any, mi: int) -> tuple[float, str]:  # fmt: skip
    """The throughput of one replica of a model, and where it comes from."""
    if isinstance(given, dict) and spec["name"] in given:
        return float(given[spec["name"]]), "given"
    if isinstance(given, int | float) and not isinstance(given, bool):
        return float(given), "given"
    if probe:
        units = _probe_units([c for m, _, c in plan.units if m == mi], probe)
        inputs = keys.inputs(mi)
        opened = run.options.replace(answer_labels=plan.labels_of(units[0]))
        rate = _probe_throughput(spec, opened, [plan.prompts(c) for c in units],
                                prepared=None if inputs is None else inputs.prepared)  # fmt: skip
        n = sum(len(c) for c in units)
        return rate, f"probe: {n} prompts in {len(units)} unit(s) of the run, on this machine"
    return float("nan"), "none given (pass tokens_per_second or probe)"


def _spread(cells: list[int], k: int) -> list[int]:
    """``k`` of ``cells`` evenly spread over them.

    Examples
    --------
    >>> _spread(list(range(10)), 3), _spread([4, 5], 8)
    ([0, 4, 9], [4, 5])
    """
    if k >= len(cells):
        return list(cells)
    return [cells[round(i * (len(cells) - 1) / max(k - 1, 1))] for i in range(k)]


def _probe_units(units: list[list[int]], prompts: int) -> list[list[int]]:
    """Whole units of the plan, evenly spread over it, holding at least ``prompts``
    prompts (all units where they hold fewer): the probe scores what the run scores, a
    unit's shared prefix and its prompts alike, so its rate is the run's.

    Examples
    --------
    >>> _probe_units([[0, 1], [2, 3], [4, 5], [6]], 3)
    [[0, 1], [6]]
    """
    for k in range(1, len(units) + 1):
        picked = [units[i] for i in _spread(list(range(len(units))), k)]
        if sum(len(c) for c in picked) >= prompts:
            return picked
    return units


def _probe_throughput(spec: dict[str, Any], options: CollectOptions,
                     units: list[list[tuple[str, str]]], *, prepared: Any = None) -> float:  # fmt: skip
    """Prompt tokens per second of ``spec`` scoring the prompts of ``units`` on this
    machine: the model loaded, a warm-up on two prompts, then each unit's prompts timed as
    the run scores a unit (one call, in the run's batches; first-token reading)."""
    model = backend_module(spec).open(spec, options, units[0][0], prepared=prepared)
    n, seconds = 0, 0.0
    try:
        model.score(units[0][:2])  # warm-up
        for prompts in units:
            t0 = time.perf_counter()
            r = model.score(prompts)
            seconds += time.perf_counter() - t0
            ids = r.data.get("prompt_token_ids")
            n += sum(n_ids(x) for x in np.asarray(ids).ravel()) if ids is not None else 0
    finally:
        model.close()
    return n / seconds if seconds > 0 else float("nan")


def cost_spent(ds: xr.Dataset) -> pd.DataFrame:
    """What a run computed, per model, counted as :func:`cost_plan` counts it.

    The cells it computed (not reused, not copied from a cell with the same key), their
    passes (one per first-token or prefix cell, one plus the reply's tokens per greedy
    cell, ``elicitation_passes`` per own-words cell, ``context_passes`` per
    conversation) and their prompts' tokens (``prompt_token_ids``).

    Parameters
    ----------
    ds : xarray.Dataset
        A results file of :func:`~xlikert.collect.collect`.

    Returns
    -------
    pandas.DataFrame
        One row per model: ``to_compute``, ``passes``, ``prompt_tokens``.

    Examples
    --------
    >>> import xlikert as xl
    >>> cost_spent(xl.open_results("results.nc"))  # doctest: +SKIP
    """
    rows = {}
    for name in ds[MODEL_DIM].values.astype(str):
        m = ds.sel(model=name)
        flat = functools.partial(_flat, m)

        # computed here: not reused, and the first cell of its key (a twin is copied)
        key = flat("cell_key")
        _, first = np.unique(key, return_index=True)
        own = np.zeros(key.size, dtype=bool)
        own[first] = True
        own &= flat("reused_from") == ""
        passes, tokens = spent_counts(functools.partial(_own, m, own))
        rows[name] = {"to_compute": int(own.sum()), "passes": passes, "prompt_tokens": tokens}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = MODEL_DIM
    return out


def _own(m: xr.Dataset, own: np.ndarray, var: str) -> np.ndarray | None:
    """A per-cell variable of one model at the cells it computed, or None where absent."""
    return _flat(m, var)[own] if var in m else None


def _flat(m: xr.Dataset, var: str) -> np.ndarray:
    """A per-cell variable of one model, in ``cell_key``'s order, flat."""
    return np.asarray(m[var].transpose(*m["cell_key"].dims).values).ravel()
