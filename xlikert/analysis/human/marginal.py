"""Pooling human groups: the mixture weights and the human marginal."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import xarray as xr

from ..._version import __version__
from ...core.errors import DesignError, InputTypeError
from ...core.io import encode_attrs, read_attrs
from ..nonsubstantive import pool_nonsubstantive

__all__ = ["human_marginal", "mixture_weights"]


def mixture_weights(human: xr.Dataset) -> xr.DataArray:
    """Weights of a human group in a mixture: ``weight`` (sum of survey weights), else ``n``.

    Examples
    --------
    >>> import pandas as pd, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"g": ["a", "b", "b"], "q": [1, 2, 2]}), ["q"],
    ...                  scale=(1, 2), by=["g"])
    >>> from xlikert.analysis.human import mixture_weights
    >>> mixture_weights(h).values.ravel().tolist()
    [1, 2]
    """
    return human["weight"] if "weight" in human else human["n"]


def human_marginal(
    human: xr.Dataset,
    *,
    dim: Hashable | Sequence[Hashable] | None = None,
    item_dim: Hashable = "item",
) -> xr.Dataset:
    """Pool the human groups along ``dim`` (default: every group, the population).

    The pooled PMF is the mixture of the group PMFs weighted by their
    respondents (or their survey weights), which is the PMF of the pooled
    respondents; ``n`` and ``n_missing`` add up, and ``n_eff`` pools as
    ``(sum W)^2 / sum (W^2 / n_eff)``; non-substantive answers pool alike
    (:func:`xlikert.analysis.nonsubstantive.pool_nonsubstantive`).

    Parameters
    ----------
    human : xr.Dataset
        A human PMF Dataset (:func:`human_pmf`).
    dim : keyword-only
        The group dim(s) to pool over; the
        other group dims are kept. Default: every group dim.
    item_dim : keyword-only
        Name of the item dim.

    Returns
    -------
    xr.Dataset
        The pooled human PMF Dataset, with the group dims not in ``dim``.

    Raises
    ------
    InputTypeError
        ``human`` is not a human PMF Dataset.
    DesignError
        A dim of ``dim`` that is not a group dim.

    Examples
    --------
    >>> import pandas as pd, xlikert as xl
    >>> h = xl.human_pmf(pd.DataFrame({"g": ["a", "b", "b"], "q": [1, 2, 2]}), ["q"],
    ...                  scale=(1, 2), by=["g"])
    >>> m = xl.human_marginal(h)
    >>> m.pmf.values.tolist(), m.n.values.tolist()
    ([[0.3333333333333333, 0.6666666666666666]], [3])
    """
    if not isinstance(human, xr.Dataset) or "pmf" not in human or "n" not in human:
        raise InputTypeError("expected a human PMF Dataset with 'pmf' and 'n' (xl.human_pmf)")
    attrs = read_attrs(human)
    groups = [d for d in human["n"].dims if d != item_dim]
    dims: list[Hashable] = (
        groups if dim is None
        else list(dim) if isinstance(dim, Sequence) and not isinstance(dim, str) else [dim]
    )  # fmt: skip
    for d in dims:
        if d not in groups:
            raise DesignError(f"{d!r} is not a group dim of the human PMF; its groups: {groups}")
    w = mixture_weights(human)
    out = {"pmf": (human["pmf"] * w).sum(dims) / w.sum(dims), "n": human["n"].sum(dims)}
    for v in ("n_missing", "weight"):
        if v in human:
            out[v] = human[v].sum(dims)
    if "n_eff" in human:
        pooled = (human["weight"] ** 2 / human["n_eff"]).sum(dims)
        out["n_eff"] = human["weight"].sum(dims) ** 2 / pooled
    out.update(pool_nonsubstantive(human, dims))
    ds = xr.Dataset(out)
    attrs["human_groups"] = [g for g in attrs.get("human_groups", []) if g not in dims]
    attrs["history"] = f"{attrs.get('history', '')}\nxlikert {__version__}: pooled over {dims}"
    ds.attrs = attrs
    return encode_attrs(ds)
