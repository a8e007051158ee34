"""The resumable state of a collection run: ``<output>.partial/``.

:class:`PartialStore` owns the folder: a manifest holding the run's
fingerprint, one file per finished unit (``m<model>-u<unit>.npz``, written to a
temporary name and renamed, so a file is either whole or absent) and one record
per finished model (``model-<i>.json``). Nothing is written before the first
unit finishes, so a run that fails its start-up checks leaves no folder behind.
Progress of another configuration is discarded with a warning.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import CollectionError
from .record import UnitResult

__all__ = ["PartialStore", "as_record"]


def as_record(info: dict[str, Any]) -> dict[str, Any]:
    """A model's provenance as the store keeps it: JSON values, keys sorted.

    Examples
    --------
    >>> as_record({"b": 1, "a": (2, 3)})
    {'a': [2, 3], 'b': 1}
    """
    return json.loads(json.dumps(info, sort_keys=True, default=str))


def _atomic_write(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class PartialStore:
    """Finished units and model records of one run, kept until its output is written.

    Parameters
    ----------
    output : path
        The run's netCDF output; the store is ``<output>.partial/``.
    fingerprint : str
        The run's configuration hash: saved progress of another one is discarded.
    format : str
        The on-disk format tag, recorded in the manifest.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> store = PartialStore(d / "run.nc", "abc")
    >>> store.path.exists()  # nothing written yet
    False
    """

    def __init__(self, output: str | os.PathLike, fingerprint: str, format: str = ""):
        self.output = Path(output)
        self.path = self.output.with_name(self.output.name + ".partial")
        self.fingerprint = fingerprint
        self.format = format
        manifest = self.path / "manifest.json"
        if self.path.is_dir():
            try:
                old = json.loads(manifest.read_text())
            except (OSError, ValueError):
                old = {}
            if old.get("fingerprint") != fingerprint:  # progress of another configuration
                stale = len(list(self.path.glob("m*-u*.npz")))
                if stale:
                    warnings.warn(
                        f"{self.path} holds {stale} saved unit(s) of a run with a different "
                        "configuration (prompts, models, scale or options); starting again",
                        stacklevel=3,
                    )
                shutil.rmtree(self.path)

    def __repr__(self) -> str:
        n = len(list(self.path.glob("m*-u*.npz"))) if self.path.is_dir() else 0
        return f"<PartialStore {self.path} units={n}>"

    # ------------------------------------------------------------------ writing
    def _ensure(self) -> None:
        if (self.path / "manifest.json").is_file():
            return
        try:
            self.path.mkdir(exist_ok=True)
            now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
            info = {"fingerprint": self.fingerprint, "format": self.format, "started": now,
                    "xlikert": __version__}  # fmt: skip
            text = json.dumps(info, indent=1, sort_keys=True).encode()
            _atomic_write(self.path / "manifest.json", lambda fh: fh.write(text))
        except OSError as exc:
            raise CollectionError(f"cannot write progress to {self.path}: {exc}") from exc

    def _unit_file(self, mi: int, ui: int) -> Path:
        return self.path / f"m{mi:03d}-u{ui:05d}.npz"

    def save_unit(self, mi: int, ui: int, result: UnitResult) -> None:
        """Save one finished unit (atomically)."""
        self._ensure()
        arrays = result.to_arrays()
        _atomic_write(self._unit_file(mi, ui), lambda fh: np.savez(fh, **arrays))

    def save_model(self, mi: int, info: dict[str, Any]) -> None:
        """Save the provenance record of a finished model."""
        self._ensure()
        text = json.dumps(as_record(info), indent=1, sort_keys=True).encode()
        _atomic_write(self.path / f"model-{mi:03d}.json", lambda fh: fh.write(text))

    # ------------------------------------------------------------------ reading
    def load_unit(self, mi: int, ui: int) -> UnitResult | None:
        """A saved unit, or None (an unreadable leftover is removed and recomputed)."""
        f = self._unit_file(mi, ui)
        if not f.is_file():
            return None
        try:
            with np.load(f) as z:
                return UnitResult.from_arrays({k: z[k] for k in z.files})
        except Exception:
            f.unlink()
            return None

    def load_model(self, mi: int) -> dict[str, Any] | None:
        f = self.path / f"model-{mi:03d}.json"
        return json.loads(f.read_text()) if f.is_file() else None

    def load(
        self, units: list[tuple[int, int, Any]], n_models: int
    ) -> tuple[dict[tuple[int, int], UnitResult], dict[int, dict[str, Any]]]:
        """The saved units among ``(model, unit, cells)`` and the saved model records."""
        done = {(mi, ui): r for mi, ui, _ in units if (r := self.load_unit(mi, ui)) is not None}
        infos = {mi: info for mi in range(n_models) if (info := self.load_model(mi)) is not None}
        return done, infos

    def remove(self) -> None:
        """Delete the folder (after the output is written)."""
        shutil.rmtree(self.path, ignore_errors=True)
