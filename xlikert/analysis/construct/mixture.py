"""Uniform mixtures over factors: the grand mixture and marginal slices
(:ref:`eq-grand-mixture`, :ref:`eq-marginal-slice-U`); both are ``.mean(dim)`` of item PMFs mixed
over the items.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import xarray as xr

from ...core.dims import SUBSCALE_DIM, factor_dims
from ...core.errors import DesignError
from ...core.validate import as_pmf

#: Dims a mixture carries along, never mixes: the subscales of a composite.
_CARRIED = (SUBSCALE_DIM,)


def _carried(pmf: xr.DataArray, item_dim: Hashable) -> tuple[str, ...]:
    """A composite's subscales are carried along; item PMFs have none (a ``subscale`` dim
    beside items is a factor with a reserved name, refused by name)."""
    return () if item_dim in pmf.dims else _CARRIED


__all__ = ["grand_mixture", "marginal_slice"]


def grand_mixture(
    pmf: xr.DataArray | xr.Dataset,
    *,
    factors: Hashable | Sequence[Hashable] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Grand mixture ``P_{S_0}``: the uniform mixture over the factor dims.

    The distributional grand mean (:ref:`eq-grand-mixture`). Works on composite
    PMFs ``(*factors, score)`` and on item PMFs (then per item).

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        PMFs with factor dims, or a results Dataset (its ``pmf``).
    factors : keyword-only
        The design's factors, all mixed over; default every dim except
        ``item_dim``, ``score_dim`` and a composite's ``subscale``. Other dims are
        batch dims, carried along.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.

    Returns
    -------
    xr.DataArray
        The mixture, with the dims of ``pmf`` less the factors; attrs kept.

    Raises
    ------
    DesignError
        A factor that is not a dim, or a dim with a name xlikert reserves
        (:mod:`xlikert.core.dims`).

    Examples
    --------
    >>> import xlikert as xl
    >>> s = xl.composite(xl.datasets.synthetic_pmf({"model": 2, "target": 3}, n_items=2))
    >>> xl.grand_mixture(s).dims
    ('score',)
    """
    pmf = as_pmf(pmf)
    carried = _carried(pmf, item_dim)
    dims = factor_dims(pmf, factors, item_dim=item_dim, score_dim=score_dim, auxiliary=carried)
    return pmf.mean(dims, keep_attrs=True)


def marginal_slice(
    pmf: xr.DataArray | xr.Dataset,
    by: Hashable | Sequence[Hashable],
    *,
    factors: Hashable | Sequence[Hashable] | None = None,
    item_dim: Hashable = "item",
    score_dim: Hashable = "score",
) -> xr.DataArray:
    """Marginal slice ``P_{M_U(lambda_U)}``: uniform mixture over all other factors.

    :ref:`eq-marginal-slice-U` (``by`` = U): one PMF per level of the factors
    ``by`` keeps, each the uniform mixture over the other factors.

    Parameters
    ----------
    pmf : xr.DataArray or xr.Dataset
        PMFs with factor dims, or a results Dataset (its ``pmf``).
    by : hashable or sequence of hashable
        The factor(s) U to keep.
    factors : keyword-only
        The design's factors; default every dim except ``item_dim``,
        ``score_dim`` and a composite's ``subscale``. The factors not in ``by``
        are mixed over; other dims are batch dims, carried along.
    item_dim, score_dim : keyword-only
        Names of the item and score dims.

    Returns
    -------
    xr.DataArray
        One PMF per level combination of ``by``: the dims of ``pmf`` less the
        factors mixed over; attrs kept.

    Raises
    ------
    DesignError
        A dim of ``by`` that is not one of the factors, or a dim with a name
        xlikert reserves (:mod:`xlikert.core.dims`).

    Examples
    --------
    >>> import xlikert as xl
    >>> s = xl.composite(xl.datasets.synthetic_pmf({"model": 2, "target": 3}, n_items=2))
    >>> xl.marginal_slice(s, "target").dims
    ('target', 'score')
    """
    pmf = as_pmf(pmf)
    carried = _carried(pmf, item_dim)
    keep = factor_dims(pmf, by, item_dim=item_dim, score_dim=score_dim, auxiliary=carried)
    allf = factor_dims(pmf, factors, item_dim=item_dim, score_dim=score_dim, auxiliary=carried)
    for d in keep:
        if d not in allf:
            raise DesignError(f"{d!r} is not one of the factors {allf}")
    return pmf.mean([d for d in allf if d not in keep], keep_attrs=True)
