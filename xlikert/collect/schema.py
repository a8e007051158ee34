"""The one per-unit record every backend returns, and its assembly into a results Dataset.

A *unit* is a fixed group of prompts of one model (see :mod:`xlikert.collect.runner`).
Every backend — transformers, in-process vLLM, an OpenAI-compatible server —
scores a unit into a :class:`UnitResult`: the variables of :data:`VARIABLES`, each
with a leading ``cell`` axis, the dims and the fill value given there. The
resumable store saves it as it is (:mod:`xlikert.collect.store`), and
:func:`assemble` scatters the units of every model into the results Dataset of
DESIGN.md §1; :func:`xlikert.collect.merge_shards` combines shard files by the
same table.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from .._version import __version__
from ..constraint import DECODING_TIE_RULE, TOPK_BOUNDS_RULE
from ..errors import CollectionError

__all__ = ["BOUND_VARIABLES", "VARIABLES", "UnitResult", "Variable", "assemble"]


@dataclass(frozen=True)
class Variable:
    """A per-cell result variable: its dims after the cell dims, fill value and attrs."""

    dims: tuple[str, ...]
    fill: Any
    attrs: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_text(self) -> bool:
        return isinstance(self.fill, str)


_NAN = float("nan")

#: Variables of every unit, in the order of the results file.
VARIABLES: dict[str, Variable] = {
    "pmf": Variable(
        ("score",),
        _NAN,
        {
            "long_name": "item PMF over valid answers (renormalised)",
            "description": "sum over each score's valid answers of P_raw, divided by valid_mass",
        },
    ),
    "valid_mass": Variable(
        (),
        _NAN,
        {
            "long_name": "valid mass",
            "description": "sum of P_raw over valid answers; 1 - failure rate",
        },
    ),
    "prompt": Variable((), "", {"description": "exact text sent to the model (after templating)"}),
    "topk_token": Variable(
        ("rank",), "", {"description": "raw vocabulary tokens of highest probability"}
    ),
    "topk_logprob": Variable(
        ("rank",), _NAN, {"description": "natural-log probability over the full vocabulary"}
    ),
    "decoding_pmf": Variable(
        ("temperature", "top_p", "score"), _NAN, {"description": DECODING_TIE_RULE}
    ),
    "decoding_valid_mass": Variable(
        ("temperature", "top_p"),
        _NAN,
        {"description": "valid mass inside the nucleus / nucleus mass (NaN: not measured)"},
    ),
}

_BOUND_ATTRS = {"description": "certified bound; equal to the stored value where it is exact"}

#: Certified intervals, present when some unit was only bounded (top-k servers).
BOUND_VARIABLES: dict[str, Variable] = {
    "pmf_lower": Variable(("score",), _NAN, _BOUND_ATTRS),
    "pmf_upper": Variable(("score",), _NAN, _BOUND_ATTRS),
    "valid_mass_lower": Variable((), _NAN, _BOUND_ATTRS),
    "valid_mass_upper": Variable((), _NAN, _BOUND_ATTRS),
}


def _shape(var: Variable, n: int, sizes: Mapping[str, int]) -> tuple[int, ...]:
    return (n, *(sizes[d] for d in var.dims))


@dataclass
class UnitResult:
    """The arrays one backend computed for one unit of prompts.

    ``data`` maps each name of :data:`VARIABLES` (and, for bounded units, of
    :data:`BOUND_VARIABLES`) to an array whose first axis runs over the unit's
    prompts; ``mode`` is the backend's measurement mode (``"exact"`` or
    ``"topk"``).
    """

    data: dict[str, np.ndarray]
    mode: str = "exact"
    cells: np.ndarray | None = None

    @classmethod
    def empty(cls, n: int, sizes: Mapping[str, int], *, bounded: bool = False) -> UnitResult:
        """A record of ``n`` prompts filled with each variable's fill value.

        Examples
        --------
        >>> r = UnitResult.empty(2, {"score": 7, "rank": 3, "temperature": 1, "top_p": 2})
        >>> r.data["decoding_pmf"].shape, r.data["topk_token"][0, 0] == ""
        ((2, 1, 2, 7), True)
        """
        table = {**VARIABLES, **(BOUND_VARIABLES if bounded else {})}
        data = {
            k: np.full(_shape(v, n, sizes), v.fill, dtype=object if v.is_text else np.float64)
            for k, v in table.items()
        }
        return cls(data, mode="topk" if bounded else "exact")

    @property
    def bounded(self) -> bool:
        return "pmf_lower" in self.data

    def check(self, n: int, sizes: Mapping[str, int]) -> None:
        """Raise when a variable is missing or has the wrong shape (a backend bug)."""
        table = {**VARIABLES, **(BOUND_VARIABLES if self.bounded else {})}
        for k, v in table.items():
            want = _shape(v, n, sizes)
            got = np.shape(self.data.get(k))
            if k not in self.data or got != want:
                raise CollectionError(
                    f"internal error: backend returned {k!r} with shape {got}, expected {want}"
                )

    # ------------------------------------------------------------------ storage
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays for ``np.savez`` (text as fixed-width unicode)."""
        out = {
            k: (np.asarray(v).astype(str) if v.dtype == object else v) for k, v in self.data.items()
        }
        out["mode"] = np.array(self.mode)
        if self.cells is not None:
            out["cells"] = np.asarray(self.cells, dtype=np.int64)
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> UnitResult:
        data = {k: np.asarray(v) for k, v in arrays.items() if k not in ("mode", "cells")}
        mode = str(arrays["mode"]) if "mode" in arrays else "exact"
        cells = np.asarray(arrays["cells"]) if "cells" in arrays else None
        return cls(data, mode, cells)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def assemble(
    prompts: xr.Dataset,
    user: xr.DataArray,
    model_names: Sequence[str],
    sizes: Mapping[str, int],
    coords: Mapping[str, Any],
    units: Sequence[tuple[int, UnitResult]],
    infos: Mapping[int, dict[str, Any]],
    *,
    shard: tuple[int, int] | None = None,
) -> xr.Dataset:
    """Scatter the units of every model into the results Dataset (DESIGN.md §1).

    Parameters
    ----------
    prompts
        The prompts Dataset (its item coords and attrs are carried over).
    user
        The user prompts, dims ``(*factors, item)``: the cell layout.
    model_names
        The ``model`` coord.
    sizes, coords
        Lengths and coords of ``score``, ``rank``, ``temperature``, ``top_p``.
    units
        ``(model index, UnitResult with cells)`` pairs.
    infos
        Per-model provenance, by model index.
    shard
        ``(i, n)`` for a shard file: adds the ``computed`` mask.
    """
    M, ncell = len(model_names), int(np.prod(user.shape))
    bounded = any(r.bounded for _, r in units)
    table = {**VARIABLES, **(BOUND_VARIABLES if bounded else {})}
    flat = {
        k: np.full(_shape(v, M * ncell, sizes), v.fill, dtype=object if v.is_text else np.float64)
        for k, v in table.items()
    }
    computed = np.zeros(M * ncell, dtype=bool)
    for mi, r in units:
        rows = mi * ncell + np.asarray(r.cells)
        for k in table:
            # an exact unit in a bounded file: its interval is the point itself
            src = k if k in r.data else ("pmf" if k.startswith("pmf") else "valid_mass")
            flat[k][rows] = r.data[src]
        computed[rows] = True
    dims = ("model", *user.dims)
    full = (M, *user.shape)
    data_vars = {}
    for k, v in table.items():
        arr = flat[k].reshape(*full, *(sizes[d] for d in v.dims))
        data_vars[k] = xr.Variable(
            (*dims, *v.dims), arr.astype(str) if v.is_text else arr, dict(v.attrs)
        )
    all_coords: dict[str, Any] = {d: user[d] for d in user.dims if d in user.coords}
    for name, co in prompts.coords.items():  # item coords (reverse_keyed, subscale, ...)
        if name not in all_coords and set(co.dims) <= set(user.dims):
            all_coords[name] = co
    all_coords["model"] = list(model_names)
    all_coords.update(coords)
    ds = xr.Dataset(data_vars, coords=all_coords, attrs=dict(prompts.attrs))
    if bounded:
        ds.attrs["bounds_rule"] = TOPK_BOUNDS_RULE
        ds["pmf"].attrs["bounded"] = (
            "where pmf_lower < pmf_upper the pmf is only bounded (top-k server): the stored "
            "value is the listed valid mass renormalised, see bounds_rule"
        )
    if shard:
        ds["computed"] = (dims, computed.reshape(full))
        ds["computed"].attrs["description"] = "True where this shard computed the cell"
        ds.attrs["shard"] = f"{shard[0]}/{shard[1]}"
    # Per-model provenance: attrs["models"][name] (a dict; xlikert.io stores it as JSON).
    ds.attrs["models"] = {model_names[mi]: dict(infos.get(mi, {})) for mi in range(M)}
    ds.attrs.update(
        xlikert_version=__version__,
        date_created=_now(),
        collection_protocol=(
            "one forward pass per (condition, item); log-softmax over the full vocabulary; "
            "valid tokens = vocabulary tokens whose surface form is a scale value with an "
            "optional leading ' ', '▁' or 'Ġ'; each model's answer rule (one token, split "
            "space, multi-token) and backend are in attrs['models'][name]"
        ),
        decoding_tie_rule=DECODING_TIE_RULE,
    )
    return ds
