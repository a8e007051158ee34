"""The saved progress of the runs on one output: ``<output>.partial/``.

:class:`PartialStore` owns the folder::

    lock                        the run holding the output (xlikert.collect.run.lock)
    manifest.json               the folder's format
    runs/<run>.json             each configuration that saved units here: its models
                                (and their identities), factor levels, items, options
    m<i>-u<j>-<run>.npz         one finished unit: the arrays of its cells, their keys
    models/<digest>.json        the provenance of a model identity, once it finished

``<run>`` is the start of a configuration's fingerprint, so runs of different
configurations on one output never write over each other's units. Every file is
written to a temporary name and renamed (whole or absent). Progress is never
deleted because the configuration changed: the cells of other configurations
whose keys this run needs are reused (:mod:`xlikert.collect.run.reuse`), the rest is
kept, and the message says what changed (models, factor levels, items,
options); only ``discard=True`` (``--discard-progress``) deletes it. When the
output is written, the units of its own configuration are deleted (the file
holds them), then the folder if nothing else is left in it.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..._version import __version__
from ...core.errors import CollectionError
from ...core.io import atomic_write
from ..record import UnitResult
from .lock import RunLock

__all__ = ["PROGRESS_FORMAT", "PartialStore", "as_record", "disk_error"]

#: The folder's format (in ``manifest.json``).
PROGRESS_FORMAT = "xlikert-progress-2"
#: Arrays a unit file holds beside the unit's own (:meth:`UnitResult.to_arrays`): its
#: cells' keys, the run and model that saved it, and the run's ``score`` and ``option``
#: axes its arrays lie on (a cell reused in a run on other axes is placed on them).
_UNIT_EXTRA = ("cell_key", "run", "model_digest", "axis_score", "axis_option")
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG)


def as_record(info: dict[str, Any]) -> dict[str, Any]:
    """A model's provenance as the store keeps it: JSON values, keys sorted.

    Examples
    --------
    >>> as_record({"b": 1, "a": (2, 3)})
    {'a': [2, 3], 'b': 1}
    """
    return json.loads(json.dumps(info, sort_keys=True, default=str))


def disk_error(path: str | os.PathLike, what: str, exc: OSError, kept: str = "") -> CollectionError:
    """A :class:`CollectionError` for a failed write, naming the path and what was written.

    Examples
    --------
    >>> str(disk_error("/x/u.npz", "a finished unit", OSError(28, "No space left on device")))
    'cannot write a finished unit to /x/u.npz: No space left on device (ENOSPC); free space (or make the folder writable) and rerun the same command: it resumes from what was saved'
    """
    name = errno.errorcode.get(exc.errno or 0, "")
    reason = f"{exc.strerror or exc}" + (f" ({name})" if name else "")
    hint = ""
    if exc.errno in _DISK_FULL:
        hint = (
            "; free space (or make the folder writable) and rerun the same command: it resumes "
            "from what was saved"
        )
    return CollectionError(f"cannot write {what} to {path}: {reason}{kept}{hint}")


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _describe_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What differs between two run descriptions: models, factor levels, items, options.

    Examples
    --------
    >>> _describe_change({"models": {"a": {}}, "factors": {"target": ["x"]}, "items": ["1"]},
    ...                 {"models": {"a": {}, "b": {}}, "factors": {"target": ["x", "y"]},
    ...                  "items": ["1"]})
    "models added ['b']; target levels added ['y']"
    """
    out: list[str] = []

    def sets(what: str, a: list, b: list) -> None:
        added, removed = [x for x in b if x not in a], [x for x in a if x not in b]
        out.extend(f"{what} {verb} {xs}" for verb, xs in (("added", added), ("removed", removed))
                   if xs)  # fmt: skip
        if not added and not removed and list(a) != list(b):
            out.append(f"{what} reordered")

    om, nm = old.get("models") or {}, new.get("models") or {}
    sets("models", list(om), list(nm))
    for name in (n for n in nm if n in om and om[n] != nm[n]):
        a, b = om[name] or {}, nm[name] or {}
        diff = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
        out.append(
            f"model {name!r} changed ({', '.join(f'{k}: {a.get(k)!r} -> {b.get(k)!r}' for k in diff)})"
        )
    of, nf = old.get("factors") or {}, new.get("factors") or {}
    sets("factors", list(of), list(nf))
    for dim in (d for d in nf if d in of):
        sets(f"{dim} levels", of[dim], nf[dim])
    sets("items", old.get("items") or [], new.get("items") or [])
    oo, no = old.get("options") or {}, new.get("options") or {}
    out.extend(f"option {k}: {oo.get(k)!r} -> {no.get(k)!r}"
               for k in sorted({*oo, *no}) if oo.get(k) != no.get(k))  # fmt: skip
    return "; ".join(out) or "the prompts' texts (same models, levels, items and options)"


class PartialStore:
    """Saved units and model records of the runs on one output, and its lock.

    Parameters
    ----------
    output : path
        The run's netCDF output; the store is ``<output>.partial/``.
    fingerprint : str
        This run's configuration hash.
    description : dict or callable
        This run's configuration in words (:func:`_describe_change` compares them), or a
        function that builds it (called once, when the lock is held).
    axes : dict, optional
        The run's ``score`` (ints) and ``option`` (names) axes, saved with every unit.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> store = PartialStore(d / "run.nc", "abc" * 20, {})
    >>> store.path.exists()  # nothing written before open()
    False
    """

    def __init__(
        self,
        output: str | os.PathLike,
        fingerprint: str,
        description: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
        axes: dict[str, Any] | None = None,
    ):
        self.output = Path(output)
        self.axes = axes or {}
        self.path = self.output.with_name(self.output.name + ".partial")
        self.fingerprint = fingerprint
        self.run = fingerprint[:16]
        self._description = description
        self.lock = RunLock(self.path, self.output)
        #: Units saved in this folder so far (all configurations).
        self.saved = 0

    @property
    def description(self) -> dict[str, Any]:
        """This configuration in words (given, or built when first needed: after the lock)."""
        if callable(self._description):
            self._description = self._description()
        return self._description or {}

    def __repr__(self) -> str:
        return f"<PartialStore {self.path} units={len(list(self._unit_files()))}>"

    # ------------------------------------------------------------------ open and close
    def open(self, *, discard: bool = False) -> list[str]:
        """Take the lock and read the folder; returns what to tell the user.

        Raises
        ------
        LockHeld
            Another run holds the output.
        CollectionError
            The folder cannot be written (naming it).
        """
        said: list[str] = []
        try:
            taken = self.lock.acquire()
            if taken:
                said.append(taken)
            if discard:
                said += self._discard()
            manifest = {"format": PROGRESS_FORMAT, "xlikert": __version__}
            self._write_json(self.path / "manifest.json", "the progress manifest", manifest)
        except OSError as exc:
            self.lock.release()
            raise disk_error(self.path, "the progress folder", exc) from exc
        except BaseException:
            self.lock.release()
            raise
        self.saved = len(list(self._unit_files()))
        said += self._others()
        return said

    def close(self, *, finished: bool) -> str | None:
        """Release the lock; after the output is written, delete this run's units (and the
        folder when nothing else is left). Returns what is kept, if anything."""
        try:
            if finished:
                for f in self._unit_files():
                    if self._is_own(f):
                        f.unlink(missing_ok=True)
                (self.path / "runs" / f"{self.run}.json").unlink(missing_ok=True)
            left = list(self._unit_files())
            if not left:
                self.lock.release()
                shutil.rmtree(self.path, ignore_errors=True)
                return None
        finally:
            self.lock.release()
        return (
            f"kept {len(left)} saved unit(s) of other configurations in {self.path} "
            "(--discard-progress / discard_progress=True deletes them)"
        )

    # ------------------------------------------------------------------ what is there
    def _unit_files(self) -> Iterator[Path]:
        if self.path.is_dir():
            yield from sorted(self.path.glob("m*-u*.npz"))

    def _is_own(self, f: Path) -> bool:
        return f.name.endswith(f"-{self.run}.npz")

    def _others(self) -> list[str]:
        """Messages about the units of other configurations found in the folder."""
        counts: dict[str, int] = {}
        for f in self._unit_files():
            if not self._is_own(f):
                run = f.stem.split("-")[-1]
                counts[run] = counts.get(run, 0) + 1
        said = []
        for run, n in counts.items():
            try:
                old = json.loads((self.path / "runs" / f"{run}.json").read_text())
            except (OSError, ValueError):
                old = {}
            said.append(
                f"{self.path} holds {n} saved unit(s) of another configuration "
                f"(started {old.get('started', '?')}; changed since: "
                f"{_describe_change(old, self.description)}): the cells that still apply are "
                "reused, the others are kept (--discard-progress deletes them)"
            )
        return said

    def _discard(self) -> list[str]:
        gone = [f for f in self._unit_files() if not self._is_own(f)]
        for f in gone:
            f.unlink()
        for f in (self.path / "runs").glob("*.json"):
            if not f.name.startswith(self.run):
                f.unlink()
        return [f"deleted {len(gone)} saved unit(s) of other configurations in {self.path}"] * bool(
            gone
        )

    # ------------------------------------------------------------------ writing
    def _write_json(self, path: Path, what: str, obj: object) -> None:
        text = json.dumps(obj, indent=1, sort_keys=True, default=str).encode()
        try:
            path.parent.mkdir(exist_ok=True)
            with atomic_write(path) as tmp:
                tmp.write_bytes(text)
        except OSError as exc:
            raise disk_error(path, what, exc, self._kept()) from exc

    def _kept(self) -> str:
        return (
            f"; the {self.saved} unit(s) saved before in {self.path} are kept" if self.saved else ""
        )

    def unit_file(self, mi: int, ui: int) -> Path:
        """The file of this run's unit ``ui`` of model ``mi``."""
        return self.path / f"m{mi:03d}-u{ui:05d}-{self.run}.npz"

    def save_unit(
        self, mi: int, ui: int, result: UnitResult, keys: list[str], model_digest: str
    ) -> None:
        """Save one finished unit with its cells' keys (atomically).

        Raises
        ------
        CollectionError
            The file cannot be written (a full disk, a read-only folder), naming it;
            the units saved before stay.
        """
        if self.saved == 0 or not (self.path / "runs" / f"{self.run}.json").is_file():
            self._write_json(self.path / "runs" / f"{self.run}.json", "the run's description",
                             {**self.description, "started": _now()})  # fmt: skip
        arrays: dict[str, Any] = {**result.to_arrays(), "cell_key": np.asarray(keys, dtype=str),
                  "run": np.array(self.fingerprint), "model_digest": np.array(model_digest)}  # fmt: skip
        if self.axes:
            arrays["axis_score"] = np.asarray(self.axes["score"], dtype=np.int64)
            arrays["axis_option"] = np.asarray(self.axes["option"], dtype=str)
        path = self.unit_file(mi, ui)
        try:
            with atomic_write(path) as tmp, open(tmp, "wb") as fh:
                np.savez(fh, **arrays)
        except OSError as exc:
            raise disk_error(path, f"finished unit {ui} of model {mi}", exc, self._kept()) from exc
        self.saved += 1

    def save_model(self, digest: str, info: dict[str, Any]) -> None:
        """Save the provenance record of a finished model (by its identity's digest)."""
        self._write_json(self.path / "models" / f"{digest[:32]}.json",
                         "a model's provenance", as_record(info))  # fmt: skip

    # ------------------------------------------------------------------ reading
    def load_model(self, digest: str) -> dict[str, Any] | None:
        """The provenance saved for a model identity, or None."""
        f = self.path / "models" / f"{digest[:32]}.json"
        try:
            return json.loads(f.read_text()) if digest and f.is_file() else None
        except (OSError, ValueError):
            return None

    @staticmethod
    def read_unit(f: Path) -> tuple[UnitResult, dict[str, np.ndarray]] | None:
        """A saved unit and its extra arrays (keys, run), or None when it is unreadable."""
        try:
            with np.load(f) as z:
                arrays = {k: z[k] for k in z.files}
        except Exception:  # a leftover of a run killed mid-write is never renamed into place
            return None
        extra = {k: arrays.pop(k) for k in _UNIT_EXTRA if k in arrays}
        return UnitResult.from_arrays(arrays), extra

    def keyed_units(self) -> Iterator[tuple[Path, np.ndarray, str]]:
        """``(file, cell keys, fingerprint of the run that saved it)`` of every saved unit of
        other configurations that records the axes its arrays lie on (this configuration's
        resume as units: :meth:`own_units`; a unit saved before units recorded their axes
        was keyed by an earlier rule, :data:`~.identity.KEY_FORMAT`, and matches no key)."""
        for f in self._unit_files():
            if self._is_own(f):
                continue
            try:
                with np.load(f) as z:
                    if "axis_score" in z.files:
                        yield f, np.asarray(z["cell_key"]), str(z["run"])
            except Exception:
                continue

    def own_units(
        self, units: list[tuple[int, int, Any]]
    ) -> dict[tuple[int, int], tuple[UnitResult, list[str] | None]]:
        """This configuration's saved units among ``(model, unit, cells)``, with their cells'
        keys: a resumed run takes them as they are, so it
        computes the rest in the units and batches of an uninterrupted run."""
        out = {}
        for mi, ui, _ in units:
            f = self.unit_file(mi, ui)
            got = self.read_unit(f) if f.is_file() else None
            if got is not None:
                keys = got[1].get("cell_key")
                out[(mi, ui)] = (got[0], None if keys is None else [str(k) for k in keys])
        return out
