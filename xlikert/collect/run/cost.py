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
(:class:`RunCost`: the projection of the cells it had to compute, beside the cells,
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

__all__ = ["COLUMNS", "RunCost", "cost_plan", "cost_spent"]

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
        row = _count(plan, run.options, keys, mi, [c for _, c in todo])
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


def _count(plan: Any, options: CollectOptions, keys: Any, mi: int,
           units: list[list[int]]) -> dict[str, Any]:  # fmt: skip
    """The passes and tokens of model ``mi``'s cells to compute, grouped in ``units``."""
    inputs = keys.inputs(mi)
    passes = passes_max = tokens = tokens_max = 0
    for cells in units:
        sent = inputs.sent(plan.prompts(cells)) if inputs is not None else []
        lengths = [len(x) if not isinstance(x, dict) else 0 for x in sent]
        n = sum(lengths)
        tokens += n
        seq = plan.context is not None and plan.context.battery_of(cells[0]) is not None
        level = plan.level_of(cells[0])
        if seq:  # the conversation: one pass per item at least, max_passes at most
            passes += len(cells)
            extra = max(options.max_passes - len(cells), 0)
            passes_max += len(cells) + extra
            tokens_max += n + extra * max(lengths, default=0)
        elif level in ("greedy", "own_words"):
            bound = options.reply_tokens if level == "greedy" else options.own_words_max_passes
            passes += len(cells)
            passes_max += bound * len(cells)
            tokens_max += n + (bound - 1) * len(cells)
        else:
            passes += len(cells)
            passes_max += len(cells)
            tokens_max += n
    return {"to_compute": sum(len(c) for c in units), "passes": passes,
            "passes_max": passes_max, "prompt_tokens": tokens, "tokens_max": tokens_max}  # fmt: skip


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
            n += sum(_n_ids(x) for x in np.asarray(ids).ravel()) if ids is not None else 0
    finally:
        model.close()
    return n / seconds if seconds > 0 else float("nan")


def _n_ids(x: Any) -> int:
    from ...core.codecs import decode_token_ids

    return len(decode_token_ids(str(x))) if x else 0


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
        passes, tokens = _spent(functools.partial(_own, m, own))
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


def _spent(get: Any) -> tuple[int, int]:
    """The forward passes and prompt tokens of computed cells, from their variables
    (``get(name)``: the cells' values, flat, or None where the run has no such variable):
    one pass per first-token or prefix cell, one plus the reply's tokens per greedy cell,
    ``elicitation_passes`` per own-words cell, ``context_passes`` per conversation (on its
    first item's cell)."""
    ids = get("prompt_token_ids")
    passes = np.ones(len(ids), dtype=np.int64)
    e = get("elicitation_passes")
    if e is not None:
        passes = np.where(e > 0, e, passes)
    replies = get("reply_token_ids")
    if replies is not None:
        passes = passes + np.asarray([_n_ids(x) for x in replies], dtype=np.int64)
    c = get("context_passes")
    if c is not None:
        pos = get("context_position")
        passes = np.where(c >= 0, np.where(pos == 0, c, 0), passes)
    return int(passes.sum()), int(sum(_n_ids(x) for x in ids))


class RunCost:
    """A run's projection of what it computes, beside what it spent, per model: the
    closing summary of :func:`~xlikert.collect.collect` (and ``xlikert run``).

    The projection counts the cells the run had to compute when it started (as
    :func:`cost_plan` does, from the keys the run made: nothing more loads); the spent
    side adds up every unit this session computed: its cells, passes, prompt tokens
    (:func:`cost_spent`'s rules) and the seconds its scoring took (on the replica that
    scored it: one replica's seconds, the model's load not included).

    Parameters
    ----------
    names : sequence of str
        The run's model names.
    tokens_per_second : float or dict of str to float, optional
        The projection's throughput of one replica (as :func:`cost_plan` takes it);
        without one the projected seconds are NaN.

    Examples
    --------
    >>> from xlikert.core.codecs import encode_token_ids
    >>> cost = RunCost(["m"], tokens_per_second=100.0)
    >>> cost.projected[0] = {"to_compute": 2, "passes": 2, "passes_max": 2,
    ...                      "prompt_tokens": 50, "tokens_max": 50}
    >>> ids = [encode_token_ids(list(range(n))) for n in (20, 30)]
    >>> cost.spend(0, {"prompt_token_ids": np.array(ids, dtype=object)}, 0.4)
    >>> row = cost.table().loc["m"]
    >>> row[["passes", "spent_passes", "prompt_tokens", "spent_prompt_tokens"]].tolist()
    [2.0, 2.0, 50.0, 50.0]
    >>> row[["seconds", "spent_seconds"]].tolist()
    [0.5, 0.4]
    """

    def __init__(self, names: Sequence[str], tokens_per_second: float | dict[str, float] | None = None):  # fmt: skip
        self.names = [str(n) for n in names]
        self.rates = tokens_per_second
        self.projected: dict[int, dict[str, int]] = {}
        self.spent: dict[int, dict[str, float]] = {}

    def project(self, plan: Any, options: CollectOptions, keys: Any, mi: int,
                units: list[list[int]]) -> None:  # fmt: skip
        """Model ``mi``'s projection: the passes and tokens of ``units`` (its cells to compute)."""
        self.projected[mi] = _count(plan, options, keys, mi, units)

    def spend(self, mi: int, data: dict[str, Any], seconds: float) -> None:
        """A unit of model ``mi`` computed: its variables (per cell) and its scoring seconds."""
        passes, tokens = _spent(
            lambda var: None if var not in data else np.asarray(data[var]).ravel()
        )
        got = self.spent.setdefault(
            mi, dict.fromkeys(("cells", "passes", "prompt_tokens", "seconds"), 0)
        )
        got["cells"] += len(data["prompt_token_ids"])
        got["passes"] += passes
        got["prompt_tokens"] += tokens
        got["seconds"] += float(seconds)

    def table(self) -> pd.DataFrame:
        """One row per model with a projection: ``to_compute``, ``passes``, ``passes_max``,
        ``prompt_tokens``, ``tokens_max``, ``tokens_per_second``, ``seconds``, then the
        spent ``spent_cells``, ``spent_passes``, ``spent_prompt_tokens``, ``spent_seconds``
        and ``spent_tokens_per_second`` (prompt tokens per scoring second)."""
        rows = {}
        for mi, proj in sorted(self.projected.items()):
            name = self.names[mi]
            rate = self.rates.get(name) if isinstance(self.rates, dict) else self.rates
            rate = float("nan") if rate is None else float(rate)
            got = self.spent.get(
                mi, dict.fromkeys(("cells", "passes", "prompt_tokens", "seconds"), 0)
            )
            s = float(got["seconds"])
            rows[name] = {**proj, "tokens_per_second": rate, "seconds": proj["tokens_max"] / rate,
                          **{f"spent_{k}": v for k, v in got.items()},
                          "spent_tokens_per_second": got["prompt_tokens"] / s if s > 0 else float("nan")}  # fmt: skip
        df = pd.DataFrame.from_dict(rows, orient="index", dtype=float)
        df.index.name = MODEL_DIM
        return df

    def summary(self) -> str:
        """The table in words: what was projected beside what was spent."""
        df = self.table()
        if df.empty:
            return "collect: nothing computed in this session"
        return (
            "collect: projected beside spent (this session; seconds: scoring, one replica's, "
            "the load not included; passes_max and tokens_max bound own-words and sequential "
            "cells):\n" + df.to_string(float_format=lambda v: f"{v:.4g}")
        )
