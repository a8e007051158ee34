"""Prompt noise as a factor of kind ``perturbation``: each level's text from its stated rule,
the rules refused by name, the effect in ``decompose`` as in a by-hand ANOVA on means."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

import xlikert as xl
from xlikert.cli import main
from xlikert.core.errors import ConfigError
from xlikert.design import experiment_from_dict, load_experiment

PARAPHRASE = [
    "{people:cap} ought to buy {adj}-made goods, not imports.",
    "Import only what {country_short} cannot make.",
    "Buy {adj}. Keep {country} in work.",
]
LEVELS = {
    "clean": "none",
    "typos": "typos rate=0.15 seed=11",
    "dense": "typos rate=1 seed=3",
    "upper": "case upper",
    "lower": "case lower",
    "spaces": "whitespace rate=0.5 seed=2",
    "reworded": {"paraphrase": PARAPHRASE},
}


def _table(levels=None) -> dict:
    return {
        "experiment": {"name": "noise", "instrument": "cetscale", "items": ["1", "2", "3"]},
        "factors": {
            "target": {"levels": ["USA", "France"]},
            "noise": {"kind": "perturbation", "levels": LEVELS if levels is None else levels},
        },
        "models": [{"name": "tiny", "source": "smollm2-135m-instruct"}],
    }


# ---- the rules, written again here from their statement (PERTURBATION_RULES) ----
ROWS = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]


def neighbours(letter: str) -> list[str]:
    """Keys in the same row or the rows above and below, one column either side."""
    r = next(i for i, row in enumerate(ROWS) if letter in row)
    col = ROWS[r].index(letter)
    out = []
    for rr in (r - 1, r, r + 1):
        if 0 <= rr < len(ROWS):
            for cc in (col - 1, col, col + 1):
                if 0 <= cc < len(ROWS[rr]) and ROWS[rr][cc] != letter:
                    out.append(ROWS[rr][cc])
    return sorted(out)


def rng_for(seed: int, item: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(item.encode("utf-8"))])


def typos(text: str, rate: float, seed: int, item: str) -> str:
    rng = rng_for(seed, item)
    out, i = "", 0
    while i < len(text):
        c = text[i]
        if c.isascii() and c.isalpha() and rng.random() < rate:
            edit = rng.integers(3)
            if edit == 0:
                options = neighbours(c.lower())
                pick = options[rng.integers(len(options))]
                out += pick.upper() if c.isupper() else pick
            elif edit == 1:
                if i + 1 < len(text):
                    out += text[i + 1] + c
                    i += 1
                else:
                    out += c
            # edit 2: deleted
        else:
            out += c
        i += 1
    return out


def whitespace(text: str, rate: float, seed: int, item: str) -> str:
    rng = rng_for(seed, item)
    return "".join(("  " if rng.random() < rate else " ") if c == " " else c for c in text)


def test_each_level_is_its_rule_applied_to_the_item_text():
    exp = experiment_from_dict(_table())
    ds = exp.build_prompts()
    assert ds["noise"].values.tolist() == list(LEVELS)
    changed = 0
    for target in ("USA", "France"):
        for item in ["1", "2", "3"]:
            text = str(ds["user"].sel(target=target, item=item, noise="clean").values)
            assert "{" not in text and text  # the item rendered (the clean level)

            def got(level, target=target, item=item):
                return str(ds["user"].sel(target=target, item=item, noise=level).values)

            assert got("typos") == typos(text, 0.15, 11, item)
            assert got("dense") == typos(text, 1.0, 3, item)
            assert got("upper") == text.upper() and got("lower") == text.lower()
            assert got("spaces") == whitespace(text, 0.5, 2, item)
            changed += sum(got(lv) != text for lv in ("typos", "dense", "spaces"))
    assert changed == 18  # every random level changed every text here (the test can fail)
    usa = ds["user"].sel(target="USA", noise="reworded").values.tolist()
    assert usa == ["Americans ought to buy American-made goods, not imports.",
                   "Import only what the U.S. cannot make.",
                   "Buy American. Keep America in work."]  # fmt: skip
    assert '"typos": "typos rate=0.15 seed=11"' in ds.attrs["perturbation_rules"]
    assert "rng.integers(3)" in ds.attrs["perturbation_rule_text"]


def test_the_level_is_the_same_text_in_every_run_and_differs_by_seed():
    a = experiment_from_dict(_table()).build_prompts()
    b = experiment_from_dict(_table()).build_prompts()
    xr.testing.assert_identical(a["user"], b["user"])
    other = dict(LEVELS, typos="typos rate=0.15 seed=12")
    c = experiment_from_dict(_table(other)).build_prompts()
    assert not c["user"].sel(noise="typos").equals(a["user"].sel(noise="typos"))


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("typos rate=1.5 seed=1", "rate must be in [0, 1], got 1.5"),
        ("whitespace rate=-0.1 seed=1", "rate must be in [0, 1], got -0.1"),
        ("typos rate=0.1", "typos takes rate=R and seed=S"),
        ("typos rate=0.1 seed=1.5", "seed must be a non-negative integer"),
        ("typo rate=0.1 seed=1", "not a perturbation"),
        ("case title", "write 'case upper' or 'case lower'"),
        ({"paraphrase": ["only one"]}, "give one non-empty text per item administered (3"),
        ({"paraphrase": ["{nationality}", "b", "c"]}, "placeholders ['nationality']"),
    ],
)
def test_a_bad_rule_is_refused_by_name_before_anything_loads(rule, message):
    with pytest.raises(ConfigError) as err:
        experiment_from_dict(_table({"clean": "none", "bad": rule}))
    assert "factor 'noise' level 'bad'" in str(err.value)
    assert message in str(err.value)


def test_prompts_cli_shows_the_rules_and_the_perturbed_text(tmp_path):
    path = tmp_path / "noise.toml"
    path.write_text(
        '[experiment]\nname = "noise"\ninstrument = "cetscale"\nitems = ["1"]\n'
        '[factors.target]\nlevels = ["USA"]\n[factors.noise]\nkind = "perturbation"\n'
        '[factors.noise.levels]\nclean = "none"\nupper = "case upper"\n'
        '[[models]]\nname = "tiny"\nsource = "smollm2-135m-instruct"\n'
    )
    out = tmp_path / "prompts.csv"
    result = CliRunner().invoke(main, ["prompts", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "noise (perturbation, 2 levels): clean, upper" in result.output
    assert "upper: case upper" in result.output
    assert "SHOULD ALWAYS BUY" in out.read_text()
    assert load_experiment(path).build_prompts()["user"].sizes["noise"] == 2


def test_decompose_gives_the_perturbation_effect_as_a_by_hand_anova():
    """Synthetic results over model x noise: the effect means are the classical ANOVA's,
    and the variance component (the mean squared effect) is SS_noise / cells."""
    rng = np.random.default_rng(5)
    M, P, K, S = 3, 4, 3, 5
    pmf = xr.DataArray(
        rng.dirichlet(np.ones(S) * 0.7, size=(M, P, K)),
        dims=("model", "noise", "item", "score"),
        coords={"model": ["a", "b", "c"], "noise": ["clean", "typos", "upper", "spaces"],
                "item": ["1", "2", "3"], "score": np.arange(1, S + 1)},
    )  # fmt: skip
    dec = xl.decompose(pmf, reflect=False, subscale=None)
    means = (pmf * pmf["score"]).sum("score").sum("item").values  # (M, P) composite means
    grand = means.mean()
    level = means.mean(0)
    np.testing.assert_allclose(dec["noise"]["E"].values, level - grand, atol=1e-9)
    ss_noise = M * ((level - grand) ** 2).sum()  # the classical sum of squares
    component = float((dec["noise"]["E"] ** 2).mean())
    assert component == pytest.approx(ss_noise / (M * P), rel=1e-9)
    assert component > 1e-4  # not trivially zero
