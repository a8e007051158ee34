"""The passes and tokens of a run's cells, counted before it runs and as it runs.

* :func:`count_units`: what the cells to compute will read (the forward passes known
  exactly and their upper bound, the prompts' tokens and an upper bound of every token
  read), from the cells' token ids (only the tokenizer);
* :func:`spent_counts`: what computed cells read, from their variables;
* :class:`RunCost`: a run's projection beside what it spent, its closing summary.

:mod:`.cost` (``xlikert plan``) counts with the same functions, so the plan and the run
count alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...core.dims import MODEL_DIM
from ..options import CollectOptions

__all__ = ["RunCost", "count_units", "n_ids", "spent_counts"]


def count_units(plan: Any, options: CollectOptions, keys: Any, mi: int,
                units: list[list[int]]) -> dict[str, Any]:  # fmt: skip
    """The passes and tokens of model ``mi``'s cells to compute, grouped in ``units``.

    Parameters
    ----------
    plan : Plan
        The run's plan (:class:`~xlikert.collect.run.runner.Plan`): prompts, levels,
        conversations.
    options : CollectOptions
        The run's settings (the own-words, reply and sequential budgets).
    keys : RunKeys
        The run's keys (:class:`~.identity.RunKeys`): each model's inputs, whose ``sent``
        gives the token ids a prompt is read as (only the tokenizer loads).
    mi : int
        The model's index.
    units : list of list of int
        The cells to compute, unit by unit (a conversation is one unit).

    Returns
    -------
    dict
        ``to_compute`` (cells), ``passes`` (known exactly), ``passes_max`` (their upper
        bound), ``prompt_tokens`` (exact), ``tokens_max`` (an upper bound of every token
        read; the rules: :mod:`.cost`).
    """
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


def n_ids(x: Any) -> int:
    """The number of token ids in one stored ``*_token_ids`` value ("" holds none).

    Examples
    --------
    >>> from xlikert.core.codecs import encode_token_ids
    >>> n_ids(encode_token_ids([5, 6, 7])), n_ids("")
    (3, 0)
    """
    from ...core.codecs import decode_token_ids

    return len(decode_token_ids(str(x))) if x else 0


def spent_counts(get: Any) -> tuple[int, int]:
    """The forward passes and prompt tokens that computed cells read, from their variables.

    One pass per first-token or prefix cell, one plus the reply's tokens per greedy
    cell, ``elicitation_passes`` per own-words cell, ``context_passes`` per conversation
    (on its first item's cell).

    Parameters
    ----------
    get : callable
        ``get(name)``: the cells' values of a variable, flat, or None where the run has
        no such variable (``prompt_token_ids`` is always there).

    Returns
    -------
    tuple of (int, int)
        The passes and the prompt tokens.

    Examples
    --------
    >>> from xlikert.core.codecs import encode_token_ids
    >>> ids = np.array([encode_token_ids([1, 2]), encode_token_ids([3])], dtype=object)
    >>> spent_counts({"prompt_token_ids": ids, "elicitation_passes": np.array([0, 5])}.get)
    (6, 3)
    """
    ids = get("prompt_token_ids")
    passes = np.ones(len(ids), dtype=np.int64)
    e = get("elicitation_passes")
    if e is not None:
        passes = np.where(e > 0, e, passes)
    replies = get("reply_token_ids")
    if replies is not None:
        passes = passes + np.asarray([n_ids(x) for x in replies], dtype=np.int64)
    c = get("context_passes")
    if c is not None:
        pos = get("context_position")
        passes = np.where(c >= 0, np.where(pos == 0, c, 0), passes)
    return int(passes.sum()), int(sum(n_ids(x) for x in ids))


class RunCost:
    """A run's projection of what it computes, beside what it spent, per model: the
    closing summary of :func:`~xlikert.collect.collect` (and ``xlikert run``).

    The projection counts the cells the run had to compute when it started (as
    :func:`~.cost.cost_plan` does, from the keys the run made: nothing more loads); the spent
    side adds up every unit this session computed: its cells, passes, prompt tokens
    (:func:`~.cost.cost_spent`'s rules) and the seconds its scoring took (on the replica that
    scored it: one replica's seconds, the model's load not included).

    Parameters
    ----------
    names : sequence of str
        The run's model names.
    tokens_per_second : float or dict of str to float, optional
        The projection's throughput of one replica (as :func:`~.cost.cost_plan` takes it);
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
        self.projected[mi] = count_units(plan, options, keys, mi, units)

    def spend(self, mi: int, data: dict[str, Any], seconds: float) -> None:
        """A unit of model ``mi`` computed: its variables (per cell) and its scoring seconds."""
        passes, tokens = spent_counts(
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
