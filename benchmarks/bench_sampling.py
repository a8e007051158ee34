"""Exact vs sampling: one forward pass per item against a Monte Carlo study.

The same condition set (the demo experiment: CETSCALE x 4 targets = 68
prompts, Qwen2.5-Coder-0.5B-Instruct, built-in offline model) is measured several
ways in one process:

* **exact** (xlikert): ``collect`` -- one forward pass per prompt, the full
  next-token PMF over the scale (the N -> infinity limit: SE 0);
* **exact pass + draws**: the same forward pass as exact collection (the
  transformers backend's batches on the system prompt's KV cache, its own
  ``Scorer`` calls), N answers per prompt drawn from its next-token logits
  (seeded): the cost of sampling on top of an identical forward pass, so exact and
  this sampler run at equal compute, as the executed GFLOP per prompt show;
* **sampling** (what a researcher would run): for every prompt
  ``model.generate(do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
  max_new_tokens=1, num_return_sequences=N)``, parse the digit, count
  failures, average the valid answers; N = 10, 100, 1000 per item. The N
  sequences go in ``generate`` calls of at most ``--chunk`` sequences each
  (memory); ``num_return_sequences`` replicates the prompt, so each sequence
  pays its own prefill, as it does in ``transformers``; and one prompt per
  forward pass (unbatched, no prefix cache), its N answers drawn from that pass;
* **vLLM** ``n=N`` in the vLLM venv, each request's ``num_cached_tokens``
  recorded: the N sequences share the prompt's full KV blocks and each recomputes
  the tail block.

For each N the table gives the wall time, the seconds per sampled sequence,
the standard error the budget leaves -- analytic from the exact PMFs,
``SD(S)/sqrt(N)`` of the composite ``S`` (:func:`xlikert.analysis.sampling.standard_error`)
-- and, for the items actually sampled, the empirical SE (from the sample
variances) with z-scores of the sampled means against the exact means. A
second table turns this into the time needed to reach a given precision in
every condition.

A sampling budget whose full run would exceed its share of the time budget
(``--max-seconds``) is run on the first prompts only and extrapolated
linearly in (sequences x prompt tokens); the table and the JSON say so
("extrapolated from k of M prompts").

Usage::

    python benchmarks/bench_sampling.py            # Qwen2.5-0.5B, 68 prompts, ~5 min
    python benchmarks/bench_sampling.py --quick    # SmolLM2-135M, 6 prompts, < 1 min

Writes ``benchmarks/results/sampling.json`` (``sampling-quick.json`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    format_table,
    load_average,
    load_record,
    machine,
    model_name,
    result_path,
    timed,
    write_json,
)
from _flops import FlopCounter, cache_keyword, request_flops
from _prompts import demo_prompts, prompt_pairs, target_major
from _render import duration, fmt, table
from _vllm import not_measured, run_child

PRECISION_TARGETS = (1.0, 0.1, 0.01)

#: Why ``sampling.json`` has no second vLLM request layout that shares more.
VLLM_SECOND_LAYOUT = (
    "not measured: no request layout shares more without changing the prompts. vLLM's "
    "prefix cache hits whole KV blocks and is capped at the prompt length - 1 (the last "
    "token is recomputed for its logits; vLLM 0.32.0, vllm/v1/core/kv_cache_manager.py, "
    "KVCacheManager.get_computed_blocks), so even after a prefill request every one of the N sequences "
    "recomputes the tokens after the last full block below the last token. Padding a "
    "prompt to a block multiple would not help (a prompt of k blocks shares k - 1 of them); "
    "a prompt of k blocks + 1 token would share k blocks, but that is a different prompt, "
    "and its PMF is not the one exact collection reads. A smaller block size shares more "
    "(an engine setting, not a request layout)."
)


def parse_answer(text: str, scale: set[str], one_token: bool) -> int | None:
    """The scale value a sampled answer gives, or None (a constraint failure).

    With one new token, the stripped token must be a scale value (as for the
    exact valid-token set); with more, the first word, trailing ``.,;:!)``
    removed.
    """
    s = text.strip()
    if not one_token:
        s = s.split()[0].rstrip(".,;:!)") if s else ""
    return int(s) if s in scale else None


def _split(n: int, chunk: int) -> list[int]:
    return [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])


#: ``generate``'s sampler as a researcher would set it: temperature 1, no top-p/top-k.
SAMPLE = {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0}


class _PromptSampler:
    """One prompt's sequences drawn ``size`` at a time, as :func:`run_sampling` times them.

    ``shared=False``: ``generate`` with ``num_return_sequences`` (each sequence pays its
    own prefill). ``shared=True``: the prompt's forward pass once (its first call), the
    first new token of every sequence drawn from its last-position logits, longer answers
    continued by ``generate`` on its KV cache expanded to the sequences.
    """

    def __init__(self, lm, ids: list[int], shared: bool, max_new_tokens: int) -> None:
        import torch

        tok = lm.tokenizer
        self.model, self.shared, self.max_new = lm.model, shared, max_new_tokens
        self.pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        self.x = torch.tensor([ids], device=lm.device)
        self.mask = torch.ones_like(self.x)
        self.prefill = None

    def draw(self, size: int):
        """``size`` sequences' new tokens."""
        import torch

        x, model = self.x, self.model
        with torch.no_grad():
            if not self.shared:
                out = model.generate(x, attention_mask=self.mask, **SAMPLE,
                                     max_new_tokens=self.max_new, num_return_sequences=size,
                                     pad_token_id=self.pad)  # fmt: skip
                return out[:, x.shape[1] :]
            if self.prefill is None:  # once per prompt
                self.prefill = model(x, attention_mask=self.mask, use_cache=True, logits_to_keep=1)
            probs = torch.softmax(self.prefill.logits[0, -1].float(), -1)
            first = torch.multinomial(probs, size, replacement=True)[:, None]
            if self.max_new == 1:
                return first
            name = cache_keyword(model)  # cache, or past_key_values before it
            past = copy.deepcopy(getattr(self.prefill, name))
            past.batch_repeat_interleave(size)
            xs = torch.cat([x.expand(size, -1), first], 1)
            out = model.generate(xs, attention_mask=torch.ones_like(xs), **{name: past},
                                 **SAMPLE, max_new_tokens=self.max_new - 1,
                                 pad_token_id=self.pad)  # fmt: skip
            return out[:, x.shape[1] :]


def run_sampling(
    lm,
    encoded: list[list[int]],
    n: int,
    chunk: int,
    max_seconds: float,
    max_new_tokens: int,
    scale: set[str],
    shared: bool = False,
) -> dict[str, Any]:
    """Sample ``n`` answers per prompt, prompt by prompt, within ``max_seconds``.

    ``shared=False``: ``generate`` with ``num_return_sequences`` (each sequence pays its
    own prefill). ``shared=True``: one forward pass per prompt (the shared prefill);
    the first new token of every sequence is drawn from its last-position logits
    (softmax at temperature 1, ``torch.multinomial``: what ``generate``'s sampler does
    with top_p = 1 and top_k = 0), and longer answers continue with ``generate`` on
    the prompt's KV cache expanded to the sequences (``cache``).

    Stops before a call whose expected time would overrun the budget (after at least
    two calls, or one prompt in full); the time of the whole run is then extrapolated
    linearly in sequences x prompt tokens.
    """
    sizes = _split(n, chunk)
    min_calls = min(len(sizes), 2)  # at least one prompt in full when N <= 2 x chunk
    answers: list[list[int | None]] = []
    elapsed, calls, work_done = 0.0, 0, 0.0
    stopped = False
    for ids in encoded:
        prompt = _PromptSampler(lm, ids, shared, max_new_tokens)
        got: list[int | None] = []
        for size in sizes:
            if calls >= min_calls and elapsed + elapsed / calls > max_seconds:
                stopped = True
                break
            texts, seconds = timed(
                lambda size=size, prompt=prompt: lm.tokenizer.batch_decode(
                    prompt.draw(size), skip_special_tokens=True
                )
            )
            elapsed += seconds
            calls += 1
            work_done += (size if not shared else size / n) * len(ids)
            got += [parse_answer(t, scale, max_new_tokens == 1) for t in texts]
        if got:
            answers.append(got)
        if stopped:
            break
    # the work the time is extrapolated in: sequences x prompt tokens (a prefill per
    # sequence), or prompt tokens (one shared prefill per prompt)
    work_total = float((1 if shared else n) * sum(len(e) for e in encoded))
    work = (work_total, work_done)
    return _sampling_run(n, answers, len(encoded), calls, elapsed, work, shared)


def _sampling_run(n, answers, prompts, calls, elapsed, work, shared) -> dict[str, Any]:
    """A sampling run's record: measured, or extrapolated linearly in ``work`` (the whole
    run's, the part run's) when it stopped early."""
    complete = [a for a in answers if len(a) == n]
    sequences = sum(len(a) for a in answers)
    full = len(complete) == prompts
    return {
        "n": n,
        "answers": answers,
        "prompts_complete": len(complete),
        "prompts_total": prompts,
        "sequences_sampled": sequences,
        "generate_calls": calls,
        "measured_s": elapsed,
        "s_per_sequence": elapsed / max(sequences, 1),
        "total_s": elapsed if full else elapsed * work[0] / work[1],
        "extrapolated": not full,
        "extrapolation": None
        if full
        else (
            f"extrapolated from {sequences} of {n * prompts} sequences "
            f"({len(complete)} complete of {prompts} prompts), linear in "
            + ("prompt tokens (one prefill per prompt)" if shared else "sequences x prompt tokens")
        ),
    }


def _drawing_model(lm, options, n: int, generator):
    """The transformers backend's ``LocalModel`` whose readout draws ``n`` answers per
    prompt (``token``: the ids drawn) instead of reading the exact PMF."""
    import torch

    from xlikert.collect.backends.transformers import LocalModel

    class Drawing(LocalModel):
        """LocalModel whose readout draws answers instead of reading the exact PMF."""

        batches = 0

        def readout(self, logits, k: int) -> dict[str, np.ndarray]:
            z = logits.reshape(k, len(self.leaves), self.keep, logits.shape[-1])
            li, pos = self.where[self.lm.answers.contexts.index(())]
            probs = torch.softmax(z[:, li, pos].float(), -1)
            drawn = torch.multinomial(probs, n, replacement=True, generator=generator)
            self.batches += 1
            return {"token": drawn.cpu().numpy()}

    return Drawing(lm, options)


def exact_pass_sampler(
    lm,
    options,
    prompts: list[tuple[str, str]],
    n: int,
    scale: set[str],
    generator,
) -> dict[str, Any]:
    """Draw ``n`` answers per prompt from the logits of exact collection's own forward pass.

    The transformers backend's :class:`~xlikert.collect.backends.transformers.LocalModel` runs every
    unit (the prompts of one system prompt, ``options.chunk_size`` at most) as
    exact collection does: the shared prefix once on the KV cache, then the same
    length-sorted batches through the same :class:`~xlikert.collect.backends.transformers.Scorer`
    calls. Only the readout differs: instead of the exact PMF, each prompt's
    next-token logits give ``n`` draws (softmax at temperature 1 over the full
    vocabulary, ``torch.multinomial`` with ``generator``: what ``generate``'s
    sampler does with top_p = 1 and top_k = 0), each parsed like the other
    samplers' one-token answers (:func:`parse_answer`).

    Parameters
    ----------
    lm
        The :class:`~xlikert.collect.backends.transformers.LoadedModel` exact collection used.
    options
        The :class:`~xlikert.collect.options.CollectOptions` exact collection ran with.
    prompts
        ``(system, user)`` pairs in the order the answers are returned.
    n
        Answers drawn per prompt.
    scale
        The scale values as strings.
    generator
        A seeded ``torch.Generator``.

    Returns
    -------
    dict
        ``answers`` (per prompt, ``n`` scale values or None), ``measured_s``,
        ``units`` and ``batches`` (forward passes after the shared prefixes).
    """
    t0 = time.perf_counter()
    model = _drawing_model(lm, options, n, generator)
    units: dict[str, list[int]] = {}  # one unit per system prompt, as collect() plans them
    for j, (system, _) in enumerate(prompts):
        units.setdefault(system, []).append(j)
    tokens = np.zeros((len(prompts), n), dtype=np.int64)
    n_units = 0
    for cells in units.values():
        for a in range(0, len(cells), options.chunk_size):
            part = cells[a : a + options.chunk_size]
            texts = [model.template.render(*prompts[j]) for j in part]
            encoded = [model.template.encode(t) for t in texts]
            tokens[part] = model.read_prompts(texts, encoded)["token"]
            n_units += 1
    # parse each token id drawn once (decoding is the same for every draw of it)
    ids = np.unique(tokens)
    words = lm.tokenizer.batch_decode([[int(i)] for i in ids], skip_special_tokens=True)
    value = {int(i): parse_answer(w, scale, True) for i, w in zip(ids, words, strict=True)}
    answers = [[value[int(i)] for i in row] for row in tokens]
    return {"answers": answers, "measured_s": time.perf_counter() - t0, "units": n_units,
            "batches": model.batches}  # fmt: skip


def empirical(
    answers: list[list[int | None]], n: int, mean_k: np.ndarray, var_k: np.ndarray, n_items: int
) -> dict[str, Any]:
    """Empirical SE and z-scores of the sampled means (complete prompts only).

    ``mean_k``, ``var_k``: exact mean and variance of each prompt's answer
    (renormalised over the scale), in prompt order (target-major).
    """
    complete = [a for a in answers if len(a) == n]
    m = len(complete)
    if m == 0:
        return {"prompts": 0}
    fails = sum(v is None for a in complete for v in a)
    z, se_emp, se_ana, est = [], [], [], []
    for k, a in enumerate(complete):
        v = np.array([x for x in a if x is not None], dtype=float)
        if v.size < 2:
            se_emp.append(np.nan)
            est.append(np.nan if v.size == 0 else v.mean())
            continue
        se_emp.append(v.std(ddof=1) / math.sqrt(v.size))
        se_ana.append(math.sqrt(var_k[k] / v.size))
        est.append(v.mean())
        z.append((v.mean() - mean_k[k]) / se_ana[-1] if se_ana[-1] > 0 else np.nan)
    out: dict[str, Any] = {
        "prompts": m,
        "failure_rate_sampled": fails / (m * n),
        "item_se_empirical_mean": float(np.nanmean(se_emp)) if np.isfinite(se_emp).any() else None,
        "item_se_analytic_mean": float(np.mean(se_ana)) if se_ana else None,
        "item_mean_z2": float(np.nanmean(np.square(z))) if z else None,
    }
    # composite per condition where every item of the condition was sampled
    n_cond = m // n_items
    comp = []
    for c in range(n_cond):
        sl = slice(c * n_items, (c + 1) * n_items)
        e = np.array(est[sl])
        s = np.array(se_emp[sl])
        comp.append(
            {
                "estimate": float(e.sum()),
                "exact": float(mean_k[sl].sum()),
                "se_empirical": float(np.sqrt(np.square(s).sum())),
                "se_analytic": float(np.sqrt(var_k[sl].sum() / n)),
            }
        )
    if comp:
        out["composite"] = comp
        out["composite_se_empirical_mean"] = float(np.mean([c["se_empirical"] for c in comp]))
        out["composite_abs_error_mean"] = float(
            np.mean([abs(c["estimate"] - c["exact"]) for c in comp])
        )
        out["composite_mean_z2"] = float(
            np.mean([((c["estimate"] - c["exact"]) / c["se_analytic"]) ** 2 for c in comp])
        )
    return out


class Exact(NamedTuple):
    """The exact PMFs' moments every sampling run is compared with (prompts target-major)."""

    mean: np.ndarray  # each prompt's exact mean answer (renormalised over the scale)
    var: np.ndarray  # ... and its variance
    valid_mass: np.ndarray  # each prompt's valid mass
    se: Any  # analytic SE of the composite per condition and budget (target, n)
    sd: np.ndarray  # SD of the composite per condition (target)
    targets: int
    items: int


def exact_moments(ds, budgets: list[int]) -> Exact:
    """:class:`Exact` from exact collection's results."""
    from xlikert.analysis.sampling import composite_moments, standard_error

    pmf = ds.pmf.isel(model=0)  # (target, item, score), renormalised over the scale
    y = pmf.score.values.astype(float)
    mean_k = target_major((pmf * y).sum("score"))
    var_k = target_major((pmf * y**2).sum("score")) - mean_k**2
    return Exact(
        mean=mean_k,
        var=np.clip(var_k, 0.0, None),
        valid_mass=target_major(ds.valid_mass),
        se=standard_error(pmf, n=budgets),
        sd=np.sqrt(composite_moments(pmf)["var"].values),
        targets=pmf.sizes["target"],
        items=pmf.sizes["item"],
    )


def analyse(r: dict[str, Any], n: int, ex: Exact, exact_s: float, limit) -> dict[str, Any]:
    """Add SE (analytic, failures discarded, empirical) and time ratios to a sampling run."""
    answers = r.pop("answers")
    emp = empirical(answers, n, ex.mean, ex.var, ex.items)
    # the raw answers (0 = failure), prompt by prompt in target-major order
    r["answers"] = [[0 if v is None else v for v in a] for a in answers]
    m = emp.get("prompts", 0)
    if m:
        emp["failure_rate_exact"] = float(1.0 - ex.valid_mass[:m].mean())
    se_n = ex.se.sel(n=n)
    # failures discarded: item k keeps about N * valid_mass_k answers
    se_adj = np.sqrt(
        (ex.var / (n * np.maximum(ex.valid_mass, 1e-300))).reshape(ex.targets, ex.items).sum(1)
    )
    r.update(
        {
            "max_seconds": limit,
            "composite_se_analytic_mean": float(se_n.mean()),
            "composite_se_analytic_max": float(se_n.max()),
            "composite_se_analytic_failures_discarded_mean": float(se_adj.mean()),
            "empirical": emp,
            "time_ratio_exact_over_sampling": exact_s / r["total_s"],
            "speedup_exact_vs_sampling": r["total_s"] / exact_s,
        }
    )
    return r


def cost_fit(runs: list[dict[str, Any]], prompts: int) -> dict[str, float]:
    """Seconds per prompt as ``a + b N``, least squares over the budgets timed (a, b >= 0)."""
    ns = np.array([r["n"] for r in runs], float)
    t = np.array([r["total_s"] / prompts for r in runs], float)
    if len(runs) == 1:
        return {"a": 0.0, "b": float(t[0] / ns[0])}
    (b, a), *_ = np.linalg.lstsq(np.c_[ns, np.ones_like(ns)], t, rcond=None)
    if a < 0:  # through the origin
        a, b = 0.0, float((ns @ t) / (ns @ ns))
    elif b < 0:
        a, b = float(t.mean()), 0.0
    return {"a": float(a), "b": float(b)}


def executed_gflop(cfg, requests: list[list[int]], sequences: int = 1) -> float:
    """GFLOP vLLM executed for ``[prompt tokens, num_cached_tokens]`` requests.

    Each of a request's ``sequences`` computes the prompt's uncached tokens and one
    row of logits (the FLOP model of :mod:`_flops`, as ``bench_collect.py`` counts vLLM).
    """
    return sequences * request_flops(cfg, requests) / 1e9


def prefix_sharing(requests: list[list[int]], block: int | None) -> dict[str, Any]:
    """What vLLM's prefix cache shared per sequence, from ``num_cached_tokens``.

    The shared tokens are whole KV blocks (``num_cached_tokens``); the rest of the
    prompt, the tail partial block (a whole block when the prompt is a block
    multiple), is recomputed by every sequence.
    """
    total = np.array([t for t, _ in requests], float)
    cached = np.array([c for _, c in requests], float)
    out: dict[str, Any] = {
        "requests": len(requests),
        "prompt_tokens_mean": float(total.mean()),
        "cached_tokens_per_sequence_mean": float(cached.mean()),
        "recomputed_tokens_per_sequence_mean": float((total - cached).mean()),
        "recomputed_tokens_per_sequence_min_max": [int((total - cached).min()),
                                                   int((total - cached).max())],
    }  # fmt: skip
    if block:
        out["block_size"] = block
        out["cached_in_whole_blocks"] = bool(np.all(cached % block == 0))
        out["cached_equals_full_blocks_below_last_token"] = bool(
            np.all(cached == (total - 1) // block * block)
        )
        # prompts whose length is a block multiple: the last block is recomputed whole
        multiple = total % block == 0
        out["block_multiple_prompts"] = int(multiple.sum())
        if multiple.any():
            out["block_multiple_recomputed_tokens_mean"] = float((total - cached)[multiple].mean())
    return out


def vllm_runs(data, cfg, ex: Exact, exact_s_vllm: float) -> list[dict[str, Any]]:
    """The vLLM child's n=N runs as sampling runs (extrapolated linearly in prompts), with
    the prefix cache's per-sequence sharing and the executed GFLOP per prompt."""
    runs = []
    for v in data["sampling"]:
        n, done, total = v["n"], v["prompts_done"], v["prompts_total"]
        full = done == total
        reqs, primed = (
            v["prompt_tokens_and_cache_hits"],
            v.get("prime_prompt_tokens_and_cache_hits"),
        )
        gflop = executed_gflop(cfg, reqs, n) + (executed_gflop(cfg, primed) if primed else 0.0)
        r = {
            "n": n,
            "answers": [[x or None for x in a] for a in v["answers"]],
            "prompts_complete": done,
            "prompts_total": total,
            "sequences_sampled": n * done,
            "generate_calls": v["generate_calls"],
            "measured_s": v["measured_s"],
            "s_per_sequence": v["measured_s"] / max(n * done, 1),
            "total_s": v["measured_s"] if full else v["measured_s"] * total / max(done, 1),
            "extrapolated": not full,
            "extrapolation": None
            if full
            else f"extrapolated from {done} of {total} prompts, linear in prompts",
            "prompt_tokens_and_cache_hits": reqs,
            "prime_prompt_tokens_and_cache_hits": primed,
            "prefix_sharing": prefix_sharing(reqs, data.get("block_size")),
            "executed_gflop_per_prompt": gflop / max(done, 1),
        }
        runs.append(analyse(r, n, ex, exact_s_vllm, v["max_seconds"]))
    return runs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, with the model, the prompts' subset, the budgets (``ns``), the chunk and
    each sampler's time limits resolved for the mode."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="SmolLM2-135M, 1 target x 6 items")
    ap.add_argument("--model", default=None, help="zoo name or model path")
    ap.add_argument("--targets", type=int, default=None, help="first T targets (default all)")
    ap.add_argument("--items", type=int, default=None, help="first K items (default all)")
    ap.add_argument("--budgets", default="10,100,1000", help="samples per item, comma separated")
    ap.add_argument(
        "--chunk", type=int, default=None, help="sequences per generate call (default 50)"
    )
    ap.add_argument(
        "--max-seconds",
        default=None,
        help="time budget per N (comma separated, one per budget); beyond it: extrapolate",
    )
    ap.add_argument("--max-new-tokens", type=int, default=1)
    ap.add_argument("--no-vllm", action="store_true", help="skip the vLLM rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = ap.parse_args(argv)
    args.model = model_name(args.model, args.quick)
    args.targets = args.targets or (1 if args.quick else None)
    args.items = args.items or (6 if args.quick else None)
    args.ns = [int(b) for b in args.budgets.split(",")]
    args.chunk = args.chunk or 50
    k = len(args.ns)
    if args.max_seconds:
        limits = [float(x) for x in args.max_seconds.split(",")]
        limits = (limits * k)[:k] if len(limits) == 1 else limits
    else:
        limits = [7.0] * k if args.quick else [240.0, 25.0, 25.0][:k]
    if len(limits) != k:
        ap.error("--max-seconds needs one value, or one per budget")
    args.limits = limits
    args.shared_limits = [max(x, 60.0) if not args.quick else x for x in limits]
    args.vllm_limits = [7.0] * k if args.quick else [60.0] * k
    return args


def time_exact(args, lm, prompts):
    """Exact collection: one forward pass per prompt, timed with its FLOPs counted after a
    warm-up on one prompt (which also runs the prefix-cache check, so the timed run and the
    FLOPs counted hold none); the results, seconds, FLOPs and the options collect used."""
    from xlikert.collect import collect
    from xlikert.collect.backends.transformers import LocalModel

    used: dict[str, Any] = {}  # the options collect() hands the backend

    def exact(p):
        def loader(spec, opts, probe):
            used["options"] = opts
            return LocalModel(lm, opts)

        return collect(p, [{"name": args.model, "source": args.model}], progress=False,
                       split_space=False, loader=loader)  # fmt: skip

    exact(prompts.isel(target=[0], item=[0]))
    with FlopCounter(lm.model) as fc:
        ds, exact_s = timed(lambda: exact(prompts))
    flops = {"executed_gflop": fc.flops / 1e9, "forward_calls": fc.calls,
             "executed_gflop_per_prompt": fc.flops / 1e9 / ds.sizes["target"]
             / ds.sizes["item"]}  # fmt: skip
    return ds, exact_s, flops, used["options"]


def sample_exact_pass(args, lm, options, prompts, scale, ex: Exact, exact_s) -> dict[str, Any]:
    """The sampler on exact collection's own forward calls, answers drawn from its logits
    (one-token answers), at every budget."""
    import torch

    pairs = prompt_pairs(prompts)
    gen = torch.Generator().manual_seed(args.seed)
    runs = []
    for n in args.ns:
        with FlopCounter(lm.model) as fc:
            r = exact_pass_sampler(lm, options, pairs, n, scale, gen)
        m = r.pop("measured_s")
        r.update({"n": n, "prompts_complete": len(pairs), "prompts_total": len(pairs),
                  "sequences_sampled": n * len(pairs), "generate_calls": 0,
                  "forward_calls": fc.calls, "measured_s": m,
                  "s_per_sequence": m / (n * len(pairs)), "total_s": m,
                  "extrapolated": False, "extrapolation": None,
                  "executed_gflop": fc.flops / 1e9,
                  "executed_gflop_per_prompt": fc.flops / 1e9 / len(pairs)})  # fmt: skip
        runs.append(analyse(r, n, ex, exact_s, None))
        print(f"exact_pass N={n}: {m:.1f} s, {fc.flops / 1e9 / len(pairs):.1f} GFLOP/prompt",
              flush=True)  # fmt: skip
    return {"runs": runs, "exact_s": exact_s}


def sample_transformers(args, lm, encoded, scale, ex: Exact, exact_s) -> dict[str, Any]:
    """The ``generate`` sampler (a prefill per sequence) and the one-prompt-per-pass sampler,
    each warmed up, then at every budget within its time limit, FLOPs counted."""
    samplers = {}
    for key, shared, lims in (("generate", False, args.limits),
                              ("shared_prefill", True, args.shared_limits)):  # fmt: skip
        # warm-up: one short call with the same arguments as the timed ones
        run_sampling(lm, encoded[:1], 2, 2, 0.0, args.max_new_tokens, scale, shared)
        chunk = args.chunk if not shared else max(args.chunk, 1000)
        runs = []
        for n, limit in zip(args.ns, lims, strict=True):
            with FlopCounter(lm.model) as fc:
                r = run_sampling(lm, encoded, n, chunk, limit, args.max_new_tokens, scale, shared)
            covered = r["sequences_sampled"] / n  # prompts' worth of sequences run
            r.update({"forward_calls": fc.calls, "executed_gflop": fc.flops / 1e9,
                      "executed_gflop_per_prompt": fc.flops / 1e9 / max(covered, 1e-9)})  # fmt: skip
            runs.append(analyse(r, n, ex, exact_s, limit))
            print(f"{key} N={n}: {r['measured_s']:.1f} s measured"
                  + (f" ({r['extrapolation']})" if r["extrapolated"] else ""), flush=True)  # fmt: skip
        samplers[key] = {"runs": runs, "exact_s": exact_s}
    return samplers


def run_vllm(args, cfg, ex: Exact) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Exact collection (backend "vllm") and n=N sampling in the vLLM venv: the vLLM record
    and its sampler (None when it did not run)."""
    if args.no_vllm:
        return {"not_run": "--no-vllm"}, None
    child = ["--model", args.model, "--budgets", args.budgets,
             "--max-seconds", ",".join(str(x) for x in args.vllm_limits)]  # fmt: skip
    child += ["--targets", str(ex.targets), "--items", str(ex.items)]
    data = run_child("sample", child)
    why = not_measured(data)
    if why:
        return why, None
    c = data["collect"]
    vllm = {
        "exact_s": c["seconds"][0],
        "exact_max_abs_valid_mass_diff_vs_transformers": float(
            np.max(np.abs(np.asarray(c["valid_mass"]) - ex.valid_mass))
        ),
        "vllm": data["vllm"],
        "load_s": data["load_s"],
        "torch_threads": data["torch_threads"],
        "env": data["env"],
        "child_wall_s": data["wall_s"],
        "exact_requests": c["requests"],
        "exact_executed_gflop_per_prompt": executed_gflop(cfg, c["requests"]) / c["prompts"],
        "block_size": data.get("block_size"),
        "engine": data.get("engine"),
        "second_layout": VLLM_SECOND_LAYOUT,
    }
    return vllm, {"runs": vllm_runs(data, cfg, ex, vllm["exact_s"]), "exact_s": vllm["exact_s"]}


def precision_table(samplers, ex: Exact, exact_s: float, n_prompts: int) -> list[dict[str, Any]]:
    """Extrapolated: each sampler's time to reach SE <= eps in every condition (its
    ``cost_fit`` is stored on it)."""
    # per condition: Var of the composite estimate is sum_k var_k / (N * valid_mass_k)
    # when failures are discarded; N needed so that SE <= eps in every condition
    need_ideal = float(ex.sd.max() ** 2)
    need_fail = float(
        (ex.var / np.maximum(ex.valid_mass, 1e-300)).reshape(ex.targets, ex.items).sum(1).max()
    )
    precision = []
    for eps in PRECISION_TARGETS:
        n_ideal = math.ceil(need_ideal / eps**2)
        n_req = math.ceil(need_fail / eps**2)
        row: dict[str, Any] = {"se_target": eps, "n_required_no_failures": n_ideal,
                               "n_required": n_req, "exact_s": exact_s, "sampling_s": {}}  # fmt: skip
        for key, sm in samplers.items():
            fit = sm.setdefault("cost_fit", cost_fit(sm["runs"], n_prompts))
            t_req = n_prompts * (fit["a"] + fit["b"] * n_req)
            row["sampling_s"][key] = t_req
            row.setdefault("speedup_exact_vs_sampling", {})[key] = t_req / sm["exact_s"]
        precision.append(row)
    return precision


def generation_record(args) -> dict[str, Any]:
    """How each sampler draws its answers, and the parser."""
    return {
        "call": "model.generate(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, "
        f"max_new_tokens={args.max_new_tokens}, num_return_sequences<={args.chunk})",
        "exact_pass": "exact collection's own forward pass (the transformers backend's "
        "LocalModel and Scorer calls: the system prompt's KV cache shared by the items of a "
        "target, the same length-sorted batches); the exact readout replaced by N draws per "
        "prompt from softmax(next-token logits) (temperature 1, no top-p/top-k; "
        "torch.multinomial on a torch.Generator seeded with the run's seed)",
        "shared_prefill": "unbatched, no prefix cache: one forward pass per prompt, one "
        "prompt at a time over its whole token ids; the first token of each of the N "
        "sequences drawn by torch.multinomial from softmax(last logits) (temperature 1, "
        "no top-p/top-k), longer answers by generate on the KV cache expanded to N rows",
        "vllm": "SamplingParams(n=N, max_tokens=1, temperature=1.0, top_p=1.0, top_k=0), "
        "one request per prompt after one n=1 request that fills the prefix cache "
        "(timed); about 1000 sequences per generate call",
        "parser": "stripped new token must be a scale value; else a failure"
        if args.max_new_tokens == 1
        else "first word, trailing .,;:!) removed, must be a scale value",
        "seed": args.seed,
    }


def record(args, lm, load_s, ds, encoded, exact, samplers, vllm, precision, load_before):
    """The JSON record of the run (``exact``: its time, FLOPs and the :class:`Exact`)."""
    import xlikert

    exact_s, exact_flops, ex = exact
    n_prompts = len(encoded)
    return {
        "benchmark": "exact vs sampling",
        "quick": args.quick,
        "model": args.model,
        "load_s": load_s,
        "design": f"demo experiment (CETSCALE) x {ex.targets} targets x {ex.items} items = "
        f"{n_prompts} prompts",
        "prompts": n_prompts,
        "mean_prompt_tokens": float(np.mean([len(e) for e in encoded])),
        "generation": generation_record(args),
        "exact": {
            "s": exact_s,
            "prompts_per_s": n_prompts / exact_s,
            "se": 0.0,
            "failure_rate": float(1.0 - ds.valid_mass.isel(model=0).mean()),
            "composite_sd_mean": float(ex.sd.mean()),
            "composite_sd_max": float(ex.sd.max()),
            **exact_flops,
        },
        "samplers": samplers,
        "vllm": vllm,
        "precision": precision,
        "precision_how": "extrapolated: seconds per prompt fitted as a + b N (least squares, "
        "a, b >= 0) over the budgets timed, then evaluated at the N each SE target needs",
        "baseline": "sampling with transformers (per-sequence prefill; shared prefill) in the "
        "same process, and with vLLM n=N in the vLLM venv",
        "ratios": "time_ratio_exact_over_sampling = xlikert / baseline; "
        "speedup_exact_vs_sampling = baseline / xlikert",
        **load_record(load_before),
        "device": str(lm.device),
        "machine": machine(["torch", "transformers"]),
        "xlikert_version": xlikert.__version__,
    }


def print_summary(result: dict[str, Any]) -> None:
    ex, vllm, samplers = result["exact"], result["vllm"], result["samplers"]
    labels = {"exact_pass": "exact pass + draws", "generate": "generate (prefill per sequence)",
              "shared_prefill": "1 prompt/pass, no cache", "vllm_n": "vLLM n=N"}  # fmt: skip
    rows = [["exact (xlikert)", "inf", ex["s"], "-", 0.0, "-", ex["failure_rate"], 1.0,
             ex["executed_gflop_per_prompt"], ""]]  # fmt: skip
    if "exact_s" in vllm:
        rows.append(["exact (xlikert, vLLM)", "inf", vllm["exact_s"], "-", 0.0, "-", "-", 1.0,
                     vllm["exact_executed_gflop_per_prompt"], ""])  # fmt: skip
    for key, sm in samplers.items():
        for r in sm["runs"]:
            emp = r["empirical"]
            rows.append([
                labels[key], r["n"], r["total_s"], r["s_per_sequence"],
                r["composite_se_analytic_mean"],
                emp.get("composite_se_empirical_mean") or emp.get("item_se_empirical_mean"),
                emp.get("failure_rate_sampled"), r["speedup_exact_vs_sampling"],
                r.get("executed_gflop_per_prompt", "-"), r["extrapolation"] or "measured in full",
            ])  # fmt: skip
    print(f"\n{result['model']} on {result['device']}: {result['design']}")
    print(format_table(rows, ["method", "N/item", "time s", "s/seq", "SE analytic",
                              "SE empirical", "fail rate", "x exact", "GFLOP/prompt", "note"],
                       "lrrrrrrrrl"))  # fmt: skip
    if "not_run" in vllm or "error" in vllm:
        print(f"vLLM: {vllm.get('not_run') or vllm.get('error')}")
    print(f"\nextrapolated: time to reach SE <= eps in every condition "
          f"(SD(S) max {ex['composite_sd_max']:.2f}):")  # fmt: skip
    print(format_table(
        [[p["se_target"], p["n_required"], *[p["sampling_s"][k] for k in samplers], ex["s"]]
         for p in result["precision"]],
        ["SE target", "N/item", *[f"{labels[k]} s" for k in samplers], "exact s"],
    ))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from xlikert.collect.backends.transformers import load_model

    wall0 = time.perf_counter()
    load_before = load_average()  # a shared machine: timings have noise
    prompts = demo_prompts(args.targets, args.items)
    scale = list(range(int(prompts.attrs["scale_min"]), int(prompts.attrs["scale_max"]) + 1))
    # the sampler's parser reads one token, so the exact side uses the same one-token rule
    lm, load_s = timed(lambda: load_model(args.model, scale, split_space=False))
    torch.manual_seed(args.seed)
    ds, exact_s, exact_flops, options = time_exact(args, lm, prompts)
    ex = exact_moments(ds, args.ns)
    # ---- sampling: prompts in the same order (target-major), rendered the same way
    texts = target_major(ds.prompt_text)
    encoded = [lm.encode(str(t)) for t in texts]
    tok_scale = {str(v) for v in scale}
    samplers: dict[str, dict[str, Any]] = {}
    if args.max_new_tokens == 1:  # draws from the exact pass's logits: one-token answers
        samplers["exact_pass"] = sample_exact_pass(
            args, lm, options, prompts, tok_scale, ex, exact_s
        )
    samplers.update(sample_transformers(args, lm, encoded, tok_scale, ex, exact_s))
    vllm, vllm_sampler = run_vllm(args, lm.model.config, ex)
    if vllm_sampler is not None:
        samplers["vllm_n"] = vllm_sampler
    precision = precision_table(samplers, ex, exact_s, len(encoded))
    result = record(args, lm, load_s, ds, encoded, (exact_s, exact_flops, ex), samplers, vllm,
                    precision, load_before)  # fmt: skip
    print_summary(result)
    result["wall_s"] = time.perf_counter() - wall0
    write_json(result_path("sampling", args.quick, args.out), result)
    return 0


# ----------------------------------------------------------------------------- README
#: The heading of this benchmark's table in benchmarks/README.md.
TITLE = "Exact vs sampling"


SAMPLERS = {
    "exact_pass": "transformers, exact collection's own pass (batched, prefix cache) + N draws",
    "generate": "transformers `generate`, prefill per sequence",
    "shared_prefill": "transformers, one prompt per pass (unbatched, no prefix cache)",
    "vllm_n": "vLLM `n=N` (full KV blocks shared, tail block recomputed per sequence)",
}


def _gflop(x: Any) -> str:
    return "–" if x is None else fmt(x)


def _vllm_sharing(d: dict[str, Any]) -> list[str]:
    """What vLLM's prefix cache shared per sequence in the n=N runs (num_cached_tokens)."""
    runs = d["samplers"].get("vllm_n", {}).get("runs", [])
    shares = [r["prefix_sharing"] for r in runs if r.get("prefix_sharing")]
    if not shares:
        return []
    s0 = shares[0]
    block = s0.get("block_size")
    text = (
        f"vLLM `n=N` as it runs: vLLM fans a request of `n=N` out into N sequences; after an "
        f"`n=1` request has filled the prefix cache, each of them reads the prompt's full "
        f"KV blocks{f' (block size {block})' if block else ''} from the cache and recomputes "
        f"the rest. Per sequence (`RequestOutput.num_cached_tokens`, {s0['requests']} "
        f"requests at N = {runs[0]['n']}): {fmt(s0['cached_tokens_per_sequence_mean'])} of "
        f"{fmt(s0['prompt_tokens_mean'])} prompt tokens shared, "
        f"{fmt(s0['recomputed_tokens_per_sequence_mean'])} recomputed (min–max "
        f"{fmt(s0['recomputed_tokens_per_sequence_min_max'][0])}–"
        f"{fmt(s0['recomputed_tokens_per_sequence_min_max'][1])})"
    )
    if s0.get("cached_equals_full_blocks_below_last_token"):
        text += "; every count equals the full blocks below the prompt's last token"
    if s0.get("block_multiple_prompts"):
        text += (f"; the {s0['block_multiple_prompts']} prompt(s) whose length is a multiple "
                 f"of the block recompute {fmt(s0['block_multiple_recomputed_tokens_mean'])} "
                 "tokens each (the hit stops before the last token)")  # fmt: skip
    out = [text + ". The prefill is not shared whole: each sequence pays its tail block."]
    second = d.get("vllm", {}).get("second_layout")
    if second:
        out.append(f"A second vLLM layout that shares more: {second}")
    return [" ".join(out), ""]


def _intro(d: dict[str, Any]) -> list[str]:
    """The model, the samplers, the parser, what SE and GFLOP mean, the load."""
    gen = d["generation"]
    samplers = [f"`{gen['call']}`, which copies the prompt, so every sequence pays its own "
                "prefill", gen["shared_prefill"], gen["vllm"]]  # fmt: skip
    if gen.get("exact_pass"):
        samplers.insert(0, gen["exact_pass"])
    return [
        f"{d['model']} on {d['device']}; {d['design']} (mean {d['mean_prompt_tokens']:.0f} "
        "prompt tokens). Samplers: "
        + "; ".join(f"({i}) {t}" for i, t in enumerate(samplers, 1))
        + f". Parser: {gen['parser']}. SE = standard error of the composite score (sum over "
        "the items) per condition, mean over conditions: analytic = SD(S)/sqrt(N) from the "
        "exact PMFs (`xlikert.analysis.sampling.standard_error`); empirical = from the sampled answers "
        "(conditions sampled in full; per item where none was). × exact = sampling time / "
        "exact time of the same engine. GFLOP per prompt: executed, counted from the shapes "
        "of every forward call in the timed run (transformers) or from each request's prompt "
        "tokens and `num_cached_tokens` (vLLM), with the FLOP model of `benchmarks/_flops.py`."
        + (
            f" 1-minute load average {d['load_average_before'][0]:.1f} before the run, "
            f"{d['load_average_after'][0]:.1f} after (a shared machine: timings have noise)."
            if d.get("load_average_before") and d.get("load_average_after")
            else ""
        ),
        "",
    ]


def _table(d: dict[str, Any]) -> list[str]:
    """One row per method and budget: time, SE, failures, × exact, GFLOP."""
    ex, v = d["exact"], d.get("vllm", {})
    rows = [["exact (xlikert `collect`, transformers)", "∞ (one forward pass)", fmt(ex["s"]),
             "–", "0", "–", fmt(ex["failure_rate"]), "1",
             _gflop(ex.get("executed_gflop_per_prompt")), "measured"]]  # fmt: skip
    if "exact_s" in v:
        rows.append(["exact (xlikert `collect`, backend vLLM)", "∞ (one forward pass)",
                     fmt(v["exact_s"]), "–", "0", "–", "–", "1",
                     _gflop(v.get("exact_executed_gflop_per_prompt")), "measured"])  # fmt: skip
    for key, sm in d["samplers"].items():
        for r in sm["runs"]:
            e = r["empirical"]
            emp = e.get("composite_se_empirical_mean")
            if emp is not None:
                emp_s = fmt(emp)
            elif e.get("item_se_empirical_mean") is not None:
                emp_s = (f"{fmt(e['item_se_empirical_mean'])} per item (analytic "
                         f"{fmt(e.get('item_se_analytic_mean'))}, {e['prompts']} item(s))")  # fmt: skip
            else:
                emp_s = "–"
            t = r["total_s"]
            rows.append([
                SAMPLERS.get(key, key), fmt(r["n"]),
                fmt(t) + (f" ({duration(t)})" if t >= 120 else ""), fmt(r["s_per_sequence"]),
                fmt(r["composite_se_analytic_mean"]), emp_s, fmt(e.get("failure_rate_sampled")),
                fmt(r["speedup_exact_vs_sampling"]), _gflop(r.get("executed_gflop_per_prompt")),
                r["extrapolation"] or "measured in full",
            ])  # fmt: skip
    return table(["method", "samples per item", "time s", "s per sequence", "SE analytic",
                  "SE empirical", "failure rate", "× exact", "GFLOP per prompt", "how timed"],
                 rows)  # fmt: skip


def _vllm_notes(d: dict[str, Any]) -> list[str]:
    """The vLLM rows: why missing, or their agreement, the prefix sharing, exact vs n=10."""
    v = d.get("vllm", {})
    out: list[str] = []
    if "not_run" in v or "error" in v:
        out += [f"vLLM rows: {v.get('not_run') or v.get('error', '')[:300]}.", ""]
    elif "exact_max_abs_valid_mass_diff_vs_transformers" in v:
        out += [f"vLLM {v['vllm']} (CPU build) in its venv: exact valid masses within "
                f"{v['exact_max_abs_valid_mass_diff_vs_transformers']:.1e} of the transformers "
                "backend's.", ""]  # fmt: skip
    out += _vllm_sharing(d)
    vn = {r["n"]: r for r in d["samplers"].get("vllm_n", {}).get("runs", [])}
    if "exact_s" in v and 10 in vn:
        r = vn[10]
        how = "measured in full" if not r["extrapolated"] else r["extrapolation"]
        verdict = "faster than" if v["exact_s"] < r["total_s"] else "not faster than"
        out += [f"Exact through vLLM is {verdict} vLLM `n=10` on the same prompts, in the same "
                f"run: {fmt(v['exact_s'])} s against {fmt(r['total_s'])} s ({how}), "
                f"{fmt(r['total_s'] / v['exact_s'])}×.", ""]  # fmt: skip
    return out


def _equal_compute(d: dict[str, Any]) -> list[str]:
    """Equal compute: exact against the sampler on exact collection's own forward pass."""
    ex = d["exact"]
    drawn = d["samplers"].get("exact_pass", {}).get("runs", [])
    if not drawn:
        return ["Equal compute is not measured in this file (no sampler drawing from exact "
                "collection's own forward pass).", ""]  # fmt: skip
    r = min(drawn, key=lambda r: r["n"])
    g_ex, g_s = ex.get("executed_gflop_per_prompt"), r.get("executed_gflop_per_prompt")
    same = g_ex is not None and g_s is not None and abs(g_s - g_ex) <= 0.01 * g_ex
    return [
        ("**At equal compute, exact collection leaves zero sampling error**, as measured: "
         if same else "Equal compute did not hold in this run: ")
        + f"the sampler that draws N answers from exact collection's own forward pass "
        f"executed {_gflop(g_s)} GFLOP per prompt against exact's {_gflop(g_ex)}; at "
        f"N = {r['n']} it took {fmt(r['total_s'])} s against exact's {fmt(ex['s'])} s and "
        f"left SE {fmt(r['composite_se_analytic_mean'])} (analytic), where exact's is 0 "
        "(exact's time holds its float64 full-vocabulary readout and `collect`'s "
        "bookkeeping, the sampler's its draws). "
        "The one-prompt-per-pass sampler is kept as what it is: unbatched and without the "
        "prefix cache, it executes "
        + _gflop(next((x.get("executed_gflop_per_prompt") for x in
                       d["samplers"].get("shared_prefill", {}).get("runs", [])), None))
        + " GFLOP per prompt.",
        "",
    ]  # fmt: skip


def _consistency(d: dict[str, Any]) -> list[str]:
    """Sampled means against the exact means (z²), per sampler."""
    checks = []
    for key, sm in d["samplers"].items():
        for r in sm["runs"]:
            e = r["empirical"]
            if e.get("item_mean_z2") is not None and e.get("prompts", 0) >= 10:
                text = (f"{SAMPLERS.get(key, key)} at N = {r['n']}: sampled item means against "
                        f"the exact means give mean z² = {e['item_mean_z2']:.2f} over "
                        f"{e['prompts']} items")  # fmt: skip
                if e.get("composite_mean_z2") is not None:
                    text += (f" and {e['composite_mean_z2']:.2f} for the composite over "
                             f"{len(e.get('composite', []))} conditions")  # fmt: skip
                text += (f" (1 expected); sampled failure rate "
                         f"{fmt(e.get('failure_rate_sampled'))} vs exact "
                         f"{fmt(e.get('failure_rate_exact'))}")  # fmt: skip
                checks.append(text)
                break
    if not checks:
        return []
    return ["Consistency check (the exact PMF is the N → ∞ limit): " + "; ".join(checks)
            + ".", ""]  # fmt: skip


def _precision(d: dict[str, Any]) -> list[str]:
    """Extrapolated: time to reach each SE target, per sampler."""
    ex = d["exact"]
    keys = list(d["samplers"])
    out = [
        f"**Extrapolated, not measured**: time to reach a given SE in every condition "
        f"(largest SD(S) = {ex['composite_sd_max']:.2f}; failures discarded). "
        f"{d['precision_how'][0].upper()}{d['precision_how'][1:]}; fits (seconds per prompt): "
        + "; ".join(
            f"{SAMPLERS[k]} {fmt(d['samplers'][k]['cost_fit']['a'])} + "
            f"{fmt(d['samplers'][k]['cost_fit']['b'])} N"
            for k in keys
        )
        + ".",
        "",
    ]
    out += table(
        ["SE target", "samples per item", *[f"{SAMPLERS[k]} (extrapolated)" for k in keys],
         "exact s (measured)"],
        [[fmt(p["se_target"]), fmt(p["n_required"]),
          *[f"{duration(p['sampling_s'][k])} (× {fmt(p['speedup_exact_vs_sampling'][k])})"
            for k in keys], fmt(p["exact_s"])] for p in d["precision"]],
    )  # fmt: skip
    return out


def render(d: dict[str, Any]) -> list[str]:
    return [*_intro(d), *_table(d), *_vllm_notes(d), *_equal_compute(d), *_consistency(d),
            *_precision(d)]  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
