"""The paper's Theorem (expectation-level ANOVA/Hoeffding) and corollaries as properties.

The classical components are computed here independently of xlikert by Möbius
inversion of marginal means of the mean surface (paper Cor. mobius-form), and
cross-checked once against statsmodels OLS with sum-to-zero contrasts.
"""

from __future__ import annotations

from itertools import combinations, pairwise

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.pmfs import make_pmf

import xlikert as xl


def mean_surface(pmf):
    """E[S_lambda] from item PMFs by linearity (no convolution)."""
    return (pmf * pmf.score).sum("score").sum("item").values


def hoeffding_components(mu):
    """{U: mu_U} for every subset U of axes, by Möbius inversion of marginal means."""
    axes = tuple(range(mu.ndim))
    marginal = {}
    for k in range(mu.ndim + 1):
        for v in combinations(axes, k):
            other = tuple(a for a in axes if a not in v)
            marginal[v] = mu.mean(axis=other, keepdims=True)
    comps = {}
    for k in range(mu.ndim + 1):
        for u in combinations(axes, k):
            total = np.zeros([mu.shape[a] if a in u else 1 for a in axes])
            for j in range(len(u) + 1):
                for v in combinations(u, j):
                    total = total + (-1) ** (len(u) - j) * marginal[v]
            comps[u] = total
    return comps


design = st.fixed_dictionaries(
    {
        "levels": st.lists(st.integers(2, 3), min_size=1, max_size=4),
        "n_items": st.integers(1, 3),
        "n_scores": st.integers(2, 4),
        "seed": st.integers(0, 2**16),
        "zeros": st.sampled_from([0.0, 0.3]),
    }
).filter(lambda d: np.prod(d["levels"]) <= 36)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(design)
def test_effect_means_are_hoeffding_components(d):
    pmf = make_pmf(**d)
    dec = xl.decompose(pmf)
    mu = mean_surface(pmf)
    comps = hoeffding_components(mu)
    factors = list(pmf.dims[:-2])
    grand = dec["grand"]
    np.testing.assert_allclose(float(grand.E), comps[()].item(), atol=1e-9)
    reconstructed = np.full(mu.shape, float(grand.E))
    for u, mu_u in comps.items():
        if not u:
            continue
        name = ":".join(factors[a] for a in u)
        node = dec[name]
        eff = node["pmf"]
        # every effect PMF is a PMF
        assert float(eff.min()) >= 0.0
        np.testing.assert_allclose(eff.sum("effect").values, 1.0, atol=1e-12)
        # Theorem / Cor. main-effect-anova / Cor. paired-interaction-anova
        np.testing.assert_allclose(
            node["E"].values,
            np.squeeze(mu_u, axis=tuple(a for a in range(mu.ndim) if a not in u)),
            atol=1e-9,
        )
        # centred in expectation over each of its factors
        for f in name.split(":"):
            np.testing.assert_allclose(node["E"].sum(f).values, 0.0, atol=1e-9)
        # E, SD, SNR, dPD agree with the PMF
        z = eff.effect.values
        np.testing.assert_allclose(node["E"].values, (eff * z).sum("effect").values, atol=1e-12)
        pos = eff.where(eff.effect > 0, 0.0).sum("effect")
        neg = eff.where(eff.effect < 0, 0.0).sum("effect")
        np.testing.assert_allclose(node["dPD"].values, np.maximum(pos, neg).values, atol=1e-15)
        var = (eff * (eff.effect - node["E"]) ** 2).sum("effect")
        np.testing.assert_allclose(node["SD"].values, np.sqrt(var.values), atol=1e-9)
        reconstructed = (
            reconstructed
            + node["E"]
            .broadcast_like(pmf.isel(item=0, score=0, drop=True))
            .transpose(*factors)
            .values
        )
    # additive identity (paper eq. decomposition-preview)
    np.testing.assert_allclose(reconstructed, mu, atol=1e-9)


@settings(max_examples=20, deadline=None)
@given(design)
def test_grand_mixture_is_average_of_marginal_slices(d):
    s = xl.composite(make_pmf(**d))
    grand = xl.grand_mixture(s)
    np.testing.assert_allclose(grand.sum("score"), 1.0, atol=1e-12)
    for f in s.dims[:-1]:
        slices = xl.marginal_slice(s, f)
        np.testing.assert_allclose(slices.mean(f).values, grand.values, atol=1e-14)
        # Cor. anova-consistency: E[M_c] is the classical marginal mean
        mu = (s * s.score).sum("score")
        np.testing.assert_allclose(
            (slices * s.score).sum("score").values,
            mu.mean([g for g in s.dims[:-1] if g != f]).values,
            atol=1e-9,
        )


def test_max_order_caps_the_tree():
    pmf = make_pmf([2, 3, 2], n_items=2)
    dec = xl.decompose(pmf, max_order=2)
    assert sorted(dec.children) == ["f0", "f0:f1", "f0:f2", "f1", "f1:f2", "f2", "grand"]
    assert dec.attrs["decompose_max_order"] == 2


def test_components_match_statsmodels_ols_sum_contrasts():
    smf = pytest.importorskip("statsmodels.formula.api")
    pmf = make_pmf([3, 2, 2], n_items=3, n_scores=5, seed=11)
    dec = xl.decompose(pmf)
    mu = xl.composite(pmf)
    mu = (mu * mu.score).sum("score").to_dataframe(name="y").reset_index()
    # saturated model on the mean surface: coefficients are the Hoeffding components
    fit = smf.ols("y ~ C(f0, Sum) * C(f1, Sum) * C(f2, Sum)", data=mu).fit()
    params = fit.params
    assert params["Intercept"] == pytest.approx(float(dec["grand"].E), abs=1e-9)
    for lev in ["f0_0", "f0_1"]:
        assert params[f"C(f0, Sum)[S.{lev}]"] == pytest.approx(
            float(dec["f0"].E.sel(f0=lev)), abs=1e-9
        )
    assert params["C(f1, Sum)[S.f1_0]"] == pytest.approx(
        float(dec["f1"].E.sel(f1="f1_0")), abs=1e-9
    )
    key = "C(f0, Sum)[S.f0_1]:C(f2, Sum)[S.f2_0]"
    assert params[key] == pytest.approx(float(dec["f0:f2"].E.sel(f0="f0_1", f2="f2_0")), abs=1e-9)
    key = "C(f0, Sum)[S.f0_0]:C(f1, Sum)[S.f1_0]:C(f2, Sum)[S.f2_0]"
    got = float(dec["f0:f1:f2"].E.sel(f0="f0_0", f1="f1_0", f2="f2_0"))
    assert params[key] == pytest.approx(got, abs=1e-9)


# ------------------------------------------------- effect PMFs, not only their means
def comonotone_pmf(terms, alpha, support) -> dict[float, float]:
    """sum_r alpha_r F_r^{-1}(U), U ~ Unif(0, 1), as {value: mass} (Def. comonotone-contrast).

    Written plainly: on each interval between consecutive CDF breakpoints every
    generalised inverse F_r^{-1}(u) = min{x : F_r(x) >= u} is constant.
    """
    cdfs = [np.cumsum(t) for t in terms]
    cuts = np.unique(np.clip(np.concatenate([[0.0, 1.0], *cdfs]), 0.0, 1.0))
    out: dict[float, float] = {}
    for lo, hi in pairwise(cuts):
        u = (lo + hi) / 2
        z = sum(
            a * support[min(int(np.searchsorted(c, u)), len(c) - 1)]
            for a, c in zip(alpha, cdfs, strict=True)
        )
        out[z] = out.get(z, 0.0) + (hi - lo)
    return out


def blocked_effect(S, support, U) -> dict[tuple[int, ...], dict[float, float]]:
    """Effect PMF of factor subset U per level (paper eqs. blocked-slice, interaction-block,
    interaction-global): within each block of the other factors, the comonotone Möbius
    contrast of the blocked slices M_{V|block}, V subset of U; then mixed over blocks."""
    n = S.ndim - 1
    rest = [a for a in range(n) if a not in U]
    out = {}
    for lam_u in np.ndindex(*[S.shape[a] for a in U]):
        mixed: dict[float, float] = {}
        blocks = list(np.ndindex(*[S.shape[a] for a in rest]))
        for lam_c in blocks:
            terms, alpha = [], []
            for k in range(len(U) + 1):
                for V in combinations(U, k):
                    idx = [slice(None)] * n
                    for a, lev in zip(U, lam_u, strict=True):
                        if a in V:
                            idx[a] = lev
                    for a, lev in zip(rest, lam_c, strict=True):
                        idx[a] = lev
                    terms.append(S[tuple(idx)].reshape(-1, S.shape[-1]).mean(0))
                    alpha.append((-1) ** (len(U) - k))
            for z, m in comonotone_pmf(terms, alpha, support).items():
                mixed[z] = mixed.get(z, 0.0) + m / len(blocks)
        out[lam_u] = mixed
    return out


@pytest.mark.parametrize(("levels", "seed"), [([2, 3], 1), ([3, 2], 2), ([2, 2, 2], 3)])
def test_effect_pmfs_are_blocked_comonotone_contrasts(levels, seed):
    """Every effect PMF of a 2- or 3-factor design, cell by cell, against the paper's
    equations written plainly; a global (unblocked) coupling changes them, not their means."""
    pmf = make_pmf(levels, n_items=2, n_scores=4, seed=seed, zeros=0.2)
    s = xl.composite(pmf)
    dec = xl.decompose(pmf)
    dims = [f"f{i}" for i in range(len(levels))]
    support = s.score.values.astype(float)
    np.testing.assert_allclose(
        dec["grand"].pmf.values, s.values.reshape(-1, s.sizes["score"]).mean(0), atol=1e-14
    )
    for k in range(1, len(levels) + 1):
        for U in combinations(range(len(levels)), k):
            got = dec[":".join(dims[a] for a in U)].pmf
            for lam_u, want in blocked_effect(s.values, support, U).items():
                cell = got.isel({dims[a]: lev for a, lev in zip(U, lam_u, strict=True)})
                have = dict(zip(cell.effect.values.astype(float), cell.values, strict=True))
                for z in set(have) | set(want):
                    assert have.get(z, 0.0) == pytest.approx(want.get(z, 0.0), abs=1e-12), (
                        U,
                        lam_u,
                        z,
                    )
