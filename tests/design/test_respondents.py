"""Personas from a respondent table: one level of a respondent factor per row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from xlikert.core.errors import ConfigError, DesignError, InputTypeError
from xlikert.design import experiment_from_dict
from xlikert.design.respondents import respondent_personas

TEMPLATE = "You are a {age}-year-old {sex}[ from {region}][ who left school at {school}]."
SEX = {1: "man", 2: "woman"}


def _table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "age": [43.0, 61.0, 35.0, np.nan, 52.0],
            "sex": [2, 1, 1, 2, 9],
            "region": ["Yorkshire", None, "Kent", "Fife", "Devon"],
            "school": [16, 18, None, 16, 21],
            "selfLR": [3, 4, 5, 2, 1],
        },
        index=[101, 102, 103, 104, 105],
    )


def test_drop_row_renders_codes_as_words_and_names_the_dropped():
    p = respondent_personas(_table(), TEMPLATE, values={"sex": SEX}, missing=[9])
    assert p.personas == {
        "101": "You are a 43-year-old woman from Yorkshire who left school at 16."
    }
    assert p.dropped == ("102", "103", "104", "105")
    assert p.columns == ("age", "sex", "region", "school")
    assert p.record()["columns"] == ["age", "sex", "region", "school"] and p.draw == {}


def test_omit_phrase_leaves_out_the_phrase_of_a_missing_value():
    t = _table().drop(index=[104, 105])
    p = respondent_personas(t, TEMPLATE, values={"sex": SEX}, rule="omit-phrase")
    assert p.personas == {
        "101": "You are a 43-year-old woman from Yorkshire who left school at 16.",
        "102": "You are a 61-year-old man who left school at 18.",
        "103": "You are a 35-year-old man from Kent.",
    }
    assert p.omitted == 2 and p.dropped == ()
    # a missing value outside every bracket is named, with its rows
    with pytest.raises(DesignError, match=r"column 'age' is missing for rows \['104'\]"):
        respondent_personas(_table(), TEMPLATE, values={"sex": SEX}, rule="omit-phrase",
                            missing=[9])  # fmt: skip


def test_the_draw_is_seeded_and_stored():
    t = pd.DataFrame({"age": np.arange(100)}, index=[f"r{i}" for i in range(100)])
    a = respondent_personas(t, "You are {age}.", sample=10, seed=4)
    b = respondent_personas(t, "You are {age}.", sample=10, seed=4)
    c = respondent_personas(t, "You are {age}.", sample=10, seed=5)
    assert a.personas == b.personas and a.levels != c.levels
    assert a.draw["rows"] == a.levels and a.draw["seed"] == 4 and a.draw["population"] == 100
    want = np.sort(np.random.default_rng(4).choice(100, size=10, replace=False))
    assert a.levels == [f"r{i}" for i in want]
    with pytest.raises(DesignError, match="needs a seed"):
        respondent_personas(t, "You are {age}.", sample=10)
    with pytest.raises(DesignError, match="sample=101 rows, but 100 rows are kept"):
        respondent_personas(t, "You are {age}.", sample=101, seed=1)


def test_bad_input_is_named():
    t = _table()
    with pytest.raises(DesignError, match=r"column\(s\) \['selfLR'\] that are also items asked"):
        respondent_personas(t, "You place yourself at {selfLR}.", items=["selfLR", "ClinLR"])
    with pytest.raises(DesignError, match=r"column 'sex' holds \[9\] \(first at row '105'\)"):
        respondent_personas(t, TEMPLATE, values={"sex": SEX}, rule="omit-phrase")
    with pytest.raises(DesignError, match=r"column\(s\) \['income'\] that the table does not"):
        respondent_personas(t, "You earn {income}.")
    with pytest.raises(DesignError, match=r"value maps for column\(s\) \['party'\]"):
        respondent_personas(t, "You are {age}.", values={"party": {1: "D"}})
    with pytest.raises(DesignError, match="unbalanced or nested bracket"):
        respondent_personas(t, "You are {age}[ from [{region}]].")
    with pytest.raises(DesignError, match="rule must be one of"):
        respondent_personas(t, "You are {age}.", rule="impute")
    with pytest.raises(DesignError, match="repeated row ids"):
        respondent_personas(pd.concat([t, t.iloc[:1]]), "You are {age}.")
    with pytest.raises(InputTypeError):
        respondent_personas(t.to_dict(), "You are {age}.")


def _experiment(personas) -> dict:
    return {
        "experiment": {
            "name": "people",
            "instrument": "anes96_survey",
            "system": "{respondent} Answer each question with ONLY the number of one of its "
            "options.",
            "user": "{item}\n{options}\nAnswer:",
        },
        "factors": {"respondent": personas.factor_spec()},
        "models": [{"name": "SmolLM2-135M-Instruct", "source": "smollm2-135m-instruct"}],
    }


def test_the_factor_renders_each_persons_prompts_and_may_repeat_a_persona():
    t = pd.DataFrame({"age": [30, 30, 50]}, index=["a", "b", "c"])
    p = respondent_personas(t, "You are {age} years old.")
    ds = experiment_from_dict(_experiment(p)).build_prompts()
    assert list(ds.respondent.values) == ["a", "b", "c"]
    assert str(ds.system.sel(respondent="c", item="vote").item()).startswith(
        "You are 50 years old. Answer"
    )
    # the same persona twice is two people, not a replicate condition; a free factor refuses it
    spec = _experiment(p)
    spec["factors"]["respondent"]["kind"] = "free"
    with pytest.raises(ConfigError, match="render identical prompts"):
        experiment_from_dict(spec)
