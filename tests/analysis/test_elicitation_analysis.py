"""Elicitation in the analysis: the validity table by hand, and decompose with the factor.

``decompose`` takes ``elicitation`` as any factor: its main effect and the model x
elicitation interaction have the means of the classical two-way ANOVA on the cells'
composite means, computed here by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from support.elicitation import results

import xlikert as xl
from xlikert.analysis.elicitation import VALIDITY_VARIABLES, elicitation_validity
from xlikert.core.errors import DesignError


def test_the_validity_table_is_what_each_cell_says():
    ds = results()
    table = elicitation_validity(ds)
    assert set(table.data_vars) == set(VALIDITY_VARIABLES)
    assert table.greedy_agreement.dims == ("model", "target")
    for m in ds.model.values:
        for t in ds.target.values:
            c = ds.sel(model=m, target=t)
            first = c.pmf.sel(elicitation="first_token").values
            g, o = c.sel(elicitation="greedy"), c.sel(elicitation="own_words")
            agree = [
                int(g.reply_answered.values[k]) == 1
                and g.reply_answer.values[k] == np.argmax(first[k]) + 1
                for k in range(first.shape[0])
            ]
            row = table.sel(model=m, target=t)
            assert float(row.greedy_agreement) == np.mean(agree)
            assert float(row.greedy_no_answer) == np.mean(g.reply_answered.values == 0)
            tv = [0.5 * np.abs(o.pmf.values[k] - first[k]).sum() for k in range(first.shape[0])]
            assert float(row.own_words_tv) == pytest.approx(np.mean(tv), abs=1e-15)
            assert float(row.own_words_tv_bound) == pytest.approx(
                np.mean(o.elicitation_error.values), abs=1e-15
            )
            assert float(row.own_words_no_answer) == pytest.approx(
                np.mean(o.no_answer_mass.values), abs=1e-15
            )
    assert (table.greedy_agreement > 0).any() and (table.greedy_agreement < 1).any()
    np.testing.assert_array_equal(ds.likert.elicitation_validity().greedy_agreement,
                                  table.greedy_agreement)  # fmt: skip


def test_levels_the_file_lacks_are_nan_and_a_file_without_the_factor_is_refused():
    ds = results().sel(elicitation=["first_token", "greedy"])
    table = elicitation_validity(ds)
    assert table.own_words_tv.isnull().all() and table.greedy_agreement.notnull().all()
    with pytest.raises(DesignError, match="factor 'elicitation'"):
        elicitation_validity(ds.sel(elicitation="first_token"))
    with pytest.raises(DesignError, match="compares every level with 'first_token'"):
        elicitation_validity(results().sel(elicitation=["greedy", "own_words"]))


def test_decompose_with_elicitation_is_the_classical_anova_on_means():
    rng = np.random.default_rng(3)
    M, E, K, S = 2, 3, 3, 5
    pmf = xr.DataArray(
        rng.dirichlet(np.ones(S) * 0.7, size=(M, E, K)),
        dims=("model", "elicitation", "item", "score"),
        coords={"model": ["m1", "m2"], "elicitation": ["first_token", "prefix", "greedy"],
                "item": ["1", "2", "3"], "score": np.arange(1, S + 1)},
    )  # fmt: skip
    dec = xl.decompose(pmf, reflect=False, subscale=None)
    # the composite (sum over items) mean of each cell, by hand
    means = (pmf * pmf.score).sum("score").sum("item").values  # (M, E)
    grand = means.mean()
    row, col = means.mean(1), means.mean(0)
    assert float(dec["grand"]["E"]) == pytest.approx(grand, abs=1e-9)
    np.testing.assert_allclose(dec["elicitation"]["E"].values, col - grand, atol=1e-9)
    np.testing.assert_allclose(dec["model"]["E"].values, row - grand, atol=1e-9)
    inter = means - row[:, None] - col[None, :] + grand
    np.testing.assert_allclose(dec["model:elicitation"]["E"].values, inter, atol=1e-9)
    assert np.abs(inter).max() > 1e-3  # the interaction is not trivially zero
