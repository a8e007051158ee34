"""Preemption and Ctrl-C: SIGTERM and SIGINT stop a run between saves, never inside one.

While :func:`~xlikert.collect.collect` runs in the main thread, :class:`StopOnSignals`
handles both signals: the unit being computed is abandoned (it was not
finished), every finished unit is already saved, and the run ends with
:class:`RunInterrupted`, which says how to resume. Inside the run the handler
raises :class:`StopSignal`, a ``BaseException`` like ``KeyboardInterrupt``: an
``except Exception`` on the way (a chat template's fallback, a tokenizer's) must
not swallow the signal and go on with another result. A signal that arrives while a
unit is being saved is acted on when the save is complete. A second signal
finds the previous handlers back in place (Python's KeyboardInterrupt for
SIGINT, the default end for SIGTERM). ``xlikert run`` exits with status 128 +
the signal's number (143 for SIGTERM, 130 for SIGINT), as a shell does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from ...core.errors import CollectionError

__all__ = ["SIGNALS", "RunInterrupted", "StopOnSignals", "StopSignal"]

#: The signals a run stops on (SLURM sends SIGTERM before it kills or preempts a job).
SIGNALS = ("SIGTERM", "SIGINT")


class RunInterrupted(CollectionError):
    """The run stopped on a signal after saving every finished unit.

    Attributes
    ----------
    signum
        The signal's number; a command line tool exits with ``128 + signum``.
    """

    def __init__(self, signum: int, message: str = ""):
        self.signum = int(signum)
        super().__init__(message or f"stopped by {signal.Signals(self.signum).name}")

    @property
    def exit_status(self) -> int:
        """128 + the signal's number (the shell's convention)."""
        return 128 + self.signum


class StopSignal(BaseException):
    """A signal arrived during the run: raised by :class:`StopOnSignals` where the run is.

    A ``BaseException``, as ``KeyboardInterrupt`` is, so that no ``except
    Exception`` between the handler and the run catches it (a chat template that
    fails is re-rendered without a system turn: a signal caught there would have
    changed the prompt); the run turns it into :class:`RunInterrupted`.

    Attributes
    ----------
    signum
        The signal's number.
    """

    def __init__(self, signum: int):
        self.signum = int(signum)
        super().__init__(signal.Signals(self.signum).name)


class StopOnSignals:
    """A context in which SIGTERM and SIGINT raise :class:`StopSignal` outside saves.

    Outside the main thread signals cannot be handled; there the context does nothing.

    Examples
    --------
    >>> with StopOnSignals() as stop:
    ...     with stop.saving():
    ...         pass  # a save is never cut short
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._saving = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignals:
        if threading.current_thread() is threading.main_thread():
            for name in SIGNALS:
                num = getattr(signal, name)
                self._previous[num] = signal.signal(num, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        for num, handler in self._previous.items():
            signal.signal(num, handler)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        self._restore()  # a second signal acts at once
        if not self._saving:
            raise StopSignal(signum)

    @contextlib.contextmanager
    def saving(self, *, last: bool = False) -> Iterator[None]:
        """A save that a signal does not cut short; the signal acts when it is complete
        (``last``: the save ends the run, which then ends normally)."""
        self._saving += 1
        try:
            yield
        finally:
            self._saving -= 1
        if self.signum is not None and not self._saving and not last:
            raise StopSignal(self.signum)
