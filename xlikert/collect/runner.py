"""Resumable, shardable collection runs: prompts Dataset in, results Dataset/netCDF out.

A run is split into fixed *units* (up to ``chunk_size`` prompts of one model that
share a system prompt). Each finished unit is written atomically to
``<output>.partial/`` (temporary file, then rename), next to a manifest holding
the run's fingerprint. Rerunning the same command after Ctrl-C or ``kill -9``
loads the finished units and computes only the rest; the units, their order and
their batches are the same as in an uninterrupted run, so the final file holds
identical numbers. The final netCDF is written to a temporary name and renamed,
so no half-written file ever looks complete; a finished output with the same
fingerprint is not recomputed.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .._version import __version__
from ..errors import CollectionError

__all__ = ["DEFAULT_TEMPERATURES", "DEFAULT_TOP_PS", "collect", "parse_shard", "write_atomic"]

DEFAULT_TEMPERATURES = (0.1, 0.5, 1.0, 1.3)
DEFAULT_TOP_PS = (0.8, 0.9, 1.0)
_FORMAT = "xlikert-collect-1"


# ---------------------------------------------------------------------------- helpers
def parse_shard(shard: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """Parse ``"i/n"`` (1-based) into ``(i, n)``.

    Examples
    --------
    >>> parse_shard("2/4")
    (2, 4)
    """
    if shard is None:
        return None
    if isinstance(shard, str):
        try:
            i, n = (int(x) for x in shard.split("/"))
        except ValueError:
            raise CollectionError(f"--shard must look like i/n (e.g. 1/4), got {shard!r}") from None
    else:
        i, n = shard
    if not (n >= 1 and 1 <= i <= n):
        raise CollectionError(f"shard {i}/{n}: need 1 <= i <= n")
    return (i, n)


def _scale_of(prompts: xr.Dataset, scale) -> list[int]:
    if scale is not None:
        return [int(v) for v in scale]
    if "score" in prompts.coords:
        return [int(v) for v in prompts["score"].values]
    attrs = prompts.attrs
    lo = next((attrs[k] for k in attrs if str(k).endswith("scale_min")), None)
    hi = next((attrs[k] for k in attrs if str(k).endswith("scale_max")), None)
    if lo is None or hi is None:
        raise CollectionError(
            "cannot tell the scale: the prompts Dataset has no 'score' coord and no "
            "'scale_min'/'scale_max' attrs; pass scale=range(1, 8)"
        )
    return list(range(int(lo), int(hi) + 1))


def _normalise_models(models) -> list[dict[str, Any]]:
    if isinstance(models, (str, dict)):
        models = [models]
    out = []
    for m in models:
        d = {"name": m, "source": m} if isinstance(m, str) else dict(m)
        if "source" not in d and "name" not in d:
            raise CollectionError(f"model entry {m!r} needs a 'name' or 'source'")
        d.setdefault("source", d.get("name"))
        d.setdefault("name", d["source"])
        d["name"], d["source"] = str(d["name"]), str(d["source"])
        out.append(d)
    names = [d["name"] for d in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise CollectionError(f"model names must be unique; repeated: {dup}")
    if not out:
        raise CollectionError("no models given")
    return out


def _check_source(spec: dict[str, Any]) -> None:
    from .zoo import ZOO

    source = spec["source"]
    if source in ZOO or spec.get("gguf_file") or Path(source).expanduser().exists():
        return
    if source.startswith((".", "/", "~")) or source.count("/") != 1:
        raise CollectionError(
            f"unknown model {source!r} (model {spec['name']!r}): not a built-in "
            f"({', '.join(ZOO)}), not a local directory or .gguf file, and not a Hugging "
            "Face id (owner/name)"
        )


def _check_prompts(prompts: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    for v in ("system", "user"):
        if v not in prompts:
            raise CollectionError(
                f"prompts Dataset lacks variable {v!r}; it has {list(prompts.data_vars)} "
                "(build it with Experiment.build_prompts())"
            )
    if "item" not in prompts["user"].dims:
        raise CollectionError(f"prompts 'user' has no 'item' dim; dims {prompts['user'].dims}")
    if "model" in prompts["user"].dims or "model" in prompts["system"].dims:
        raise CollectionError("prompts must not have a 'model' dim; models are given separately")
    system, user = xr.broadcast(prompts["system"], prompts["user"])
    dims = [d for d in user.dims if d != "item"] + ["item"]
    return system.transpose(*dims), user.transpose(*dims)


def write_atomic(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` to netCDF at ``path`` atomically (:func:`xlikert.io.to_netcdf`).

    Raises
    ------
    CollectionError
        When the file cannot be written; nothing is left behind.
    """
    from ..errors import XlikertError
    from ..io import to_netcdf

    try:
        return to_netcdf(ds, path)
    except (OSError, XlikertError) as exc:
        raise CollectionError(f"cannot write output {path}: {exc}") from exc


def _save_npz_atomic(path: Path, **arrays) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _write_json_atomic(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True, default=str))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- plan
class _Plan:
    """The fixed partition of (model, cell) work into units."""

    def __init__(self, system: xr.DataArray, user: xr.DataArray, models, chunk_size: int):
        self.shape = user.shape
        self.sys_flat = [str(s) for s in np.asarray(system.values).ravel()]
        self.user_flat = [str(s) for s in np.asarray(user.values).ravel()]
        ncell = len(self.user_flat)
        groups: dict[str, list[int]] = {}
        for j in range(ncell):
            groups.setdefault(self.sys_flat[j], []).append(j)
        self.units: list[tuple[int, int, list[int]]] = []  # (model index, unit index, cells)
        for mi in range(len(models)):
            ui = 0
            for cells in groups.values():
                for a in range(0, len(cells), chunk_size):
                    self.units.append((mi, ui, cells[a : a + chunk_size]))
                    ui += 1


#: Server model fields that change how requests travel, not what comes back.
_TRANSPORT_KEYS = ("concurrency", "timeout", "max_retries", "backoff")


def _fingerprint(system, user, models, scale, options) -> str:
    h = hashlib.sha256()
    payload = {
        "format": _FORMAT,
        "dims": list(user.dims),
        "coords": {d: [str(v) for v in user[d].values] for d in user.dims if d in user.coords},
        "models": models,
        "scale": scale,
        "options": options,
    }
    h.update(json.dumps(payload, sort_keys=True, default=str).encode())
    for s in np.asarray(system.values).ravel():
        h.update(str(s).encode() + b"\0")
    for s in np.asarray(user.values).ravel():
        h.update(str(s).encode() + b"\0")
    return h.hexdigest()


# ---------------------------------------------------------------------------- compute
def _compute_unit(scorer, cells, plan, batch_size, options, state) -> dict[str, np.ndarray]:
    from .backend import score_logits

    lm = scorer.lm
    texts = [lm.render(plan.sys_flat[j], plan.user_flat[j]) for j in cells]
    encoded = [lm.encode(t) for t in texts]
    # Shared prefix of this unit's token ids (same system prompt); keep >= 1 suffix token.
    n = min(len(e) for e in encoded) - 1
    P = 0
    first = encoded[0]
    while n > P and all(e[P] == first[P] for e in encoded):
        P += 1
    prefix = first[:P]
    from .backend import _is_oom

    try:
        cache = scorer.prefix_state(prefix)
    except Exception as exc:
        if not _is_oom(exc):
            raise
        raise CollectionError(
            f"model {lm.name!r} runs out of memory even on a batch of 1 prompt "
            f"(shared prefix of {P} tokens); use a smaller dtype, device_map='auto', "
            "or a bigger device"
        ) from exc
    # Sort by length (fewer pads) and split into equal batches; the order and the split
    # are fixed, so a resumed run batches exactly as an uninterrupted one.
    order = sorted(range(len(cells)), key=lambda r: (len(encoded[r]), r))
    results: list[dict[str, np.ndarray] | None] = [None] * len(cells)
    a = 0
    answers = getattr(lm, "answers", None)
    if answers is not None:
        from .backend import answer_leaves, score_answers

        leaves = [list(leaf) for leaf in answer_leaves(answers)[0]]
        keep = max(len(leaf) for leaf in leaves) + 1
    while a < len(order):
        bs = state["batch_size"]
        if answers is not None:  # one teacher-forced row per (prompt, leaf)
            bs = max(1, bs // len(leaves))
        left = len(order) - a
        nb = -(-left // bs)
        rows = order[a : a + -(-left // nb)]
        try:
            if answers is None:
                logits = scorer.forward(prefix, cache, [encoded[r][P:] for r in rows])
                last, first_row = logits[0], encoded[rows[0]][P:]
            else:
                suffixes = [encoded[r][P:] + leaf for r in rows for leaf in leaves]
                logits = scorer.forward_rows(prefix, cache, suffixes, keep=keep)
                last, first_row = logits[0, -1], suffixes[0]
            if cache is not None and not scorer._checked:
                scorer.check_prefix_cache(prefix, last, first_row)
                if not scorer.prefix_cache:
                    cache = None
                    continue  # recompute this batch without the cache
            kw = {
                "top_k": options["top_k"],
                "temperatures": options["temperatures"],
                "top_ps": options["top_ps"],
            }
            if answers is None:
                out = score_logits(logits, lm.valid, **kw)
            else:
                out = score_answers(logits, answers, len(rows), **kw)
        except Exception as exc:
            if not _is_oom(exc):
                raise
            if bs == 1:
                raise CollectionError(
                    f"model {lm.name!r} runs out of memory even on a batch of 1 prompt "
                    f"({max(len(encoded[r]) for r in rows)} tokens); use a smaller dtype, "
                    "device_map='auto', or a bigger device"
                ) from exc
            state["batch_size"] = max(1, state["batch_size"] // 2)  # prompts, not rows
            state["backoffs"] += 1
            _empty_cache()
            continue
        for k, r in enumerate(rows):
            results[r] = {key: val[k] for key, val in out.items()}
        a += len(rows)
    tok = lm.tokenizer
    res = {key: np.stack([r[key] for r in results]) for key in results[0]}
    res["topk_token"] = np.array(
        [[tok.convert_ids_to_tokens(int(i)) or "" for i in row] for row in res["topk_id"]],
        dtype=object,
    ).astype(str)
    res["prompt"] = np.array(texts, dtype=str)
    res["cells"] = np.array(cells, dtype=np.int64)
    return res


def _empty_cache() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover
        pass


def _auto_batch(device: str) -> int:
    return 64 if str(device).startswith("cuda") else 8


# ---------------------------------------------------------------------------- main entry
def collect(
    prompts: xr.Dataset,
    models: Sequence[dict[str, Any] | str] | dict[str, Any] | str,
    output: str | os.PathLike | None = None,
    *,
    scale: Sequence[int] | None = None,
    batch_size: int | str = "auto",
    device: str | None = None,
    dtype: str | None = None,
    device_map: str | None = None,
    trust_remote_code: bool = False,
    top_k: int = 20,
    temperatures: Sequence[float] = DEFAULT_TEMPERATURES,
    top_ps: Sequence[float] = DEFAULT_TOP_PS,
    shard: str | tuple[int, int] | None = None,
    prefix_cache: bool = True,
    split_space: bool = True,
    chunk_size: int = 64,
    overwrite: bool = False,
    progress: bool = True,
    on_unit: Callable[[int, int], None] | None = None,
    loader: Callable[..., Any] | None = None,
) -> xr.Dataset:
    """Collect exact next-token item PMFs for every (model, condition, item).

    Parameters
    ----------
    prompts
        Dataset with string variables ``system`` and ``user`` on dims
        ``(*factors, "item")`` (from ``Experiment.build_prompts()``); its item coords
        (``reverse_keyed``, ``subscale``) and attrs are carried into the result.
    models
        Zoo names, Hugging Face ids, local paths, or dicts (``name``, ``source``,
        ``revision``, ``dtype``, ``device``, ``device_map``, ``gguf_file``,
        ``trust_remote_code``, ``prompt_format``); ``name`` is the ``model`` level.
    output
        netCDF path. When given, the run is resumable (``<output>.partial/``) and a
        finished output with the same fingerprint is opened instead of recomputed.
    scale
        Scale values; defaults to the prompts' ``score`` coord or ``scale_min``/``scale_max`` attrs.
    batch_size
        Prompts per forward pass, or ``"auto"`` (8 on CPU, 64 on CUDA), halved on
        out-of-memory errors.
    device, dtype, device_map, trust_remote_code
        See :func:`xlikert.collect.backend.load_model`.
    top_k
        Raw top-k tokens kept per prompt (``topk_token``, ``topk_logprob``).
    temperatures, top_ps
        Decoding grid (``decoding_pmf``, ``decoding_valid_mass``).
    shard
        ``"i/n"``: compute only the i-th of n contiguous parts of the work; the
        output then carries a ``computed`` mask and is combined with ``xlikert merge``.
    prefix_cache
        Run the shared system-prompt prefix once per unit and reuse its KV cache.
    split_space
        Also count an answer whose leading space is a token of its own (``"▁"``
        then ``"5"``, as Llama 3, Qwen 2.5, Gemma and SmolLM2 tokenize ``" 5"``),
        exactly, from the same forward pass with the space token appended. Off:
        the paper's one-token rule, where such answers are constraint failures.
        Server models always use the one-token rule (they cannot condition on an
        appended token); each model's rule is in ``attrs["models"][name]["answers"]``.
    chunk_size
        Prompts per resumable unit.
    overwrite
        Replace an existing output made with a different configuration.
    progress
        Show a tqdm bar (prompts/s, ETA).
    on_unit
        Called as ``on_unit(done_units, total_units)`` after each unit is saved.
    loader
        Model loader (defaults to :func:`~xlikert.collect.backend.load_model`).

    Returns
    -------
    xarray.Dataset
        ``pmf`` (model, *factors, item, score), ``valid_mass``, ``prompt``,
        ``topk_token``/``topk_logprob`` (…, rank), ``decoding_pmf`` (…, item,
        temperature, top_p, score), ``decoding_valid_mass``; per-model provenance
        (source, revision or package version, sha256, tokenizer, valid tokens with ids
        and surface forms, dtype, device, prompt format) in ``attrs["models"][name]``.

    Examples
    --------
    >>> from xlikert.design import load_experiment  # doctest: +SKIP
    >>> exp = load_experiment("demo")  # doctest: +SKIP
    >>> ds = collect(exp.build_prompts(), exp.models, "results.nc")  # doctest: +SKIP
    >>> ds.pmf.sum("score")  # doctest: +SKIP
    """
    from tqdm.auto import tqdm

    system, user = _check_prompts(prompts)
    models = _normalise_models(models)
    scale = _scale_of(prompts, scale)
    shard_t = parse_shard(shard)
    if not (isinstance(batch_size, int) and batch_size >= 1) and batch_size != "auto":
        raise CollectionError(
            f"batch_size must be a positive integer or 'auto', got {batch_size!r}"
        )
    if chunk_size < 1:
        raise CollectionError(f"chunk_size must be >= 1, got {chunk_size}")
    options = {
        "top_k": int(top_k),
        "temperatures": [float(t) for t in temperatures],
        "top_ps": [float(p) for p in top_ps],
        "chunk_size": int(chunk_size),
        "shard": list(shard_t) if shard_t else None,
        "dtype": dtype,
        "prefix_cache": bool(prefix_cache),
        "split_space": bool(split_space),
    }
    from .server import is_server_spec, parse_server_spec

    public = []
    for spec in models:  # fail before anything is written
        if is_server_spec(spec):
            sspec = parse_server_spec(spec)
            # how the requests travel does not change the results: not part of the fingerprint
            kept = {k: v for k, v in spec.items() if k not in _TRANSPORT_KEYS}
            public.append({**kept, "base_url": sspec.public_url})
        else:
            _check_source(spec)
            public.append(spec)
    fp = _fingerprint(system, user, public, scale, options)
    # the same for every shard of one run (and equal to the unsharded run's fingerprint)
    run_fp = _fingerprint(system, user, public, scale, {**options, "shard": None})
    plan = _Plan(system, user, models, chunk_size)
    units = plan.units
    if shard_t:
        i, n = shard_t
        lo, hi = (len(units) * (i - 1)) // n, (len(units) * i) // n
        units = units[lo:hi]

    out_path = Path(output) if output is not None else None
    partial: Path | None = None
    if out_path is not None:
        if out_path.is_dir():
            raise CollectionError(f"output {out_path} is a directory; give a .nc file path")
        if not out_path.parent.is_dir():
            raise CollectionError(
                f"cannot write output {out_path}: directory {out_path.parent} does not exist"
            )
        if not os.access(out_path.parent, os.W_OK | os.X_OK):
            raise CollectionError(
                f"cannot write output {out_path}: directory {out_path.parent} is not writable"
            )
        if out_path.exists():
            from ..io import open_results

            try:
                old_ds = open_results(out_path)
            except Exception:
                old_ds = None
            if old_ds is not None and old_ds.attrs.get("xlikert_fingerprint") == fp:
                return old_ds
            if not overwrite:
                raise CollectionError(
                    f"output {out_path} exists and was made by a different run configuration "
                    "(or is not an xlikert results file); pass overwrite=True / --overwrite to replace it"
                )
        partial = out_path.with_name(out_path.name + ".partial")
        manifest = partial / "manifest.json"
        if partial.is_dir():
            try:
                old = json.loads(manifest.read_text())
            except (OSError, ValueError):
                old = {}
            if old.get("fingerprint") != fp:  # progress of another configuration
                stale = len(list(partial.glob("m*-u*.npz")))
                if stale:
                    warnings.warn(
                        f"{partial} holds {stale} saved unit(s) of a run with a different "
                        "configuration (prompts, models, scale or options); starting again",
                        stacklevel=2,
                    )
                shutil.rmtree(partial)
        try:
            partial.mkdir(exist_ok=True)
            if not manifest.exists():
                _write_json_atomic(
                    manifest,
                    {
                        "fingerprint": fp,
                        "format": _FORMAT,
                        "started": _now(),
                        "xlikert": __version__,
                    },
                )
        except OSError as exc:
            raise CollectionError(f"cannot write output {out_path}: {exc}") from exc

    done: dict[tuple[int, int], dict[str, np.ndarray]] = {}
    infos: dict[int, dict[str, Any]] = {}
    if partial is not None:
        for mi, ui, _cells in units:
            f = partial / f"m{mi:03d}-u{ui:05d}.npz"
            if f.is_file():
                try:
                    with np.load(f) as z:
                        done[(mi, ui)] = {k: z[k] for k in z.files}
                except Exception:
                    f.unlink()  # unreadable leftover: recompute
        for mi in range(len(models)):
            f = partial / f"model-{mi:03d}.json"
            if f.is_file():
                infos[mi] = json.loads(f.read_text())

    total = sum(len(c) for _, _, c in units)
    started = time.perf_counter()
    bar = tqdm(
        total=total,
        unit="prompt",
        desc="collect",
        disable=not progress,
        initial=sum(len(done[(mi, ui)]["cells"]) for mi, ui, _ in units if (mi, ui) in done),
        file=sys.stderr,
        dynamic_ncols=True,
    )
    load = loader
    if load is None:
        from .backend import load_model as load
    stats = {"backoffs": 0}
    try:
        for mi, spec in enumerate(models):
            todo = [(ui, cells) for m, ui, cells in units if m == mi and (mi, ui) not in done]
            if not todo and (mi in infos or not any(m == mi for m, _, _ in units)):
                continue
            if is_server_spec(spec):
                infos[mi] = _run_server(
                    mi, spec, scale, options, plan, units, todo, done, partial, bar, on_unit
                )
                continue
            bar.set_description(f"load {spec['name']}")
            from .backend import Scorer

            lm = load(
                spec,
                scale,
                device=device,
                dtype=dtype,
                device_map=device_map,
                trust_remote_code=trust_remote_code,
                split_space=split_space,
            )
            scorer = Scorer(lm, prefix_cache=prefix_cache)
            bs = _auto_batch(str(lm.device)) if batch_size == "auto" else int(batch_size)
            state = {"batch_size": bs, "backoffs": 0}
            bar.set_description(f"collect {spec['name']}")

            def compute(cells, scorer=scorer, state=state):
                # the batch size is read per unit: an OOM back-off lowers it in `state`
                return _compute_unit(scorer, cells, plan, state["batch_size"], options, state)

            _run_units(compute, mi, units, todo, done, partial, bar, on_unit)
            info = {k: v for k, v in lm.provenance.items() if k != "load_seconds"}
            info["valid_tokens"] = lm.valid.as_records()
            if getattr(lm, "answers", None) is not None:
                info["answer_spellings"] = lm.answers.as_records()
            info["batch_size"] = bs
            info["oom_backoffs"] = state["backoffs"]
            stats["backoffs"] += state["backoffs"]
            infos[mi] = info
            if partial is not None:
                _write_json_atomic(partial / f"model-{mi:03d}.json", info)
            del compute, scorer, lm
            _empty_cache()
    finally:
        bar.close()
    elapsed = time.perf_counter() - started

    ds = _assemble(prompts, system, user, models, scale, options, units, done, infos, shard_t)
    ds.attrs["xlikert_fingerprint"] = fp
    ds.attrs["xlikert_run_fingerprint"] = run_fp
    ds.attrs["history"] = (
        f"{_now()}: xlikert {__version__} collect ({len(models)} model(s), "
        f"{total} prompt(s){f', shard {shard_t[0]}/{shard_t[1]}' if shard_t else ''})"
    )
    ds.attrs["collection_seconds_last_session"] = round(elapsed, 3)
    if out_path is not None:
        write_atomic(ds, out_path)
        shutil.rmtree(partial, ignore_errors=True)
    return ds


def _run_units(compute, mi, units, todo, done, partial, bar, on_unit) -> None:
    """Compute model ``mi``'s pending units, saving each to ``partial`` as it finishes."""
    for ui, cells in todo:
        res = compute(cells)
        done[(mi, ui)] = res
        if partial is not None:
            _save_npz_atomic(partial / f"m{mi:03d}-u{ui:05d}.npz", **res)
        bar.update(len(cells))
        if on_unit is not None:
            on_unit(len(done), len(units))


def _run_server(mi, spec, scale, options, plan, units, todo, done, partial, bar, on_unit):
    """Collect one server model's units (see :mod:`xlikert.collect.server`)."""
    from .server import ServerModel, parse_server_spec

    sspec = parse_server_spec(spec)
    first = (todo or [(None, next(c for m, _, c in units if m == mi))])[0][1][0]
    bar.set_description(f"connect {spec['name']}")
    sm = ServerModel.open(
        sspec, scale, options["top_k"], (plan.sys_flat[first], plan.user_flat[first])
    )
    before = {
        str(done[(mi, ui)]["mode"])
        for m, ui, _ in units
        if m == mi and (mi, ui) in done and "mode" in done[(mi, ui)]
    }
    if before - {sm.mode}:
        raise CollectionError(
            f"model {spec['name']!r}: the interrupted run was collected in mode {sorted(before)} "
            f"but the server now gives mode {sm.mode!r}; set mode = {sorted(before)[0]!r} in the "
            f"model entry, or delete {partial} to start again"
        )
    bar.set_description(f"collect {spec['name']} ({sm.mode})")
    _run_units(
        lambda cells: sm.compute_unit(cells, plan, options),
        mi, units, todo, done, partial, bar, on_unit,
    )  # fmt: skip
    info = dict(sm.provenance)
    info["valid_tokens"] = sm.valid.as_records() if sm.valid is not None else []
    info["http_requests_last_session"] = sm.client.requests
    info["http_retries_last_session"] = sm.client.retries
    if partial is not None:
        _write_json_atomic(partial / f"model-{mi:03d}.json", info)
    return info


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _assemble(prompts, system, user, models, scale, options, units, done, infos, shard_t):
    from .backend import DECODING_TIE_RULE, PLAIN_FORMAT

    shape = user.shape
    ncell = int(np.prod(shape))
    M, S = len(models), len(scale)
    T, Pn, K = len(options["temperatures"]), len(options["top_ps"]), options["top_k"]
    pmf = np.full((M, ncell, S), np.nan)
    vm = np.full((M, ncell), np.nan)
    prompt = np.full((M, ncell), "", dtype=object)
    tkt = np.full((M, ncell, K), "", dtype=object)
    tkl = np.full((M, ncell, K), np.nan)
    dpmf = np.full((M, ncell, T, Pn, S), np.nan)
    dvm = np.full((M, ncell, T, Pn), np.nan)
    computed = np.zeros((M, ncell), dtype=bool)
    bounded = any("pmf_lower" in done[(mi, ui)] for mi, ui, _ in units)
    bounds = {
        "pmf_lower": np.full((M, ncell, S), np.nan),
        "pmf_upper": np.full((M, ncell, S), np.nan),
        "valid_mass_lower": np.full((M, ncell), np.nan),
        "valid_mass_upper": np.full((M, ncell), np.nan),
    }
    for mi, ui, _cells in units:
        r = done[(mi, ui)]
        c = r["cells"]
        if bounded:
            for key, arr in bounds.items():
                point = r["pmf"] if key.startswith("pmf") else r["valid_mass"]
                arr[mi, c] = r.get(key, point)
        k = r["topk_logprob"].shape[1]
        pmf[mi, c] = r["pmf"]
        vm[mi, c] = r["valid_mass"]
        prompt[mi, c] = r["prompt"]
        tkt[mi, c, :k] = r["topk_token"]
        tkl[mi, c, :k] = r["topk_logprob"]
        dpmf[mi, c] = r["decoding_pmf"]
        dvm[mi, c] = r["decoding_valid_mass"]
        computed[mi, c] = True
    dims = ("model", *user.dims)
    full = (M, *shape)
    coords: dict[str, Any] = {d: user[d] for d in user.dims if d in user.coords}
    for name, co in prompts.coords.items():  # item coords (reverse_keyed, subscale, ...)
        if name not in coords and set(co.dims) <= set(user.dims):
            coords[name] = co
    coords["model"] = [m["name"] for m in models]
    coords["score"] = np.asarray(scale, dtype=np.int64)
    coords["rank"] = np.arange(1, K + 1)
    coords["temperature"] = np.asarray(options["temperatures"])
    coords["top_p"] = np.asarray(options["top_ps"])
    ds = xr.Dataset(
        {
            "pmf": ((*dims, "score"), pmf.reshape(*full, S)),
            "valid_mass": (dims, vm.reshape(full)),
            "prompt": (dims, prompt.reshape(full).astype(str)),
            "topk_token": ((*dims, "rank"), tkt.reshape(*full, K).astype(str)),
            "topk_logprob": ((*dims, "rank"), tkl.reshape(*full, K)),
            "decoding_pmf": (
                (*dims, "temperature", "top_p", "score"),
                dpmf.reshape(*full, T, Pn, S),
            ),
            "decoding_valid_mass": ((*dims, "temperature", "top_p"), dvm.reshape(*full, T, Pn)),
        },
        coords=coords,
        attrs=dict(prompts.attrs),
    )
    if bounded:
        from .server import BOUNDS_RULE

        for key, arr in bounds.items():
            shape = (*full, S) if key.startswith("pmf") else full
            ds[key] = (ds["pmf"].dims if key.startswith("pmf") else dims, arr.reshape(shape))
            ds[key].attrs["description"] = (
                "certified bound; equal to the stored value where it is exact"
            )
        ds.attrs["bounds_rule"] = BOUNDS_RULE
        ds["pmf"].attrs["bounded"] = (
            "where pmf_lower < pmf_upper the pmf is only bounded (top-k server): the stored "
            "value is the observed valid mass renormalised, see bounds_rule"
        )
    if shard_t:
        ds["computed"] = (dims, computed.reshape(full))
        ds["computed"].attrs["description"] = "True where this shard computed the cell"
        ds.attrs["shard"] = f"{shard_t[0]}/{shard_t[1]}"
    # Per-model provenance: attrs["models"][name] (a dict; xlikert.io stores it as JSON).
    ds.attrs["models"] = {
        models[mi]["name"]: {k: v for k, v in infos.get(mi, {}).items()} for mi in range(M)
    }
    ds["pmf"].attrs.update(
        long_name="item PMF over valid answers (renormalised)",
        description="sum over each score's valid tokens of P_raw(t|x), divided by valid_mass",
    )
    ds["valid_mass"].attrs.update(
        long_name="valid mass", description="sum of P_raw(t|x) over valid tokens; 1 - failure rate"
    )
    ds["prompt"].attrs["description"] = "exact text sent to the model (after templating)"
    ds["topk_token"].attrs["description"] = "raw vocabulary tokens of highest probability"
    ds["topk_logprob"].attrs["description"] = "natural-log probability over the full vocabulary"
    ds["decoding_pmf"].attrs["description"] = DECODING_TIE_RULE
    ds["decoding_valid_mass"].attrs["description"] = "valid mass inside the nucleus / nucleus mass"
    ds.attrs.update(
        xlikert_version=__version__,
        date_created=_now(),
        collection_protocol=(
            "one forward pass per (condition, item); log-softmax over the full vocabulary in "
            "float64; valid tokens = vocabulary tokens whose surface form is a scale value with "
            "an optional leading ' ', '▁' or 'Ġ'; each model's answer rule (one token, split "
            "space, multi-token) is in attrs['models'][name]['answers']"
        ),
        plain_prompt_format=PLAIN_FORMAT,
        decoding_tie_rule=DECODING_TIE_RULE,
    )
    return ds
