"""The prompts Dataset: the arrays :meth:`Experiment.build_prompts` assembles.

Each condition's rendered prompts, the answer labels of a format factor, the item
positions of an item-order factor, the items' own options and the provenance attrs;
and :func:`prompts_to_frame`, one row per prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..core.schema import (
    INSTRUMENT_LANGUAGES_ATTR,
    ITEM_SCALE_VARIABLES,
    LANGUAGE_FACTOR_ATTR,
    SCALE_LABELS_BY_LANGUAGE_ATTR,
)
from .file_schema import SCALE_FIELDS
from .item_order import ITEM_POSITION
from .perturbation import Perturbation, perturbation_attrs, perturbed_prompt
from .scale import ShownScale, anchors_json
from .template import Template

__all__ = ["prompts_to_frame"]


def _provenance_path(path: str) -> str:
    """A built-in file as ``<xlikert>/design/...``, so results carry no local directory."""
    package = Path(__file__).resolve().parents[1]
    try:
        return f"<xlikert>/{Path(path).resolve().relative_to(package).as_posix()}"
    except ValueError:
        return str(path)


#: The per-item labels a translation may change: carried over the language dim where
#: the languages' differ (the collection reads each cell with its language's labels).
LANGUAGE_LABELS = ("answer_label", "option_label", "score_label")


def build_languages(exp) -> xr.Dataset:
    """The prompts of every language (each its translated instrument's), on the
    ``language`` factor's dim in file order.

    ``system`` and ``user`` are each language's; so are ``answer_label``,
    ``option_label`` and ``score_label`` where the languages' differ (a translated
    label answered with, shown or named), else the one array all languages share. The
    ``option`` coordinate is the instrument's own labels in every language. The attrs
    ``scale_labels`` are the instrument's own language's anchors (the experiment's
    ``[scale]``'s where it has one), ``scale_labels_by_language`` every language's (a
    JSON object: language -> score -> label)."""
    lang = next(f for f in exp.factor_specs if f.kind == "language")
    parts = [exp.language_experiments[lv].build_prompts() for lv in lang.levels]
    differ = [name for name in LANGUAGE_LABELS if name in parts[0]
              and not all(p[name].equals(parts[0][name]) for p in parts[1:])]  # fmt: skip
    own = [name for name in ("stated_instruction",) if name in parts[0]]
    ds = xr.concat(parts, dim=lang.name, data_vars=["system", "user", *own, *differ],
                   coords="minimal",
                   compat="override", join="override", combine_attrs="override")  # fmt: skip
    ds = ds.assign_coords({lang.name: np.array(lang.levels, dtype=str)})
    order = [f.name for f in exp.factor_specs]
    for name in ("system", "user"):
        ds[name] = ds[name].transpose(*order, "item")
    for name in differ:  # the language dim first, as the format dim is
        var = ds[name]
        ds[name] = var.transpose(lang.name, *(d for d in var.dims if d != lang.name))
    ds.attrs[LANGUAGE_FACTOR_ATTR] = str(lang.name)
    # the scale's labels: the instrument's own language's, and each language's beside them
    ds.attrs["scale_labels"] = anchors_json(exp.anchors)
    ds.attrs[SCALE_LABELS_BY_LANGUAGE_ATTR] = json.dumps(
        {lv: {str(k): v for k, v in sorted(exp.language_experiments[lv].anchors.items())}
         for lv in lang.levels},
        ensure_ascii=False,
    )  # fmt: skip
    ds.attrs[INSTRUMENT_LANGUAGES_ATTR] = json.dumps(exp.instrument.sources, ensure_ascii=False)
    return ds


def render_condition(
    exp,
    idx: tuple[int, ...],
    values: dict[str, str],
    sys_t: Template | None,
    shown: tuple[ShownScale, ...],
    system: np.ndarray,
    user: np.ndarray,
    noise: Perturbation | None = None,
) -> None:
    """Fill one condition's prompts, every item with its own scale placeholders (and its
    text under the condition's perturbation, :mod:`.perturbation`)."""
    per_item_system = sys_t is not None and bool(set(sys_t.fields) & set(SCALE_FIELDS))
    sys_text = sys_t.render({**values, **shown[0].fields}) if sys_t is not None else ""
    for k, ut in enumerate(exp.user_templates):
        item_values = {**values, **shown[k].fields}
        user[(*idx, k)] = ut.render(item_values)
        if noise is not None:
            it = exp.items[k]
            item_t = exp.instrument.templates.get(f"item:{it.id}") or Template.parse(it.template)
            user[(*idx, k)] = perturbed_prompt(user[(*idx, k)], item_t, it.id, item_values, noise)
        if per_item_system and sys_t is not None:
            system[(*idx, k)] = sys_t.render(item_values)
        else:
            system[(*idx, k)] = sys_text


def format_labels(exp) -> xr.Dataset:
    """``answer_label (<format factor>, score)`` on the one scale (empty without a format)."""
    fmt = exp.format_factor
    if fmt is None:
        return xr.Dataset()
    labels = exp.answer_labels()
    score = np.arange(exp.scale_min, exp.scale_max + 1, dtype=np.int64)
    return xr.Dataset(
        {
            "answer_label": (
                (fmt.name, "score"),
                np.array(
                    [[labels[lv][y] for y in score.tolist()] for lv in fmt.levels],
                    dtype=np.str_,
                ),
                {
                    "description": "the answer label that means each score under each "
                    f"{fmt.name} level"
                },
            )
        },
        coords={fmt.name: np.array(fmt.levels, dtype=str), "score": score},
    )


def item_positions(exp, specs) -> xr.Dataset:
    """``item_position (<item-order factor>, item)``: the 0-based position at which each
    level asks each item in its conversation (empty without an item-order factor)."""
    order = next((f for f in specs if f.kind == "item_order"), None)
    if order is None:
        return xr.Dataset()
    n_items = len(exp.items)
    positions = [[list(order.orders[lv]).index(k) for k in range(n_items)]
                 for lv in order.levels]  # fmt: skip
    return xr.Dataset(
        {ITEM_POSITION: ((order.name, "item"), np.array(positions, dtype=np.int64),
                         {"description": f"0-based position at which each {order.name} "
                          "level asks each item in its conversation"})},
        coords={order.name: np.array(order.levels, dtype=str)},
    )  # fmt: skip


def per_item_variables(exp, shown: dict[str | None, tuple[ShownScale, ...]]) -> xr.Dataset:
    """Each item's support, nominal flag, answer labels, point labels and options."""
    scales = [exp.scale_of(it.id) for it in exp.items]
    score = np.arange(min(s.min for s in scales), max(s.max for s in scales) + 1)
    options = list(dict.fromkeys(o.name for s in scales for o in s.nonsubstantive))
    fmt = exp.format_factor
    lead = [fmt.name] if fmt is not None else []
    answer = np.array(
        [[[sh.labels.get(int(y), "") for y in score] for sh in row] for row in shown.values()],
        dtype=str,
    )
    option = np.array(
        [[[sh.options.get(o, "") for o in options] for sh in row] for row in shown.values()],
        dtype=str,
    ).reshape(len(shown), len(scales), len(options))
    if fmt is None:
        answer, option = answer[0], option[0]
    points = np.array([[s.anchors.get(int(y), "") for y in score] for s in scales], dtype=str)
    coords: dict[str, Any] = {
        "score": score.astype(np.int64),
        "score_min": ("item", np.array([s.min for s in scales], dtype=np.int64)),
        "score_max": ("item", np.array([s.max for s in scales], dtype=np.int64)),
        "nominal": ("item", np.array([it.nominal for it in exp.items], dtype=bool)),
    }
    if fmt is not None:
        coords[fmt.name] = np.array(fmt.levels, dtype=str)
    data: dict[str, Any] = {
        "answer_label": ((*lead, "item", "score"), answer),
        "score_label": (("item", "score"), points),
    }
    if options:
        coords["option"] = np.array(options, dtype=str)
        data["option_label"] = ((*lead, "item", "option"), option)
    for name, (dims, values) in list(data.items()):
        data[name] = (dims, values, {"description": ITEM_SCALE_VARIABLES[name].description})
    for name in ("score_min", "score_max", "nominal"):
        dim, values = coords[name]
        coords[name] = (dim, values, {"description": ITEM_SCALE_VARIABLES[name].description})
    ds = xr.Dataset(data, coords=coords)
    return ds.assign_coords(item=np.array([it.id for it in exp.items], dtype=str))


def prompt_attrs(exp) -> dict[str, Any]:
    """The provenance attrs of the prompts (``scale_min``/``scale_max``: the score axis)."""
    inst = exp.instrument
    lo, hi = exp.scale_min, exp.scale_max
    if exp.per_item:
        scales = [exp.scale_of(it.id) for it in exp.items]
        lo, hi = min(s.min for s in scales), max(s.max for s in scales)
    return {
        "instrument": inst.name,
        "instrument_title": inst.title,
        "citation": inst.citation,
        "scale_min": int(lo),
        "scale_max": int(hi),
        "scale_labels": anchors_json(exp.anchors),
        "instrument_sha256": inst.sha256,
        "instrument_file": _provenance_path(inst.path),
        "experiment": exp.name,
        "experiment_sha256": exp.sha256,
        **perturbation_attrs(exp.factor_specs),
    }


def prompts_to_frame(ds: xr.Dataset):
    """One row per prompt: factor levels, item, reverse_keyed, subscale, system, user.

    Parameters
    ----------
    ds : xarray.Dataset
        Prompts as :meth:`Experiment.build_prompts` returns them: ``user`` and
        ``system`` over the prompt factors and ``item``, with ``reverse_keyed`` and
        ``subscale`` over ``item``.

    Returns
    -------
    pandas.DataFrame
        One row per prompt (C order of ``user``'s dims), a column per dim of
        ``user``, then ``reverse_keyed``, ``subscale``, ``system`` and ``user``.

    Examples
    --------
    >>> from xlikert.design import load_experiment
    >>> df = prompts_to_frame(load_experiment("demo").build_prompts())
    >>> list(df.columns)
    ['target', 'item', 'reverse_keyed', 'subscale', 'system', 'user']
    >>> len(df)
    68
    """
    import pandas as pd

    dims = list(ds.user.dims)
    rows = {}
    grids = np.meshgrid(*(np.asarray(ds[d].values) for d in dims), indexing="ij")
    for d, g in zip(dims, grids, strict=True):
        rows[d] = g.ravel()
    item_pos = np.meshgrid(*(np.arange(ds.sizes[d]) for d in dims), indexing="ij")[
        dims.index("item")
    ].ravel()
    rows["reverse_keyed"] = np.asarray(ds["reverse_keyed"].values)[item_pos]
    rows["subscale"] = np.asarray(ds["subscale"].values)[item_pos]
    rows["system"] = np.asarray(ds["system"].values).ravel()
    rows["user"] = np.asarray(ds["user"].values).ravel()
    return pd.DataFrame(rows)
