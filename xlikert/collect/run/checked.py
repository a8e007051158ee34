"""What ``collect()`` was asked, checked once before anything loads.

:func:`check_run` reads a call's arguments into one :class:`CheckedRun`: the prompts'
``system`` and ``user`` prompts, the model entries (each checked by its backend),
the run's options (the call's options and overrides, the scale and the ``option``
axis the prompts carry, validated in one step), each cell's answer labels, the
sequential conditions, the shard, the output and the results files to reuse.
Every later step of the run (:mod:`xlikert.collect.run.runner`) reads it and
changes none of it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xarray as xr

from ...core.dims import MODEL_DIM, check_factor_name
from ...core.errors import CollectionError
from ..context.administration import Conversations
from ..elicitation import Elicitations, check_elicitation_backends
from ..options import CollectOptions
from ..protocol import backend_module, backend_of
from .labels import cell_labels, option_axis

__all__ = ["CheckedRun", "check_run", "parse_shard"]


@dataclass(frozen=True)
class CheckedRun:
    """A call of ``collect()``, checked: what every step of the run reads.

    Attributes
    ----------
    prompts
        The prompts Dataset as given (its item coords and attrs go into the results).
    system, user
        Its ``system`` and ``user`` prompts broadcast to one another, dims
        ``(*factors, "item")``: one cell per element.
    models
        The model entries, each with a ``name`` and a ``source``.
    checked
        Each entry as its backend's ``check`` returned it (what identifies the results).
    options
        The run's options, validated once: the call's ``options`` and overrides, the
        prompts' scale where none was given, and their ``option`` axis.
    labels
        Each cell's answer labels (:func:`~xlikert.collect.run.labels.cell_labels`);
        None: the run's options.
    context
        The sequential conditions (:class:`~xlikert.collect.context.administration.Conversations`),
        or None.
    elicitations
        Each cell's elicitation level (:class:`~xlikert.collect.elicitation.Elicitations`),
        or None (no elicitation factor).
    shard
        ``(i, n)``: this run computes part i of n; None: the whole run.
    output
        The results file to write, or None.
    reuse
        Earlier results files to copy cells from.
    """

    prompts: xr.Dataset
    system: xr.DataArray
    user: xr.DataArray
    models: list[dict[str, Any]]
    checked: list[dict[str, Any]]
    options: CollectOptions
    labels: list[tuple[str, ...] | None] | None
    context: Conversations | None
    elicitations: Elicitations | None
    shard: tuple[int, int] | None
    output: Path | None
    reuse: list[Path]


def check_run(
    prompts: xr.Dataset,
    models: Sequence[dict[str, Any] | str] | dict[str, Any] | str,
    output: str | os.PathLike | None = None,
    *,
    options: CollectOptions | None = None,
    overrides: dict[str, Any] | None = None,
    shard: str | tuple[int, int] | None = None,
    reuse: Sequence[str | os.PathLike] = (),
) -> CheckedRun:
    """Check a call of ``collect()`` (its arguments as :func:`~xlikert.collect.collect`
    takes them; ``overrides``: its keyword overrides of ``options``).

    Raises
    ------
    CollectionError
        Bad prompts, models, options, shard, output path or reuse files, each named.
    """
    given = _given_options(options)
    system, user = _check_prompts(prompts)
    run_options = _run_options(given, overrides or {}, prompts)
    labels = cell_labels(prompts, user, run_options)  # a format factor, items' own options
    entries = _normalise_models(models)
    context = Conversations.of(prompts, user)
    if context is not None:
        _check_sequential_backends(entries)
    elicitations = Elicitations.of(user, prompts)
    if elicitations is not None:
        check_elicitation_backends(entries, elicitations, run_options)
        if context is not None and elicitations.used != ["first_token"]:
            raise CollectionError(
                "sequential administration reads the first token after every answer history; "
                f"it does not combine with the elicitation levels {elicitations.used[1:]} yet: "
                "give administration = ['isolated'] or elicitation = ['first_token']"
            )
    shard_ = parse_shard(shard)
    checked = [backend_module(spec).check(spec, run_options) for spec in entries]
    out = _check_output(output)
    return CheckedRun(
        prompts=prompts, system=system, user=user, models=entries, checked=checked,
        options=run_options, labels=labels, context=context, elicitations=elicitations,
        shard=shard_, output=out,
        reuse=_check_reuse(reuse, out),
    )  # fmt: skip


def _given_options(options: CollectOptions | None) -> CollectOptions:
    """The call's ``options`` (default: the defaults), refused if not a CollectOptions."""
    if options is None:
        return CollectOptions()
    if not isinstance(options, CollectOptions):
        raise CollectionError(
            f"options must be a CollectOptions (CollectOptions.from_mapping(d) builds one from "
            f"a dict), got {type(options).__name__}"
        )
    return options


def _run_options(
    given: CollectOptions, overrides: dict[str, Any], prompts: xr.Dataset
) -> CollectOptions:
    """The run's options, validated in one step: ``given`` with the call's ``overrides``
    (unknown names refused), the prompts' scale where none is given and the ``option``
    axis their answer labels carry (:func:`~xlikert.collect.run.labels.option_axis`)."""
    changes = dict(overrides)
    changes["scale"] = _scale_of(prompts, changes.get("scale", given.scale))
    names = option_axis(prompts)
    if names is not None:
        changes["nonsubstantive"] = names
    return given.replace(where="collect()", **changes)


def parse_shard(shard: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """Parse ``"i/n"`` (1-based) into ``(i, n)``.

    Parameters
    ----------
    shard : str, tuple of (int, int) or None
        ``"i/n"`` (the ``--shard`` option: part i of n, counted from 1), the pair
        ``(i, n)``, or None (no sharding).

    Returns
    -------
    tuple of (int, int) or None
        ``(i, n)``, checked; None for None.

    Raises
    ------
    CollectionError
        A text that is not ``"i/n"``, or ``i`` outside ``1..n``.

    Examples
    --------
    >>> parse_shard("2/4")
    (2, 4)
    >>> parse_shard("5/4")
    Traceback (most recent call last):
    ...
    xlikert.core.errors.CollectionError: shard 5/4: need 1 <= i <= n
    """
    if shard is None:
        return None
    if isinstance(shard, str):
        try:
            i, n = (int(x) for x in shard.split("/"))
        except ValueError:
            raise CollectionError(f"--shard must look like i/n (e.g. 1/4), got {shard!r}") from None
    else:
        i, n = shard
    if not (n >= 1 and 1 <= i <= n):
        raise CollectionError(f"shard {i}/{n}: need 1 <= i <= n")
    return (i, n)


def _scale_of(prompts: xr.Dataset, scale) -> tuple[int, ...]:
    if scale is not None:
        return scale
    if "score" in prompts.coords:
        return tuple(int(v) for v in prompts["score"].values)
    attrs = prompts.attrs
    lo = next((attrs[k] for k in attrs if str(k).endswith("scale_min")), None)
    hi = next((attrs[k] for k in attrs if str(k).endswith("scale_max")), None)
    if lo is None or hi is None:
        raise CollectionError(
            "cannot tell the scale: the prompts Dataset has no 'score' coord and no "
            "'scale_min'/'scale_max' attrs; pass scale=range(1, 8)"
        )
    return tuple(range(int(lo), int(hi) + 1))


def _normalise_models(models) -> list[dict[str, Any]]:
    if isinstance(models, str | dict):
        models = [models]
    out = []
    for m in models:
        d = {"name": m, "source": m} if isinstance(m, str) else dict(m)
        if "source" not in d and "name" not in d:
            raise CollectionError(f"model entry {m!r} needs a 'name' or 'source'")
        d.setdefault("source", d.get("name"))
        d.setdefault("name", d["source"])
        d["name"], d["source"] = str(d["name"]), str(d["source"])
        out.append(d)
    names = [d["name"] for d in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise CollectionError(f"model names must be unique; repeated: {dup}")
    if not out:
        raise CollectionError("no models given")
    return out


def _check_prompts(prompts: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    for v in ("system", "user"):
        if v not in prompts:
            raise CollectionError(
                f"prompts Dataset lacks variable {v!r}; it has {list(prompts.data_vars)} "
                "(build it with Experiment.build_prompts())"
            )
    if "item" not in prompts["user"].dims:
        raise CollectionError(f"prompts 'user' has no 'item' dim; dims {prompts['user'].dims}")
    if MODEL_DIM in prompts["user"].dims or MODEL_DIM in prompts["system"].dims:
        raise CollectionError(
            f"prompts must not have a {MODEL_DIM!r} dim; models are given separately"
        )
    system, user = xr.broadcast(prompts["system"], prompts["user"])
    for d in user.dims:  # factor names must not take the names of xlikert's own dims
        if d != "item":
            check_factor_name(d, where=f"prompts factor {d!r}")
    dims = [d for d in user.dims if d != "item"] + ["item"]
    return system.transpose(*dims), user.transpose(*dims)


def _check_output(output) -> Path | None:
    if output is None:
        return None
    out = Path(output)
    if out.is_dir():
        raise CollectionError(f"output {out} is a directory; give a .nc file path")
    if not out.parent.is_dir():
        raise CollectionError(f"cannot write output {out}: directory {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise CollectionError(f"cannot write output {out}: directory {out.parent} is not writable")
    return out


def _check_sequential_backends(models: Sequence[dict[str, Any]]) -> None:
    """Sequential administration needs a backend that reads token-id contexts exactly.

    Raises
    ------
    CollectionError
        A model entry of the openai backend (it renders the conversation itself and lists
        top-k log-probabilities only), named, before anything loads.
    """
    for spec in models:
        if backend_of(spec) == "openai":
            raise CollectionError(
                f"model {spec['name']!r}: sequential administration reads the exact answer "
                "distribution after every answer history from token ids with a reused prefix; "
                "an OpenAI-compatible server cannot do that exactly (it renders the "
                "conversation itself and lists top-k log-probabilities only). Use the "
                "transformers or the in-process vLLM backend, or administration = 'isolated'"
            )


def _check_reuse(paths: Sequence[str | os.PathLike], out_path: Path | None) -> list[Path]:
    """The results files to reuse cells from: existing files, not the output itself."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    out = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise CollectionError(f"--reuse {p}: no such results file")
        if out_path is not None and path.resolve() == out_path.resolve():
            raise CollectionError(
                f"--reuse {p} is the output itself: rerunning resumes it, and --overwrite "
                "replaces it reusing its cells"
            )
        out.append(path)
    return out
