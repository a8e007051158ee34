"""Questionnaires as they are fielded: each item its own options, non-substantive answers,
nominal items, ``{options}`` rendered per item, and a factor that changes nothing refused."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner
from support.survey import SURVEY, write
from support.survey import survey_experiment as experiment

from xlikert.core.errors import ConfigError, LabelMappingError
from xlikert.design import Option, Scale, load_experiment, load_instrument
from xlikert.design.formats import builtin_format


def error(fn, kind=ConfigError) -> str:
    with pytest.raises(kind) as info:
        fn()
    return str(info.value)


# --------------------------------------------------------------------------- the file


def test_items_carry_their_own_options(tmp_path):
    inst = load_instrument(write(tmp_path, "survey.toml", SURVEY))
    dk = Option("Don't know", 8)
    assert inst.response_scale == Scale(
        1, 7, {1: "Extremely liberal", 7: "Extremely conservative"}, (dk,)
    )
    assert inst.scale_of("self") is not None and inst.scale_of("self").nonsubstantive == (dk,)
    assert inst.scale_of("tv") == Scale(0, 7, {0: "None", 7: "Every day"})  # replaced: no DK
    trust = inst.scale_of("trust")
    assert (trust.answers, [o.label for o in trust.nonsubstantive]) == (
        "letters",
        ["Don't know", "Refused"],
    )
    assert inst.item("vote").nominal and not inst.item("trust").nominal
    text = repr(inst)
    assert "own options: tv 0..7" in text and "vote 0..1 (0=Clinton, 1=Dole)" in text
    assert "answered with the labels, nominal" in text


def test_prompts_record_each_items_support_and_labels(tmp_path):
    exp = experiment(tmp_path)
    assert exp.per_item
    ds = exp.build_prompts()
    assert ds.score.values.tolist() == list(range(0, 8))  # the union of 1..7, 0..7, 1..4, 0..1
    assert (ds.attrs["scale_min"], ds.attrs["scale_max"]) == (0, 7)
    assert ds.score_min.values.tolist() == [1, 0, 1, 0]
    assert ds.score_max.values.tolist() == [7, 7, 4, 1]
    assert ds.nominal.values.tolist() == [False, False, False, True]
    lab = ds.answer_label
    assert lab.dims == ("item", "score")
    assert lab.sel(item="self").values.tolist() == ["", *map(str, range(1, 8))]
    assert lab.sel(item="tv").values.tolist() == [str(y) for y in range(8)]
    assert lab.sel(item="trust").values.tolist() == ["", "A", "B", "C", "D", "", "", ""]
    assert lab.sel(item="vote").values.tolist() == ["Clinton", "Dole", *[""] * 6]
    assert ds.option.values.tolist() == ["Don't know", "Refused"]
    assert ds.option_label.values.tolist() == [["8", ""], ["", ""], ["E", "F"], ["", ""]]
    assert ds.score_label.sel(item="tv", score=7).item() == "Every day"
    assert ds.score_label.sel(item="self", score=0).item() == ""  # off the support
    # every item with a nonempty label exactly on its support
    on = (ds.score >= ds.score_min) & (ds.score <= ds.score_max)
    assert bool(((lab != "") == on).all())


def test_options_placeholder_renders_each_items_own_options(tmp_path):
    ds = experiment(tmp_path).build_prompts()
    user = ds.user.sel(party="Republican")
    assert user.sel(item="self").item() == (
        "As a Republican: Where would you place yourself?\n1. Extremely liberal\n2\n3\n4\n5\n6\n"
        "7. Extremely conservative\n8. Don't know\nAnswer:"
    )
    assert user.sel(item="tv").item().endswith("\n0. None\n1\n2\n3\n4\n5\n6\n7. Every day\nAnswer:")
    assert (
        user.sel(item="trust")
        .item()
        .endswith(
            "\nA. Never\nB. Some of the time\nC. Most of the time\nD. Always\nE. Don't know\n"
            "F. Refused\nAnswer:"
        )
    )
    assert user.sel(item="vote").item().endswith("?\nClinton\nDole\nAnswer:")


def test_system_prompt_shows_each_items_scale_only_when_it_uses_it(tmp_path):
    fixed = experiment(tmp_path).build_prompts()
    assert set(fixed.system.values.ravel()) == {"Answer with ONLY the answer label."}
    ds = experiment(tmp_path, head='framing = "shown"\n').build_prompts()
    assert ds.system.sel(party="Democrat", item="tv").item() == "Options: 0=None, 7=Every day."
    assert ds.system.sel(party="Democrat", item="vote").item() == "Options: Clinton, Dole."
    assert ds.system.sel(party="Democrat", item="trust").item() == (
        "Options: A=Never, B=Some of the time, C=Most of the time, D=Always."
    )


def test_a_format_factor_applies_to_each_items_own_points(tmp_path):
    fmt = '[factors.fmt]\nkind = "format"\nlevels = ["original", "reversed", "letters"]\n'
    ds = experiment(tmp_path, fmt).build_prompts()
    lab, opt = ds.answer_label, ds.option_label
    assert lab.dims == ("fmt", "item", "score") and opt.dims == ("fmt", "item", "option")
    # letters: every item lettered on its own points, the options after them
    assert lab.sel(fmt="letters", item="tv").values.tolist() == list("ABCDEFGH")
    assert lab.sel(fmt="letters", item="vote").values.tolist()[:2] == ["A", "B"]
    assert opt.sel(fmt="letters", item="self").values.tolist() == ["H", ""]
    # original keeps each item's own answers; reversed shows each from its highest point
    assert lab.sel(fmt="original", item="trust").values.tolist()[1:5] == list("ABCD")
    assert lab.sel(fmt="reversed", item="trust").values.tolist()[1:5] == list("DCBA")
    assert lab.sel(fmt="reversed", item="vote").values.tolist()[:2] == ["Clinton", "Dole"]
    rev = ds.user.sel(party="Democrat", fmt="reversed", item="vote").item()
    assert rev.endswith("?\nDole\nClinton\nAnswer:")
    assert opt.sel(fmt="reversed", item="trust").values.tolist() == ["E", "F"]


def test_explicit_labels_fit_only_items_with_as_many_points(tmp_path):
    fmt = (
        '[factors.fmt]\nkind = "format"\n[factors.fmt.levels]\noriginal = "original"\n'
        '[factors.fmt.levels.seven]\nlabels = "a b c d e f g"\n'
    )
    text = error(lambda: experiment(tmp_path, fmt), LabelMappingError)
    assert "factor 'fmt' level 'seven', item(s) 'tv' on their own scale" in text
    assert "item(s) 'trust' on their own scale" in text and "'vote'" in text
    assert "'self'" not in text  # 1..7: seven labels fit


def test_netcdf_round_trip(tmp_path):
    ds = experiment(tmp_path).build_prompts()
    ds.to_netcdf(tmp_path / "p.nc")
    with xr.open_dataset(tmp_path / "p.nc") as back:
        xr.testing.assert_identical(back.load(), ds)


def test_single_scale_instruments_are_unchanged():
    exp = load_experiment("anes96")
    assert not exp.per_item
    ds = exp.build_prompts()
    assert not {"score_min", "score_max", "nominal", "score", "option"} & set(ds.coords)
    assert set(ds.data_vars) == {"system", "user"}
    fmt = load_experiment("formats").build_prompts()
    assert fmt.answer_label.dims == ("format", "score")


def test_experiment_scale_can_add_a_dont_know(tmp_path):
    body = '[scale]\nmin = 1\nmax = 5\nanchors = { 1 = "No", 5 = "Yes" }\n'
    body += 'nonsubstantive = [{ label = "Prefer not to say", code = 9 }]\n'
    toy = SURVEY.split("[[items]]")[0] + '[[items]]\nid = "a"\ntemplate = "A?"\n'
    exp = experiment(tmp_path, body, instrument=toy)
    assert exp.per_item and exp.scale_of("a").nonsubstantive == (Option("Prefer not to say", 9),)
    ds = exp.build_prompts()
    assert ds.option_label.values.tolist() == [["9"]]
    assert ds.user.isel(party=0).item().endswith("5. Yes\n9. Prefer not to say\nAnswer:")


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        (
            'label = "Don\'t know", code = 8',
            'label = "Don\'t know", code = 7',
            "the non-substantive code 7 is a point of the scale 1..7",
        ),
        (
            '{ label = "Refused" }',
            '{ label = "Don\'t know" }',
            'the non-substantive option "Don\'t know" is listed twice',
        ),
        (
            'anchors = { 0 = "Clinton", 1 = "Dole" }',
            'anchors = { 0 = "Clinton", 1 = "Clinton" }',
            "the label 'Clinton' is used twice",
        ),
        (
            'answers = "letters"',
            'answers = "words"',
            "item 'trust' (items[2]): field 'scale.answers' must be 'codes', 'letters' or 'labels'",
        ),
        (
            "nominal = true",
            "nominal = true\nreverse_keyed = true",
            "item 'vote' (items[3]): a nominal item has no order to reverse or sum: drop "
            "reverse_keyed",
        ),
        (
            'anchors = { 0 = "Clinton", 1 = "Dole" }',
            'anchors = { 0 = "Clinton", 1 = "Dole" }\n[[items]]\nid = "x"\ntemplate = "X?"\n'
            "nominal = true",
            "item 'x' (items[4]): a nominal item's options are known by their labels, but the "
            "point(s) [2, 3, 4, 5, 6] of its scale 1..7 have none (the instrument's [scale])",
        ),
    ],
)
def test_file_errors_name_the_item_and_field(tmp_path, old, new, fragment):
    assert old in SURVEY
    path = write(tmp_path, "bad.toml", SURVEY.replace(old, new))
    assert fragment in error(lambda: load_instrument(path))


def test_labels_need_every_point_labelled(tmp_path):
    bad = SURVEY.replace("min = 0\nmax = 1\n", "min = 0\nmax = 2\n")
    text = error(lambda: load_instrument(write(tmp_path, "bad.toml", bad)))
    assert 'answers = "labels" needs a label on every point; [2] have none' in text
    assert "the scale end 2 needs a label" in text


def test_an_answer_label_meaning_two_things_is_a_named_error(tmp_path):
    # the option has no code: it is answered with its label, here the digit of a point
    clash = SURVEY.replace('{ label = "Don\'t know", code = 8 }', '{ label = "7" }')
    text = error(lambda: experiment(tmp_path, instrument=clash), LabelMappingError)
    assert "the answer label '7' means both point 7 and '7' on the scale 1..7" in text


def test_nominal_item_under_an_experiment_scale_needs_its_labels(tmp_path):
    toy = SURVEY.split("[[items]]")[0] + '[[items]]\nid = "v"\ntemplate = "V?"\nnominal = true\n'
    toy = toy.replace(
        'anchors = { 1 = "Extremely liberal", 7 = "Extremely conservative" }',
        'anchors = { 1 = "A", 2 = "B", 3 = "C", 4 = "D", 5 = "E", 6 = "F", 7 = "G" }',
    )
    assert load_instrument(write(tmp_path, "ok.toml", toy)).item("v").nominal
    body = '[scale]\nmin = 1\nmax = 3\nanchors = { 1 = "x", 3 = "z" }\n'
    text = error(lambda: experiment(tmp_path, body, instrument=toy))
    assert "item 'v': a nominal item's options are known by their labels" in text
    assert "(the experiment's [scale])" in text


# --------------------------------------------------------------------------- item 5


def test_a_free_factor_no_template_uses_is_refused_by_name(tmp_path):
    text = error(lambda: experiment(tmp_path, user='user = "{item}\\n{options}"\n'))
    assert "factor 'party': changes no prompt" in text
    assert "uses {party}, so its levels would be replicates" in text


def test_a_factor_with_fields_no_template_uses_names_them(tmp_path):
    body = '[factors.who.levels.old]\nage = "old"\nplace = "here"\n'
    body += '[factors.who.levels.young]\nage = "young"\nplace = "there"\n'
    text = error(lambda: experiment(tmp_path, body))
    assert "factor 'who': changes no prompt" in text and "(or its fields age, place)" in text


def test_levels_that_render_alike_are_refused(tmp_path):
    user = 'user = "As {party}, {age}: {item}"\n'
    body = '[factors.who.levels.a]\nage = "old"\nplace = "here"\n'
    body += '[factors.who.levels.b]\nage = "old"\nplace = "there"\n'
    text = error(lambda: experiment(tmp_path, body, user=user))
    assert "factor 'who': levels 'a' and 'b' render identical prompts (the same text in {age})" in (
        text
    )


def test_framings_with_the_same_text_are_refused(tmp_path):
    body = (
        '[factors.prompt]\nkind = "framing"\n[factors.prompt.levels]\n'
        'one = "Answer."\ntwo = "Answer."\n'
    )
    text = error(lambda: experiment(tmp_path, body))
    assert "factor 'prompt': levels 'one' and 'two' render identical prompts" in text


def test_a_format_factor_is_not_refused_for_changing_no_text(tmp_path):
    # the format changes how the answer is read, not (only) the text
    fmt = '[factors.fmt]\nkind = "format"\nlevels = ["original", "letters"]\n'
    assert experiment(tmp_path, fmt).n_conditions == 4


def test_xlikert_prompts_refuses_the_factor_naming_it(tmp_path):
    from xlikert.cli import main

    write(tmp_path, "survey.toml", SURVEY)
    path = write(
        tmp_path,
        "exp.toml",
        '[experiment]\ninstrument = "survey.toml"\n[factors.party]\nlevels = ["a", "b"]\n',
    )
    result = CliRunner().invoke(main, ["prompts", str(path)])
    assert result.exit_code != 0
    assert "factor 'party': changes no prompt" in result.output


# --------------------------------------------------------------------------- Scale


def test_scale_show_resolves_labels_per_format():
    s = Scale(1, 3, {1: "No", 2: "Maybe", 3: "Yes"}, (Option("Refused", -9),))
    assert s.show().options == {"Refused": "-9"}
    assert s.show(builtin_format("letters")).options == {"Refused": "D"}
    words = Scale(1, 3, {1: "No", 2: "Maybe", 3: "Yes"}, (Option("Refused", -9),), "labels")
    shown = words.show()
    assert shown.labels == {1: "No", 2: "Maybe", 3: "Yes"} and shown.options == {
        "Refused": "Refused"
    }
    assert shown.fields["options"] == "No\nMaybe\nYes\nRefused"
    assert shown.fields["anchors"] == "No, Maybe, Yes"
    # a format without labels of its own keeps the item's answers
    assert words.show(builtin_format("numbers")).labels == shown.labels
    with pytest.raises(LabelMappingError, match="27 options cannot be lettered"):
        Scale(0, 26, {0: "a", 26: "z"}, answers="letters").show()
    assert np.array_equal(list(s.scores), [1, 2, 3])


# --------------------------------------------------------------------------- options shown


def test_items_own_options_not_shown_are_named_before_anything_runs(tmp_path):
    # The case: items with their own scales under a user template without {options}
    # rendered prompts that showed the model no options, and said nothing.
    text = error(lambda: experiment(tmp_path, user='user = "As {party}: {item}"\n'), ConfigError)
    assert "item 'tv': has its own options (0..7" in text
    assert "item 'trust': has its own options" in text
    assert "item 'vote': has its own options" in text
    assert "item 'self': has its non-substantive option(s) \"Don't know\"" in text
    assert "add {options} to the user template" in text


def test_options_shown_in_the_system_prompt_of_every_framing_suffice(tmp_path):
    user = 'user = "As {party}: {item}"\n'
    both = SURVEY.replace('plain = "Answer with ONLY the answer label."', 'plain = "{options}"')
    exp = experiment(tmp_path, user=user, instrument=both.replace("{anchors}", "{options}"))
    assert "Extremely liberal" in exp.build_prompts().system.sel(item="self").values.flat[0]
    # one framing that does not show them is enough to refuse: 'shown' has {anchors},
    # which shows each item's points but not its "Don't know"
    body = '[factors.framing]\nkind = "framing"\nlevels = ["plain", "shown"]\n'
    text = error(lambda: experiment(tmp_path, body, instrument=both, user=user), ConfigError)
    assert "item 'self': has its non-substantive option(s) \"Don't know\"" in text
    assert "item 'trust': has its non-substantive option(s)" in text
    assert "item 'tv'" not in text
