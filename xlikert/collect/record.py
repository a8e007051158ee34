"""The one per-unit record every backend returns, and its assembly into a results Dataset.

A *unit* is a fixed group of prompts of one model (see :mod:`xlikert.collect.run.runner`).
Every backend — transformers, in-process vLLM, an OpenAI-compatible server —
scores a unit into a :class:`UnitResult`: the variables of the results schema
(:mod:`xlikert.core.schema`), each with a leading ``cell`` axis, the dims and the fill
value given there. The
resumable store saves it as it is (:mod:`xlikert.collect.run.store`), and
:func:`assemble` scatters the units of every model into the results Dataset of
the results schema; :func:`xlikert.collect.merge_shards` combines shard files by the
same table.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import xarray as xr

from .._version import __version__
from ..core.codecs import decode_token_ids
from ..core.dims import MODEL_DIM
from ..core.errors import CollectionError
from ..core.schema import (
    BOUND_VARIABLES,
    CELL_VARIABLES,
    CONTEXT_VARIABLES,
    NONSUBSTANTIVE_BOUND_VARIABLES,
    PROMPT_VARIABLES,
    SAMPLED_VARIABLES,
    SCRIPT_BOUND_VARIABLES,
    TRACE_VARIABLES,
    Variable,
    variable_table,
)
from ..kernels.readout import DECODING_TIE_RULE, TOPK_BOUNDS_RULE
from .answers.numerals import NUMERAL_RULE, UNICODE_VERSION
from .answers.walk import WALK_RULE
from .reasoning import REASONING_RULE

__all__ = ["ReadSequence", "UnitResult", "assemble", "describe_models", "read_sequence"]


def _shape(var: Variable, n: int, sizes: Mapping[str, int]) -> tuple[int, ...]:
    return (n, *(sizes[d] for d in var.dims))


@dataclass
class UnitResult:
    """The arrays one backend computed for one unit of prompts.

    ``data`` maps each name of :data:`VARIABLES` (and, for bounded units, of
    :data:`BOUND_VARIABLES`; for a model in reasoning mode, of
    :data:`TRACE_VARIABLES`, with its own number of traces; when the run has
    non-substantive options, ``sizes["option"] > 0``, of
    :data:`NONSUBSTANTIVE_VARIABLES`) to an array whose first axis runs over the
    unit's prompts; ``mode`` is the backend's measurement mode (``"exact"`` or
    ``"topk"``).
    """

    data: dict[str, np.ndarray]
    mode: str = "exact"
    cells: np.ndarray | None = None

    @classmethod
    def empty(
        cls, n: int, sizes: Mapping[str, int], *, bounded: bool = False, traces: int = 0,
        walk: bool = False,
    ) -> UnitResult:  # fmt: skip
        """A record of ``n`` prompts filled with each variable's fill value.

        Parameters
        ----------
        n : int
            The number of prompts (the length of every array's first axis).
        sizes : Mapping of str to int
            The lengths of the per-cell dims (``score``, ``rank``, ``temperature``,
            ``top_p``), as :attr:`CollectOptions.sizes <xlikert.collect.CollectOptions.sizes>`
            gives them.
        bounded : bool, default False
            Add the certified bounds (:data:`~xlikert.core.schema.BOUND_VARIABLES`) and
            measure in mode ``"topk"``.
        traces : int, default 0
            Reasoning traces per prompt; above 0 adds the trace variables
            (:data:`~xlikert.core.schema.TRACE_VARIABLES`) with this many traces.
        walk : bool, default False
            Word answers read by the certified walk: adds the bounds and
            :data:`~xlikert.core.schema.WALK_VARIABLES`, in mode ``"exact"`` (the
            bound is stored beside the point, :mod:`xlikert.collect.answers.walk`).

        Returns
        -------
        UnitResult
            Every variable of the schema at its fill value (NaN, or ``""`` for text),
            to be filled in by a backend.

        Examples
        --------
        >>> r = UnitResult.empty(2, {"score": 7, "rank": 3, "temperature": 1, "top_p": 2})
        >>> r.data["decoding_pmf"].shape, r.data["topk_token"][0, 0] == ""
        ((2, 1, 2, 7), True)
        >>> UnitResult.empty(2, {"score": 7, "rank": 3, "temperature": 1, "top_p": 2},
        ...                  traces=4).data["trace_pmf"].shape
        (2, 4, 7)
        """
        sizes = {**sizes, "trace": traces}
        table = variable_table(
            bounded=bounded or walk, traces=traces, nonsubstantive=sizes.get("option", 0) > 0,
            scripts=sizes.get("script", 0) > 0, walk=walk,
        )  # fmt: skip
        data = {k: v.full(_shape(v, n, sizes)) for k, v in table.items()}
        return cls(data, mode="topk" if bounded else "exact")

    @property
    def walked(self) -> bool:
        """Whether the record holds the walk's variables (word answers read by the walk).

        Examples
        --------
        >>> from xlikert.collect import CollectOptions, UnitResult
        >>> UnitResult.empty(2, CollectOptions(scale=(1, 2, 3)).sizes).walked
        False
        """
        return "answer_passes" in self.data

    @property
    def placed_cells(self) -> np.ndarray:
        """:attr:`cells`, known: the flat cell indices of a unit the runner placed.

        Raises
        ------
        CollectionError
            A unit not placed yet (its ``cells`` are None).

        Examples
        --------
        >>> r = UnitResult.empty(2, {"score": 3, "rank": 1, "temperature": 1, "top_p": 1})
        >>> r.cells = np.array([4, 7])
        >>> r.placed_cells.tolist()
        [4, 7]
        """
        if self.cells is None:
            raise CollectionError("internal error: a unit read before the runner placed it")
        return self.cells

    @property
    def bounded(self) -> bool:
        """Whether the record holds certified bounds (a unit measured in mode ``"topk"``).

        Returns
        -------
        bool
            True where ``data`` has the bound variables (``pmf_lower`` and the others).

        Examples
        --------
        >>> sizes = {"score": 5, "rank": 3, "temperature": 1, "top_p": 1}
        >>> UnitResult.empty(2, sizes).bounded, UnitResult.empty(2, sizes, bounded=True).bounded
        (False, True)
        """
        return "pmf_lower" in self.data

    @property
    def traces(self) -> int:
        """Traces per prompt (0: not in reasoning mode).

        Returns
        -------
        int
            The length of ``trace_pmf``'s second axis, or 0 without it.

        Examples
        --------
        >>> sizes = {"score": 5, "rank": 3, "temperature": 1, "top_p": 1}
        >>> UnitResult.empty(2, sizes).traces, UnitResult.empty(2, sizes, traces=4).traces
        (0, 4)
        """
        return int(self.shape("trace_pmf")[1]) if "trace_pmf" in self.data else 0

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of variable ``name`` (a stored unit gives it without reading the data).

        Parameters
        ----------
        name : str
            A variable of :attr:`data`.

        Returns
        -------
        tuple of int
            Its shape (the first axis: the unit's prompts).

        Examples
        --------
        >>> UnitResult.empty(2, {"score": 5, "rank": 3, "temperature": 1, "top_p": 1}).shape("pmf")
        (2, 5)
        """
        return tuple(np.shape(self.data[name]))

    def check(self, n: int, sizes: Mapping[str, int]) -> None:
        """Raise when a variable is missing or has the wrong shape (a backend bug).

        Parameters
        ----------
        n : int
            The number of prompts the backend was given.
        sizes : Mapping of str to int
            The lengths of the per-cell dims (as for :meth:`empty`);
            ``sizes["trace"]`` (default 0) is the number of traces the model samples.

        Raises
        ------
        CollectionError
            A variable missing or of the wrong shape, or the wrong number of traces,
            naming the variable and both shapes.

        Examples
        --------
        >>> sizes = {"score": 5, "rank": 3, "temperature": 1, "top_p": 1}
        >>> UnitResult.empty(2, sizes).check(2, sizes)  # passes silently
        >>> UnitResult.empty(2, sizes).check(3, sizes)
        Traceback (most recent call last):
        ...
        xlikert.core.errors.CollectionError: internal error: backend returned 'pmf' with shape (2, 5), ...
        """
        traces = int(sizes.get("trace", 0))
        if self.traces != traces:
            raise CollectionError(
                f"internal error: backend returned {self.traces} trace(s) per prompt, "
                f"expected {traces}"
            )
        table = variable_table(
            bounded=self.bounded, traces=traces, nonsubstantive=sizes.get("option", 0) > 0,
            scripts=sizes.get("script", 0) > 0, walk=self.walked,
        )  # fmt: skip
        for k, v in table.items():
            want = _shape(v, n, {**sizes, "trace": traces})
            got = np.shape(self.data[k]) if k in self.data else None
            if got != want:
                raise CollectionError(
                    f"internal error: backend returned {k!r} with shape {got}, expected {want}"
                )

    # ------------------------------------------------------------------ storage
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays for ``np.savez`` (text as fixed-width unicode).

        Returns
        -------
        dict of str to numpy.ndarray
            Each variable (text as fixed-width unicode), ``"mode"`` (a 0-d string
            array) and, where set, ``"cells"`` (the unit's cell indices, int64);
            :meth:`from_arrays` reads it back.

        Examples
        --------
        >>> sizes = {"score": 5, "rank": 3, "temperature": 1, "top_p": 1}
        >>> arrays = UnitResult.empty(2, sizes).to_arrays()
        >>> arrays["pmf"].shape, str(arrays["mode"]), arrays["prompt_text"].dtype.kind
        ((2, 5), 'exact', 'U')
        """
        out = {
            k: (np.asarray(v).astype(str) if v.dtype == object else v) for k, v in self.data.items()
        }
        out["mode"] = np.array(self.mode)
        if self.cells is not None:
            out["cells"] = np.asarray(self.cells, dtype=np.int64)
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> UnitResult:
        """The record :meth:`to_arrays` wrote (as ``np.load`` gives it back).

        Parameters
        ----------
        arrays : Mapping of str to numpy.ndarray
            The variables, and optionally ``"mode"`` (default ``"exact"``) and
            ``"cells"``.

        Returns
        -------
        UnitResult
            The record, its arrays as given.

        Examples
        --------
        >>> sizes = {"score": 5, "rank": 3, "temperature": 1, "top_p": 1}
        >>> back = UnitResult.from_arrays(UnitResult.empty(2, sizes, bounded=True).to_arrays())
        >>> back.mode, back.bounded, back.cells is None
        ('topk', True, True)
        """
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
    cells: Mapping[str, np.ndarray] | None = None,
    context: bool = False,
    elicitation: bool = False,
    block_cells: int | None = None,
) -> xr.Dataset:
    """Scatter the units of every model into the results Dataset (the results schema).

    Parameters
    ----------
    prompts
        The prompts Dataset (its item coords and attrs are carried over).
    user
        The user prompts, dims ``(*factors, item)``: the cell layout.
    model_names
        The ``model`` coord.
    sizes, coords
        Lengths and coords of ``score``, ``rank``, ``temperature``, ``top_p``
        (and ``option``, adding :data:`NONSUBSTANTIVE_VARIABLES` when > 0);
        ``sizes["trace"]`` (default 0): the most traces of any model in
        reasoning mode (adds :data:`TRACE_VARIABLES` when > 0).
    units
        ``(model index, UnitResult with cells)`` pairs.
    infos
        Per-model provenance, by model index.
    shard
        ``(i, n)`` for a shard file: adds the ``computed`` mask.
    cells
        Variables of :data:`~xlikert.core.schema.CELL_VARIABLES` (each cell's key and
        origin), each a flat array over (model, cell): model-major, cells in the
        order of ``user``'s values.
    context
        The run administers some cells sequentially: adds
        :data:`~xlikert.core.schema.CONTEXT_VARIABLES` (``history`` as long as the most
        histories any item read; ``other_item`` the item dim).
    elicitation
        The run has an elicitation factor: adds
        :data:`~xlikert.core.schema.ELICITATION_VARIABLES`.
    block_cells
        None: every variable in memory. Else each variable is a dask array of blocks of
        about this many cells (along the model and the first factor), each block filled
        from the units when it is computed: ``to_netcdf`` writes the file block by block,
        so the units' data (lazy, :class:`~xlikert.collect.run.stream.StoredUnit`) is
        read from disk a block at a time and the whole never sits in memory.
    """
    M, ncell = len(model_names), int(np.prod(user.shape))
    bounded = any(r.bounded for _, r in units)
    walked = any(r.walked for _, r in units)
    n_traces = int(sizes.get("trace", 0))
    histories = [r.shape("history_pmf")[1] for _, r in units if "history_pmf" in r.data]
    sizes = {**sizes, "trace": n_traces, "history": max(histories, default=0),
             "other_item": user.sizes["item"], "other_score": sizes["score"]}  # fmt: skip
    table = variable_table(
        bounded=bounded, traces=n_traces, context=context,
        nonsubstantive=sizes.get("option", 0) > 0, scripts=sizes.get("script", 0) > 0,
        elicitation=elicitation, walk=walked,
    )  # fmt: skip
    rows_of = [mi * ncell + np.asarray(r.cells, dtype=np.int64) for mi, r in units]
    computed = np.zeros(M * ncell, dtype=bool)
    for rows in rows_of:
        computed[rows] = True
    dims = (MODEL_DIM, *user.dims)
    full = (M, *user.shape)
    data_vars = {}
    for k, v in table.items():
        if block_cells is None:
            arr = _fill(k, v, units, rows_of, sizes, 0, M * ncell).reshape(
                *full, *(sizes[d] for d in v.dims)
            )
        else:
            arr = _blocks(k, v, units, rows_of, sizes, full, block_cells)
        data_vars[k] = xr.Variable((*dims, *v.dims), arr, dict(v.attrs))
    all_coords: dict[str, Any] = {str(d): user[d] for d in user.dims if d in user.coords}
    for name, co in prompts.coords.items():  # item coords (reverse_keyed, subscale, ...)
        if str(name) not in all_coords and set(co.dims) <= set(user.dims):
            all_coords[str(name)] = co
    all_coords[MODEL_DIM] = list(model_names)
    all_coords.update(coords)
    if context:
        all_coords["other_item"] = np.asarray(user["item"].values)
        all_coords["other_score"] = np.asarray(coords["score"])
    if n_traces:
        all_coords["trace"] = np.arange(n_traces)
    ds = xr.Dataset(data_vars, coords=all_coords, attrs=dict(prompts.attrs))
    _describe_modes(ds, bounded=bounded, reasoning=bool(n_traces))
    if walked:
        ds.attrs["walk_rule"] = WALK_RULE
        ds["pmf"].attrs["bounded"] = (
            "where pmf_lower < pmf_upper the pmf is only bounded: a top-k server (bounds_rule) "
            "or word answers whose walk stopped at answer_tol (walk_rule, answer_error)"
        )
    if "script_mass" in ds:
        ds.attrs.update(numeral_rule=NUMERAL_RULE, unicode_version=UNICODE_VERSION)
    for k, flat_values in (cells or {}).items():
        values = np.asarray(flat_values, dtype=object).reshape(full).astype(str)
        ds[k] = xr.Variable(dims, values, dict(CELL_VARIABLES[k].attrs))
    if shard:
        ds["computed"] = (dims, computed.reshape(full), dict(PROMPT_VARIABLES["computed"].attrs))
        ds.attrs["shard"] = f"{shard[0]}/{shard[1]}"
    # Per-model provenance: attrs["models"][name] (a dict; xlikert.core.io stores it as JSON).
    ds.attrs["models"] = {model_names[mi]: dict(infos.get(mi, {})) for mi in range(M)}
    ds.attrs.update(xlikert_version=__version__, date_created=_now())
    describe_models(ds)
    return ds


def _fill(k, v, units, rows_of, sizes, lo: int, hi: int) -> np.ndarray:
    """Variable ``k`` (schema ``v``) over the flat (model, cell) rows ``lo`` to ``hi``: its
    fill value, the units' values scattered in (text as fixed-width unicode)."""
    out = v.full(_shape(v, hi - lo, sizes))
    for (_, r), rows in zip(units, rows_of, strict=True):
        inside = (rows >= lo) & (rows < hi)
        if not inside.any():
            continue
        at = rows[inside] - lo
        if k in r.data:
            x = np.asarray(r.data[k])[inside]
            if k in TRACE_VARIABLES and TRACE_VARIABLES[k].dims[:1] == ("trace",):
                out[at, : r.traces] = x  # fewer traces: the rest stays fill
            elif k in CONTEXT_VARIABLES and CONTEXT_VARIABLES[k].dims[:1] == ("history",):
                out[at, : np.shape(x)[1]] = x  # padded with fill
            else:
                out[at] = x
        elif k in BOUND_VARIABLES:  # an exact unit in a bounded file: the point itself
            out[at] = np.asarray(r.data["pmf" if k.startswith("pmf") else "valid_mass"])[inside]
        elif k in NONSUBSTANTIVE_BOUND_VARIABLES:
            out[at] = np.asarray(r.data["nonsubstantive_mass"])[inside]
        elif k in SCRIPT_BOUND_VARIABLES and "script_mass" in r.data:
            out[at] = np.asarray(r.data["script_mass"])[inside]
        elif k == "pmf_se":  # a model not in reasoning mode: its pmf is exact
            out[at] = 0.0
    return out.astype(str) if v.is_text else out


def _blocks(k, v, units, rows_of, sizes, full: tuple[int, ...], block_cells: int):
    """Variable ``k`` as a dask array (dims: model, the factors, the item, its own) of
    blocks along the model and the first factor, each filled by :func:`_fill` when computed."""
    import dask
    import dask.array as da

    inner = full[2:]
    per = int(np.prod(inner, dtype=np.int64))  # rows per level of the first factor
    step = max(1, block_cells // max(per, 1))
    own = tuple(sizes[d] for d in v.dims)
    dtype = np.dtype(str) if v.is_text else v.full((0, *own)).dtype

    def block(lo: int, n: int) -> np.ndarray:
        return _fill(k, v, units, rows_of, sizes, lo, lo + n * per).reshape(1, n, *inner, *own)

    models = []
    for mi in range(full[0]):
        parts = []
        for i in range(0, full[1], step):
            n = min(step, full[1] - i)
            lo = (mi * full[1] + i) * per
            parts.append(da.from_delayed(dask.delayed(block, pure=False)(lo, n),
                                         (1, n, *inner, *own), dtype=dtype))  # fmt: skip
        models.append(da.concatenate(parts, axis=1))
    return da.concatenate(models, axis=0)


def _describe_modes(ds: xr.Dataset, *, bounded: bool, reasoning: bool) -> None:
    """The attrs of a file with bounded cells (top-k servers) or sampled traces."""
    if bounded:
        ds.attrs["bounds_rule"] = TOPK_BOUNDS_RULE
        ds["pmf"].attrs["bounded"] = (
            "where pmf_lower < pmf_upper the pmf is only bounded (top-k server): the stored "
            "value is the listed valid mass renormalised, see bounds_rule"
        )
    if not reasoning:
        return
    ds.attrs["reasoning_rule"] = REASONING_RULE
    ds.attrs["sampling_error"] = (
        "for the models in reasoning mode (ds.likert.attrs['reasoning_models']; their settings in "
        "ds.likert.attrs['models'][name]['reasoning']) pmf, valid_mass, decoding_pmf and "
        "decoding_valid_mass are means over sampled traces and carry Monte Carlo error; "
        "pmf_se is the standard error of pmf per score; trace_pmf and trace_valid_mass are "
        "exact given each trace; every other model's numbers are exact (pmf_se = 0)"
    )
    for k in SAMPLED_VARIABLES:
        if k != "pmf_se" and k in ds:
            ds[k].attrs["sampling_error"] = (
                "mean over sampled traces for models in reasoning mode; see pmf_se and "
                "the file's sampling_error attribute"
            )
    ds["topk_token"].attrs["reasoning"] = "empty for models in reasoning mode"


def describe_models(ds: xr.Dataset) -> None:
    """Set what ``ds.attrs["models"]`` says of the measurement, in place: the file's
    ``collection_protocol`` and ``decoding_tie_rule``, and ``decoding_pmf``'s description
    (:func:`assemble`; :func:`~xlikert.collect.merge_shards` after joining the shards'
    models)."""
    from ..core.io import read_attrs

    models = read_attrs(ds)["models"]
    ds["decoding_pmf"].attrs["description"] = _per_model(
        models, "decoding_rule", "the decoding grid"
    )
    ds.attrs.update(
        collection_protocol=(
            _per_model(models, "collection_protocol", "the measurement")
            + ". Valid tokens = vocabulary tokens whose surface form is a scale value with an "
            "optional leading ' ', '▁' or 'Ġ'; each model's answer rule (one token, split "
            "space, multi-token), backend and collection_protocol are in "
            "ds.likert.attrs['models'][name]"
        ),
        decoding_tie_rule=DECODING_TIE_RULE,
    )


def _per_model(models: dict[str, dict[str, Any]], key: str, what: str) -> str:
    """What the models' provenance says under ``key``: the one text when all agree, else
    each text after the models it applies to (a backend that does not record it is named)."""
    texts: dict[str, list[str]] = {}
    for name, info in models.items():
        text = info.get(key) or f"{what} not recorded by the backend of model {name!r}"
        texts.setdefault(str(text), []).append(name)
    if len(texts) == 1:
        return next(iter(texts))
    return "; ".join(f"models {', '.join(map(repr, names))}: {t}" for t, names in texts.items())


class ReadSequence(NamedTuple):
    """The token ids a model read before an answer: prompt, trace and closing.

    ``ids`` is their concatenation: one forward pass over it gives the next-token
    logits the stored PMF was read from (the answer rule then reads the valid
    tokens, and with the split-space rule a bare space token, after it).
    """

    prompt: np.ndarray
    trace: np.ndarray
    closing: np.ndarray

    @property
    def ids(self) -> np.ndarray:
        return np.concatenate([self.prompt, self.trace, self.closing])


def read_sequence(ds: xr.Dataset, *, trace: int | None = None, **cell: Any) -> ReadSequence:
    """The exact token ids read for one cell of a results file (and one of its traces).

    Retokenising ``prompt_text`` and the decoded trace is not enough to
    reproduce a number: a tokenizer may merge tokens across the boundaries
    (a trace ending in ``,`` and a closing starting with a newline become one
    token the model never saw). The file stores the ids themselves.

    Parameters
    ----------
    ds : xarray.Dataset
        A results Dataset (``collect``, :func:`xlikert.open_results`, or plain
        ``xr.open_dataset``).
    trace : int, optional
        Position of the trace along ``trace`` (reasoning mode); None in exact mode.
    **cell : Any
        One level of every factor and the item (``model=..., target=..., item=...``).

    Returns
    -------
    ReadSequence
        ``prompt``, ``trace`` and ``closing`` ids (int64; the last two empty in
        exact mode) and their concatenation ``ids``.

    Raises
    ------
    CollectionError
        The file holds no ids (an older file, or the openai backend, which sent
        text), the cell is not one cell, or the trace does not exist.

    Examples
    --------
    The ids are stored as text (:func:`xlikert.core.codecs.encode_token_ids`); a
    one-cell results file made by hand:

    >>> from xlikert.core.codecs import encode_token_ids
    >>> ds = xr.Dataset(
    ...     {"prompt_token_ids": (("model", "item"), [[encode_token_ids([1, 9, 42])]])},
    ...     coords={"model": ["m"], "item": ["1"]},
    ... )
    >>> read_sequence(ds, model="m", item="1").ids
    array([ 1,  9, 42])
    >>> read_sequence(ds, model="m")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: read_sequence needs one level of each of ['item']

    The sequence one trace of a reasoning run was read after, scored again:

    >>> ds = xl.open_results("reasoning.nc")  # doctest: +SKIP
    >>> seq = read_sequence(ds, model="qwen-cot", target="USA", item="1", trace=0)  # doctest: +SKIP
    >>> logits = model(torch.tensor([seq.ids])).logits[0, -1]  # doctest: +SKIP
    """
    if "prompt_token_ids" not in ds:
        raise CollectionError(
            "this results file holds no token ids ('prompt_token_ids'): it was written by an "
            "older xlikert; rerun the collection to store them"
        )
    missing = [d for d in ds["prompt_token_ids"].dims if d not in cell]
    if missing:
        raise CollectionError(f"read_sequence needs one level of each of {missing}")
    at = ds.sel(cell)
    prompt = str(at["prompt_token_ids"].values)
    if not prompt:
        raise CollectionError(
            f"no token ids stored for {cell}: the backend sent text, not ids "
            "(OpenAI-compatible servers tokenise on their side)"
        )
    empty = np.empty(0, dtype=np.int64)
    if trace is None:
        return ReadSequence(decode_token_ids(prompt), empty, empty)
    if "trace_token_ids" not in ds:
        raise CollectionError("this results file holds no traces (not a reasoning run)")
    if not 0 <= int(trace) < ds.sizes["trace"]:
        raise CollectionError(f"trace {trace} out of range: the file holds {ds.sizes['trace']}")
    ids = str(at["trace_token_ids"].isel(trace=int(trace)).values)
    if not ids:
        raise CollectionError(f"no trace {trace} for {cell}: this model sampled fewer traces")
    closing = str(at["trace_closing_ids"].isel(trace=int(trace)).values)
    return ReadSequence(decode_token_ids(prompt), decode_token_ids(ids), decode_token_ids(closing))
