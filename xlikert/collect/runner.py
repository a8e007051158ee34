"""Resumable, shardable, growable collection runs: prompts Dataset in, results netCDF out.

A run is split into fixed *units* (up to ``chunk_size`` prompts of one model that
share a system prompt). Every cell (one model, condition and item) has a key: the
hash of what determines its numbers (:mod:`xlikert.collect.identity`). Before a
model loads, the run looks its cells' keys up in the output's saved progress and
in earlier results files (``reuse=``): a cell found there is copied, not
computed, so a study grows (a model, a factor level, an item) by computing only
its new cells, and a model whose every cell is found is not loaded at all.
Each model with cells to compute is opened through its backend
(:mod:`xlikert.collect.protocol`), scores its units one by one, and is closed
before the next model loads (:mod:`xlikert.collect.session`).

Each finished unit is saved in ``<output>.partial/``
(:class:`~xlikert.collect.store.PartialStore`), which one run at a time holds
(:mod:`xlikert.collect.lock`); rerunning the same command after Ctrl-C, SIGTERM
or ``kill -9`` computes only the rest, in the same units and batches, so the final
file holds the numbers of an uninterrupted run. Saved progress of another
configuration is kept, never deleted without ``discard_progress=True``. The final
netCDF is written to a temporary name and renamed, so no half-written file ever
looks complete; a finished output with the same fingerprint is not recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..core.dims import MODEL_DIM, check_factor_name
from ..core.errors import CollectionError
from .context.administration import Conversations
from .layout import cell_labels
from .options import CollectOptions
from .protocol import Model, backend_module, backend_of
from .session import Session, write_atomic

__all__ = [
    "Plan",
    "collect",
    "parse_shard",
    "write_atomic",
]

_FORMAT = "xlikert-collect-3"  # 3: token ids stored; vLLM read by the logits processor


def parse_shard(shard: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """Parse ``"i/n"`` (1-based) into ``(i, n)``.

    Parameters
    ----------
    shard : str, tuple of (int, int) or None
        ``"i/n"`` (the ``--shard`` option: part i of n, counted from 1), the pair
        ``(i, n)``, or None (no sharding).

    Returns
    -------
    tuple of (int, int) or None
        ``(i, n)``, checked; None for None.

    Raises
    ------
    CollectionError
        A text that is not ``"i/n"``, or ``i`` outside ``1..n``.

    Examples
    --------
    >>> parse_shard("2/4")
    (2, 4)
    >>> parse_shard("5/4")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: shard 5/4: need 1 <= i <= n
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
    if MODEL_DIM in prompts["user"].dims or MODEL_DIM in prompts["system"].dims:
        raise CollectionError(
            f"prompts must not have a {MODEL_DIM!r} dim; models are given separately"
        )
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


def _check_sequential_backends(models: Sequence[dict[str, Any]]) -> None:
    """Sequential administration needs a backend that reads token-id contexts exactly.

    Raises
    ------
    CollectionError
        A model entry of a server backend (it renders the conversation itself and lists
        top-k log-probabilities only), named, before anything loads.
    """
    for spec in models:
        if backend_of(spec) == "openai":
            raise CollectionError(
                f"model {spec['name']!r}: sequential administration reads the exact answer "
                "distribution after every answer history from token ids with a reused prefix; "
                "an OpenAI-compatible server cannot do that exactly (it renders the "
                "conversation itself and lists top-k log-probabilities only). Use the "
                "transformers or the in-process vLLM backend, or administration = 'isolated'"
            )


def _check_sequential_items(prompts: xr.Dataset, context: Conversations) -> None:
    """Sequential administration reads the items of a conversation on one answer scale.

    Raises
    ------
    CollectionError
        Under sequential administration, items with answer labels of their own or with
        non-substantive options (a questionnaire as fielded), named, before anything
        loads: the conversation's tree branches on one set of answers for every item.
    """
    items = [str(i) for i in np.asarray(prompts["item"].values)]
    own: dict[str, str] = {}
    if "answer_label" in prompts:  # the answers most items share are the instrument's
        lab = prompts["answer_label"]
        rows = [tuple(np.asarray(lab.isel(item=n).values).ravel()) for n in range(len(items))]
        common = Counter(rows).most_common(1)[0][0]
        own = {item: "its own answers" for item, row in zip(items, rows, strict=True)
               if row != common}  # fmt: skip
    if "option_label" in prompts:
        for n, item in enumerate(items):
            if bool((prompts["option_label"].isel(item=n) != "").any()):
                own[item] = ", ".join(filter(None, [own.get(item), "non-substantive options"]))
    if own and context.batteries:
        named = "; ".join(f"{item!r} ({why})" for item, why in own.items())
        raise CollectionError(
            "sequential administration reads every item of a conversation on one scale of "
            "answers (the history tree branches on them), without non-substantive options; "
            f"these items differ: {named}. Administer them isolated, or sequentially as "
            "items on the instrument's one scale"
        )


# ---------------------------------------------------------------------------- plan
class Plan:
    """The fixed partition of (model, cell) work into units, and the run's fingerprints."""

    def __init__(
        self, system, user, models, options: CollectOptions, shard, labels=None, context=None
    ):
        chunk_size = options.chunk_size
        #: The sequential conditions (:class:`~.context.administration.Conversations`), or None.
        self.context = context
        seq = context.where if context is not None else {}
        self.sys_flat = [str(s) for s in np.asarray(system.values).ravel()]
        self.user_flat = [str(s) for s in np.asarray(user.values).ravel()]
        #: Each cell's answer labels (a response format, the item's own options; see
        #: :func:`~xlikert.collect.layout.cell_labels`), None: the run's options.
        self.labels = labels
        # a unit shares a system prompt and (with a format factor) the answer labels
        groups: dict[tuple[Any, str], list[int]] = {}
        for j, s in enumerate(self.sys_flat):
            if j not in seq:
                groups.setdefault((labels[j] if labels else None, s), []).append(j)
        # a conversation (a sequential condition, its cells in the order asked) is one unit
        batteries = context.batteries if context is not None else []
        #: Every model's cells in the order its units take them (a cell's first twin owns it).
        self.order = [j for cells in [*groups.values(), *batteries] for j in cells]
        units: list[tuple[int, int, list[int]]] = []  # (model index, unit index, cells)
        for mi in range(len(models)):
            ui = 0
            for cells in groups.values():
                for a in range(0, len(cells), chunk_size):
                    units.append((mi, ui, cells[a : a + chunk_size]))
                    ui += 1
            for cells in batteries:
                units.append((mi, ui, list(cells)))
                ui += 1
        #: ``(i, n)``: this run computes part i of n (whole units).
        self.shard = shard
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
        if batteries:  # sequential administration: the conversations and their reading
            opts["sequential"] = {"batteries": batteries, "tol": options.tol,
                                  "max_passes": options.max_passes}  # fmt: skip
        self.fingerprint = self._hash(system, user, public, options.scale, {**opts, "shard": shard})
        # the same for every shard of one run (and equal to the unsharded run's fingerprint)
        self.run_fingerprint = self._hash(
            system, user, public, options.scale, {**opts, "shard": None}
        )

    def labels_of(self, cells: Sequence[int], options: CollectOptions) -> tuple[str, ...] | None:
        """The answer labels of a unit's cells (they share them)."""
        return self.labels[cells[0]] if self.labels else options.answer_labels

    def key_labels(self, cell: int, options: CollectOptions) -> tuple[str, ...]:
        """The answer labels a cell is read with, as its key holds them: the label of each
        score (the digits spelled; ``""`` off the item's support), then, when the item
        offers non-substantive options, ``"<option>=<label>"`` for every option of the
        run's ``option`` axis (``""`` after ``=`` where the item does not offer it), so a
        cell is never taken from a file whose options or their labels differ.

        Examples
        --------
        >>> from xlikert.collect.options import CollectOptions
        >>> opts = CollectOptions(scale=(1, 2, 3), nonsubstantive=("Don't know", "Refused"))
        >>> plan = Plan.__new__(Plan)
        >>> plan.labels = [("1", "2", "3", "8", ""), None]
        >>> plan.key_labels(0, opts)
        ('1', '2', '3', "Don't know=8", 'Refused=')
        >>> plan.key_labels(1, opts)
        ('1', '2', '3')
        """
        labels = self.labels[cell] if self.labels else options.answer_labels
        if not labels:
            return tuple(str(y) for y in options.scale)
        n = len(labels) - len(options.nonsubstantive)
        offered = labels[n:]
        if not any(offered):
            return tuple(labels[:n])
        named = (f"{o}={x}" for o, x in zip(options.nonsubstantive, offered, strict=True))
        return (*labels[:n], *named)

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
    """The finished output of this very configuration, or None when it is to be replaced.

    Raises
    ------
    CollectionError
        The output was made by another configuration and ``overwrite`` is off.
    """
    from ..core.io import open_results

    try:
        old = open_results(out_path)
    except Exception:
        old = None
    if old is not None and old.attrs.get("xlikert_fingerprint") == fingerprint:
        return old
    if not overwrite:
        raise CollectionError(
            f"output {out_path} exists and was made by a different run configuration "
            "(or is not an xlikert results file); pass overwrite=True / --overwrite to replace "
            "it (its cells whose identity is unchanged are copied, not recomputed), or write "
            f"to another file with reuse=[{str(out_path)!r}] / --reuse {out_path}"
        )
    return None


def _check_reuse(paths: Sequence[str | os.PathLike], out_path: Path | None) -> list[Path]:
    """The results files to reuse cells from: existing files, not the output itself."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    out = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise CollectionError(f"--reuse {p}: no such results file")
        if out_path is not None and path.resolve() == out_path.resolve():
            raise CollectionError(
                f"--reuse {p} is the output itself: rerunning resumes it, and --overwrite "
                "replaces it reusing its cells"
            )
        out.append(path)
    return out


def _options(options: CollectOptions | None, overrides: dict[str, Any]) -> CollectOptions:
    if options is None:
        options = CollectOptions()
    elif not isinstance(options, CollectOptions):
        raise CollectionError(
            f"options must be a CollectOptions (CollectOptions.from_mapping(d) builds one from "
            f"a dict), got {type(options).__name__}"
        )
    return options.replace(where="collect()", **overrides)  # unknown names refused


# ---------------------------------------------------------------------------- main entry
def collect(
    prompts: xr.Dataset,
    models: Sequence[dict[str, Any] | str] | dict[str, Any] | str,
    output: str | os.PathLike | None = None,
    *,
    options: CollectOptions | None = None,
    shard: str | tuple[int, int] | None = None,
    overwrite: bool = False,
    reuse: Sequence[str | os.PathLike] = (),
    discard_progress: bool = False,
    progress: bool = True,
    on_unit: Callable[[int, int], None] | None = None,
    loader: Callable[[dict[str, Any], CollectOptions, tuple[str, str]], Model] | None = None,
    **overrides: Any,
) -> xr.Dataset:
    """Collect exact next-token item PMFs for every (model, condition, item).

    Parameters
    ----------
    prompts : xarray.Dataset
        Dataset with string variables ``system`` and ``user`` on dims
        ``(*factors, "item")`` (from ``Experiment.build_prompts()``); its item coords
        (``reverse_keyed``, ``subscale``) and attrs are carried into the result. A
        factor ``administration`` with the level ``sequential`` asks the items of each
        such condition in one conversation (:mod:`xlikert.collect.context`; one unit
        of work each, read exactly or certified to ``tol`` within ``max_passes``),
        in the order of ``item_position`` where an item-order factor gives one.
    models : str, dict or sequence of str or dict
        Zoo names, Hugging Face ids, local paths, or dicts (``name``, ``source``,
        ``backend`` = ``"transformers"`` (default), ``"vllm"`` or ``"openai"``, and
        the backend's keys: see :mod:`xlikert.collect.backends.transformers`,
        :mod:`xlikert.collect.backends.vllm`, :mod:`xlikert.collect.backends.openai`); ``name`` is
        the ``model`` level.
    output : str or os.PathLike, optional
        A netCDF path. When given, the run is resumable (``<output>.partial/``, which
        one run at a time holds) and a finished output with the same fingerprint is
        opened instead of recomputed.
    options : CollectOptions, optional
        The run's settings (:class:`~xlikert.collect.options.CollectOptions`:
        the decoding grid, top-k, the answer rule, batch and unit sizes, the
        in-process backends' device and dtype); default: the defaults.
    shard : str or tuple of (int, int), optional
        ``"i/n"``: compute only part i of n (whole units); merge with
        :func:`~xlikert.collect.merge_shards`.
    overwrite : bool, default False
        Replace an output made by another configuration; its cells whose key is
        unchanged are copied, not recomputed.
    reuse : sequence of str or os.PathLike, default ()
        Earlier results files whose cells are copied where their key is this run's
        (:mod:`xlikert.collect.identity`): a study grows by its new cells only. The
        output's own saved progress is always reused.
    discard_progress : bool, default False
        Delete the saved progress of other configurations in ``<output>.partial/``
        first (it is otherwise kept, and reused where it applies).
    progress : bool, default True
        Show a progress bar (tqdm) and say what is reused.
    on_unit : callable, optional
        Called with (units done, units total) after every unit.
    loader : callable, optional
        ``(model entry, options, probe) -> Model`` instead of the entry's
        backend's ``open`` (to reuse a loaded model, e.g. in benchmarks); called
        as ``open`` is, ``probe`` being one ``(system, user)`` prompt of the run.
        The entry's identity (its backend's ``inputs``) is taken to describe the
        loaded model.
    **overrides : Any
        Any field of :class:`~xlikert.collect.options.CollectOptions` by name,
        overriding ``options`` (``scale``, ``top_k``, ``temperatures``,
        ``top_ps``, ``split_space``, ``prefix_cache``, ``batch_size``,
        ``chunk_size``, ``device``, ``dtype``, ``device_map``,
        ``trust_remote_code``). Everything is validated before any model loads.
        ``tol`` and ``max_passes`` read the sequential conditions.
        ``scale`` defaults to the prompts' ``score`` coord or
        ``scale_min``/``scale_max`` attrs; ``temperatures`` and ``top_ps`` are
        the decoding grid (``decoding_pmf``): the item PMF a sampler would see;
        ``split_space`` False gives the paper's one-token rule.

    Returns
    -------
    xarray.Dataset
        ``pmf``, ``valid_mass``, ``prompt_text``, ``topk_*``, ``decoding_*`` (the
        results schema, :mod:`xlikert.core.schema`; :doc:`/data-model`), certified
        bounds for top-k servers, each cell's ``cell_key`` and ``reused_from``,
        provenance in ``ds.likert.attrs["models"][name]`` (with the
        ``cell_identity`` its keys hash; the attrs are stored as JSON text, so
        that ``ds.to_netcdf`` works as it stands), ``attrs["cells_computed"]``,
        ``attrs["cells_copied"]``, ``attrs["cells_reused"]`` and
        ``attrs["reuse_sources"]``; with a model in reasoning mode (an entry with
        ``reasoning = {traces = 8, max_new_tokens = 256, seed = 0}``, see
        :mod:`xlikert.collect.reasoning`) also ``pmf_se`` and the ``trace_*``
        variables on a ``trace`` dim (:data:`~xlikert.core.schema.TRACE_VARIABLES`), and
        ``attrs["sampling_error"]`` saying which numbers carry Monte Carlo error; with
        sequential conditions, :data:`~xlikert.core.schema.CONTEXT_VARIABLES` (the certified
        bound, whether ``tol`` was met, the pairwise joints, every history read) and
        the rules in ``attrs`` (``history_rule``: how the failure mass enters).

    Raises
    ------
    CollectionError
        Bad prompts, models, options or output path, before anything runs; a
        model that cannot be loaded or reached, a full disk (finished units are
        kept); :class:`~xlikert.collect.lock.LockHeld` when another run holds the
        output; :class:`~xlikert.collect.interrupt.RunInterrupted` on SIGTERM or
        SIGINT, after saving every finished unit.

    Examples
    --------
    Everything is checked before a model loads (these lines run offline):

    >>> from xlikert.design import load_experiment
    >>> exp = load_experiment("demo")
    >>> collect(exp.build_prompts(), exp.models, top_ps=(0.9, 1.5))
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: collect(): top_ps must hold finite numbers in (0, 1]; ...
    >>> collect(exp.build_prompts(), exp.models, shard="1-4")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: --shard must look like i/n (e.g. 1/4), got '1-4'

    A run (the demo's three offline models: a few minutes on a laptop CPU), the same
    with the experiment's ``[collect]`` settings, and a bigger study that copies the
    cells it shares with the first:

    >>> ds = collect(exp.build_prompts(), exp.models, "results.nc", top_ps=(0.9, 1.0))  # doctest: +SKIP
    >>> opts = CollectOptions.from_mapping(exp.collect, where="demo [collect]")  # doctest: +SKIP
    >>> ds = collect(exp.build_prompts(), exp.models, options=opts)  # doctest: +SKIP
    >>> bigger = collect(exp2.build_prompts(), exp2.models, "v2.nc", reuse=["results.nc"])  # doctest: +SKIP
    >>> int(bigger.attrs["cells_reused"])  # doctest: +SKIP
    68
    """
    options = _options(options, overrides)
    system, user = _check_prompts(prompts)
    options = options.replace(where="collect()", scale=_scale_of(prompts, options.scale))
    models = _normalise_models(models)
    labels, options = cell_labels(prompts, user, options)  # a format factor, items' own options
    context = Conversations.of(prompts, user)
    if context is not None:
        _check_sequential_backends(models)
        _check_sequential_items(prompts, context)
    plan = Plan(system, user, models, options, parse_shard(shard), labels, context)
    out_path = _check_output(output)
    sources = [(p, True) for p in _check_reuse(reuse, out_path)]
    if out_path is not None and out_path.exists():
        finished = _finished(out_path, plan.fingerprint, overwrite)
        if finished is not None:
            return finished
        sources.append((out_path, False))  # replaced: its cells that still apply are copied
    session = Session(prompts, user, plan, models, options, loader=loader, progress=progress,
                      on_unit=on_unit)  # fmt: skip
    return session.run(out_path, sources, discard=discard_progress)
