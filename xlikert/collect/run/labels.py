"""Each cell's answer labels, read off the prompts with the run's options.

The prompts of a run may carry their own answer labels (``answer_label``, by a format
factor or by item) and non-substantive options (``option_label``); :func:`cell_labels`
gives each cell the labels its answer rule reads (:mod:`xlikert.collect.answers`), and
:func:`option_axis` the run's ``option`` axis.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ...core.errors import CollectionError
from ..options import CollectOptions

__all__ = ["cell_labels", "option_axis"]


def option_axis(prompts: xr.Dataset) -> tuple[str, ...] | None:
    """The run's ``option`` axis from the prompts: the names of the non-substantive options
    their ``option_label`` offers (``()``: none), or None when the prompts carry no answer
    labels (the run's ``nonsubstantive`` option stands).

    Examples
    --------
    >>> import xarray as xr
    >>> option_axis(xr.Dataset())
    >>> labels = xr.DataArray([["8", ""]], dims=("item", "option"),
    ...                       coords={"option": ["Don't know", "Refused"]})
    >>> option_axis(xr.Dataset({"answer_label": ("score", ["1", "2"]), "option_label": labels}))
    ("Don't know", 'Refused')
    """
    if "answer_label" not in prompts:
        return None
    opt = prompts.get("option_label")
    if opt is None or "option" not in opt.dims:  # none, or misplaced (cell_labels says so)
        return ()
    return tuple(str(x) for x in opt["option"].values)


def cell_labels(
    prompts: xr.Dataset, user: xr.DataArray, options: CollectOptions
) -> list[tuple[str, ...] | None] | None:
    """Each cell's answer labels from the prompts, read with the run's options.

    ``answer_label`` gives the label of each score under each level of a format
    factor (dims ``(<format factor>, score)``) or, when the items have their own
    options, of each item's points (dims ``([<format factor>], item, score)``,
    ``""`` off its support); ``option_label`` (dims ``([<format factor>], item,
    option)``) the label of each non-substantive option it offers. A cell's labels
    are its scores' labels, then its options' (see
    :attr:`~xlikert.collect.options.CollectOptions.answer_labels`); None where they
    are the digits of every score and no option is offered.

    ``options`` are the run's, checked once: their ``nonsubstantive`` is the prompts'
    ``option`` axis (:func:`option_axis`), their ``scale`` the prompts' scores.

    Returns
    -------
    list or None
        One entry per cell of ``user`` (flattened in its dim order), or None when
        the prompts carry no answer labels.

    Raises
    ------
    CollectionError
        Labels on dims the prompts do not have, or a ``score`` coord that is not the
        run's scale; run-wide ``answer_labels`` given as well.
    LabelMappingError
        A cell's labels that are not one distinct label per point and option.
    """
    if "answer_label" not in prompts:
        return None
    lab = prompts["answer_label"]
    opt = prompts.get("option_label")
    for var, extra in ((lab, "score"), (opt, "option")):
        if var is None:
            continue
        others = [d for d in var.dims if d != extra]
        if extra not in var.dims or not set(others) <= set(user.dims) or not others:
            raise CollectionError(
                f"prompts {var.name!r} must have dims ([<format factor>], [item], {extra!r}) "
                f"with the others dims of the prompts {user.dims}; got {var.dims}"
            )
    if options.answer_labels is not None:
        raise CollectionError(
            "answer_labels is set for the run and the prompts carry their own (answer_label "
            f"over {[d for d in lab.dims if d != 'score']}); drop one"
        )
    scores = tuple(int(v) for v in lab["score"].values)
    if scores != options.known_scale:
        raise CollectionError(
            f"prompts 'answer_label' is on the scores {list(scores)}, the run's scale is "
            f"{list(options.known_scale)}"
        )
    digits = tuple(str(y) for y in scores)
    rows = _rows(lab, user, "score")
    if opt is not None:
        rows = np.concatenate([rows, _rows(opt, user, "option")], axis=1)
    named = {d for var in (lab, opt) if var is not None for d in var.dims}
    checked: dict[tuple[str, ...], tuple[str, ...] | None] = {}
    out = []
    for k, row in enumerate(rows):
        labels = tuple(str(x) for x in row)
        if labels not in checked:
            where = _where(user, k, named)
            options.replace(where=where, answer_labels=labels)  # checks them
            plain = labels[: len(scores)] == digits and not any(labels[len(scores) :])
            checked[labels] = None if plain else labels
        out.append(checked[labels])
    return out


def _rows(var: xr.DataArray, user: xr.DataArray, last: str) -> np.ndarray:
    """``var`` broadcast over the cells of ``user``: ``(cells, len(last))`` strings."""
    full = var.astype(str).broadcast_like(user).transpose(*user.dims, last)
    return np.asarray(full.values).reshape(-1, full.sizes[last])


def _where(user: xr.DataArray, k: int, dims: set) -> str:
    """The cell ``k`` of ``user`` (flattened) named by its levels of ``dims``."""
    index = np.unravel_index(k, user.shape)
    return ", ".join(
        f"{d} {user[d].values[i]!r}" if d == "item" else f"{d} level {user[d].values[i]!r}"
        for d, i in zip(user.dims, index, strict=True)
        if d in dims
    )
