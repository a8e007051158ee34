"""One run per output: the lock file in ``<output>.partial/``.

A run holds an exclusive :func:`fcntl.flock` on ``<output>.partial/lock`` from its
start to its end, and writes into the file who it is (host, process, start time,
command). A second run on the same output finds the lock held and stops at once,
naming the holder. The operating system releases the lock when the holder's
process ends in any way (``kill -9``, a node that went down and, on NFS, the
lease that expired), so a lock file whose writer is gone is taken over and said
so; the file's text is only what the messages quote. Where ``flock`` is not
available (Windows), the holder's process id is checked instead, on its own host.

NFS mounts normally pass ``flock`` through to the server (Linux since 2.6.12); a
mount with ``local_lock=flock`` or ``nolock`` keeps it on one node, and then only
runs on the same node see each other's lock.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from ...core.errors import CollectionError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LockHeld", "RunLock"]


class LockHeld(CollectionError):
    """Another run holds the output's lock (the message names it)."""


def _process_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host.

    Examples
    --------
    >>> _process_alive(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def _describe_holder(info: dict[str, Any]) -> str:
    """``host <h>, process <pid>, started <t>`` from a lock file's record.

    Examples
    --------
    >>> _describe_holder({"host": "n1", "pid": 7, "started": "2025-01-01T00:00:00+00:00"})
    'host n1, process 7, started 2025-01-01T00:00:00+00:00'
    """
    return (
        f"host {info.get('host', '?')}, process {info.get('pid', '?')}, "
        f"started {info.get('started', '?')}"
    )


class RunLock:
    """The exclusive lock of one output's run (``<output>.partial/lock``).

    Parameters
    ----------
    folder
        The progress folder; created when missing.
    output
        The output it protects (for messages).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "r.nc.partial"
    >>> lock = RunLock(d, "r.nc")
    >>> lock.acquire() is None  # nobody held it before
    True
    >>> lock.release()
    """

    def __init__(self, folder: str | os.PathLike, output: str | os.PathLike):
        self.folder = Path(folder)
        self.path = self.folder / "lock"
        self.output = Path(output)
        self._fd: int | None = None

    def __repr__(self) -> str:
        return f"<RunLock {self.path} held={self._fd is not None}>"

    @staticmethod
    def record() -> dict[str, Any]:
        """Who this process is: host, process id, start time, command line."""
        now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        cmd = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))
        return {"host": socket.gethostname(), "pid": os.getpid(), "started": now, "command": cmd}

    def read(self) -> dict[str, Any]:
        """The record in the lock file (empty when there is none or it is unreadable)."""
        try:
            info = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def acquire(self) -> str | None:
        """Take the lock; returns a sentence when a lock left by a gone run was taken over.

        Raises
        ------
        LockHeld
            Another live run holds it; the message names host, process and start.
        OSError
            The folder or the lock file cannot be written (the caller names it).
        """
        self.folder.mkdir(exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if not self._flock(fd):
                os.close(fd)
                raise self._held(self.read())
            try:  # the file may have been removed by a run that finished meanwhile
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        try:
            before = self.read()
            if fcntl is None and before and self._alive(before):
                raise self._held(before)
            text = json.dumps(self.record(), indent=1).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, text, 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self._taken_over(before) if before else None

    def _flock(self, fd: int) -> bool:
        if fcntl is None:  # pragma: no cover - Windows
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    @staticmethod
    def _alive(info: dict[str, Any]) -> bool:
        return info.get("host") == socket.gethostname() and _process_alive(int(info.get("pid", 0)))

    def _held(self, info: dict[str, Any]) -> LockHeld:
        who = _describe_holder(info) if info else "a run that has not written its name yet"
        return LockHeld(
            f"output {self.output} is being collected by another run ({who}; lock {self.path}). "
            "Two runs on one output would write into one progress folder: wait for that run "
            "to end or stop it, or give this run another output (-o)"
        )

    def _taken_over(self, info: dict[str, Any]) -> str:
        here = info.get("host") == socket.gethostname()
        if here and not _process_alive(int(info.get("pid", 0))):
            why = "that process is gone"
        elif here:
            why = "that process id is alive but no longer holds the lock (a reused id)"
        else:
            why = "it no longer holds the lock (that run ended)"
        return f"took over the lock {self.path} left by {_describe_holder(info)}: {why}"

    def release(self) -> None:
        """Remove the lock file and let go of the lock (idempotent)."""
        if self._fd is None:
            return
        try:
            if self.read().get("pid") == os.getpid():
                self.path.unlink()
        except OSError:
            pass
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
