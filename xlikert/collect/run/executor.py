"""Where a run's units are computed: in this process, or by the replicas of a cluster.

A :class:`~.session.Session` finds the cells already measured, then hands the units
still to compute to its executor, and saves each finished unit itself
(:meth:`~.session.Session.save_unit`): the executor decides only *where* a unit is
scored, never what it holds, so lock, resume, reuse, keys and the results file are
the same whichever computed it (a cluster is an executor of the same units, not a second
runner).

* :class:`InProcess`: today's run, one model at a time, loaded here, its units in order;
* :class:`~.cluster.RayExecutor`: replicas of each model as Ray actors, units handed out
  dynamically, the costliest first (:mod:`.cluster`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ..options import CollectOptions

__all__ = ["Executor", "InProcess", "Work"]

#: One model's work: ``(model index, model entry, [(unit index, cells to compute), ...])``.
Work = tuple[int, dict[str, Any], list[tuple[int, list[int]]]]


@runtime_checkable
class Executor(Protocol):
    """What a :class:`~.session.Session` asks of an executor."""

    def prepare(self, models: Sequence[dict[str, Any]], options: CollectOptions) -> None:
        """Check, before anything loads, that the models can be computed (refuse by name)."""

    def compute(self, session: Any, work: Sequence[Work], stop: Any, bar: Any) -> None:
        """Compute ``work``'s units; give each finished one to ``session.save_unit`` and each
        finished model's provenance to ``session.finish_model``."""

    def record(self) -> dict[str, Any] | None:
        """Where the units were computed (the results' ``cluster`` attribute), or None."""


class InProcess:
    """Today's executor: each model loaded in this process in turn, its units in order.

    Examples
    --------
    >>> InProcess().record() is None
    True
    """

    name = "in_process"

    def prepare(self, models: Sequence[dict[str, Any]], options: CollectOptions) -> None:
        """Nothing to check: the backends checked their entries (:func:`~.checked.check_run`)."""

    def compute(self, session: Any, work: Sequence[Work], stop: Any, bar: Any) -> None:
        """Load each model in turn and score its units in plan order."""
        for mi, spec, todo in work:
            session.compute_model(mi, spec, todo, stop, bar)

    def record(self) -> dict[str, Any] | None:
        """None: a run in one process has no cluster record (its file is the plain one)."""
        return None
