"""The silicon population and the alignment table of groups and cells."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ...core.errors import DesignError
from ...core.io import encode_attrs, read_attrs
from ...core.validate import as_pmf
from ..human import human_marginal, mixture_weights
from .estimate import alignment
from .pairs import check_pair, human_parts

__all__ = ["alignment_table", "silicon_population"]


def silicon_population(
    model: xr.DataArray | xr.Dataset,
    human: xr.Dataset,
    *,
    dim: Hashable | Sequence[Hashable] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """The model's PMF mixed over persona factors with the human groups' counts (a silicon sample).

    The model's persona factors are dims named like the human group attributes
    (e.g. ``party``, ``education``) with the same levels; the mixture over
    ``dim`` (default: every human group) weights each persona by the
    respondents of that group (the sum of their survey weights when weighted),
    per item, so it matches the human marginal :func:`xlikert.human_marginal`
    over the same ``dim``. Mixtures are means: ``sum_g w_g p_g / sum_g w_g``.

    Parameters
    ----------
    model : xr.DataArray or xr.Dataset
        Model PMFs whose persona factors are named like the human groups (or a
        results Dataset: its ``pmf``).
    human : xr.Dataset
        A human PMF Dataset (:func:`xlikert.human_pmf`): its counts, or sums of
        survey weights, are the mixture weights.
    dim : keyword-only
        The persona factors to mix over;
        default every human group.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.

    Returns
    -------
    xr.DataArray
        ``pmf``, the silicon population's PMF: the dims of ``model`` less ``dim``;
        the attr ``silicon_mixture_over`` names them.

    Raises
    ------
    DesignError
        A dim of ``dim`` that is not a human group, or model and human PMFs with
        different items or levels on a shared dim.
    InvalidPMFError
        Model and human PMFs on different score axes.
    InputTypeError
        ``human`` neither a Dataset nor a DataArray.

    Examples
    --------
    >>> import pandas as pd, xarray as xr, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"g": ["a", "b", "b"], "q": [1, 2, 2]}), ["q"],
    ...                  scale=(1, 2), by=["g"])
    >>> m = xr.DataArray([[[1.0, 0.0]], [[0.0, 1.0]]], dims=("g", "item", "score"),
    ...                  coords={"g": ["a", "b"], "item": ["q"], "score": [1, 2]})
    >>> xl.silicon_population(m, h).values.tolist()           # 1/3 a, 2/3 b
    [[0.3333333333333333, 0.6666666666666666]]
    """
    p = as_pmf(model)
    q, _, _ = human_parts(human)
    check_pair(p, q, score_dim, item_dim)
    w = mixture_weights(human).astype(np.float64)
    groups = [d for d in w.dims if d != item_dim]
    dims: list[Hashable] = (
        groups if dim is None
        else list(dim) if isinstance(dim, Sequence) and not isinstance(dim, str) else [dim]
    )  # fmt: skip
    for d in dims:
        if d not in groups:
            raise DesignError(f"{d!r} is not a group of the human data; its groups: {groups}")
    out = (p * w).sum(dims) / w.sum(dims)
    out.attrs = encode_attrs({**read_attrs(p), "silicon_mixture_over": [str(d) for d in dims]})
    out.name = "pmf"
    return out.transpose(..., *[d for d in (item_dim, score_dim) if d in out.dims])


def _label(cell: dict[Hashable, Any], groups: list[Hashable]) -> str:
    parts = [f"{g}={cell[g]}" for g in groups if g in cell]
    return ", ".join(parts) if parts else "all respondents"


def alignment_table(model: xr.DataArray, human: xr.Dataset, by: Hashable) -> pd.DataFrame:
    """Alignment of each ``by`` level (e.g. model) with the human population, each attribute's
    subgroups and (with several attributes) each cell: tidy rows with estimate, interval, ceiling.

    The model's persona factors named like the human groups are mixed with the human counts
    (:func:`silicon_population`); a model without them is compared as it is.

    Returns
    -------
    pandas.DataFrame
        Columns ``by``, ``group`` (``"party=D, edu=hi"``, or ``"all respondents"``),
        ``item``, ``metric``, ``estimate``, ``se``, ``lower``, ``upper``, ``ceiling``.
    """
    groups = [d for d in human["n"].dims if d != "item"]  # the human groups (kept or pooled)
    targets: list[tuple[list[Hashable], xr.Dataset, xr.DataArray]] = [
        (groups, human_marginal(human), silicon_population(model, human))
    ]
    for g in groups if len(groups) > 1 else []:
        rest = [d for d in groups if d != g]
        targets.append(
            (rest, human_marginal(human, dim=rest), silicon_population(model, human, dim=rest))
        )
    if groups:
        targets.append(([], human, model))
    frames = []
    for mixed, h, m in targets:
        a = alignment(m, h)
        df = a[["estimate", "lower", "upper", "se", "ceiling"]].to_dataframe().reset_index()
        kept = [g for g in groups if g not in mixed]
        df.insert(1, "group", [_label(row, kept) for row in df[kept].to_dict("records")])
        frames.append(df.drop(columns=kept))
    out = pd.concat(frames, ignore_index=True)
    keep = [by, "group", "item", "metric", "estimate", "se", "lower", "upper", "ceiling"]
    return out[[c for c in keep if c in out.columns]]
