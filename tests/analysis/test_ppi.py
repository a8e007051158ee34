"""Prediction-powered inference: coverage over simulated surveys, and the results wrapper."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

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


def test_the_formulas_by_hand():
    y = np.array([1.0, 3.0, 2.0, 5.0])
    fl = np.array([1.5, 2.5, 2.0, 4.0])
    fu = np.array([2.0, 3.0, 4.0, 1.0, 2.5])
    out = ppi_mean_numpy(y, fl, fu, power_tuning=False)
    assert float(out["estimate"]) == pytest.approx(y.mean() + fu.mean() - fl.mean())
    var = np.var(y - fl, ddof=1) / 4 + np.var(fu, ddof=1) / 5
    assert float(out["se"]) == pytest.approx(np.sqrt(var))
    tuned = ppi_mean_numpy(y, fl, fu)
    lam = np.cov(y, fl)[0, 1] / ((1 + 4 / 5) * np.var(np.r_[fl, fu], ddof=1))
    assert float(tuned["ppi_lambda"]) == pytest.approx(lam)
    assert float(tuned["estimate"]) == pytest.approx(y.mean() + lam * (fu.mean() - fl.mean()))
    with pytest.raises(DesignError, match="n=1 answered"):
        ppi_mean_numpy(y[:1], fl[:1], fu)


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
