"""The Ray executor: a run's units computed by model replicas on a Ray cluster.

Each replica is a Ray actor (:class:`Replica`) that loads one model once and scores
the units it is handed, as :class:`~.session.Session` scores them in one process.
The driver (the process that called :func:`~xlikert.collect.collect`) hands each
model's units out in batches to whichever of its replicas is free, the costliest first
(:func:`_unit_cost`), so a fast node takes more of them; a batch is sized to about
``batch_seconds`` of work once the model's speed is known (:class:`_Pace`), and no
larger than a share of what is left (so the replicas end together). The replica sends
each unit back as soon as it is scored (a Ray streaming generator), and the driver
saves it through the run's unit store
(:meth:`~.session.Session.save_unit`). Lock, resume, reuse, keys and the final file
are therefore the single-process run's; the file adds only ``attrs["cluster"]``: the
nodes, the replicas and which replica computed which unit.

Resources: a replica asks for the GPUs its model entry needs (vLLM: its
``tensor_parallel_size`` times ``pipeline_parallel_size``; transformers: one on a
``cuda`` device, or where the cluster has GPUs and the entry does not say ``cpu``) and
``cpus`` CPUs (its torch threads). A model whose replica fits on no node is refused
by name before anything loads. Replicas of several models run at once where the
cluster has room; a model's replicas are ended when its units are done, which makes
room for the next model's.

Faults: a replica (or node) that dies loses only the units of its batch not yet sent
back, which go back to the front of the queue and to another replica (a new one is
started in its place, at most ``max_failures`` times per model); finished units are saved as they arrive,
so they are never computed twice, and a driver killed with ``kill -9`` resumes from
them when the command is run again, as a single-process run does.

The model's files must be found at the same path on every node (a shared file system
or the Hugging Face cache on each node).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ...core.dims import MODEL_DIM
from ...core.errors import CollectionError, XlikertError
from ..options import CollectOptions
from ..protocol import backend_module

__all__ = ["RayExecutor", "Replica", "UnitWork"]

#: The message when Ray is missing.
NO_RAY = (
    "the Ray executor needs Ray in this environment: pip install 'xlikert[ray]' "
    "(or pip install 'ray[default]'), on the driver and on every node of the cluster"
)


def _import_ray() -> Any:
    """The ``ray`` module.

    Raises
    ------
    CollectionError
        Ray is not installed, naming the extra that installs it.
    """
    try:
        import ray
    except ImportError as exc:
        raise CollectionError(NO_RAY) from exc
    return ray


def _replica_resources(spec: dict[str, Any], options: CollectOptions, *, cpus: int,
                      cluster_gpus: float) -> dict[str, float]:  # fmt: skip
    """The resources one replica of a model entry asks for: ``{"CPU": .., "GPU": ..}``.

    Examples
    --------
    >>> opts = CollectOptions()
    >>> _replica_resources({"name": "m", "backend": "vllm", "tensor_parallel_size": 4}, opts,
    ...                   cpus=1, cluster_gpus=8)
    {'CPU': 1.0, 'GPU': 4.0}
    >>> _replica_resources({"name": "m"}, opts, cpus=2, cluster_gpus=0)
    {'CPU': 2.0, 'GPU': 0.0}
    >>> _replica_resources({"name": "m", "device": "cuda"}, opts, cpus=1, cluster_gpus=0)
    {'CPU': 1.0, 'GPU': 1.0}
    """
    backend = spec.get("backend", "transformers")
    if backend == "vllm":
        gpus = int(spec.get("tensor_parallel_size", 1)) * int(spec.get("pipeline_parallel_size", 1))
    elif backend == "openai":  # the server computes: the replica only sends requests
        gpus = 0
    else:
        device = str(spec.get("device", options.device) or "auto")
        gpus = 1 if device.startswith("cuda") or (device == "auto" and cluster_gpus > 0) else 0
    return {"CPU": float(cpus), "GPU": float(gpus)}


def _unit_cost(plan: Any, options: CollectOptions, cells: Sequence[int]) -> tuple[int, int]:
    """A unit's cost where it is known before it runs: the upper bound of its forward
    passes (one per cell read at the first token or after a prefix; the reply cap per
    ``greedy`` cell; ``own_words_max_passes`` per ``own_words`` cell; ``max_passes`` per
    conversation), then its prompts' characters. The costliest units go first."""
    level = plan.level_of(cells[0])
    if plan.context is not None and plan.context.battery_of(cells[0]) is not None:
        passes = options.max_passes
    elif level == "greedy":
        passes = options.reply_tokens * len(cells)
    elif level == "own_words":
        passes = options.own_words_max_passes * len(cells)
    else:
        passes = len(cells)
    return passes, sum(len(s) + len(u) for s, u in plan.prompts(cells))


def _unit_weight(cost: tuple[int, int], cells: int) -> float:
    """A unit's work in one number, to size batches by (:class:`_Pace` learns its
    seconds): its prompts' characters times the passes per cell.

    Examples
    --------
    >>> _unit_weight((4, 800), 4), _unit_weight((48, 800), 4)  # 4 first-token cells; own words
    (800.0, 9600.0)
    """
    passes, chars = cost
    return float(max(chars, 1)) * passes / max(cells, 1)


@dataclasses.dataclass
class UnitWork:
    """What every replica needs to score a unit as the session does (one copy in Ray's
    object store): the plan, the prompts' ``user`` texts, the options, the models'
    entries and resolved files, and a custom loader (None: the backends' ``open``)."""

    plan: Any
    user: Any
    options: CollectOptions
    models: list[dict[str, Any]]
    prepared: list[Any]
    loader: Callable[..., Any] | None = None

    def score_unit(self, model: Any, cells: list[int]) -> Any:
        """Score one unit as :meth:`~.session.Session.score_unit` does (the same code)."""
        from .session import Session

        return Session.score_unit(self, model, cells)  # type: ignore[arg-type]


class Replica:
    """One model loaded on a node of the cluster (a Ray actor; :meth:`RayExecutor.compute`
    makes it one with the model's resources)."""

    def __init__(self, threads: int):
        if threads:
            try:
                import torch

                torch.set_num_threads(int(threads))
            except ImportError:
                pass
        self.work: UnitWork | None = None
        self.model: Any = None
        self.mi = -1

    def where(self) -> dict[str, Any]:
        """This replica's process and node."""
        import ray

        ctx = ray.get_runtime_context()
        return {"pid": os.getpid(), "node": ctx.get_node_id(),
                "host": ray.util.get_node_ip_address()}  # fmt: skip

    def load(self, work: UnitWork, mi: int, label_sets: list[list[int]]) -> dict[str, Any]:
        """Load model ``mi`` with the labels of ``label_sets[0]``'s cells, then check that it
        reads every other label set (as the session does before a unit is read)."""
        from .session import with_labels

        self.work, self.mi = work, mi
        plan, spec, options = work.plan, work.models[mi], work.options
        first = label_sets[0]
        probe = plan.prompts([first[0]])[0]
        opened = options.replace(answer_labels=plan.labels_of(first))
        if work.loader is not None:
            self.model = work.loader(spec, opened, probe)
        else:
            self.model = backend_module(spec).open(spec, opened, probe,
                                                   prepared=work.prepared[mi])  # fmt: skip
        if hasattr(self.model, "relabel"):
            for cells in label_sets:
                self.model = with_labels(self.model, plan.labels_of(cells), spec, work.loader,
                                          options, plan.prompts(cells)[0])  # fmt: skip
        return {"mode": self.model.mode, **self.where()}

    def score_batch(self, units: list[tuple[int, list[int]]]) -> Any:
        """Score a batch of units of the loaded model in turn, yielding each as soon as it
        is scored: ``(unit index, its UnitResult, seconds it took)`` (a Ray streaming
        generator: the driver saves a unit while the next is scored, and a replica that
        dies loses only the units not yet yielded)."""
        from .session import with_labels

        work = self.work
        assert work is not None, "load() first"
        plan = work.plan
        for ui, cells in units:
            t0 = time.perf_counter()
            self.model = with_labels(self.model, plan.labels_of(cells), work.models[self.mi],
                                      work.loader, work.options, plan.prompts(cells)[0])  # fmt: skip
            r = work.score_unit(self.model, cells)
            yield ui, r, time.perf_counter() - t0

    def provenance(self) -> dict[str, Any]:
        """The loaded model's provenance (as the session records it)."""
        return self.model.provenance()

    def close(self) -> None:
        """Close the model (its memory freed before the actor ends)."""
        if self.model is not None:
            self.model.close()
            self.model = None


@dataclasses.dataclass
class _Rep:
    """The driver's view of one replica."""

    id: str
    mi: int
    actor: Any
    where: dict[str, Any] = dataclasses.field(default_factory=dict)
    units: int = 0
    cells: int = 0
    ended: str = ""
    #: The units of the batch it was handed and has not sent back yet, in order.
    held: deque = dataclasses.field(default_factory=deque)


class RayExecutor:
    """Compute a run's units on a Ray cluster (see the module's text).

    Parameters
    ----------
    address : str, default "auto"
        ``"auto"``: the cluster running here (``ray start``); ``"local"``: one started on
        this machine for the run (and stopped after it); ``host:port``: a head's address.
    replicas : int, optional
        Replicas of each model; default: as many as the cluster has room for, at most
        one per unit of the model.
    cpus : int, default 1
        CPUs per replica (and its torch threads).
    max_failures : int, default 3
        Replicas of one model that may die (each unit they held is computed elsewhere)
        before the run stops with a :class:`CollectionError` (finished units are kept).
    batch_seconds : float, default 1.0
        The work handed to a replica in one call, in seconds once the model's speed is
        known (the first batch of each model is one unit): each call costs a round trip
        through the cluster, which a batch of a second or more makes small beside it
        (0: one unit per call).

    Examples
    --------
    >>> RayExecutor("local", replicas=2).name
    'ray'
    """

    name = "ray"

    def __init__(self, address: str = "auto", *, replicas: int | None = None, cpus: int = 1,
                 max_failures: int = 3, batch_seconds: float = 1.0):  # fmt: skip
        if replicas is not None and not (isinstance(replicas, int) and replicas >= 1):
            raise CollectionError(
                f"RayExecutor: replicas must be an integer >= 1, got {replicas!r}"
            )
        if not (isinstance(cpus, int) and cpus >= 1):
            raise CollectionError(f"RayExecutor: cpus must be an integer >= 1, got {cpus!r}")
        self.address, self.replicas, self.cpus = str(address), replicas, cpus
        self.max_failures = int(max_failures)
        if not (isinstance(batch_seconds, int | float) and batch_seconds >= 0):
            raise CollectionError(
                f"RayExecutor: batch_seconds must be a number >= 0, got {batch_seconds!r}"
            )
        self.batch_seconds = float(batch_seconds)
        self.ray: Any = None
        self._started = False
        self._nodes: list[dict[str, Any]] = []
        self._needs: list[dict[str, float]] = []
        self._reps: list[_Rep] = []
        self._unit_of: dict[tuple[int, int], str] = {}
        self._names: list[str] = []
        #: Seconds: ``connect`` (to the cluster), ``first_load`` (from the start of the
        #: units to the first replica loaded), ``units`` (from the start of the units to
        #: the last saved), ``save`` (the driver saving units), ``saves`` (their number),
        #: ``batches`` (the calls that handed units out), ``scored`` (the seconds the
        #: replicas took to score the units, as each replica timed its own), ``close``
        #: (ending the replicas and leaving the cluster).
        self.timing: dict[str, float] = {}

    # ------------------------------------------------------------------ before anything loads
    def prepare(self, models: Sequence[dict[str, Any]], options: CollectOptions) -> None:
        """Connect to the cluster and refuse, by name, a model whose replica fits no node.

        Raises
        ------
        CollectionError
            Ray not installed; the cluster cannot be reached; a model asks for more than
            the largest node has.
        """
        ray = self.ray = _import_ray()
        self._reps, self._unit_of, self.timing = [], {}, {}  # one run's record
        t0 = time.perf_counter()
        self._connect(ray)
        self.timing["connect"] = round(time.perf_counter() - t0, 3)
        try:
            self._check_room(ray, models, options)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Disconnect from the cluster (and stop it, where this run started it)."""
        if self._started:
            self.ray.shutdown()
            self._started = False

    def _check_room(self, ray: Any, models: Sequence[dict[str, Any]],
                    options: CollectOptions) -> None:  # fmt: skip
        self._nodes = [n for n in ray.nodes() if n.get("Alive")]
        gpus = sum(float(n["Resources"].get("GPU", 0)) for n in self._nodes)
        self._names = [str(m["name"]) for m in models]
        self._needs = [_replica_resources(m, options, cpus=self.cpus, cluster_gpus=gpus)
                       for m in models]  # fmt: skip
        for spec, need in zip(models, self._needs, strict=True):
            if not self._fits(need):
                raise CollectionError(self._no_room(spec, need))
            if need["GPU"] and not _has_gpu_here() and _auto_dtype(spec, options):
                raise CollectionError(
                    f"model {spec['name']!r}: its replicas load on GPUs but this driver has "
                    "none, and dtype 'auto' resolves on the machine that loads (a cell's key "
                    "holds it): set dtype (bfloat16, float16, float32) in the model entry or "
                    "in [collect]"
                )

    def _connect(self, ray: Any) -> None:
        """Join the cluster (or start one with ``local``), once per process."""
        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False}
        try:
            if self.address == "local":
                ray.init(**kwargs)
            else:
                ray.init(address=self.address, log_to_driver=False, **_loopback_node(self.address))
        except Exception as exc:  # ConnectionError, ValueError, ...: named with the address
            raise CollectionError(
                f"cannot reach the Ray cluster at {self.address!r}: {exc}; start one with "
                "`ray start --head` (then --ray auto), or use --ray local"
            ) from exc
        self._started = True

    def _fits(self, need: dict[str, float]) -> bool:
        return any(all(float(n["Resources"].get(k, 0)) >= v for k, v in need.items() if v)
                   for n in self._nodes)  # fmt: skip

    def _no_room(self, spec: dict[str, Any], need: dict[str, float]) -> str:
        best = {k: max((float(n["Resources"].get(k, 0)) for n in self._nodes), default=0.0)
                for k in need}  # fmt: skip
        why = ("tensor_parallel_size x pipeline_parallel_size" if spec.get("backend") == "vllm"
               else "its device" if need["GPU"] else "cpus per replica")  # fmt: skip
        return (
            f"model {spec['name']!r} asks for {need['GPU']:g} GPU(s) and {need['CPU']:g} CPU(s) "
            f"per replica ({why}); the largest node of the Ray cluster at {self.address!r} "
            f"({len(self._nodes)} node(s)) has {best['GPU']:g} GPU(s) and {best['CPU']:g} "
            "CPU(s): add nodes with room, lower the model's parallel size, or run it elsewhere"
        )

    def _capacity(self, need: dict[str, float]) -> int:
        """How many replicas of ``need`` the cluster holds at once."""
        total = 0
        for n in self._nodes:
            fit = [float(n["Resources"].get(k, 0)) // v for k, v in need.items() if v]
            total += int(min(fit)) if fit else 1
        return max(total, 1)

    # ------------------------------------------------------------------ the run
    def compute(self, session: Any, work: Sequence[Any], stop: Any, bar: Any) -> None:
        """Start replicas, hand the units out, save each finished one through ``session``."""
        ray = self.ray
        if ray is None:
            self.prepare(session.models, session.options)
            ray = self.ray
        inputs = [session.keys.inputs(mi) for mi in range(len(session.models))]
        unit = UnitWork(session.plan, session.user, session.options, list(session.models),
                        [_portable(i.prepared) if i is not None else None for i in inputs],
                        session.loader)  # fmt: skip
        ref = ray.put(unit)
        queues = {mi: deque(sorted(todo, key=lambda u: _unit_cost(session.plan, session.options,
                                                                 u[1]), reverse=True))
                  for mi, _, todo in work}  # fmt: skip
        bar.set_description(f"collect on ray ({len(self._nodes)} node(s))")
        try:
            _Dispatch(self, session, ref, queues, stop, bar).run()
        finally:
            t0 = time.perf_counter()
            for rep in self._reps:
                if not rep.ended:
                    rep.ended = "stopped"
                ray.kill(rep.actor, no_restart=True)
            self.close()
            self.timing["close"] = round(time.perf_counter() - t0, 3)

    def start(self, mi: int, ref: Any, label_sets: list[list[int]]) -> tuple[_Rep, Any]:
        """A new replica of model ``mi``, and the reference of its load."""
        ray, need = self.ray, self._needs[mi]
        n = sum(1 for r in self._reps if r.mi == mi) + 1
        actor = ray.remote(Replica).options(num_cpus=need["CPU"], num_gpus=need["GPU"],
                                            max_restarts=0).remote(self.cpus)  # fmt: skip
        rep = _Rep(f"{self._names[mi]}/{n}", mi, actor)
        self._reps.append(rep)
        return rep, actor.load.remote(ref, mi, label_sets)

    def target(self, mi: int, units: int) -> int:
        """Replicas of model ``mi`` for ``units`` units."""
        return max(1, min(self.replicas or self._capacity(self._needs[mi]), units))

    def live_replicas(self) -> list[dict[str, Any]]:
        """The replicas started and not ended: id, model, node, process id (once loaded)
        and whether it holds units now."""
        return [{"replica": r.id, MODEL_DIM: self._names[r.mi], **r.where,
                 "busy": bool(r.held)} for r in self._reps if not r.ended]  # fmt: skip

    def record(self) -> dict[str, Any] | None:
        """The cluster record: nodes, replicas (node, process, units, how each ended) and
        which replica computed which unit (``"model/unit"`` -> replica id)."""
        nodes = [{"node": n["NodeID"], "host": n.get("NodeManagerAddress", ""),
                  "resources": {k: v for k, v in n["Resources"].items() if k in ("CPU", "GPU")}}
                 for n in self._nodes]  # fmt: skip
        reps = [{"replica": r.id, MODEL_DIM: self._names[r.mi], **r.where, "units": r.units,
                 "cells": r.cells, "ended": r.ended or "done",
                 "resources": self._needs[r.mi]} for r in self._reps]  # fmt: skip
        units = {f"{self._names[mi]}/{ui}": rid for (mi, ui), rid in sorted(self._unit_of.items())}
        return {"executor": "ray", "address": self.address, "nodes": nodes, "replicas": reps,
                "units": units, "seconds": self.timing}  # fmt: skip


class _Pace:
    """How long one model's units take, learnt from those scored: seconds per unit of
    :func:`_unit_weight`; it sizes the batches handed out (``target`` seconds each).

    Examples
    --------
    >>> pace = _Pace(target=1.0)
    >>> q, weights = deque((u, [u]) for u in range(10)), dict.fromkeys(range(10), 10.0)
    >>> [ui for ui, _ in pace.take(q, weights, replicas=1)]  # the speed unknown: one unit
    [0]
    >>> pace.add(10.0, 0.4)  # a unit of weight 10 took 0.4 s: 3 units make a second
    >>> [ui for ui, _ in pace.take(q, weights, replicas=1)]
    [1, 2, 3]
    >>> [ui for ui, _ in pace.take(q, weights, replicas=3)]  # 6 left, 3 replicas: 1 each
    [4]
    """

    def __init__(self, target: float):
        self.target = float(target)
        self.weight = 0.0
        self.seconds = 0.0

    def add(self, weight: float, seconds: float) -> None:
        """A unit of ``weight`` was scored in ``seconds``."""
        self.weight += max(float(weight), 1e-9)
        self.seconds += max(float(seconds), 0.0)

    def take(
        self, q: deque, weights: dict[int, float], replicas: int
    ) -> list[tuple[int, list[int]]]:
        """The next batch from the front of ``q``: one unit while the speed is unknown,
        else units until about ``target`` seconds, at most half of the queue's share of
        one of ``replicas`` replicas (the last batches shrink, so replicas end together)."""
        if not q:
            return []
        cap = 1 if not self.weight else max(1, -(-len(q) // (2 * max(replicas, 1))))
        per = self.seconds / self.weight if self.weight else 0.0
        out: list[tuple[int, list[int]]] = []
        est = 0.0
        while q and len(out) < cap and (not out or est < self.target):
            out.append(q.popleft())
            est += per * weights.get(out[-1][0], 1.0)
        return out


class _Dispatch:
    """The driver's loop: replicas started, loaded, handed batches of units, each unit
    saved as it comes back, replicas replaced when they die."""

    def __init__(self, ex: RayExecutor, session: Any, ref: Any, queues: dict[int, deque],
                 stop: Any, bar: Any):  # fmt: skip
        self.ex, self.session, self.ref, self.queues = ex, session, ref, queues
        self.stop, self.bar, self.ray = stop, bar, ex.ray
        self.pending: dict[Any, tuple[str, _Rep]] = {}
        self.failures = dict.fromkeys(queues, 0)
        self.finished: set[int] = set()
        plan, options = session.plan, session.options
        self.weights = {mi: {ui: _unit_weight(_unit_cost(plan, options, cells), len(cells))
                             for ui, cells in q} for mi, q in queues.items()}  # fmt: skip
        self.pace = {mi: _Pace(ex.batch_seconds) for mi in queues}
        self.t0 = time.perf_counter()
        ex.timing.update(save=0.0, saves=0, batches=0, scored=0.0)

    def run(self) -> None:
        for mi, q in self.queues.items():
            for _ in range(self.ex.target(mi, len(q))):
                self._start(mi)
        while self.pending:
            ready, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=1.0)
            for ref in ready:
                kind, rep = self.pending.pop(ref)
                self._arrived(ref, kind, rep)

    def _label_sets(self, mi: int) -> list[list[int]]:
        plan = self.session.plan
        sets = {plan.labels_of(cells): cells for _, cells in self.queues[mi]}
        return list(sets.values()) or [next(c for m, _, c in plan.units if m == mi)]

    def _start(self, mi: int) -> None:
        rep, ref = self.ex.start(mi, self.ref, self._label_sets(mi))
        self.pending[ref] = ("load", rep)

    def _get(self, ref: Any, rep: _Rep, stream: bool) -> tuple[bool, Any]:
        """``(True, value)`` of a replica's reply (a generator: its next), or ``(False,
        None)`` when the replica died (its held units given back); a failure in the
        replica's code is raised (an :class:`XlikertError` as it is)."""
        ray = self.ray
        try:
            return True, ray.get(next(ref) if stream else ref)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                ray.exceptions.ObjectLostError) as exc:  # fmt: skip
            self._died(rep, exc)
            return False, None
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, XlikertError):
                raise cause from None
            raise CollectionError(
                f"model {self.ex._names[rep.mi]!r} on replica {rep.id}: {cause or exc}"
            ) from exc

    def _arrived(self, ref: Any, kind: str, rep: _Rep) -> None:
        ok, value = self._get(ref, rep, stream=kind == "batch")
        if not ok:
            return None
        if kind == "load":
            rep.where = {k: value[k] for k in ("node", "host", "pid")}
            self.ex.timing.setdefault("first_load", round(time.perf_counter() - self.t0, 3))
            self.session.check_mode(rep.mi, self.session.models[rep.mi],
                                     _Mode(value["mode"]))  # fmt: skip
        elif kind == "batch":
            return self._unit_back(ref, rep, *value)
        elif kind == "provenance":
            self.session.finish_model(rep.mi, value)
            return self._end_model(rep.mi)
        self._next(rep)

    def _unit_back(self, stream: Any, rep: _Rep, ui: int, result: Any, seconds: float) -> None:
        """A unit of ``rep``'s batch is scored: the replica's next batch first, when this
        was its last (it computes while this saves), then the unit saved."""
        held, cells = rep.held.popleft()
        assert held == ui, f"replica {rep.id} sent unit {ui} back, not unit {held}"
        self.pace[rep.mi].add(self.weights[rep.mi][ui], seconds)
        if rep.held:
            self.pending[stream] = ("batch", rep)
        else:
            self._next(rep)
        t0 = time.perf_counter()
        self.session.save_unit(rep.mi, ui, cells, result, self.stop, self.bar, seconds=seconds)
        timing = self.ex.timing
        timing["save"] = round(timing["save"] + time.perf_counter() - t0, 6)
        timing["saves"] += 1
        timing["scored"] = round(timing["scored"] + seconds, 6)
        timing["units"] = round(time.perf_counter() - self.t0, 3)
        self.ex._unit_of[(rep.mi, ui)] = rep.id
        rep.units, rep.cells = rep.units + 1, rep.cells + len(cells)

    def _next(self, rep: _Rep) -> None:
        """Hand ``rep`` its model's next batch; when none is left, end it (the last one to
        finish fetches the model's provenance first)."""
        mi = rep.mi
        live = sum(1 for r in self.ex._reps if r.mi == mi and not r.ended)
        batch = self.pace[mi].take(self.queues[mi], self.weights[mi], live)
        if batch:
            rep.held.extend(batch)
            stream = rep.actor.score_batch.options(num_returns="streaming").remote(batch)
            self.pending[stream] = ("batch", rep)
            self.ex.timing["batches"] += 1
            return
        busy = any(r.mi == mi and r.held and not r.ended for r in self.ex._reps)
        if busy or mi in self.finished:
            self._end(rep, "done")
            return
        self.finished.add(mi)
        self.pending[rep.actor.provenance.remote()] = ("provenance", rep)

    def _end(self, rep: _Rep, how: str) -> None:
        rep.ended = rep.ended or (how if rep.where else "unused: its model was done first")
        self.ray.kill(rep.actor, no_restart=True)

    def _end_model(self, mi: int) -> None:
        for rep in self.ex._reps:
            if rep.mi == mi and not rep.ended:
                self._end(rep, "done")
        for ref, (_, rep) in list(self.pending.items()):
            if rep.mi == mi:  # replicas still loading: nothing left for them
                del self.pending[ref]

    def _died(self, rep: _Rep, exc: Exception) -> None:
        """A replica died: the units of its batch not sent back go to the front of the
        queue, in order, and another replica is started in its place (at most
        ``max_failures`` per model)."""
        mi = rep.mi
        rep.ended = "died"
        self.queues[mi].extendleft(reversed(rep.held))
        rep.held.clear()
        self.failures[mi] += 1
        if self.failures[mi] > self.ex.max_failures:
            raise CollectionError(
                f"model {self.ex._names[mi]!r}: {self.failures[mi]} replicas died (the last: "
                f"{rep.id}, {type(exc).__name__}); the finished units are saved: rerun the "
                "same command to resume"
            )
        self.finished.discard(mi)  # set only while the provenance was asked of this one
        if self.queues[mi] or not any(r.mi == mi and not r.ended for r in self.ex._reps):
            self._start(mi)


@dataclasses.dataclass
class _Mode:
    """A model's mode as a replica reported it (what :meth:`Session.check_mode` reads)."""

    mode: str


def _portable(prepared: Any) -> Any:
    """An entry's resolved files without the loaded tokenizer (the replica loads its own)."""
    if hasattr(prepared, "_tokenizer") and not isinstance(prepared, type):
        return dataclasses.replace(prepared, _tokenizer=None)
    return prepared


def _has_gpu_here() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def _auto_dtype(spec: dict[str, Any], options: CollectOptions) -> bool:
    return spec.get("backend", "transformers") == "transformers" and (
        spec.get("dtype", options.dtype) in (None, "auto")
    )


def _loopback_node(address: str) -> dict[str, str]:
    """``ray.init``'s node address for a cluster reached on loopback: the same one.

    A cluster at ``127.0.0.x`` runs on this machine; the driver then declares itself on
    that address too, so none of the run's traffic leaves loopback (left to itself Ray
    names the machine's network address). Any other address: Ray's own choice.

    Examples
    --------
    >>> _loopback_node("127.0.0.2:6379"), _loopback_node("10.1.2.3:6379")
    ({'_node_ip_address': '127.0.0.2'}, {})
    """
    host = address.rsplit(":", 1)[0]
    return {"_node_ip_address": host} if host.startswith("127.") and host != "127.0.0.1" else {}
