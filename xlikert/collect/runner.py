"""Resumable, shardable collection runs: prompts Dataset in, results Dataset/netCDF out.

A run is split into fixed *units* (up to ``chunk_size`` prompts of one model that
share a system prompt). Each model is opened through its backend
(:mod:`xlikert.collect.protocol`), scores its units one by one, and is closed
before the next model loads. Each finished unit is saved in
``<output>.partial/`` (:class:`~xlikert.collect.store.PartialStore`); rerunning
the same command after Ctrl-C or ``kill -9`` loads the finished units and
computes only the rest. The units, their order and their batches are the same as
in an uninterrupted run, so the final file holds identical numbers. The final
netCDF is written to a temporary name and renamed, so no half-written file ever
looks complete; a finished output with the same fingerprint is not recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .._version import __version__
from ..dims import check_factor_name
from ..errors import CollectionError
from ..io import encode_attrs
from .layout import cell_labels
from .options import CollectOptions
from .protocol import Model, backend_module
from .record import UnitResult, assemble
from .store import PartialStore, as_record
from .templates import PLAIN_FORMAT

__all__ = [
    "Plan",
    "collect",
    "parse_shard",
    "write_atomic",
]

_FORMAT = "xlikert-collect-3"  # 3: token ids stored; vLLM read by the logits processor


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


# ---------------------------------------------------------------------------- inputs
def _scale_of(prompts: xr.Dataset, scale) -> tuple[int, ...]:
    if scale is not None:
        return scale
    if "score" in prompts.coords:
        return tuple(int(v) for v in prompts["score"].values)
    attrs = prompts.attrs
    lo = next((attrs[k] for k in attrs if str(k).endswith("scale_min")), None)
    hi = next((attrs[k] for k in attrs if str(k).endswith("scale_max")), None)
    if lo is None or hi is None:
        raise CollectionError(
            "cannot tell the scale: the prompts Dataset has no 'score' coord and no "
            "'scale_min'/'scale_max' attrs; pass scale=range(1, 8)"
        )
    return tuple(range(int(lo), int(hi) + 1))


def _normalise_models(models) -> list[dict[str, Any]]:
    if isinstance(models, str | dict):
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
    for d in user.dims:  # factor names must not take the names of xlikert's own dims
        if d != "item":
            check_factor_name(d, where=f"prompts factor {d!r}")
    dims = [d for d in user.dims if d != "item"] + ["item"]
    return system.transpose(*dims), user.transpose(*dims)


def _check_output(output) -> Path | None:
    if output is None:
        return None
    out = Path(output)
    if out.is_dir():
        raise CollectionError(f"output {out} is a directory; give a .nc file path")
    if not out.parent.is_dir():
        raise CollectionError(f"cannot write output {out}: directory {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise CollectionError(f"cannot write output {out}: directory {out.parent} is not writable")
    return out


# ---------------------------------------------------------------------------- plan
class Plan:
    """The fixed partition of (model, cell) work into units, and the run's fingerprints."""

    def __init__(self, system, user, models, options: CollectOptions, shard, labels=None):
        chunk_size = options.chunk_size
        self.sys_flat = [str(s) for s in np.asarray(system.values).ravel()]
        self.user_flat = [str(s) for s in np.asarray(user.values).ravel()]
        #: Each cell's answer labels (a response format), None: the run's options.
        self.labels = labels
        # a unit shares a system prompt and (with a format factor) the answer labels
        groups: dict[tuple[Any, str], list[int]] = {}
        for j, s in enumerate(self.sys_flat):
            groups.setdefault((labels[j] if labels else None, s), []).append(j)
        units: list[tuple[int, int, list[int]]] = []  # (model index, unit index, cells)
        for mi in range(len(models)):
            ui = 0
            for cells in groups.values():
                for a in range(0, len(cells), chunk_size):
                    units.append((mi, ui, cells[a : a + chunk_size]))
                    ui += 1
        if shard:
            i, n = shard
            units = units[(len(units) * (i - 1)) // n : (len(units) * i) // n]
        self.units = units
        # every entry checked by its backend before anything is written
        public = [backend_module(spec).check(spec, options) for spec in models]
        self.public = public
        # traces per prompt of each model (0: not in reasoning mode)
        self.traces = [int((p.get("reasoning") or {}).get("traces", 0)) for p in public]
        opts = {**options.fingerprinted(), "chunk_size": chunk_size}
        if labels:  # a response format: the labels of each level
            opts["answer_labels_by_cell"] = sorted({" ".join(x or ()) for x in labels})
        self.fingerprint = self._hash(system, user, public, options.scale, {**opts, "shard": shard})
        # the same for every shard of one run (and equal to the unsharded run's fingerprint)
        self.run_fingerprint = self._hash(
            system, user, public, options.scale, {**opts, "shard": None}
        )

    def labels_of(self, cells: Sequence[int], options: CollectOptions) -> tuple[str, ...] | None:
        """The answer labels of a unit's cells (they share them)."""
        return self.labels[cells[0]] if self.labels else options.answer_labels

    def prompts(self, cells: Sequence[int]) -> list[tuple[str, str]]:
        return [(self.sys_flat[j], self.user_flat[j]) for j in cells]

    @staticmethod
    def _hash(system, user, models, scale, options) -> str:
        h = hashlib.sha256()
        payload = {
            "format": _FORMAT,
            "dims": list(user.dims),
            "coords": {d: [str(v) for v in user[d].values] for d in user.dims if d in user.coords},
            "models": models,
            "scale": list(scale),
            "options": options,
        }
        h.update(json.dumps(payload, sort_keys=True, default=str).encode())
        for s in np.asarray(system.values).ravel():
            h.update(str(s).encode() + b"\0")
        for s in np.asarray(user.values).ravel():
            h.update(str(s).encode() + b"\0")
        return h.hexdigest()


def _finished(out_path: Path, fingerprint: str, overwrite: bool) -> xr.Dataset | None:
    from ..io import open_results

    try:
        old = open_results(out_path)
    except Exception:
        old = None
    if old is not None and old.attrs.get("xlikert_fingerprint") == fingerprint:
        return old
    if not overwrite:
        raise CollectionError(
            f"output {out_path} exists and was made by a different run configuration "
            "(or is not an xlikert results file); pass overwrite=True / --overwrite to replace it"
        )
    return None


# ---------------------------------------------------------------------------- main entry
def collect(
    prompts: xr.Dataset,
    models: Sequence[dict[str, Any] | str] | dict[str, Any] | str,
    output: str | os.PathLike | None = None,
    *,
    options: CollectOptions | None = None,
    shard: str | tuple[int, int] | None = None,
    overwrite: bool = False,
    progress: bool = True,
    on_unit: Callable[[int, int], None] | None = None,
    loader: Callable[[dict[str, Any], CollectOptions, tuple[str, str]], Model] | None = None,
    **overrides: Any,
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
        ``backend`` = ``"transformers"`` (default), ``"vllm"`` or ``"openai"``, and
        the backend's keys: see :mod:`xlikert.collect.backends.transformers`,
        :mod:`xlikert.collect.backends.vllm`, :mod:`xlikert.collect.backends.openai`); ``name`` is
        the ``model`` level.
    output
        netCDF path. When given, the run is resumable (``<output>.partial/``) and a
        finished output with the same fingerprint is opened instead of recomputed.
    options
        The run's settings (:class:`~xlikert.collect.options.CollectOptions`:
        the decoding grid, top-k, the answer rule, batch and unit sizes, the
        in-process backends' device and dtype); default: the defaults.
    **overrides
        Any field of :class:`~xlikert.collect.options.CollectOptions` by name,
        overriding ``options`` (``scale``, ``top_k``, ``temperatures``,
        ``top_ps``, ``split_space``, ``prefix_cache``, ``batch_size``,
        ``chunk_size``, ``device``, ``dtype``, ``device_map``,
        ``trust_remote_code``). Everything is validated before any model loads.
        ``scale`` defaults to the prompts' ``score`` coord or
        ``scale_min``/``scale_max`` attrs; ``temperatures`` and ``top_ps`` are
        the decoding grid (``decoding_pmf``): the item PMF a sampler would see.
    shard
        ``"i/n"``: compute only part i of n (whole units); merge with
        :func:`~xlikert.collect.merge_shards`.
    prefix_cache
        Reuse the system prompt's KV cache (transformers; checked at run time).
    split_space
        Count answers whose leading space is a token of its own, exactly
        (:data:`~xlikert.collect.tokens.SPACED_ANSWER_RULE`); False gives the
        paper's one-token rule.
    overwrite
        Replace an output made by another configuration.
    progress
        Show a progress bar (tqdm).
    on_unit
        Called with (units done, units total) after every unit.
    loader
        ``(model entry, options, probe) -> Model`` instead of the entry's
        backend's ``open`` (to reuse a loaded model, e.g. in benchmarks); called
        as ``open`` is, ``probe`` being one ``(system, user)`` prompt of the run.

    Returns
    -------
    xr.Dataset
        ``pmf``, ``valid_mass``, ``prompt``, ``topk_*``, ``decoding_*`` (DESIGN.md
        §1), certified bounds for top-k servers, provenance in
        ``attrs["models"][name]``; with a model in reasoning mode (an entry with
        ``reasoning = {traces = 8, max_new_tokens = 256, seed = 0}``, see
        :mod:`xlikert.collect.reasoning`) also ``pmf_se`` and the ``trace_*``
        variables on a ``trace`` dim (:data:`~xlikert.schema.TRACE_VARIABLES`),
        and ``attrs["sampling_error"]`` saying which numbers carry Monte Carlo error.

    Raises
    ------
    CollectionError
        Bad prompts, models, options or output path, before anything runs; a
        model that cannot be loaded or reached (finished units are kept).

    Examples
    --------
    >>> from xlikert.design import load_experiment  # doctest: +SKIP
    >>> exp = load_experiment("demo")  # doctest: +SKIP
    >>> ds = collect(exp.build_prompts(), exp.models, "results.nc", top_ps=(0.9, 1.0))  # doctest: +SKIP
    >>> opts = CollectOptions.from_mapping(exp.collect, where="demo [collect]")  # doctest: +SKIP
    >>> ds = collect(exp.build_prompts(), exp.models, options=opts)  # doctest: +SKIP
    >>> ds.pmf.sum("score")  # doctest: +SKIP
    """
    from tqdm.auto import tqdm

    if options is None:
        options = CollectOptions()
    elif not isinstance(options, CollectOptions):
        raise CollectionError(
            f"options must be a CollectOptions (CollectOptions.from_mapping(d) builds one from "
            f"a dict), got {type(options).__name__}"
        )
    options = options.replace(where="collect()", **overrides)  # unknown names refused
    system, user = _check_prompts(prompts)
    options = options.replace(where="collect()", scale=_scale_of(prompts, options.scale))
    models = _normalise_models(models)
    shard_t = parse_shard(shard)
    labels, options = cell_labels(prompts, user, options)  # a format factor, items' own options
    plan = Plan(system, user, models, options, shard_t, labels)
    out_path = _check_output(output)
    if out_path is not None and out_path.exists():
        finished = _finished(out_path, plan.fingerprint, overwrite)
        if finished is not None:
            return finished
    store = PartialStore(out_path, plan.fingerprint, _FORMAT) if out_path is not None else None

    done: dict[tuple[int, int], UnitResult] = {}
    infos: dict[int, dict[str, Any]] = {}
    if store is not None:
        done, infos = store.load(plan.units, len(models))
    total = sum(len(c) for _, _, c in plan.units)
    started = time.perf_counter()
    bar = tqdm(total=total, unit="prompt", desc="collect", disable=not progress, file=sys.stderr,
               initial=sum(len(r.cells) for r in done.values()), dynamic_ncols=True)  # fmt: skip
    try:
        for mi, spec in enumerate(models):
            mine = [(ui, cells) for m, ui, cells in plan.units if m == mi]
            todo = [(ui, cells) for ui, cells in mine if (mi, ui) not in done]
            if not todo and (mi in infos or not mine):
                continue
            bar.set_description(f"load {spec['name']}")
            first = (todo or mine)[0][1]
            probe = plan.prompts([first[0]])[0]
            opened = options.replace(answer_labels=plan.labels_of(first, options))
            model = (loader or backend_module(spec).open)(spec, opened, probe)
            try:
                _check_resumed_mode(
                    spec, model, [done[(mi, ui)] for ui, _ in mine if (mi, ui) in done]
                )
                bar.set_description(f"collect {spec['name']}")
                for ui, cells in todo:
                    model = _with_labels(model, plan.labels_of(cells, options), spec, loader,
                                         options, plan.prompts(cells)[0])  # fmt: skip
                    r = model.score(plan.prompts(cells))
                    r.check(len(cells), {**options.sizes, "trace": plan.traces[mi]})
                    r.cells = np.asarray(cells, dtype=np.int64)
                    done[(mi, ui)] = r
                    if store is not None:
                        store.save_unit(mi, ui, r)
                    bar.update(len(cells))
                    if on_unit is not None:
                        on_unit(len(done), len(plan.units))
                # as a resumed run reads it back from the store (sorted keys, JSON values),
                # so an interrupted run writes the same attrs as an uninterrupted one
                infos[mi] = as_record(model.provenance())
                if store is not None:
                    store.save_model(mi, infos[mi])
            finally:
                model.close()
                del model
    finally:
        bar.close()
    elapsed = time.perf_counter() - started

    ds = assemble(
        prompts,
        user,
        [m["name"] for m in models],
        {**options.sizes, "trace": max(plan.traces)},
        options.coords,
        [(mi, done[(mi, ui)]) for mi, ui, _ in plan.units],
        infos,
        shard=shard_t,
    )
    ds.attrs.update(
        plain_prompt_format=PLAIN_FORMAT,
        xlikert_fingerprint=plan.fingerprint,
        xlikert_run_fingerprint=plan.run_fingerprint,
        history=(
            f"{ds.attrs['date_created']}: xlikert {__version__} collect ({len(models)} model(s), "
            f"{total} prompt(s){f', shard {shard_t[0]}/{shard_t[1]}' if shard_t else ''})"
        ),
        collection_seconds_last_session=round(elapsed, 3),
    )
    if max(plan.traces):
        ds.attrs["reasoning_models"] = [
            m["name"] for m, t in zip(models, plan.traces, strict=True) if t
        ]
    for name in ("answer_label", "score_label", "option_label"):  # labels of scores, options
        if name in prompts:
            ds[name] = prompts[name].astype(str)
    ds = encode_attrs(ds)  # netCDF-ready as it stands: ds.to_netcdf works
    if out_path is not None:
        write_atomic(ds, out_path)
        store.remove()
    return ds


def _with_labels(model, labels, spec, loader, options: CollectOptions, probe) -> Model:
    """The model reading answers with ``labels``: relabelled in place where the backend
    can (every backend of xlikert), else closed and opened again with them."""
    current = getattr(model, "options", options).answer_labels
    if labels == current:
        return model
    if hasattr(model, "relabel"):
        model.relabel(labels)
        return model
    model.close()
    return (loader or backend_module(spec).open)(spec, options.replace(answer_labels=labels), probe)


def _check_resumed_mode(spec, model, resumed: list[UnitResult]) -> None:
    """A resumed model must measure in the mode its saved units were measured in."""
    mode = model.mode
    before = sorted({r.mode for r in resumed} - {mode})
    if before:
        raise CollectionError(
            f"model {spec['name']!r}: the interrupted run was collected in mode {before} but "
            f"the engine now gives mode {mode!r}; set mode = {before[0]!r} in the model entry, "
            "or delete the .partial folder to start again"
        )
