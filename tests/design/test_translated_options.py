"""Translations of each item's own options and of the non-substantive options (issue 40,
item 1): the items' anchors and the options' labels in each language, one ``option``
coordinate across languages, every missing one named by item (or option) and language."""

from __future__ import annotations

import pytest
import xarray as xr
from support.survey import (
    GERMAN,
    GERMAN_USER,
    IN_TWO_LANGUAGES,
    SURVEY,
    german_by_hand,
    survey_experiment,
    write,
)

from xlikert.core.errors import ConfigError
from xlikert.design import (
    Option,
    Scale,
    builtin_experiments,
    builtin_instruments,
    load_experiment,
    load_instrument,
)


def test_the_items_own_anchors_and_the_options_are_translated(tmp_path):
    inst = load_instrument(write(tmp_path, "survey.toml", SURVEY + GERMAN))
    de = inst.translated("de")
    assert de.scale_of("tv") == Scale(0, 7, {0: "Keinen", 7: "Jeden Tag"})
    assert de.scale_of("vote").anchors == {0: "Bill Clinton", 1: "Bob Dole"}
    assert de.scale_of("vote").answers == "labels" and de.item("vote").nominal
    trust = de.scale_of("trust")
    assert trust.anchors == {1: "Nie", 2: "Manchmal", 3: "Meistens", 4: "Immer"}
    # the option's text is German, its name (the option coordinate) the instrument's own
    assert trust.nonsubstantive == (
        Option("Weiss nicht", name="Don't know"),
        Option("Verweigert", name="Refused"),
    )
    assert de.nonsubstantive == (Option("Weiss nicht", 8, name="Don't know"),)
    assert de.scale_of("self").nonsubstantive[0].code == 8  # codes stay
    shown = trust.show()
    assert shown.options == {"Don't know": "E", "Refused": "F"}
    assert shown.fields["options"].splitlines()[-2:] == ["E. Weiss nicht", "F. Verweigert"]
    # the English instrument is as it was
    assert inst.scale_of("tv") == Scale(0, 7, {0: "None", 7: "Every day"})
    assert inst.nonsubstantive == (Option("Don't know", 8),)


def test_two_languages_share_the_option_coordinate_and_carry_their_labels(tmp_path):
    both = survey_experiment(tmp_path, IN_TWO_LANGUAGES, instrument=SURVEY + GERMAN).build_prompts()
    assert both.option.values.tolist() == ["Don't know", "Refused"]
    # the answer labels differ (the vote's names): one per language, read per cell
    assert both.answer_label.dims == ("language", "item", "score")
    vote = both.answer_label.sel(item="vote", score=[0, 1])
    assert vote.sel(language="en").values.tolist() == ["Clinton", "Dole"]
    assert vote.sel(language="de").values.tolist() == ["Bill Clinton", "Bob Dole"]
    assert both.score_label.sel(language="de", item="tv", score=7).item() == "Jeden Tag"
    # the options are answered with the same codes and letters: one array for both
    assert both.option_label.dims == ("item", "option")
    user = both.user.sel(language="de", party="Democrat", item="trust").item()
    assert "E. Weiss nicht\nF. Verweigert" in user and "Don't know" not in user
    assert user.startswith("Als ") and user.endswith("Antwort:")  # the experiment's own text
    assert "0. Keinen" in both.user.sel(language="de", party="Democrat", item="tv").item()
    # each language equals its instrument administered alone (German: written by hand)
    (tmp_path / "de").mkdir()
    alone_de = survey_experiment(
        tmp_path / "de", instrument=german_by_hand(), user=GERMAN_USER
    ).build_prompts()
    alone_de = alone_de.assign_coords(option=["Don't know", "Refused"])
    alone_en = survey_experiment(tmp_path, instrument=SURVEY + GERMAN).build_prompts()
    for lang, alone in (("de", alone_de), ("en", alone_en)):
        for v in ("user", "system", "answer_label", "option_label", "score_label"):
            got = both[v].sel(language=lang, drop=True) if "language" in both[v].dims else both[v]
            xr.testing.assert_equal(got.transpose(*alone[v].dims), alone[v])


def test_every_missing_option_translation_is_named_before_anything_loads(tmp_path):
    lacking = (
        GERMAN.replace('tv = { 0 = "Keinen", 7 = "Jeden Tag" }', 'tv = { 0 = "Keinen" }')
        .replace(', "Refused" = "Verweigert"', ', "Refusd" = "Verweigert"')
        .replace('vote = { 0 = "Bill Clinton", 1 = "Bob Dole" }', 'self = { 1 = "x" }')
    )
    with pytest.raises(ConfigError) as err:
        survey_experiment(tmp_path, IN_TWO_LANGUAGES, instrument=SURVEY + lacking)
    msg = str(err.value)
    assert "item 'tv' scale anchor 7 has no 'de' translation" in msg
    assert "item 'vote' scale anchor 0 has no 'de' translation" in msg
    assert "item 'vote' scale anchor 1 has no 'de' translation" in msg
    assert "option 'Refused' has no 'de' translation" in msg
    assert "nonsubstantive 'Refusd' is not an option of the instrument" in msg
    assert "item_anchors 'self' is not an item with its own scale" in msg
    extra = GERMAN.replace('tv = { 0 = "Keinen", ', 'tv = { 3 = "Drei", 0 = "Keinen", ')
    with pytest.raises(ConfigError, match="item 'tv' scale anchor 3 is not an anchor"):
        survey_experiment(tmp_path, IN_TWO_LANGUAGES, instrument=SURVEY + extra)
    # a translated label that clashes on its scale is refused as the file's own would be
    clash = GERMAN.replace('"Refused" = "Verweigert"', '"Refused" = "Weiss nicht"')
    with pytest.raises(ConfigError, match="Weiss nicht"):
        survey_experiment(tmp_path, IN_TWO_LANGUAGES, instrument=SURVEY + clash)


@pytest.mark.parametrize("name", builtin_instruments())
def test_the_builtin_instruments_translate_as_before(name):
    inst = load_instrument(name)
    for lang in inst.languages:
        tr = inst.translated(lang)
        assert [o.name for o in tr.nonsubstantive] == [o.label for o in inst.nonsubstantive]
        assert [it.id for it in tr.items] == [it.id for it in inst.items]


def test_the_builtin_experiments_name_their_options_by_their_labels():
    for name in builtin_experiments():
        exp = load_experiment(name)
        ds = exp.build_prompts()
        if "option" in ds.coords:
            labels = {o.label for it in exp.items for o in exp.scale_of(it.id).nonsubstantive}
            assert set(ds.option.values.tolist()) == labels, name


def test_human_data_name_a_translated_option_as_the_results_do(tmp_path):
    from xlikert.analysis.human.inputs import from_instrument

    inst = load_instrument(write(tmp_path, "survey.toml", SURVEY + GERMAN))
    items = {"q1": "self", "q2": "trust"}
    for lang in ("en", "de"):
        _, codes = from_instrument(inst.translated(lang), items, None, None, [])
        assert codes == {"Don't know": {"self": [8]}}, lang  # trust's options have no code
