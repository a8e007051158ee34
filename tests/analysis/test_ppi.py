"""Prediction-powered inference: coverage over simulated surveys, and the results wrapper."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.stats import norm

from xlikert.analysis.ppi import ppi_mean_numpy, prediction_powered
from xlikert.core.errors import DesignError

DK = "Don't know"


def _surveys(rng, runs, n, big_n, informative=True):
    """Simulated surveys of a 1..7 item with known truth. Each person has a propensity
    ``p``; the model predicts ``f = 1 + 6 (0.1 + 0.8 p)`` (informative, biased by
    design) and the person answers ``1 + Binomial(6, 0.05 + 0.85 p)``, so
    ``E[Y] = 1 + 6 (0.05 + 0.85 E[p]) = 1 + 6 (0.05 + 0.85 / 2)`` exactly."""
    p = rng.random((runs, n + big_n))
    f = 1 + 6 * (0.1 + 0.8 * p) if informative else 1 + 6 * rng.random((runs, n + big_n))
    y = 1 + rng.binomial(6, 0.05 + 0.85 * p[:, :n])
    return y.astype(float), f[:, :n], f[:, n:], 1 + 6 * (0.05 + 0.85 / 2)


@pytest.mark.parametrize("tuned", [True, False])
def test_the_95_interval_covers_the_truth(tuned):
    rng = np.random.default_rng(2023)
    runs = 4000
    y, fl, fu, truth = _surveys(rng, runs, n=150, big_n=3000)
    out = ppi_mean_numpy(y, fl, fu, power_tuning=tuned)
    cover = ((out["lower"] <= truth) & (truth <= out["upper"])).mean()
    assert abs(cover - 0.95) <= 0.01, cover
    human = ((out["human_lower"] <= truth) & (truth <= out["human_upper"])).mean()
    assert abs(human - 0.95) <= 0.015, human  # a Wald interval of n = 150 (0.9415 here)
    # the model is informative: narrower than the humans alone, more respondents' worth
    width = (out["upper"] - out["lower"]).mean()
    human_width = (out["human_upper"] - out["human_lower"]).mean()
    assert width < 0.7 * human_width, (width, human_width)
    assert np.median(out["effective_n"]) > 2 * 150
    np.testing.assert_allclose(out["effective_n"], (out["human_se"] / out["se"]) ** 2 * 150)


def test_a_share_is_covered_too():
    """A category's share: Y = 1[answer is the category], f the model's probability of it."""
    rng = np.random.default_rng(5)
    runs, n, big_n = 3000, 200, 2000
    q = rng.beta(2, 3, size=(runs, n + big_n))
    y = (rng.random((runs, n)) < 0.3 + 0.5 * q[:, :n]).astype(float)
    out = ppi_mean_numpy(y, q[:, :n], q[:, n:])
    truth = 0.3 + 0.5 * 2 / 5
    cover = ((out["lower"] <= truth) & (truth <= out["upper"])).mean()
    assert abs(cover - 0.95) <= 0.01, cover


def test_an_uninformative_model_costs_little_when_tuned():
    rng = np.random.default_rng(7)
    y, fl, fu, truth = _surveys(rng, 2000, n=150, big_n=3000, informative=False)
    out = ppi_mean_numpy(y, fl, fu)
    cover = ((out["lower"] <= truth) & (truth <= out["upper"])).mean()
    assert abs(cover - 0.95) <= 0.015, cover
    ratio = (out["se"] / out["human_se"]).mean()
    assert 0.98 < ratio < 1.05, ratio


def _ppi_py_mean_ci(y, yhat, yhat_unlabeled, alpha, lam=None):
    """ppi_py's ``ppi_mean_pointestimate`` and ``ppi_mean_ci`` for a 1-d mean, re-written
    here from its source (ppi_py/ppi.py, ``_calc_lam_glm`` with ``clip=True``): the
    gradients centred at the lambda = 1 estimate, ``cov_grads = (1/n) (G'Gh + Gh'G)``,
    ``Var(grads_hat)`` by ``np.cov`` over labeled and unlabeled, ``lam = Tr(cov) /
    (2 (1 + n/N) Tr(var))`` clipped to [0, 1]; the interval from ``std()`` (1/n, 1/N).

    For a mean the Hessian is 1 and the gradients are ``theta - Y`` and ``theta - f``,
    so this is PPI++'s ``lambda = Cov(Y, f) / ((1 + n/N) Var(f))`` (Angelopoulos, Duchi
    and Zrnic 2023, the power-tuned mean) with the reference's normalisations."""
    n, big_n = y.shape[0], yhat_unlabeled.shape[0]
    if lam is None:
        theta1 = yhat_unlabeled.mean() + (y - yhat).mean()
        g, gh, ghu = y - theta1, yhat - theta1, yhat_unlabeled - theta1
        gc, ghc = g - g.mean(), gh - gh.mean()
        cov_grads = (1 / n) * (gc @ ghc + ghc @ gc)
        var_grads_hat = np.cov(np.concatenate([gh, ghu]))
        lam = float(np.clip(cov_grads / (2 * (1 + n / big_n) * var_grads_hat), 0, 1))
    est = (lam * yhat_unlabeled).mean() + (y - lam * yhat).mean()
    imputed_std = (lam * yhat_unlabeled).std() / np.sqrt(big_n)
    rectifier_std = (y - lam * yhat).std() / np.sqrt(n)
    half = norm.ppf(1 - alpha / 2) * np.sqrt(imputed_std**2 + rectifier_std**2)
    return lam, est, est - half, est + half


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_clipped_estimate_and_interval_are_ppi_py_s(seed):
    rng = np.random.default_rng(seed)
    n, big_n = [(12, 18), (30, 200), (5, 40), (50, 9)][seed]
    p = rng.random(n + big_n)
    y = (1 + rng.binomial(2, 0.1 + 0.8 * p[:n])).astype(float)
    f = 2 + [0.1, 2.0, -0.5, 0.7][seed] * (p - 0.5) + 0.05 * rng.standard_normal(n + big_n)
    lam, est, lo, hi = _ppi_py_mean_ci(y, f[:n], f[n:], alpha=0.1)
    out = ppi_mean_numpy(y, f[:n], f[n:], confidence=0.9)
    assert float(out["ppi_lambda"]) == pytest.approx(lam, rel=1e-12, abs=1e-15)
    for key, want in [("estimate", est), ("lower", lo), ("upper", hi)]:
        assert float(out[key]) == pytest.approx(want, rel=1e-12), key
    # the same formulas at a fixed lambda: the original estimator and the humans alone
    for fixed, kw in [(1.0, {"power_tuning": False}), (0.0, None)]:
        _, est, lo, hi = _ppi_py_mean_ci(y, f[:n], f[n:], alpha=0.1, lam=fixed)
        got = ppi_mean_numpy(y, f[:n], f[n:], confidence=0.9, **kw) if kw else None
        if got is None:  # lambda = 0 is the humans-only interval beside every result
            got = {"estimate": out["human_estimate"], "lower": out["human_lower"],
                   "upper": out["human_upper"]}  # fmt: skip
        for key, want in [("estimate", est), ("lower", lo), ("upper", hi)]:
            assert float(got[key]) == pytest.approx(want, rel=1e-12), (fixed, key)


def test_lambda_is_clipped_and_both_values_are_kept():
    y = np.array([1.0, 2.0, 9.0])
    fl, fu = np.array([1.0, 2.0, 2.5]), np.array([2.0, 2.1])
    out = ppi_mean_numpy(y, fl, fu)
    raw = (np.cov(y, fl, ddof=0)[0, 1]) / ((1 + 3 / 2) * np.var(np.r_[fl, fu], ddof=1))
    assert raw > 1
    assert float(out["ppi_lambda_unclipped"]) == pytest.approx(raw)
    assert float(out["ppi_lambda"]) == 1.0
    free = ppi_mean_numpy(y, fl, fu, clip=False)
    assert float(free["ppi_lambda"]) == pytest.approx(raw)
    assert float(free["estimate"]) == pytest.approx(y.mean() + raw * (fu.mean() - fl.mean()))
    # anti-correlated predictions: lambda clipped to 0, the humans alone
    neg = ppi_mean_numpy(y, -fl, -fu)
    assert float(neg["ppi_lambda_unclipped"]) < 0 and float(neg["ppi_lambda"]) == 0.0
    assert float(neg["estimate"]) == float(neg["human_estimate"])
    assert float(neg["se"]) == pytest.approx(float(neg["human_se"]))
    untuned = ppi_mean_numpy(y, fl, fu, power_tuning=False)
    assert float(untuned["ppi_lambda"]) == float(untuned["ppi_lambda_unclipped"]) == 1.0
    with pytest.raises(DesignError, match="n=1 answered"):
        ppi_mean_numpy(y[:1], fl[:1], fu)


def _split_people(rng, runs, size, n, people=None):
    """``runs`` random splits of ``size`` people into ``n`` answered and the rest, on a
    1..3 item (E[Y] = 2 exactly) whose model predictions vary little but follow the
    answers: the situation where PPI++'s unclipped lambda runs far outside [0, 1].
    ``people``: split these ``(p, y)`` every time (default: new people each run)."""
    if people is None:
        p = rng.random((runs, size))
        y = (1 + rng.binomial(2, 0.1 + 0.8 * p)).astype(float)
    else:
        p, y = (np.broadcast_to(a, (runs, size)) for a in people)
    f = 2 + 0.1 * (p - 0.5)
    order = np.argsort(rng.random((runs, size)), axis=1)
    y, f = np.take_along_axis(y, order, 1), np.take_along_axis(f, order, 1)
    return y[:, :n], f[:, :n], f[:, n:]


def test_over_200_splits_of_30_people_the_clipped_lambda_stays_in_0_1():
    rng = np.random.default_rng(53)
    p = rng.random(30)
    people = (p, (1 + rng.binomial(2, 0.1 + 0.8 * p)).astype(float))
    y, fl, fu = _split_people(rng, 200, 30, 15, people=people)
    out = ppi_mean_numpy(y, fl, fu)
    assert (out["ppi_lambda"] >= 0).all() and (out["ppi_lambda"] <= 1).all()
    raw = out["ppi_lambda_unclipped"]
    assert raw.max() > 5, raw.max()  # unclipped, it alarms a reader (15.6 in the issue)
    kept = (raw >= 0) & (raw <= 1)
    np.testing.assert_array_equal(out["ppi_lambda"][kept], raw[kept])
    np.testing.assert_array_equal(out["ppi_lambda"][raw > 1], 1.0)
    free = ppi_mean_numpy(y, fl, fu, clip=False)
    np.testing.assert_array_equal(free["ppi_lambda"], raw)


def test_over_200_surveys_the_clipped_interval_covers_at_the_nominal_level():
    rng = np.random.default_rng(2311)
    runs = 200
    y, fl, fu = _split_people(rng, runs, 200, 100)
    out = ppi_mean_numpy(y, fl, fu)
    cover = ((out["lower"] <= 2.0) & (out["upper"] >= 2.0)).mean()
    sim_error = 3 * np.sqrt(0.95 * 0.05 / runs)  # three binomial SEs of 200 runs
    assert abs(cover - 0.95) <= sim_error, cover


def _results(n=8, seed=1):
    rng = np.random.default_rng(seed)
    pmf = np.zeros((2, n, 2, 5))
    mass = rng.gamma(1.0, size=(2, n, 5))
    pmf[:, :, 0] = mass / mass.sum(-1, keepdims=True)
    pmf[:, :, 1, :2] = rng.dirichlet([1, 1], size=(2, n))
    ns = np.full((2, n, 2, 1), np.nan)
    ns[:, :, 0, 0] = 0.1
    return xr.Dataset(
        {
            "pmf": (("model", "respondent", "item", "score"), pmf),
            "valid_mass": (("model", "respondent", "item"), np.full((2, n, 2), 0.8)),
            "nonsubstantive_mass": (("model", "respondent", "item", "option"), ns),
        },
        coords={"model": ["m1", "m2"], "respondent": [f"r{i}" for i in range(n)],
                "item": ["lr", "vote"], "score": [1, 2, 3, 4, 5], "option": [DK],
                "score_min": ("item", [1, 1]), "score_max": ("item", [5, 2]),
                "nominal": ("item", [False, True])},
    )  # fmt: skip


def test_the_results_wrapper_uses_the_exact_expectations():
    res = _results()
    answers = pd.DataFrame(
        {"lr": [1, 5, 3, 2, None, None, None, None], "vote": [1, 2, 2, 1, 1, None, None, None]},
        index=[f"r{i}" for i in range(8)],
    )
    out = prediction_powered(res, answers, "lr")
    e = (res.pmf.sel(item="lr") * res.score).sum("score")
    for m in ["m1", "m2"]:
        f = e.sel(model=m).values
        want = ppi_mean_numpy(np.array([1, 5, 3, 2.0]), f[:4], f[4:])
        for k, v in want.items():
            np.testing.assert_allclose(float(out[k].sel(model=m)), float(v), rtol=1e-12)
    assert out.attrs["n_labeled"] == 4 and out.attrs["n_unlabeled"] == 4
    # a category of the nominal vote: the model's share of it among the answers
    share = prediction_powered(res, answers, "vote", category=2, power_tuning=False)
    f = res.pmf.sel(item="vote", score=2, model="m2").values
    want = ppi_mean_numpy(np.array([0, 1, 1, 0, 0.0]), f[:5], f[5:], power_tuning=False)
    np.testing.assert_allclose(float(share.estimate.sel(model="m2")), float(want["estimate"]))
    # a Don't know share: the model's Don't know rate per person
    dk = prediction_powered(res, answers.assign(lr=[DK, 5, 3, 2, DK, None, None, None]), "lr",
                            category=DK, labeled=["r0", "r1", "r2", "r4"])  # fmt: skip
    assert dk.attrs["n_labeled"] == 4 and dk.attrs["n_unlabeled"] == 4
    rate = 0.1 / 0.9
    want = ppi_mean_numpy(np.array([1, 0, 0, 1.0]), np.full(4, rate), np.full(4, rate))
    np.testing.assert_allclose(float(dk.estimate.sel(model="m1")), float(want["estimate"]))


def test_one_model_reads_as_scalars():
    res = _results().isel(model=[1])
    answers = pd.DataFrame({"lr": [1, 5, 3, 2, None, None, None, None]},
                           index=[f"r{i}" for i in range(8)])  # fmt: skip
    out = prediction_powered(res, answers, "lr")
    assert out.estimate.dims == () and str(out.model.item()) == "m2"
    kept = prediction_powered(res, answers, "lr", squeeze=False)
    assert kept.estimate.dims == ("model",)
    for k in ("estimate", "lower", "upper", "ppi_lambda", "ppi_lambda_unclipped"):
        assert float(out[k]) == float(kept[k].item())
    assert 0 <= float(out.ppi_lambda) <= 1 and out.attrs["ppi_clip"] == 1
    free = prediction_powered(res, answers, "lr", clip=False)
    assert float(free.ppi_lambda) == float(out.ppi_lambda_unclipped)


def test_the_wrapper_refuses_bad_requests_by_name():
    res = _results()
    answers = pd.DataFrame({"lr": [DK, 5, 3, 2, None, None, None, None],
                            "vote": [1, 2, 2, 1, 1, None, None, None]},
                           index=[f"r{i}" for i in range(8)])  # fmt: skip
    with pytest.raises(DesignError, match=r"labeled respondents \['r0'\] answered"):
        prediction_powered(res, answers, "lr")
    with pytest.raises(DesignError, match="'vote' is nominal"):
        prediction_powered(res, answers, "vote")
    with pytest.raises(DesignError, match=r"without an answer \['r5'\]"):
        prediction_powered(res, answers, "vote", category=1, labeled=["r1", "r5"])
    with pytest.raises(DesignError, match=r"not respondents \['zz'\]"):
        prediction_powered(res, answers, "vote", category=1, labeled=["r1", "zz"])
    with pytest.raises(DesignError, match="does not offer the option"):
        prediction_powered(res, answers, "vote", category=DK)
    with pytest.raises(DesignError, match=r"no point 3; its scale 1\.\.2"):
        prediction_powered(res, answers, "vote", category=3)
    with pytest.raises(DesignError, match="no 'respondent' factor"):
        prediction_powered(res.isel(respondent=0), answers, "lr", category=2)
