"""One collection run: find the cells already measured, compute the rest, assemble the file.

:func:`~xlikert.collect.collect` checks its inputs once
(:func:`~xlikert.collect.run.checked.check_run`), builds the plan
(:class:`~xlikert.collect.run.runner.Plan`) and the cells' keys
(:class:`~.identity.RunKeys`); a :class:`Session` then

1. takes the output's lock and reads its saved progress (:class:`~.store.PartialStore`);
2. looks every cell's key up in the saved progress and the earlier results files
   (:class:`~.reuse.Reuse`);
3. loads each model that still has cells to compute (one at a time), scores those
   cells unit by unit, saving each finished unit, and stops between saves on
   SIGTERM or SIGINT (:class:`~.interrupt.StopOnSignals`);
4. assembles the results file from the computed and the reused cells, and writes it.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from ..._version import __version__
from ...core.errors import CollectionError, XlikertError
from ...core.io import encode_attrs
from ..context.administration import ITEM_POSITION, context_attrs, score_battery
from ..elicitation import elicitation_attrs, score_elicited
from ..options import CollectOptions
from ..progress import CellProgressFn, bar_postfix
from ..protocol import LabelWalkingModel, Model, backend_module
from ..record import UnitResult, assemble
from ..templates import PLAIN_FORMAT
from .executor import InProcess
from .identity import KEY_FORMAT, RunKeys, numbers_options
from .interrupt import RunInterrupted, StopOnSignals, StopSignal
from .reuse import ProgressSource, ResultsSource, Reuse, RunCells, open_source, shortfall
from .store import PartialStore, as_record, disk_error
from .stream import BLOCK_CELLS, StoredUnit, write_streamed
from .tally import RunCost

if TYPE_CHECKING:
    from .checked import CheckedRun

__all__ = ["Session", "with_labels", "write_results_file"]


def write_results_file(ds: xr.Dataset, path: str | os.PathLike, kept: str = "") -> Path:
    """Write the results file: ``ds`` to netCDF at ``path``, atomically
    (:func:`xlikert.core.io.to_netcdf`, through :func:`~xlikert.core.io.atomic_write`),
    a failure said as a :class:`CollectionError` naming the file and the work ``kept``.

    Raises
    ------
    CollectionError
        When the file cannot be written (naming it and why); nothing is left behind.
    """
    from ...core.io import to_netcdf

    try:
        return to_netcdf(ds, path)
    except OSError as exc:
        raise disk_error(path, "the results file", exc, kept) from exc
    except XlikertError as exc:
        raise CollectionError(f"cannot write output {path}: {exc}") from exc


class Session:
    """The state of one run: its plan, keys, found and computed cells, and model records."""

    def __init__(
        self,
        run: CheckedRun,
        plan: Any,  # a runner.Plan (runner imports this module)
        keys: RunKeys,
        *,
        loader: Callable[..., Model] | None = None,
        progress: bool = True,
        on_unit: Callable[[int, int], None] | None = None,
        executor: Any = None,
        tokens_per_second: float | dict[str, float] | None = None,
    ):
        """``run``: the checked call (:class:`~xlikert.collect.run.checked.CheckedRun`);
        ``plan``: its units (:class:`~xlikert.collect.run.runner.Plan`); ``keys``: its
        cells' keys (:func:`~xlikert.collect.run.runner.run_keys`); ``executor``: where
        the units are computed (:mod:`.executor`; None: in this process);
        ``tokens_per_second``: the throughput of the projection the run's closing summary
        sets beside what it spent (:class:`~.tally.RunCost`)."""
        self.prompts, self.user, self.plan, self.keys = run.prompts, run.user, plan, keys
        self.models, self.options = list(run.models), run.options
        self.loader, self.progress, self.on_unit = loader, progress, on_unit
        self.executor = executor if executor is not None else InProcess()
        #: The projection of the cells to compute, beside what this session spent.
        self.cost = RunCost([m["name"] for m in self.models], tokens_per_second)
        self.reuse = Reuse([])
        self.store: PartialStore | None = None
        #: Units computed by this configuration (this session, or saved by an earlier one).
        self.done: dict[tuple[int, int], UnitResult] = {}
        self.cell_keys: dict[tuple[int, int], str] = {}
        #: A cell -> the earlier cell with the same key (the same prompt): computed once,
        #: copied (None in a shard when that cell is another shard's: the merge copies it).
        self.twins: dict[tuple[int, int], tuple[int, int]] = {}
        self.infos: dict[int, dict[str, Any]] = {}
        self.computed_now = 0
        self.units_done = 0
        #: A results file -> model name -> why its cells were not reused -> how many.
        self.shortfall: dict[str, dict[str, dict[str, int]]] = {}
        #: The run's ``score`` and ``option`` axes (a reused cell is placed on them).
        self.axes: dict[str, list[Any]] = {"score": [int(y) for y in self.options.known_scale],
                     "option": [str(o) for o in self.options.nonsubstantive]}  # fmt: skip

    # ------------------------------------------------------------------ the run
    def run(
        self, output: Path | None, reuse: Sequence[tuple[Path, bool]], *, discard: bool = False
    ) -> xr.Dataset:
        """Collect every cell of the plan; write ``output`` when given.

        ``reuse``: results files to reuse cells from, each with whether it was asked
        for by name (else a file without keys is only a warning). ``discard``: delete
        the saved progress of other configurations first.

        Raises
        ------
        RunInterrupted
            SIGTERM or SIGINT: every finished unit is saved; the message says how to resume.
        """
        finished = False
        if output is not None:
            self.store = PartialStore(output, self.plan.fingerprint, self.description,
                                      axes=self.axes)  # fmt: skip
            for line in self.store.open(discard=discard):
                warnings.warn(line, UserWarning, stacklevel=3)  # run < collect < its caller
        try:
            started = time.perf_counter()
            with StopOnSignals() as stop:
                self.find(reuse)
                self.compute(stop)
                if self.progress and self.cost.projected:
                    print(self.cost.summary(), file=sys.stderr)
                streamed = output is not None
                ds = self.assemble(time.perf_counter() - started, streamed=streamed)
                if output is not None:
                    assert self.store is not None, "an output keeps a store"
                    kept = f"; the finished units in {self.store.path} are kept"
                    with stop.saving(last=True):  # a signal now: the file is complete first
                        ds = write_streamed(ds, output, lambda d, p: write_results_file(d, p, kept))
                        finished = True
        except StopSignal as exc:
            raise RunInterrupted(exc.signum, self._stopped(exc.signum)) from None
        finally:
            if self.store is not None:
                left = self.store.close(finished=finished)
                if left and finished:
                    warnings.warn(left, UserWarning, stacklevel=3)
        return ds

    def description(self) -> dict[str, Any]:
        """This configuration in words, for the progress folder (what changed, later)."""
        user, opts = self.user, self.options
        return {
            "fingerprint": self.plan.fingerprint,
            "models": {
                m["name"]: (self.keys.identity(mi) or {}).get("model", m)
                for mi, m in enumerate(self.models)
            },
            "factors": {
                str(d): [str(v) for v in user[d].values]
                for d in user.dims
                if d != "item" and d in user.coords
            },
            "items": [str(v) for v in user["item"].values] if "item" in user.coords else [],
            "options": {
                "scale": list(opts.known_scale),
                **numbers_options(opts),
                "chunk_size": opts.chunk_size,
                "prefix_cache": opts.prefix_cache,
            },
        }

    def _stopped(self, signum: int) -> str:
        import signal

        name = signal.Signals(signum).name
        total = sum(len(c) for _, _, c in self.plan.units)
        have = len(self.reuse.found) + sum(len(r.placed_cells) for r in self.done.values())
        where = (
            f"{self.store.saved} finished unit(s) are saved in {self.store.path} ({have} of "
            f"{total} cells done); rerun the same command to resume: it computes only the rest"
            if self.store is not None
            else "nothing was saved (no output file): give an output to make a run resumable"
        )
        return f"stopped by {name} after saving every finished unit: {where}"

    # ------------------------------------------------------------------ finding cells
    def find(self, paths: Sequence[tuple[Path, bool]]) -> None:
        """Resume this configuration's saved units, key every cell, pair the cells whose
        prompts are the same (:attr:`twins`) and find the cells already measured (other
        configurations' progress, earlier results files)."""
        sources: list[Any] = []
        if self.store is not None:
            for (mi, ui), (r, saved) in self.store.own_units(self.plan.units).items():
                self.done[(mi, ui)] = StoredUnit.of(r, self.store.unit_file(mi, ui))
                if saved is not None:
                    self.cell_keys.update(
                        zip(((mi, int(j)) for j in r.placed_cells), saved, strict=True)
                    )
            sources.append(ProgressSource(self.store))
        sources += [s for p, named in paths if (s := open_source(p, required=named)) is not None]
        self.reuse = Reuse(sources)
        own = {(mi, int(j)) for (mi, _), r in self.done.items() for j in r.placed_cells}
        planned = {(mi, j) for mi, _, c in self.plan.units for j in c}
        predicted: dict[str, dict[int, str]] = {}
        for mi in sorted({mi for mi, _, _ in self.plan.units}):
            self.keys.check_spelled(mi, {self.plan.labels_of(c) for m, _, c in self.plan.units
                                         if m == mi})  # fmt: skip
            keys = self.keys.predict(mi, self.plan.order)  # the whole plan's: twins across shards
            predicted[self.models[mi]["name"]] = keys
            own -= self._drop_stale(mi, keys)
            first: dict[str, int] = {}
            for j in self.plan.order:
                if keys.get(j) and (mi, j) in planned:
                    self.cell_keys.setdefault((mi, j), keys[j])
                    if keys[j] in first:
                        self.twins[(mi, j)] = (mi, first[keys[j]])
                first.setdefault(keys.get(j) or f"-{j}", j)
            if self.reuse:  # a conversation's cells only from this run's own saved units
                seq = self.plan.context.where if self.plan.context is not None else {}
                self.reuse.lookup(mi, {j: k for j, k in keys.items() if (mi, j) in planned
                                       and (mi, j) not in own and j not in seq})  # fmt: skip
        self._find_shortfall(predicted)
        self._say_found()

    def _find_shortfall(self, predicted: dict[str, dict[int, str]]) -> None:
        """Why each results file gave fewer cells than it holds, per model (:func:`shortfall`);
        a file keyed by an earlier rule is a warning (its cells are computed again)."""
        run = RunCells(predicted, {m["name"]: self.keys.identity(mi)
                                   for mi, m in enumerate(self.models)},
                       self.user, self.plan.key_labels)  # fmt: skip
        for src in self.reuse.sources:
            if isinstance(src, ResultsSource) and (why := shortfall(src, run)):
                self.shortfall[src.name] = why
                stale = {n: c for n, r in why.items() for w, c in r.items()
                         if w.startswith("keyed by an earlier rule")}  # fmt: skip
                if stale:
                    warnings.warn(
                        f"{src.name} was keyed by an earlier key rule than today's "
                        f"({KEY_FORMAT}: a cell's key holds its own item's labels, not the "
                        f"run's score axis): its {sum(stale.values())} cell(s) of model(s) "
                        f"{sorted(stale)} cannot be matched and are computed again",
                        UserWarning, stacklevel=5,
                    )  # fmt: skip

    def _drop_stale(self, mi: int, keys: dict[int, str]) -> set[tuple[int, int]]:
        """Forget this configuration's saved units of model ``mi`` whose keys are not the
        cells' keys now (the model's files changed in place): they are computed again."""

        def changed(j: int) -> bool:
            return self.cell_keys.get((mi, j), keys.get(j)) != keys.get(j)

        stale = [
            u
            for u, r in self.done.items()
            if u[0] == mi and any(changed(int(j)) for j in r.placed_cells)
        ]
        cells = {(mi, int(j)) for u in stale for j in self.done[u].placed_cells}
        for u in stale:
            del self.done[u]
        for c in cells:
            self.cell_keys.pop(c, None)
        if stale:
            warnings.warn(
                f"model {self.models[mi]['name']!r}: {len(stale)} saved unit(s) were measured "
                "with another model identity (its files changed since?): computed again",
                UserWarning, stacklevel=5,
            )  # fmt: skip
        return cells

    def _say_found(self) -> None:
        found = self.reuse.describe()
        own = sum(len(r.placed_cells) for r in self.done.values())
        total = sum(len(c) for _, _, c in self.plan.units)
        reused = sum(v["cells"] for v in found.values())
        twins = sum(1 for c in self.twins if c not in self.reuse.found)
        if self.progress and (own or reused or twins):
            parts = [f"{own} saved by this run before"] * bool(own)
            parts += [f"{v['cells']} reused from {k}" for k, v in found.items()]
            parts += [f"{twins} the same as another cell (copied)"] * bool(twins)
            print(f"collect: {total} cells: {'; '.join(parts)}; "
                  f"{total - own - reused - twins} to compute", file=sys.stderr)  # fmt: skip
        for path, models in self.shortfall.items() if self.progress else ():
            for name, why in models.items():
                said = "; ".join(f"{n} {w}" for w, n in why.items())
                print(f"collect: not reused from {path}, model {name!r}: {said}",
                      file=sys.stderr)  # fmt: skip

    # ------------------------------------------------------------------ computing cells
    def todo(self, mi: int) -> list[tuple[int, list[int]]]:
        """The units of model ``mi`` with cells still to compute, and those cells."""
        out = []
        for m, ui, cells in self.plan.units:
            if m != mi or (mi, ui) in self.done:
                continue
            left = [
                j for j in cells if (mi, j) not in self.reuse.found and (mi, j) not in self.twins
            ]
            if left:
                out.append((ui, left))
        return out

    def compute(self, stop: StopOnSignals) -> None:
        """Load each model with cells to compute, one at a time, and score them."""
        from tqdm.auto import tqdm

        total = sum(len(c) for _, _, c in self.plan.units)
        have = total - sum(len(c) for mi in range(len(self.models)) for _, c in self.todo(mi))
        self.units_done = len(self.plan.units) - sum(len(self.todo(mi))
                                                     for mi in range(len(self.models)))  # fmt: skip
        bar = tqdm(total=total, unit="prompt", desc="collect", disable=not self.progress,
                   file=sys.stderr, initial=have, dynamic_ncols=True)  # fmt: skip
        work = []
        for mi, spec in enumerate(self.models):
            todo = self.todo(mi)
            mine = any(m == mi for m, _, _ in self.plan.units)
            if todo or (mine and not self._known_info(mi)):
                work.append((mi, spec, todo))
            if todo and self.progress:  # the projection is read only by the closing summary
                self.cost.project(self.plan, self.options, self.keys, mi, [c for _, c in todo])
        try:
            self.executor.compute(self, work, stop, bar)
        finally:
            bar.close()

    def _known_info(self, mi: int) -> bool:
        """Whether a record of model ``mi`` is at hand without loading it (then kept)."""
        digest = self.keys.digest(mi)
        info = None
        if self.store is not None:
            info = self.store.load_model(digest)
        if info is None:
            info = self.reuse.info(mi)
            if info is not None:
                info = {**info, "loaded": "no: every cell reused (this record is the source's)"}
        if info is not None:
            self.infos[mi] = info
        return info is not None

    def _open(self, mi: int, spec: dict[str, Any], cells: Sequence[int]) -> Model:
        """Load model ``mi`` (a custom loader, else its backend's ``open`` with what the
        run's keys resolved for it: its weights are hashed and its tokenizer loaded once)."""
        probe = self.plan.prompts([cells[0]])[0]
        opened = self.options.replace(answer_labels=self.plan.labels_of(cells))
        if self.loader is not None:
            return self.loader(spec, opened, probe)
        inputs = self.keys.inputs(mi)
        prepared = None if inputs is None else inputs.prepared
        return backend_module(spec).open(spec, opened, probe, prepared=prepared)

    def compute_model(self, mi, spec, todo, stop: StopOnSignals, bar) -> None:
        """Load model ``mi`` here, score its units ``todo`` in order, save each."""
        plan, options = self.plan, self.options
        bar.set_description(f"load {spec['name']}")
        first = todo[0][1] if todo else next(c for m, _, c in plan.units if m == mi)
        model = self._open(mi, spec, first)
        try:
            self.check_mode(mi, spec, model)
            if hasattr(model, "relabel"):  # every label set's rule before any unit is read:
                # a label the model cannot read is refused first (each rule is kept)
                sets = {plan.labels_of(cells): cells for _, cells in todo}
                for labels, cells in sets.items():
                    model = with_labels(model, labels, spec, self.loader, options,
                                         plan.prompts(cells)[0])  # fmt: skip
            bar.set_description(f"collect {spec['name']}")
            for ui, cells in todo:
                t0 = time.perf_counter()
                model = with_labels(model, plan.labels_of(cells), spec, self.loader,
                                     options, plan.prompts(cells)[0])  # fmt: skip
                r = self.score_unit(model, cells, bar_postfix(bar))
                self.save_unit(mi, ui, cells, r, stop, bar, seconds=time.perf_counter() - t0)
            self.finish_model(mi, model.provenance())
        finally:
            model.close()
            del model

    def save_unit(self, mi: int, ui: int, cells: list[int], r: UnitResult,
                  stop: StopOnSignals, bar: Any, *, seconds: float = 0.0) -> None:  # fmt: skip
        """Check and save a finished unit of model ``mi`` (wherever it was computed;
        ``seconds``: its scoring took, counted in :attr:`cost`)."""
        r.check(len(cells), {**self.options.sizes, "trace": self.plan.traces[mi]})
        r.cells = np.asarray(cells, dtype=np.int64)
        keys = self.keys.of_result(mi, r)
        self.cost.spend(mi, r.data, seconds)
        with stop.saving():
            if self.store is not None:  # kept on disk, not in memory
                self.store.save_unit(mi, ui, r, keys, self.keys.digest(mi))
                r = StoredUnit.of(r, self.store.unit_file(mi, ui))
            self.done[(mi, ui)] = r
            self.cell_keys.update(((mi, j), k) for j, k in zip(cells, keys, strict=True))
            self.computed_now += len(cells)
            self.units_done += 1
        bar.update(len(cells))
        if self.on_unit is not None:
            self.on_unit(self.units_done, len(self.plan.units))

    def finish_model(self, mi: int, provenance: dict[str, Any]) -> None:
        """Keep the record of model ``mi`` once its units are done: as a resumed run reads
        it back from the store (sorted keys, JSON values), so an interrupted run writes the
        same attrs as an uninterrupted one."""
        self.infos[mi] = as_record(provenance)
        if self.store is not None:
            self.store.save_model(self.keys.digest(mi), self.infos[mi])

    def score_unit(
        self, model: Model, cells: list[int], progress: CellProgressFn | None = None
    ) -> UnitResult:
        """Score one unit: its prompts, or its conversation (a sequential condition);
        a long reader (own words, a conversation) tells ``progress`` how far it is."""
        plan, options = self.plan, self.options
        level = plan.level_of(cells[0])
        if level != "first_token":
            # stated: the label of each point of the run's scale ("" off the item's support)
            labels = plan.replies(cells[0]) if level == "stated" else None
            return score_elicited(  # a unit's cells share their stated instruction
                model,
                plan.prompts(cells),
                level,
                plan.options_of(cells[0]),
                labels,
                progress=progress,
            )
        if plan.context is None or plan.context.battery_of(cells[0]) is None:
            r = _score_walking(model, plan.prompts(cells), progress)
            if plan.elicitations is not None:  # the file has the elicitation variables
                r = _with_elicitation_fill(r)
            return r
        items = np.asarray(self.user["item"].values).astype(str)
        where = [j % self.user.sizes["item"] for j in cells]
        return score_battery(
            model, plan.prompts(cells), [str(items[k]) for k in where],
            plan.replies(cells[0]), options.known_scale, options.sizes,
            tol=options.tol, max_passes=options.max_passes, n_items=len(items), item_index=where,
            answers=[plan.labels[c] for c in cells] if plan.labels else None,
            options=options.nonsubstantive, progress=progress,
        )  # fmt: skip

    def check_mode(self, mi: int, spec: dict[str, Any], model: Model) -> None:
        """A model must measure in the mode its reused cells were measured in."""
        modes = {r.mode: "saved progress" for (m, _), r in self.done.items() if m == mi}
        modes.update(self.reuse.modes(mi))
        before = sorted(set(modes) - {model.mode})
        if before:
            raise CollectionError(
                f"model {spec['name']!r}: cells of {modes[before[0]]} were collected in mode "
                f"{before} but the engine now gives mode {model.mode!r}; set mode = "
                f"{before[0]!r} in the model entry, or start again without them (move the "
                ".partial folder aside, or drop --reuse)"
            )

    # ------------------------------------------------------------------ the file
    def assemble(self, seconds: float = 0.0, *, streamed: bool = False) -> xr.Dataset:
        """The results Dataset of every planned cell, computed and reused, with its attrs
        (``seconds``: this session's collection time); ``streamed``: its variables dask
        arrays read from the saved units block by block (:mod:`.stream`)."""
        plan, options = self.plan, self.options
        units = [(mi, r) for (mi, _), r in sorted(self.done.items())]
        computed = sum(len(r.placed_cells) for _, r in units)
        elicited = plan.elicitations is not None
        units += self.reuse.units(plan.traces, options.sizes, elicitation=elicited, axes=self.axes)
        twins = self._twin_units(units)
        units += twins
        ncell = int(np.prod(self.user.shape))
        keys = np.full(len(self.models) * ncell, "", dtype=object)
        origin = np.full(len(self.models) * ncell, "", dtype=object)
        for (mi, j), k in self.cell_keys.items():
            keys[mi * ncell + j] = k
        for mi, j in self.reuse.found:
            origin[mi * ncell + j] = self.reuse.label(mi, j)
        for mi in self.infos:
            self.infos[mi] = {**self.infos[mi], "cell_identity": self.keys.identity(mi)}
        ds = assemble(
            self.prompts, self.user, [m["name"] for m in self.models],
            {**options.sizes, "trace": max(plan.traces)}, options.coords, units, self.infos,
            shard=plan.shard, cells={"cell_key": keys, "reused_from": origin},
            context=plan.context is not None, elicitation=elicited,
            block_cells=BLOCK_CELLS if streamed else None,
        )  # fmt: skip
        if elicited:
            ds.attrs.update(elicitation_attrs(options, plan.elicitations))
        if plan.context is not None:
            ds.attrs.update(context_attrs(options))
            if ITEM_POSITION in self.prompts:  # each item-order level's positions
                ds[ITEM_POSITION] = self.prompts[ITEM_POSITION].astype(np.int64)
        reused = int(sum(1 for v in origin if v))
        total = int(sum(len(c) for _, _, c in plan.units))
        shard = f", shard {plan.shard[0]}/{plan.shard[1]}" if plan.shard else ""
        ds.attrs.update(
            plain_prompt_format=PLAIN_FORMAT,
            xlikert_fingerprint=plan.fingerprint,
            xlikert_run_fingerprint=plan.run_fingerprint,
            history=(
                f"{ds.attrs['date_created']}: xlikert {__version__} collect ({len(self.models)} "
                f"model(s), {total} prompt(s){shard})"
            ),
            collection_seconds_last_session=round(seconds, 3),
            cells_computed=computed,
            cells_copied=sum(len(r.placed_cells) for _, r in twins),
            cells_reused=reused,
            reuse_sources=self._sources(),
        )
        cluster = self.executor.record()
        if cluster is not None:  # where each unit was computed (not the numbers)
            ds.attrs["cluster"] = cluster
        if max(plan.traces):
            ds.attrs["reasoning_models"] = [
                m["name"] for m, t in zip(self.models, plan.traces, strict=True) if t
            ]
        for name in ("answer_label", "score_label", "option_label"):  # labels of scores, options
            if name in self.prompts:
                ds[name] = self.prompts[name].astype(str)
        return encode_attrs(ds)  # netCDF-ready as it stands: ds.to_netcdf works

    def _sources(self) -> dict[str, dict[str, Any]]:
        """Each source that gave cells (how many), and each results file that gave fewer than
        it holds, with why per model (``not_reused``: model -> reason -> cells)."""
        out = self.reuse.describe()
        for src in self.reuse.sources:
            if src.name in self.shortfall:
                entry = out.setdefault(src.name, {**src.describe(), "cells": 0})
                entry["not_reused"] = self.shortfall[src.name]
        return out

    def _twin_units(self, units: list[tuple[int, UnitResult]]) -> list[tuple[int, UnitResult]]:
        """Copies of the cells whose twin (the earlier cell of the same key) ``units`` hold."""
        where = {(mi, int(j)): (u, row) for u, (mi, r) in enumerate(units)
                 for row, j in enumerate(r.placed_cells)}  # fmt: skip
        groups: dict[int, list[tuple[int, int]]] = {}
        for (mi, j), twin in self.twins.items():
            if (mi, j) not in where and twin in where:
                u, row = where[twin]
                groups.setdefault(u, []).append((j, row))
        out = []
        for u, pairs in groups.items():
            mi, r = units[u]
            rows = [row for _, row in pairs]
            data = {k: np.asarray(v)[rows] for k, v in r.data.items()}
            out.append((mi, UnitResult(data, r.mode, np.asarray([j for j, _ in pairs]))))
        return out


def _with_elicitation_fill(r: UnitResult) -> UnitResult:
    """A first-token unit of a run with an elicitation factor: its elicitation variables at
    their fill values (saved with the unit, so a resumed run holds the same)."""
    from ...core.schema import ELICITATION_VARIABLES

    n = len(r.data["pmf"])
    for name, var in ELICITATION_VARIABLES.items():
        r.data.setdefault(name, var.full((n,)))
    return r


def with_labels(model, labels, spec, loader, options: CollectOptions, probe) -> Model:
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


def _score_walking(
    model: Model, prompts: list[tuple[str, str]], progress: CellProgressFn | None
) -> UnitResult:
    """``model.score(prompts)``; a model that walks word labels tells ``progress`` how far
    each prompt's walk is while it reads (:class:`~xlikert.collect.protocol.LabelWalkingModel`)."""
    if not isinstance(model, LabelWalkingModel):
        return model.score(prompts)
    model.walk_progress = progress
    try:
        return model.score(prompts)
    finally:
        model.walk_progress = None
