"""Resumable, shardable, growable collection runs: prompts Dataset in, results netCDF out.

A run is split into fixed *units* (up to ``chunk_size`` prompts of one model that
share a system prompt). Every cell (one model, condition and item) has a key: the
hash of what determines its numbers (:mod:`xlikert.collect.run.identity`). Before a
model loads, the run looks its cells' keys up in the output's saved progress and
in earlier results files (``reuse=``): a cell found there is copied, not
computed, so a study grows (a model, a factor level, an item) by computing only
its new cells, and a model whose every cell is found is not loaded at all.
Each model with cells to compute is opened through its backend
(:mod:`xlikert.collect.protocol`), scores its units one by one, and is closed
before the next model loads (:mod:`xlikert.collect.run.session`).

Each finished unit is saved in ``<output>.partial/``
(:class:`~xlikert.collect.run.store.PartialStore`), which one run at a time holds
(:mod:`xlikert.collect.run.lock`); rerunning the same command after Ctrl-C, SIGTERM
or ``kill -9`` computes only the rest, in the same units and batches, so the final
file holds the numbers of an uninterrupted run. Saved progress of another
configuration is kept, never deleted without ``discard_progress=True``. The final
netCDF is written to a temporary name and renamed, so no half-written file ever
looks complete; a finished output with the same fingerprint is not recomputed.

:func:`collect` is one sequence of steps, each reading what the one before made:

1. check the call once (:func:`~xlikert.collect.run.checked.check_run`): prompts,
   model entries (each by its backend), options, shard, output, reuse files;
2. plan the units and the fingerprints (:class:`Plan`);
3. key the cells (:func:`run_keys`), and find the files to copy cells from;
4. run: find, compute (:class:`~xlikert.collect.run.session.Session`);
5. assemble the results file and write it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Container, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ...core.errors import CollectionError
from ..options import EXECUTORS, CollectOptions
from ..protocol import Model
from .checked import CheckedRun, check_run, parse_shard
from .cluster import RayExecutor
from .executor import Executor, InProcess
from .identity import RunKeys, key_labels
from .session import Session, write_results_file

__all__ = [
    "Plan",
    "collect",
    "parse_shard",
    "reuse_sources",
    "run_keys",
    "write_results_file",
]

_FORMAT = "xlikert-collect-3"  # 3: token ids stored; vLLM read by the logits processor


# ---------------------------------------------------------------------------- plan
class Plan:
    """The fixed partition of (model, cell) work into units, and the run's fingerprints."""

    def __init__(self, run: CheckedRun):
        options, context = run.options, run.context
        #: The run's options (:attr:`CheckedRun.options`): what every unit is read with.
        self.options = options
        #: The sequential conditions (:class:`~.context.administration.Conversations`), or None.
        self.context = context
        self.sys_flat = [str(s) for s in np.asarray(run.system.values).ravel()]
        self.user_flat = [str(s) for s in np.asarray(run.user.values).ravel()]
        #: Each cell's answer labels (a response format, the item's own options; see
        #: :func:`~xlikert.collect.run.labels.cell_labels`), None: the run's options.
        self.labels = run.labels
        #: Each cell's elicitation level (:class:`~..elicitation.Elicitations`), or None.
        self.elicitations = run.elicitations
        groups = _groups(self.sys_flat, run.labels, context.where if context is not None else {},
                         self.reading_of)  # fmt: skip
        # a conversation (a sequential condition, its cells in the order asked) is one unit
        batteries = context.batteries if context is not None else []
        #: Every model's cells in the order its units take them (a cell's first twin owns it).
        self.order = [j for cells in [*groups, *batteries] for j in cells]
        #: ``(i, n)``: this run computes part i of n (whole units).
        self.shard = run.shard
        #: ``(model index, unit index, cells)`` of every unit this run computes.
        self.units = _shard(_units(len(run.models), groups, batteries, options.chunk_size),
                            run.shard)  # fmt: skip
        #: Every entry as its backend checked it (:func:`~.checked.check_run`).
        self.public = run.checked
        #: Traces per prompt of each model (0: not in reasoning mode).
        self.traces = [int((p.get("reasoning") or {}).get("traces", 0)) for p in self.public]
        opts = _fingerprinted(options, run.labels, batteries)
        if run.elicitations is not None and run.elicitations.used != ["first_token"]:
            opts["elicitation"] = {lv: options.elicitation_settings(lv)
                                   for lv in run.elicitations.used}  # fmt: skip
            if run.elicitations.instructions is not None and "stated" in run.elicitations.used:
                opts["elicitation"]["stated_instructions"] = sorted(
                    {self.options_of(j).stated_instruction for j in range(len(self.user_flat))
                     if self.level_of(j) == "stated"}
                )  # fmt: skip
        self.fingerprint = _hash(run, {**opts, "shard": run.shard})
        #: The same for every shard of one run (and equal to the unsharded run's fingerprint).
        self.run_fingerprint = _hash(run, {**opts, "shard": None})

    def level_of(self, cell: int) -> str:
        """The elicitation level of a cell (``first_token`` without the factor)."""
        return "first_token" if self.elicitations is None else self.elicitations.level(cell)

    def options_of(self, cell: int) -> CollectOptions:
        """The options a cell is read with: the run's, with the cell's own ``stated``
        instruction where the prompts carry one (:meth:`~..elicitation.Elicitations.options_of`)."""
        if self.elicitations is None:
            return self.options
        return self.elicitations.options_of(cell, self.options)

    def reading_of(self, cell: int) -> str:
        """How a cell is read: its level, and for a ``stated`` cell its instruction (a
        unit's cells share it)."""
        level = self.level_of(cell)
        if level != "stated":
            return level
        return f"stated\0{self.options_of(cell).stated_instruction}"

    def labels_of(self, cells: Sequence[int]) -> tuple[str, ...] | None:
        """The answer labels of a unit's cells (they share them)."""
        return self.labels[cells[0]] if self.labels else self.options.answer_labels

    def key_labels(self, cell: int) -> tuple[str, ...]:
        """The answer labels a cell is read with, as its key holds them
        (:func:`~xlikert.collect.run.identity.key_labels`): ``"<score>=<label>"`` for each
        point of its item, then ``"<option>=<label>"`` for each non-substantive option the
        item offers; not the run's ``score`` or ``option`` axis, so a cell keeps its key
        when items on other scales or with other options come or go.

        Examples
        --------
        >>> from xlikert.collect.options import CollectOptions
        >>> opts = CollectOptions(scale=(1, 2, 3), nonsubstantive=("Don't know", "Refused"))
        >>> plan = Plan.__new__(Plan)
        >>> plan.options, plan.labels = opts, [("1", "2", "3", "8", ""), None]
        >>> plan.key_labels(0)
        ('1=1', '2=2', '3=3', "Don't know=8")
        >>> plan.key_labels(1)
        ('1=1', '2=2', '3=3')
        """
        options = self.options
        labels = self.labels[cell] if self.labels else options.answer_labels
        return key_labels(options.known_scale, options.nonsubstantive, labels)

    def replies(self, cell: int) -> tuple[str, ...]:
        """The label of each point of the run's scale a cell is read with (``""`` off its
        item's support; the digits where the prompts carry no labels)."""
        labels = self.labels[cell] if self.labels else self.options.answer_labels
        if not labels:
            return tuple(str(y) for y in self.options.known_scale)
        return tuple(labels[: len(self.options.known_scale)])

    def prompts(self, cells: Sequence[int]) -> list[tuple[str, str]]:
        return [(self.sys_flat[j], self.user_flat[j]) for j in cells]


def _groups(
    sys_flat: Sequence[str], labels: Sequence[Any] | None, sequential: Container[int],
    level: Callable[[int], str] | None = None,
) -> list[list[int]]:  # fmt: skip
    """The isolated cells grouped by system prompt, (with a format factor) answer labels
    and (with an elicitation factor) how the answer is read: a unit's cells share them."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for j, s in enumerate(sys_flat):
        if j not in sequential:
            key: tuple[Any, ...] = (labels[j] if labels else None, s)
            how = "first_token" if level is None else level(j)
            groups.setdefault(key if how == "first_token" else (*key, how), []).append(j)
    return list(groups.values())


def _units(
    n_models: int, groups: Sequence[list[int]], batteries: Sequence[Sequence[int]], size: int
) -> list[tuple[int, int, list[int]]]:
    """Every model's units: each group cut into ``size`` cells, then one unit per
    conversation; ``(model index, unit index, cells)``."""
    units: list[tuple[int, int, list[int]]] = []
    for mi in range(n_models):
        cut = [cells[a : a + size] for cells in groups for a in range(0, len(cells), size)]
        cut += [list(cells) for cells in batteries]
        units += [(mi, ui, cells) for ui, cells in enumerate(cut)]
    return units


def _shard(units: list[Any], shard: tuple[int, int] | None) -> list[Any]:
    """Part i of n of ``units`` (whole units); all of them without a shard."""
    if not shard:
        return units
    i, n = shard
    return units[(len(units) * (i - 1)) // n : (len(units) * i) // n]


def _fingerprinted(
    options: CollectOptions, labels: Sequence[Any] | None, batteries: Sequence[Any]
) -> dict[str, Any]:
    """The run's settings that enter its fingerprint (the shard added by the caller)."""
    opts = {**options.fingerprinted(), "chunk_size": options.chunk_size}
    if labels:  # a response format: the labels of each level
        opts["answer_labels_by_cell"] = sorted({" ".join(x or ()) for x in labels})
    if batteries:  # sequential administration: the conversations and their reading
        opts["sequential"] = {"batteries": batteries, "tol": options.tol,
                              "max_passes": options.max_passes}  # fmt: skip
    return opts


def _hash(run: CheckedRun, options: dict[str, Any]) -> str:
    """A run's fingerprint: its prompts, checked model entries, scale and ``options``."""
    system, user = run.system, run.user
    h = hashlib.sha256()
    payload = {
        "format": _FORMAT,
        "dims": list(user.dims),
        "coords": {d: [str(v) for v in user[d].values] for d in user.dims if d in user.coords},
        "models": run.checked,
        "scale": list(run.options.known_scale),
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
    from ...core.io import open_results

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
    executor: Any = None,
    tokens_per_second: float | dict[str, float] | None = None,
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
        (:mod:`xlikert.collect.run.identity`): a study grows by its new cells only. The
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
    executor : str or Executor, optional
        Where the units are computed (:mod:`xlikert.collect.run.executor`):
        ``"in_process"`` (one model at a time in this process), ``"ray"`` (model
        replicas on a Ray cluster: :class:`~xlikert.collect.run.cluster.RayExecutor`,
        with the options' ``ray_address`` and ``replicas``), or an executor object
        (e.g. ``RayExecutor("local", replicas=2)``); default: the options'
        ``executor``. The results file is the same, but for ``attrs["cluster"]``
        (nodes, replicas, which replica computed which unit).
    tokens_per_second : float or dict of str to float, optional
        The throughput of one replica (one number, or one per model name) at which the
        run's closing summary projects the time of the cells it computes, beside the time
        it spent (:class:`~xlikert.collect.run.tally.RunCost`; printed with ``progress``).
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
        With an ``output``, the file as written, opened lazily (each per-cell variable
        read in blocks when used, its values those of :func:`xlikert.open_results`; no
        file handle held; ``.load()`` it to keep it in memory, and a read after the file
        was written again raises :class:`CollectionError`): the run's memory does not
        grow with its cells. Without one, the Dataset in memory. To write it again, use
        :func:`xlikert.to_netcdf` (a temporary file, then a rename) or another path:
        ``ds.to_netcdf(output)`` over its own file truncates the file before its values
        are read (``.load()`` it first).

    Raises
    ------
    CollectionError
        Bad prompts, models, options or output path, before anything runs; a
        model that cannot be loaded or reached, a full disk (finished units are
        kept); :class:`~xlikert.collect.run.lock.LockHeld` when another run holds the
        output; :class:`~xlikert.collect.run.interrupt.RunInterrupted` on SIGTERM or
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
    run = check_run(prompts, models, output, options=options, overrides=overrides,
                    shard=shard, reuse=reuse)  # fmt: skip
    plan = Plan(run)
    sources = reuse_sources(run, plan, overwrite)
    if isinstance(sources, xr.Dataset):  # this very configuration, finished before
        return sources
    chosen = _make_executor(executor, run.options)
    chosen.prepare(run.models, run.options)  # refuses a model the cluster has no room for
    session = Session(run, plan, run_keys(run, plan), loader=loader, progress=progress,
                      on_unit=on_unit, executor=chosen,
                      tokens_per_second=tokens_per_second)  # fmt: skip
    return session.run(run.output, sources, discard=discard_progress)


def run_keys(run: CheckedRun, plan: Plan) -> RunKeys:
    """The keys of the run's cells (:mod:`~xlikert.collect.run.identity`): each model's
    inputs, the cells' answer labels as the plan reads them, and each sequential cell's
    conversation."""
    battery = plan.context.battery_of if plan.context is not None else None
    level = plan.level_of if plan.elicitations is not None else None
    return RunKeys(run.models, run.options, plan.prompts, plan.key_labels, battery, level,
                   plan.options_of if level is not None else None)  # fmt: skip


def reuse_sources(
    run: CheckedRun, plan: Plan, overwrite: bool
) -> list[tuple[Path, bool]] | xr.Dataset:
    """The results files to copy cells from, each with whether it was named (``reuse=``)
    or is the output being replaced; or the output itself when it is this very
    configuration's, finished."""
    sources = [(p, True) for p in run.reuse]
    out = run.output
    if out is not None and out.exists():
        finished = _finished(out, plan.fingerprint, overwrite)
        if finished is not None:
            return finished
        sources.append((out, False))  # replaced: its cells that still apply are copied
    return sources


def _make_executor(executor: Any, options: CollectOptions) -> Executor:
    """The executor of a run: ``executor`` as given (a name or an :class:`Executor`), else
    the options' (``executor``, ``ray_address``, ``replicas``).

    Raises
    ------
    CollectionError
        An unknown name, or an object that is no executor; Ray not installed.

    Examples
    --------
    >>> _make_executor(None, CollectOptions()).name
    'in_process'
    >>> _make_executor("dask", CollectOptions())
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: collect(): executor must be one of ['in_process', 'ray'] or an Executor (prepare, compute, record), got 'dask'
    """
    if executor is None:
        executor = options.executor
    if isinstance(executor, Executor):
        return executor
    if executor == "in_process":
        return InProcess()
    if executor == "ray":
        return RayExecutor(options.ray_address, replicas=options.replicas)
    raise CollectionError(
        f"collect(): executor must be one of {list(EXECUTORS)} or an Executor (prepare, "
        f"compute, record), got {executor!r}"
    )
