"""Individual-level scores: each respondent's answer against the model's exact PMF."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from xlikert.analysis.individual import individual_scores, individual_summary
from xlikert.core.errors import DesignError, InputTypeError

DK = "Don't know"


def _results(n: int = 6, seed: int = 0) -> xr.Dataset:
    """Per-respondent results, two models: ``lr`` on 1..5 with Don't know, ``tv`` on 0..3
    (its own support inside the 0..5 axis), ``vote`` nominal on 0..1."""
    rng = np.random.default_rng(seed)
    scores = np.arange(0, 6)
    support = {"lr": (1, 5), "tv": (0, 3), "vote": (0, 1)}
    pmf = np.zeros((2, n, 3, scores.size))
    for j, (lo, hi) in enumerate(support.values()):
        mass = rng.gamma(0.8, size=(2, n, hi - lo + 1))
        pmf[:, :, j, lo : hi + 1] = mass / mass.sum(-1, keepdims=True)
    valid = rng.uniform(0.6, 0.9, size=(2, n, 3))
    ns = np.full((2, n, 3, 1), np.nan)
    ns[:, :, 0, 0] = rng.uniform(0.02, 0.1, size=(2, n))
    return xr.Dataset(
        {
            "pmf": (("model", "respondent", "item", "score"), pmf),
            "valid_mass": (("model", "respondent", "item"), valid),
            "nonsubstantive_mass": (("model", "respondent", "item", "option"), ns),
        },
        coords={
            "model": ["m1", "m2"],
            "respondent": [f"r{i}" for i in range(n)],
            "item": list(support),
            "score": scores,
            "option": [DK],
            "score_min": ("item", [v[0] for v in support.values()]),
            "score_max": ("item", [v[1] for v in support.values()]),
            "nominal": ("item", [False, False, True]),
        },
    )


def _answers(n: int = 6) -> pd.DataFrame:
    lr = [1, DK, 5, 3, np.nan, 2][:n]
    tv = [0, 3, 2, 1, 1, 0][:n]
    vote = [0, 1, 1, 0, 1, np.nan][:n]
    return pd.DataFrame(
        {"lr": lr, "tv": tv, "vote": vote, "party": list("DDRRRD")[:n]},
        index=[f"r{i}" for i in range(n)],
    )


def _by_hand(res: xr.Dataset, answers: pd.DataFrame, model: str, who: str, item: str) -> dict:
    """The scores of one person and item, from the definitions, one loop at a time."""
    cell = res.sel(model=model, respondent=who, item=item)
    lo, hi = int(cell.score_min), int(cell.score_max)
    points = list(range(lo, hi + 1))
    pmf = [float(cell.pmf.sel(score=y)) for y in points]
    vm = float(cell.valid_mass)
    dk = float(cell.nonsubstantive_mass.sel(option=DK))
    dk = 0.0 if np.isnan(dk) else dk
    total = vm + dk
    q = {y: p * vm / total for y, p in zip(points, pmf, strict=True)}
    if not np.isnan(float(cell.nonsubstantive_mass.sel(option=DK))):
        q[DK] = dk / total
    a = answers.loc[who, item]
    if not isinstance(a, str) and pd.isna(a):
        return {}
    a = a if isinstance(a, str) else int(a)
    p = q[a]
    brier = sum((v - (1.0 if c == a else 0.0)) ** 2 for c, v in q.items())
    top = max(q.values())
    modes = [c for c, v in q.items() if v == top]
    out = {"answer_probability": p, "log_score": np.log(p), "brier": brier,
           "mode_correct": (a in modes) / len(modes), "rps": np.nan}  # fmt: skip
    if isinstance(a, int) and not bool(cell.nominal):
        cum, rps = 0.0, 0.0
        for y, pk in zip(points[:-1], pmf[:-1], strict=True):
            cum += pk
            rps += (cum - (1.0 if y >= a else 0.0)) ** 2
        out["rps"] = rps / (len(points) - 1)
    return out


def test_scores_match_the_formulas_person_by_person():
    res, answers = _results(), _answers()
    s = individual_scores(res, answers)
    assert dict(s.sizes) == {"model": 2, "respondent": 6, "item": 3}
    checked = 0
    for model in ["m1", "m2"]:
        for who in answers.index:
            for item in ["lr", "tv", "vote"]:
                want = _by_hand(res, answers, model, who, item)
                got = s.sel(model=model, respondent=who, item=item)
                if not want:
                    assert all(np.isnan(float(got[v])) for v in s.data_vars)
                    continue
                for var, value in want.items():
                    np.testing.assert_allclose(float(got[var]), value, rtol=1e-12, atol=1e-15,
                                               equal_nan=True, err_msg=f"{var} {who} {item}")  # fmt: skip
                checked += 1
    assert checked == 2 * (18 - 2)
    # a Don't know is scored against the model's Don't know share, and has no RPS
    dk = s.sel(respondent="r1", item="lr")
    rate = res.nonsubstantive_mass / (res.valid_mass + res.nonsubstantive_mass)
    np.testing.assert_allclose(
        dk.answer_probability, rate.sel(respondent="r1", item="lr", option=DK), rtol=1e-12
    )
    assert np.isnan(dk.rps).all() and np.isnan(s.rps.sel(item="vote")).all()


def test_rps_is_zero_for_a_sure_hit_and_one_for_the_far_end():
    res = xr.Dataset(
        {"pmf": (("respondent", "item", "score"), [[[1.0, 0.0, 0.0, 0.0]], [[1.0, 0, 0, 0]]])},
        coords={"respondent": ["a", "b"], "item": ["q"], "score": [1, 2, 3, 4]},
    )
    s = individual_scores(res, pd.DataFrame({"q": [1, 4]}, index=["a", "b"]))
    np.testing.assert_allclose(s.rps.values.ravel(), [0.0, 1.0])
    np.testing.assert_allclose(s.brier.values.ravel(), [0.0, 2.0])
    np.testing.assert_allclose(s.mode_correct.values.ravel(), [1.0, 0.0])


def test_tied_modes_share_the_hit():
    res = xr.Dataset(
        {"pmf": (("respondent", "item", "score"), [[[0.4, 0.4, 0.2]]])},
        coords={"respondent": ["a"], "item": ["q"], "score": [1, 2, 3]},
    )
    s = individual_scores(res, pd.DataFrame({"q": [2]}, index=["a"]))
    assert s.mode_correct.item() == 0.5


def test_missing_codes_and_nonsubstantive_codes():
    res, answers = _results(), _answers()
    coded = answers.assign(lr=[1, 8, 5, 3, 9, 2])
    s = individual_scores(res, coded, nonsubstantive={DK: [8]}, missing=[9])
    xr.testing.assert_identical(s, individual_scores(res, answers))


def test_summary_means_ses_and_groups():
    res, answers = _results(), _answers()
    s = individual_scores(res, answers)
    out = individual_summary(res, answers, by=["party"])
    for party in ["D", "R"]:
        who = answers.index[answers.party == party]
        x = s.sel(respondent=list(who))
        for var in ["brier", "answer_probability"]:
            v = x[var].sel(model="m1", item="tv").values
            got = out.sel(party=party, model="m1", item="tv", metric=var)
            np.testing.assert_allclose(float(got.estimate), v.mean(), rtol=1e-12)
            np.testing.assert_allclose(float(got.se), v.std(ddof=1) / np.sqrt(v.size), rtol=1e-12)
        assert int(out.n.sel(party=party, item="lr", metric="brier")) == int(
            x.brier.sel(model="m1", item="lr").notnull().sum()
        )


def test_skill_against_the_baselines_by_hand():
    res, answers = _results(), _answers()
    out = individual_summary(res, answers)
    s = individual_scores(res, answers).sel(model="m2", item="tv")
    # uniform on tv's 4 points: Brier 1 - 1/4 for everyone
    want = 1 - s.brier.mean() / 0.75
    got = out.skill.sel(model="m2", item="tv", metric="brier", baseline="uniform")
    np.testing.assert_allclose(float(got), float(want), rtol=1e-12)
    # population: tv answered 0, 3, 2, 1, 1, 0 -> shares 2/6, 2/6, 1/6, 1/6
    share = np.array([2, 2, 1, 1]) / 6
    pop_brier = [(share**2).sum() - 2 * share[a] + 1 for a in [0, 3, 2, 1, 1, 0]]
    np.testing.assert_allclose(
        float(out.baseline_estimate.sel(model="m2", item="tv", metric="brier",
                                        baseline="population")),
        np.mean(pop_brier), rtol=1e-12,
    )  # fmt: skip
    acc = out.skill.sel(model="m2", item="tv", metric="mode_correct", baseline="uniform")
    np.testing.assert_allclose(float(acc), (float(s.mode_correct.mean()) - 0.25) / 0.75)


def test_group_persona_baseline_reads_each_respondents_group():
    res, answers = _results(), _answers()
    group = res.isel(respondent=[0, 2]).rename(respondent="party").assign_coords(party=["D", "R"])
    g = individual_scores(group, answers, persona=["party"])
    for who, party in answers.party.items():
        one = res.isel(respondent=[0 if party == "D" else 2]).assign_coords(respondent=[who])
        want = individual_scores(one, answers.loc[[who]])
        xr.testing.assert_allclose(g.sel(respondent=[who]), want)
    out = individual_summary(res, answers, persona_results=group, persona=["party"])
    assert list(out.baseline.values) == ["population", "group_persona", "uniform"]
    other = group.assign_coords(model=["m1", "m3"])
    with pytest.raises(DesignError, match="other 'model' levels than the results"):
        individual_summary(res, answers, persona_results=other, persona=["party"])
    with pytest.raises(DesignError, match=r"no items \['vote'\]"):
        individual_summary(res, answers, persona_results=group.sel(item=["lr", "tv"]),
                           persona=["party"])  # fmt: skip
    # r0 and r2 are their group's persona: the same scores
    m = individual_scores(res, answers)
    same = m.sel(respondent=["r0", "r2"]).brier
    np.testing.assert_allclose(g.brier.sel(respondent=["r0", "r2"]), same)


def test_a_group_persona_baseline_scores_the_matching_respondents_and_names_the_rest():
    res, answers = _results(), _answers()
    group = res.isel(respondent=[0, 2]).rename(respondent="party").assign_coords(party=["D", "X"])
    lost = sorted(answers.index[answers.party == "R"])
    note = (
        f"{len(lost)} of 6 respondents left out of the group persona baseline: {lost} "
        "(party='R' is not a level of the persona results' 'party' ['D', 'X'])"
    )
    with pytest.warns(UserWarning, match=re.escape(note)):
        g = individual_scores(group, answers, persona=["party"])
    assert g.attrs["group_persona_left_out"] == note
    assert bool(g.brier.sel(respondent=lost).isnull().all())
    kept = [r for r in answers.index if r not in lost]
    full = res.isel(respondent=[0, 2]).rename(respondent="party").assign_coords(party=["D", "R"])
    want = individual_scores(full, answers, persona=["party"]).sel(respondent=kept)
    xr.testing.assert_identical(g.sel(respondent=kept).drop_attrs(), want.drop_attrs())
    with pytest.warns(UserWarning, match="left out of the group persona baseline"):
        out = individual_summary(res, answers, persona_results=group, persona=["party"])
    assert out.attrs["group_persona_left_out"] == note
    # the skill against the group persona pairs the kept respondents only
    m = individual_scores(res, answers).sel(respondent=kept, model="m1", item="tv")
    b = want.sel(model="m1", item="tv")
    got = out.baseline_estimate.sel(model="m1", item="tv", metric="brier", baseline="group_persona")
    np.testing.assert_allclose(float(got), float(b.brier.mean()), rtol=1e-12)
    skill = out.skill.sel(model="m1", item="tv", metric="brier", baseline="group_persona")
    np.testing.assert_allclose(float(skill), 1 - float(m.brier.mean() / b.brier.mean()), rtol=1e-12)


def test_retest_ceiling():
    res, answers = _results(), _answers()
    retest = answers.assign(tv=[0, 2, 2, 1, 0, 0])  # 4 of 6 the same
    out = individual_summary(res, answers, retest=retest)
    agree = np.array([1, 0, 1, 1, 0, 1.0])
    np.testing.assert_allclose(float(out.retest_agreement.sel(item="tv")), 4 / 6)
    np.testing.assert_allclose(
        float(out.retest_agreement_se.sel(item="tv")), agree.std(ddof=1) / np.sqrt(6)
    )
    acc = individual_scores(res, answers).mode_correct.sel(model="m1", item="tv").values
    np.testing.assert_allclose(
        float(out.normalized_accuracy.sel(model="m1", item="tv")), acc.mean() / (4 / 6)
    )


def test_skill_se_matches_the_spread_over_simulated_surveys():
    """The delta-method SE of a skill score against the uniform answer: its mean over
    400 simulated surveys (one group each) is within 10% of the skill's standard
    deviation over them."""
    rng = np.random.default_rng(11)
    n, k, runs = 300, 5, 400
    model = rng.dirichlet(np.full(k, 0.5), size=n * runs)
    truth = 0.7 * model + 0.3 * rng.dirichlet(np.full(k, 0.5), size=n * runs)
    answer = (rng.random((n * runs, 1)) > truth.cumsum(1)).sum(1) + 1
    ids = [str(i) for i in range(n * runs)]
    res = xr.DataArray(model[:, None, :], dims=("respondent", "item", "score"),
                       coords={"respondent": ids, "item": ["q"], "score": np.arange(1, k + 1)})  # fmt: skip
    table = pd.DataFrame({"q": answer, "survey": np.repeat(np.arange(runs), n)}, index=ids)
    out = individual_summary(res, table, by=["survey"])
    cell = out.sel(item="q", metric="rps", baseline="uniform")
    assert dict(cell.skill.sizes) == {"survey": runs} and float(cell.skill.mean()) > 0.1
    ratio = float(cell.skill_se.mean()) / float(cell.skill.std(ddof=1))
    print("skill", float(cell.skill.mean()), "se/sd", ratio)
    assert 0.9 < ratio < 1.1, ratio


def test_bad_input_is_named():
    res, answers = _results(), _answers()
    with pytest.raises(
        DesignError, match=r"item 'tv' are outside the item's scale 0\.\.3.*\[7\].*'r2'"
    ):
        individual_scores(res, answers.assign(tv=[0, 3, 7, 1, 1, 0]))
    with pytest.raises(DesignError, match=r"item 'tv'.*Don't know.*'r0'"):
        individual_scores(res, answers.assign(tv=[DK, 3, 2, 1, 1, 0]))
    with pytest.raises(DesignError, match=r"item 'lr'.*scale 1\.\.5 and its options"):
        individual_scores(res, answers.assign(lr=[0, 1, 1, 1, 1, 1]))
    with pytest.raises(DesignError, match=r"no row for respondents \['r5'\]"):
        individual_scores(res, answers.iloc[:5])
    with pytest.raises(DesignError, match=r"no column for items \['vote'\]"):
        individual_scores(res, answers.drop(columns="vote"))
    with pytest.raises(DesignError, match="repeated respondent ids"):
        individual_scores(res, pd.concat([answers, answers.iloc[:1]]))
    with pytest.raises(InputTypeError, match="DataFrame"):
        individual_scores(res, answers.to_numpy())
    with pytest.raises(DesignError, match="no 'respondent' factor"):
        individual_scores(res.isel(respondent=0), answers)
    group = res.isel(respondent=[0, 2]).rename(respondent="party").assign_coords(party=["X", "Y"])
    with pytest.raises(DesignError, match="no respondent's group is a group persona"):
        individual_scores(group, answers, persona=["party"])
    with pytest.raises(DesignError, match="persona column 'sex' is not in the answers table"):
        individual_scores(group, answers, persona=["sex"])
    with pytest.raises(DesignError, match="nonsubstantive options \\['Refused'\\]"):
        individual_scores(res, answers, nonsubstantive={"Refused": [9]})


def test_two_group_columns_make_two_dims():
    res, answers = _results(), _answers()
    answers = answers.assign(sex=list("ffmmfm"))
    out = individual_summary(res, answers, by=["party", "sex"])
    assert dict(out.estimate.sizes) == {"model": 2, "party": 2, "sex": 2, "item": 3, "metric": 5}
    who = answers.index[(answers.party == "R") & (answers.sex == "m")]
    v = individual_scores(res, answers).brier.sel(model="m2", item="tv", respondent=list(who))
    got = out.estimate.sel(model="m2", party="R", sex="m", item="tv", metric="brier")
    np.testing.assert_allclose(float(got), float(v.mean()), rtol=1e-12)
