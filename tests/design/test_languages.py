"""Translations in one instrument and the ``language`` factor (issue 40, items 1 and 5)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

import xlikert as xl
from xlikert.core.errors import ConfigError
from xlikert.design import load_experiment, load_instrument

INSTRUMENT = """
[instrument]
name = "tiny"
citation = "none"
language = "en"
default_framing = "plain"
lexicon_factor = "target"

[scale]
min = 1
max = 5
[scale.anchors]
1 = "No"
5 = "Yes"

[framings]
plain = "Answer {scale_min}-{scale_max} ({scale_min}={min_label}, {scale_max}={max_label})."

[lexicon.USA]
people = "Americans"
[lexicon.France]
people = "the French"

[[items]]
id = "a"
template = "{people:cap} like tea."
[[items]]
id = "b"
template = "{people:cap} like coffee."

[translations.de]
source = "test"
anchors = { 1 = "Nein", 5 = "Ja" }
framings = { plain = "Antworte {scale_min}-{scale_max} ({scale_min}={min_label}, {scale_max}={max_label})." }
items = { a = "{people:cap} mögen Tee.", b = "{people:cap} mögen Kaffee." }
lexicon = { USA = { people = "die Amerikaner" }, France = { people = "die Franzosen" } }

[translations.fr]
source = "test, incomplete"
anchors = { 1 = "Non" }
framings = { plain = "Répondez {scale_min}-{scale_max}." }
items = { a = "{people:cap} aiment le thé." }
lexicon = { USA = { people = "les Américains" } }
"""

EXPERIMENT = """
[experiment]
instrument = "tiny.toml"
[factors.target]
levels = ["USA", "France"]
[factors.language]
kind = "language"
levels = {levels}
[[models]]
name = "m"
source = "smollm2-135m-instruct"
"""


def write(tmp_path, levels):
    (tmp_path / "tiny.toml").write_text(INSTRUMENT, encoding="utf-8")
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT.replace("{levels}", levels), encoding="utf-8")
    return path


def test_a_language_factor_crosses_the_translations(tmp_path):
    exp = load_experiment(write(tmp_path, '["en", "de"]'))
    ds = exp.build_prompts()
    assert dict(ds.sizes) == {"target": 2, "language": 2, "item": 2}
    assert ds.user.dims == ("target", "language", "item")
    assert (
        ds.user.sel(language="de", target="France", item="b").item()
        == "Die Franzosen mögen Kaffee."
    )
    assert ds.user.sel(language="en", target="USA", item="a").item() == "Americans like tea."
    assert (
        ds.system.sel(language="de", target="USA", item="a").item()
        == "Antworte 1-5 (1=Nein, 5=Ja)."
    )
    assert exp.factors == {"target": ["USA", "France"], "language": ["en", "de"]}


def test_a_missing_translation_is_named_by_item_and_language(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_experiment(write(tmp_path, '["en", "fr"]'))
    msg = str(err.value)
    assert "item 'b' has no 'fr' translation" in msg
    assert "scale anchor 5 has no 'fr' translation" in msg
    assert "lexicon level 'France' field 'people' has no 'fr' translation" in msg
    with pytest.raises(ConfigError, match="'it' is not a language"):
        load_experiment(write(tmp_path, '["en", "it"]'))


OWN_TEXTS = """
[experiment]
instrument = "tiny.toml"
system = "Answer with {answer_labels}: {anchors}; {nonsubstantive}."
[scale]
min = 1
max = 4
anchors = { 1 = "Never", 4 = "Always" }
nonsubstantive = [{ label = "Don't know", code = 8 }]
[factors.target]
levels = ["USA"]
[factors.language]
kind = "language"
levels = ["en", "de"]
[[models]]
name = "m"
source = "smollm2-135m-instruct"
"""
GERMAN_TEXTS = """
[translations.de]
system = "Antworten Sie mit {answer_labels}: {anchors}; {nonsubstantive}."
anchors = { 1 = "Nie", 4 = "Immer" }
nonsubstantive = { "Don't know" = "Weiß nicht" }
"""


def test_the_experiments_own_texts_are_translated(tmp_path):
    """The texts an experiment adds (its system prompt, its [scale]'s labels) are each
    language's; the option keeps the experiment's label as its name; the attrs give the
    scale's labels of every language."""
    (tmp_path / "tiny.toml").write_text(INSTRUMENT, encoding="utf-8")
    path = tmp_path / "exp.toml"
    path.write_text(OWN_TEXTS + GERMAN_TEXTS, encoding="utf-8")
    ds = load_experiment(path).build_prompts()
    de, en = (ds.system.sel(language=lv, target="USA", item="a").item() for lv in ("de", "en"))
    assert de == "Antworten Sie mit 1, 2, 3, 4: 1=Nie, 4=Immer; 8=Weiß nicht.", de
    assert en == "Answer with 1, 2, 3, 4: 1=Never, 4=Always; 8=Don't know.", en
    assert ds.user.sel(language="de", target="USA", item="a").item() == "Die Amerikaner mögen Tee."
    assert ds.option.values.tolist() == ["Don't know"]
    assert json.loads(ds.attrs["scale_labels"]) == {"1": "Never", "4": "Always"}
    assert json.loads(ds.attrs["scale_labels_by_language"]) == {
        "en": {"1": "Never", "4": "Always"},
        "de": {"1": "Nie", "4": "Immer"},
    }
    # the instrument's scale in a language run: each language's anchors
    bfi = load_experiment("languages").build_prompts()
    by_language = json.loads(bfi.attrs["scale_labels_by_language"])
    assert by_language["zh"] == {"1": "非常不同意", "5": "非常同意"}
    assert json.loads(bfi.attrs["scale_labels"]) == by_language["en"]


def test_an_experiment_text_without_its_translation_is_named(tmp_path):
    (tmp_path / "tiny.toml").write_text(INSTRUMENT, encoding="utf-8")
    path = tmp_path / "exp.toml"
    lacking = GERMAN_TEXTS.replace(', 4 = "Immer"', "").replace(
        '"Don\'t know" = ', '"Dont know" = '
    )
    path.write_text(OWN_TEXTS + lacking + '[translations.fr]\nanchors = { 1 = "Jamais" }\n',
                    encoding="utf-8")  # fmt: skip
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    msg = str(err.value)
    assert "[translations.de]: the experiment's [scale] anchor 4 has no 'de' translation" in msg
    assert "the experiment's [scale] option \"Don't know\" has no 'de' translation" in msg
    assert "nonsubstantive 'Dont know' is not an option of the experiment's [scale]" in msg
    assert "[translations.fr]: 'fr' is not a level of the language factor (levels: en, de)" in msg
    # no translation at all: the system prompt, both anchors and the option, named
    path.write_text(OWN_TEXTS, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    assert str(err.value).count("has no 'de' translation") == 4, str(err.value)
    assert "[experiment] system has no 'de' translation (give it; the same text keeps it)" in (
        str(err.value)
    )
    # translations without a language factor to use them
    path.write_text(
        OWN_TEXTS.replace('[factors.language]\nkind = "language"\nlevels = ["en", "de"]\n', "")
        + GERMAN_TEXTS,
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="no language factor to translate its texts for"):
        load_experiment(path)


def test_the_builtin_instrument_in_three_languages_and_two_scripts():
    inst = load_instrument("bfi_short")
    assert inst.languages == ("en", "de", "zh")
    assert "project's own" in inst.translations["zh"]
    zh = inst.translated("zh")
    assert all(any("\u4e00" <= c <= "\u9fff" for c in it.template) for it in zh.items)
    assert [it.reverse_keyed for it in zh.items] == [it.reverse_keyed for it in inst.items]
    ds = load_experiment("languages").build_prompts()
    assert list(ds.language.values) == ["en", "de", "zh"]
    assert "非常同意" in ds.system.sel(language="zh", item="1").item()
    # the built-in instruments without translations are unchanged
    cet = load_instrument("cetscale")
    assert cet.languages == ("en",) and cet.translated("en") is cet


def test_decompose_gives_the_classical_anova_of_the_language_term():
    rng = np.random.default_rng(4)
    langs, targets, items = ["en", "de", "zh"], ["USA", "China"], ["1", "2", "3"]
    pmf = xr.DataArray(
        rng.dirichlet(np.ones(5), size=(3, 2, 3)),
        dims=("language", "target", "item", "score"),
        coords={"language": langs, "target": targets, "item": items, "score": np.arange(1, 6)},
    )
    dec = xl.decompose(pmf, reflect=False, subscale=None)
    # the composite's mean per cell, by hand: the sum of the items' means
    m = (pmf * pmf.score).sum("score").sum("item").values  # (language, target)
    grand = m.mean()
    main = m.mean(1) - grand
    np.testing.assert_allclose(dec["language"].ds.E.values, main, atol=1e-10)
    inter = m - m.mean(1, keepdims=True) - m.mean(0, keepdims=True) + grand
    got = dec["language:target"].ds.E.transpose("language", "target").values
    np.testing.assert_allclose(got, inter, atol=1e-10)
    # the effects of every language sum to zero, as the ANOVA's do
    assert abs(float(dec["language"].ds.E.sum())) < 1e-10


def test_the_stated_instruction_is_the_experiments_and_translated(tmp_path):
    """``[experiment] stated_instruction`` travels with the prompts, each language's (its
    ``[translations.<tag>]``); one missing, or one without ``{options}``, is refused by name
    when the experiment loads (before any model); without one the prompts carry none and
    a run reads its ``stated_instruction`` option (the default: English)."""
    path = write(tmp_path, '["en", "de"]')
    own = "Percent per option as JSON. Options: {options}."
    german = "Prozent je Option als JSON. Optionen: {options}."
    base = path.read_text(encoding="utf-8")
    text = base.replace('instrument = "tiny.toml"\n',
                        f'instrument = "tiny.toml"\nstated_instruction = "{own}"\n')  # fmt: skip
    path.write_text(text + f'[translations.de]\nstated_instruction = "{german}"\n',
                    encoding="utf-8")  # fmt: skip
    ds = load_experiment(path).build_prompts()
    assert ds["stated_instruction"].dims == ("language",)
    assert ds["stated_instruction"].sel(language="de").item() == german
    assert ds["stated_instruction"].sel(language="en").item() == own
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[translations.de\]: the experiment's \[experiment\] "
                       r"stated_instruction has no 'de' translation"):  # fmt: skip
        load_experiment(path)
    path.write_text(text + '[translations.de]\nstated_instruction = "Prozent je Option."\n',
                    encoding="utf-8")  # fmt: skip
    with pytest.raises(ConfigError, match=r"\[translations.de\]: stated_instruction must name "
                       r"the options with \{options\}"):  # fmt: skip
        load_experiment(path)
    path.write_text(base.replace('instrument = "tiny.toml"\n',
                                 'instrument = "tiny.toml"\nstated_instruction = "JSON."\n'),
                    encoding="utf-8")  # fmt: skip
    with pytest.raises(ConfigError, match=r"\[experiment\], field 'stated_instruction': must "
                       r"name the options"):  # fmt: skip
        load_experiment(path)
    path.write_text(base, encoding="utf-8")
    assert "stated_instruction" not in load_experiment(path).build_prompts()
