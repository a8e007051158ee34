"""What context makes visible: the items of one conversation, answered together.

Under sequential administration (:mod:`xlikert.collect.context`) the items of a
condition are asked in one conversation, and their answers are no longer
independent given the condition: the pairwise joint PMF
``joint[i, j, a, b] = P(Y_i = a, Y_j = b)`` of every item pair within the
conversation is exact (or certified) and gives

* :func:`inter_item_correlation` -- the Pearson correlation of every item pair;
* :func:`carry_over` -- the tables ``P(Y_j = b | Y_i = a)``;
* :func:`conversation_reliability` -- Cronbach's α and McDonald's ω of a single
  conversation: the respondent is one conversation drawn from the model (exact;
  under isolation every covariance is 0 and α = 0);
* :func:`conversation_consensus` -- Multivariate Consensus on the whole joint of
  the ``K`` answers, where every history was read, instead of on the product of
  the marginals.

The joint has dims ``(*factors, item, other_item, score, other_score)``; the
numpy cores (``*_numpy``) take ``(..., K, K, S, S)`` arrays.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import xarray as xr

from ..core.dims import OTHER_ITEM_DIM, OTHER_SCORE_DIM, SUBSCALE_DIM
from ..core.errors import DesignError, InvalidPMFError
from ..core.io import encode_attrs
from ..core.validate import check_score_axis, describe_cells
from ..kernels.history_tree import full_joint, history_tree
from .keying import subscale_groups
from .reliability import (
    ZERO_VARIANCE_RTOL,
    cronbach_alpha,
    item_rest_correlation,
    mcdonald_omega,
)
from .support import require_ordinal

__all__ = [
    "carry_over",
    "conversation_consensus",
    "conversation_reliability",
    "inter_item_correlation",
]

_JOINT_DIMS = ("item", OTHER_ITEM_DIM, "score", OTHER_SCORE_DIM)

#: How the coefficients of a conversation are defined (``attrs["convention"]``).
CONVERSATION_CONVENTION = (
    "population: conversations drawn from the model under one condition (sequential "
    "administration); Sigma_ij = sum_ab y_a y_b P(Y_i = a, Y_j = b) - mu_i mu_j from the exact "
    "pairwise joints, Sigma_ii the variance of item i's PMF. alpha = K/(K-1) (1 - tr Sigma / "
    "1'Sigma 1); omega and item_total as xl.reliability (one-factor ML, factanal objective). "
    "Reverse-keyed items reflected first (the sign of their covariances flips); each subscale "
    "its own scale."
)


# --------------------------------------------------------------------------- numpy cores
def _joint_covariance_numpy(joint: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Means ``(..., K)`` and covariance ``(..., K, K)`` of the items from their pairwise joints.

    Examples
    --------
    >>> j = np.zeros((2, 2, 2, 2))
    >>> j[0, 0] = j[1, 1] = np.diag([0.5, 0.5])
    >>> j[0, 1] = j[1, 0] = np.diag([0.5, 0.5])  # the second answer repeats the first
    >>> mean, cov = _joint_covariance_numpy(j, np.array([1.0, 2.0]))
    >>> mean.tolist(), cov.tolist()
    ([1.5, 1.5], [[0.25, 0.25], [0.25, 0.25]])
    """
    joint = np.asarray(joint, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    diag = np.diagonal(np.diagonal(joint, axis1=-4, axis2=-3), axis1=-3, axis2=-2)  # (..., K, S)
    mean = np.einsum("...ka,a->...k", diag, y)
    second = np.einsum("...ijab,a,b->...ij", joint, y, y)
    return mean, second - mean[..., :, None] * mean[..., None, :]


def _carry_over_numpy(joint: np.ndarray) -> np.ndarray:
    """``P(Y_j = b | Y_i = a)`` from ``joint (..., K, K, S, S)``; NaN where ``P(Y_i = a) = 0``.

    Examples
    --------
    >>> j = np.array([[[[0.2, 0.3], [0.1, 0.4]]]])
    >>> _carry_over_numpy(j).round(6).tolist()
    [[[[0.4, 0.6], [0.2, 0.8]]]]
    """
    joint = np.asarray(joint, dtype=np.float64)
    row = joint.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(row > 0, joint / row, np.nan)


def _joint_consensus_numpy(p: np.ndarray, y: np.ndarray) -> float:
    """Multivariate Consensus (the formulas page, "Multivariate Consensus") of a whole joint PMF.

    ``Cns = 1 + sum_y P(y) log2(1 - ||y - mu|| / d_max)``, ``d_max = sqrt(K)
    (y_max - y_min)``, over the ``S^K`` cells of ``p`` (``K`` axes of length ``S``),
    with ``mu`` the item means of ``p``.

    Examples
    --------
    >>> p = np.zeros((2, 2)); p[0, 0] = p[1, 1] = 0.5
    >>> round(_joint_consensus_numpy(p, np.array([1.0, 2.0])), 12)
    0.0
    >>> round(_joint_consensus_numpy(np.full((2, 2), 0.25), np.array([1.0, 2.0])), 12)
    0.0
    """
    p = np.asarray(p, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    K = p.ndim
    p = p / p.sum()
    d2 = np.zeros(p.shape)
    for k in range(K):
        other = tuple(a for a in range(K) if a != k)
        mu = float((p.sum(axis=other) * y).sum())
        shape = [1] * K
        shape[k] = y.size
        d2 = d2 + ((y - mu) ** 2).reshape(shape)
    dmax = np.sqrt(K) * (y[-1] - y[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(p > 0, p * np.log2(np.clip(1.0 - np.sqrt(d2) / dmax, 0.0, None)), 0.0)
    return float(1.0 + term.sum())


# --------------------------------------------------------------------------- xarray layer
def _check_joint(joint: xr.DataArray | xr.Dataset, what: str | None = None) -> xr.DataArray:
    """The pairwise joint, checked; ``what`` (a function's name): it needs ordered options."""
    if isinstance(joint, xr.Dataset):
        ns = joint.get("nonsubstantive_mass")
        if ns is not None and bool(np.isfinite(ns.values).any()):
            offered = ns.notnull().any([d for d in ns.dims if d != "item"])
            named = [str(i) for i in ns["item"].values[offered.values]]
            raise InvalidPMFError(
                f"items {named} offer non-substantive options: the stored joint holds the "
                "cells of the substantive answers only (its mass is below 1 where an answer "
                "was 'Don't know'), so the tables within a conversation are not built over "
                "them; select the items without options"
            )
        name = next((v for v in ("joint", "context_joint") if v in joint), None)
        if name is None:
            raise InvalidPMFError(
                "no 'joint' variable (or a results file's 'context_joint'): the pairwise "
                "joints come from sequential administration (xlikert.collect.context)"
            )
        joint = joint[name]
    missing = [d for d in _JOINT_DIMS if d not in joint.dims]
    if missing:
        raise InvalidPMFError(
            f"a pairwise joint needs the dims {_JOINT_DIMS}; {joint.name or 'the input'} lacks "
            f"{missing} (dims {joint.dims})"
        )
    values = np.asarray(joint.values)
    if np.isnan(values).any() or (values < -1e-12).any():
        raise InvalidPMFError("the pairwise joint holds NaN or negative mass")
    total = joint.sum(("score", OTHER_SCORE_DIM))
    if not np.allclose(total, 1.0, atol=1e-6):
        raise InvalidPMFError(
            f"the pairwise joint does not sum to 1 over (score, other_score) at "
            f"{describe_cells(abs(total - 1) > 1e-6)} (a conversation whose items offer "
            "non-substantive options stores the substantive answers' cells only)"
        )
    if what is not None:
        require_ordinal(joint, what)
    return joint.transpose(..., *_JOINT_DIMS)


def inter_item_correlation(joint: xr.DataArray | xr.Dataset) -> xr.DataArray:
    """The Pearson correlation of every item pair within a conversation.

    Parameters
    ----------
    joint : xr.DataArray or xr.Dataset
        Pairwise joints ``(*factors, item, other_item, score, other_score)`` or a
        sequential Dataset (its ``joint``).

    Returns
    -------
    xr.DataArray
        ``inter_item_correlation`` with dims ``(*factors, item, other_item)``; 1 on the
        diagonal; NaN for an item with zero variance.

    Raises
    ------
    InvalidPMFError
        Missing dims, NaN or negative mass, a pair not summing to 1.

    Examples
    --------
    >>> j = np.zeros((2, 2, 2, 2))
    >>> j[0, 0] = j[1, 1] = j[0, 1] = j[1, 0] = np.diag([0.5, 0.5])
    >>> da = xr.DataArray(j, dims=("item", "other_item", "score", "other_score"),
    ...                   coords={"score": [1, 2], "other_score": [1, 2]})
    >>> inter_item_correlation(da).values.tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    joint = _check_joint(joint, "xl.inter_item_correlation")
    y = check_score_axis(joint, "score").astype(np.float64)
    _, cov = _joint_covariance_numpy(joint.values, y)
    sd = np.sqrt(np.clip(np.diagonal(cov, axis1=-2, axis2=-1), 0.0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / (sd[..., :, None] * sd[..., None, :])
    dims = [*joint.dims[:-2]]
    out = xr.DataArray(corr, dims=dims, coords=_coords(joint, dims))
    out.attrs = {"long_name": "inter-item correlation within a conversation"}
    return out.rename("inter_item_correlation")


def carry_over(joint: xr.DataArray | xr.Dataset) -> xr.DataArray:
    """Carry-over tables: ``P(Y_other_item = other_score | Y_item = score)`` in one conversation.

    For an earlier ``item`` and a later ``other_item`` it is how the earlier answer
    moves the later one; for the reverse order, what the later answer says of the
    earlier one.

    Returns
    -------
    xr.DataArray
        ``carry_over`` with the joint's dims; NaN where ``P(Y_item = score) = 0``.

    Examples
    --------
    >>> j = np.zeros((2, 2, 2, 2))
    >>> j[0, 0] = j[1, 1] = j[0, 1] = j[1, 0] = np.diag([0.5, 0.5])
    >>> da = xr.DataArray(j, dims=("item", "other_item", "score", "other_score"),
    ...                   coords={"score": [1, 2], "other_score": [1, 2]})
    >>> carry_over(da).isel(item=0, other_item=1).values.tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    joint = _check_joint(joint)
    out = joint.copy(data=_carry_over_numpy(joint.values))
    out.attrs = {"long_name": "P(answer to other_item | answer to item) within a conversation"}
    return out.rename("carry_over")


def conversation_reliability(
    joint: xr.DataArray | xr.Dataset,
    *,
    reflect: bool = True,
    subscale: Hashable | None = SUBSCALE_DIM,
) -> xr.Dataset:
    """Cronbach's α and McDonald's ω of a single conversation, exactly.

    The respondent is one conversation drawn from the model under the condition;
    the item covariance comes from the exact pairwise joints
    (:data:`CONVERSATION_CONVENTION`), then α, ω, the corrected item–total
    correlations and the loadings as :func:`xlikert.reliability` computes them
    from a covariance matrix.

    Parameters
    ----------
    joint : xr.DataArray or xr.Dataset
        Pairwise joints or a sequential Dataset.
    reflect : bool, keyword-only
        Reflect the reverse-keyed items (item coordinate ``reverse_keyed``) first.
    subscale : hashable or None, keyword-only
        The item coordinate naming each item's subscale (two or more subscales:
        one α and ω each); None: one scale.

    Returns
    -------
    xr.Dataset
        ``alpha``, ``omega`` ``(*factors, [subscale])``; ``item_total``, ``loading``
        ``(*factors, item)``.

    Raises
    ------
    DesignError
        A (sub)scale of fewer than two items; an item, or a sum score, with zero
        variance within the conversation (naming it).

    Examples
    --------
    >>> j = np.zeros((2, 2, 2, 2))
    >>> j[0, 0] = j[1, 1] = j[0, 1] = j[1, 0] = np.diag([0.5, 0.5])
    >>> da = xr.DataArray(j, dims=("item", "other_item", "score", "other_score"),
    ...                   coords={"score": [1, 2], "other_score": [1, 2]})
    >>> float(conversation_reliability(da).alpha)
    1.0
    """
    joint = _check_joint(joint, "xl.conversation_reliability")
    y = check_score_axis(joint, "score").astype(np.float64)
    cov = _keyed_covariance(joint, y, reflect)
    ids = np.asarray(joint["item"].values).astype(str) if "item" in joint.coords else None
    ids = ids if ids is not None else np.arange(joint.sizes["item"]).astype(str)
    groups = subscale_groups(joint, subscale, item_dim="item") if subscale is not None else None
    named = groups is not None
    groups = groups or [("", np.arange(ids.size))]
    spread = (y[-1] - y[0]) ** 2
    factors = list(joint.dims[:-4])
    flat = np.diagonal(cov, axis1=-2, axis2=-1) <= ZERO_VARIANCE_RTOL * spread
    if flat.any():
        raise DesignError(
            f"items {sorted(set(ids[np.nonzero(flat)[-1]].tolist()))} have zero variance within "
            "the conversation (one answer with probability 1): α and ω are undefined; leave "
            "them out (joint.drop_sel(item=..., other_item=...))"
        )
    fits = [_fit(cov, idx, ids, name, named, spread) for name, idx in groups]
    item_total = np.full((*cov.shape[:-2], ids.size), np.nan)
    loading = np.full_like(item_total, np.nan)
    for (_, idx), (_, _, r, lam) in zip(groups, fits, strict=True):
        item_total[..., idx], loading[..., idx] = r, lam
    scale_dims = [*factors, SUBSCALE_DIM] if named else factors
    stack = (lambda xs: np.stack(xs, axis=-1)) if named else (lambda xs: xs[0])
    coords: dict[Hashable, Any] = _coords(joint, [*factors, "item"])
    if named:
        coords[SUBSCALE_DIM] = np.array([g for g, _ in groups], dtype=str)
    ds = xr.Dataset(
        {
            "alpha": (scale_dims, stack([f[0] for f in fits])),
            "omega": (scale_dims, stack([f[1] for f in fits])),
            "item_total": ([*factors, "item"], item_total),
            "loading": ([*factors, "item"], loading),
        },
        coords=coords,
    )
    ds["alpha"].attrs = {"long_name": "Cronbach's alpha of one conversation's sum score"}
    ds["omega"].attrs = {"long_name": "McDonald's omega total of one conversation's sum score"}
    ds.attrs = {"convention": CONVERSATION_CONVENTION}
    return encode_attrs(ds)


def _keyed_covariance(joint: xr.DataArray, y: np.ndarray, reflect: bool) -> np.ndarray:
    """The items' covariance ``(..., K, K)``, reverse-keyed items reflected (``y -> min + max
    - y`` flips the sign of their covariances with the others) when ``reflect``."""
    _, cov = _joint_covariance_numpy(joint.values, y)
    if reflect and "reverse_keyed" in joint.coords:
        sign = np.where(np.asarray(joint["reverse_keyed"].values, dtype=bool), -1.0, 1.0)
        cov = cov * sign[:, None] * sign[None, :]
    return cov


def _fit(
    cov: np.ndarray, idx: np.ndarray, ids: np.ndarray, name: str, named: bool, spread: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """α, ω, item–total r and loadings of one (sub)scale's sum score."""
    where = f"subscale {name!r}" if named else "the instrument"
    if idx.size < 2:
        raise DesignError(
            f"{where} has {idx.size} item ({', '.join(ids[idx])}): α and ω need two or more"
        )
    sub = cov[..., idx[:, None], idx[None, :]]
    if np.any(sub.sum(axis=(-2, -1)) <= ZERO_VARIANCE_RTOL * spread):
        raise DesignError(f"the sum score of {where} has zero variance within the conversation")
    omega, lam = mcdonald_omega(sub)
    return cronbach_alpha(sub), omega, item_rest_correlation(sub), lam


def _coords(like: xr.DataArray, dims: list[Hashable]) -> dict[Hashable, Any]:
    """The coordinates of ``like`` that lie on ``dims`` only."""
    return {c: like[c].variable for c in like.coords if set(like[c].dims) <= set(dims)}


def conversation_consensus(ds: xr.Dataset) -> xr.DataArray:
    """Multivariate Consensus of one conversation on the whole joint of its answers.

    Under isolation the joint of the ``K`` answers is the product of the item PMFs
    (:func:`xlikert.consensus`); in one conversation it is the exact mixture over
    the answer histories, built from the history tree where every history was read
    (:func:`~xlikert.kernels.history_tree.full_joint`), and the consensus sum
    (:func:`_joint_consensus_numpy`) runs over its ``S^K`` cells exactly.

    Parameters
    ----------
    ds : xr.Dataset
        A sequential Dataset of one condition (:func:`~xlikert.collect.context.sequential_dataset`).

    Returns
    -------
    xr.DataArray
        ``consensus`` (a scalar).

    Raises
    ------
    CollectionError
        The tree was pruned, or its joint is too large to enumerate.

    Examples
    --------
    >>> cns = conversation_consensus(sequential_dataset(result))  # doctest: +SKIP
    """
    require_ordinal(ds, "xl.conversation_consensus")
    tree = history_tree(ds)
    if tree.n_options:
        raise InvalidPMFError(
            "conversation_consensus needs every answer on the score axis; this conversation's "
            f"items offer the non-substantive options {[str(o) for o in ds['option'].values]}"
        )
    y = check_score_axis(ds["pmf"], "score").astype(np.float64)
    value = _joint_consensus_numpy(full_joint(tree), y)
    out = xr.DataArray(value, name="consensus")
    out.attrs = {
        "long_name": "Multivariate Consensus of one conversation (whole joint)",
        "units": "1",
        "method": "exact sum over the joint of all answers of the conversation",
    }
    return out
