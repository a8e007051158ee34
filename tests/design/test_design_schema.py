"""The declared TOML schema: errors named by place, the README generated from it, every shipped file."""

from __future__ import annotations

import re
import textwrap
import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel

from xlikert.core.errors import ConfigError
from xlikert.design import (
    builtin_experiments,
    builtin_instruments,
    experiment_from_dict,
    load_experiment,
    load_instrument,
)
from xlikert.design import file_schema as schema

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "xlikert" / "design" / "README.md"

TOY = """
[instrument]
name = "toy"
citation = "Toy, A. (2024)."

[scale]
min = 1
max = 5
anchors = { 1 = "Disagree", 5 = "Agree" }

[[items]]
id = "q1"
template = "I like it."

[[items]]
id = "q2"
template = "I like it a lot."
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def message(fn) -> str:
    with pytest.raises(ConfigError) as info:
        fn()
    return str(info.value)


def exp(**sections) -> dict:
    return {"experiment": {"instrument": "cetscale"}, "factors": {"target": {}}, **sections}


# --------------------------------------------------------------------------- errors by place


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        (
            'name = "toy"',
            'name = "toy"\ncitaton = "x"',
            "toy.toml: [instrument]: unknown field 'citaton' (did you mean 'citation'?); "
            "allowed: name, citation, title,",
        ),
        (
            'id = "q2"',
            'id = "q2"\nreverse = true',
            "toy.toml: item 'q2' (items[1]): unknown field 'reverse' (did you mean "
            "'reverse_keyed'?); allowed: id, template, reverse_keyed, subscale, source_text",
        ),
        (
            "[scale]",
            "[lexicn.A]\nx = 'y'\n\n[scale]",
            "toy.toml: top level: unknown field 'lexicn' (did you mean 'lexicon'?)",
        ),
    ],
)
def test_unknown_key_is_named_with_its_place(tmp_path, old, new, line):
    path = write(tmp_path, "toy.toml", TOY.replace(old, new, 1))
    assert line in message(lambda: load_instrument(path))


def test_unknown_key_in_an_experiment_table(tmp_path):
    table = exp(factors={"target": {"levels": ["USA"], "kinds": "lexicon"}})
    msg = message(lambda: experiment_from_dict(table, file="e.toml"))
    assert msg.startswith("e.toml: factor 'target': unknown field 'kinds' (did you mean 'kind'?)")
    table = exp(experiment={"instrument": "cetscale", "usr": "{item}"})
    assert "[experiment]: unknown field 'usr' (did you mean 'user'?)" in message(
        lambda: experiment_from_dict(table, file="e.toml")
    )


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        ("min = 1", 'min = "1"', "toy.toml: [scale]: field 'min' must be an integer, got '1'"),
        ("max = 5", "max = true", "toy.toml: [scale]: field 'max' must be an integer, got True"),
        (
            'template = "I like it a lot."',
            'template = "I like it a lot."\nreverse_keyed = "yes"',
            "toy.toml: item 'q2' (items[1]): field 'reverse_keyed' must be true or false, got 'yes'",
        ),
        (
            'name = "toy"',
            'name = "toy"\nplaceholders = "persona"',
            "toy.toml: [instrument]: field 'placeholders' must be an array, got 'persona'",
        ),
        (
            'anchors = { 1 = "Disagree", 5 = "Agree" }',
            'anchors = { 1 = "Disagree", five = "Agree" }',
            "toy.toml: [scale]: key 'five' in 'anchors' must be a scale value (an integer)",
        ),
    ],
)
def test_wrong_type_names_file_section_and_field(tmp_path, old, new, line):
    path = write(tmp_path, "toy.toml", TOY.replace(old, new, 1))
    assert line in message(lambda: load_instrument(path))


def test_wrong_type_in_an_experiment(tmp_path):
    path = write(
        tmp_path,
        "e.toml",
        """
        [experiment]
        instrument = "cetscale"
        user = 3

        [factors.target]
        levels = "USA"

        [[models]]
        source = "x/y"
        trust_remote_code = 1
        """,
    )
    msg = message(lambda: load_experiment(path))
    assert msg.startswith(f"{path}: 3 problems:")
    assert "[experiment]: field 'user' must be a string, got 3" in msg
    assert "factor 'target': field 'levels' must be an array or a table, got 'USA'" in msg
    assert "model 'x/y' (models[0]): field 'trust_remote_code' must be true or false, got 1" in msg


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        ('citation = "Toy, A. (2024)."', "", "[instrument]: required field 'citation' is missing"),
        (
            'template = "I like it."',
            "",
            "item 'q1' (items[0]): required field 'template' is missing",
        ),
        ("max = 5", "", "[scale]: required field 'max' is missing"),
        ("[scale]", "[scales]", "top level: required field 'scale' is missing"),
    ],
)
def test_missing_required_field(tmp_path, old, new, line):
    path = write(tmp_path, "toy.toml", TOY.replace(old, new, 1))
    msg = message(lambda: load_instrument(path))
    assert msg.startswith(f"{path}: ") and line in msg
    if new == "[scales]":  # the misspelt table is named too
        assert "top level: unknown field 'scales' (did you mean 'scale'?)" in msg


def test_missing_required_field_of_an_experiment():
    msg = message(lambda: experiment_from_dict({"experiment": {"name": "x"}}, file="e.toml"))
    assert msg == "e.toml: [experiment]: required field 'instrument' is missing"
    msg = message(lambda: experiment_from_dict({"factors": {}}, file="e.toml"))
    assert msg == "e.toml: top level: required field 'experiment' is missing"


def test_values_are_not_coerced_and_every_problem_of_form_is_listed(tmp_path):
    text = TOY.replace('id = "q2"', "id = 2.5", 1).replace('name = "toy"', "name = 7", 1)
    path = write(tmp_path, "toy.toml", text)
    msg = message(lambda: load_instrument(path))
    assert msg.startswith(f"{path}: 2 problems:")
    assert "[instrument]: field 'name' must be a string, got 7" in msg
    assert "items[1]: field 'id' must be a string or an integer, got 2.5" in msg
    # an integer id is the item's string id
    inst = load_instrument(write(tmp_path, "ok.toml", TOY.replace('id = "q2"', "id = 2", 1)))
    assert inst.item_ids == ["q1", "2"]


def test_a_bad_item_is_left_out_and_the_rules_across_fields_still_run(tmp_path):
    text = TOY + '\n[[items]]\nid = "q3"\ntemplate = 3\n\n[[items]]\nid = "q1"\ntemplate = "x"\n'
    msg = message(lambda: load_instrument(write(tmp_path, "toy.toml", text)))
    assert "item 'q3' (items[2]): field 'template' must be a string, got 3" in msg
    # the duplicate after the dropped item keeps its index in the file
    assert "item 'q1' (items[3]): duplicate item id 'q1' (first used by items[0])" in msg


def test_scale_rules_name_the_scale(tmp_path):
    text = TOY.replace(
        'anchors = { 1 = "Disagree", 5 = "Agree" }', 'anchors = { 1 = "D", 9 = "A" }'
    )
    path = write(tmp_path, "toy.toml", text)
    msg = message(lambda: load_instrument(path))
    assert msg == (
        f"{path}: [scale]: anchor 9 is outside the scale 1..5; "
        'the scale end 5 needs a label (e.g. 5 = "...")'
    )


# --------------------------------------------------------------------------- [collect]


def test_collect_table_is_kept_as_given():
    options = {"temperatures": [0.5, 1.0], "top_k": 20, "grid": {"nested": ["anything"]}}
    experiment = experiment_from_dict(exp(collect=options))
    assert experiment.collect == options
    assert isinstance(experiment.collect, dict)
    assert experiment_from_dict(exp()).collect is None
    assert load_experiment("demo").collect is None
    msg = message(lambda: experiment_from_dict(exp(collect=[1]), file="e.toml"))
    assert msg == "e.toml: top level: field 'collect' must be a table, got [1]"


# --------------------------------------------------------------------------- README


def test_readme_tables_are_the_ones_generated_from_the_schema():
    text = README.read_text("utf-8")
    assert schema._readme_tables() in text, (
        "xlikert/design/README.md is out of date: run "
        'python -c "from xlikert.design.file_schema import update_readme; update_readme()"'
    )


def test_every_schema_field_is_documented_in_the_readme():
    text = README.read_text("utf-8")
    rows = set(re.findall(r"^\| `(\w+)` \|", text, flags=re.MULTILINE))
    for model in schema.MODELS:
        assert f"**`{model.toml}`**" in text, model.__name__
        for key, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{key} has no docstring"
            assert key in rows, f"{model.__name__}.{key}"
    fields = {key for model in schema.MODELS for key in model.model_fields}
    # the [collect] table's keys are CollectOptions' fields (less the scale and its
    # non-substantive options: the instrument's)
    from dataclasses import fields as dataclass_fields

    from xlikert.collect import CollectOptions

    collect = {f.name for f in dataclass_fields(CollectOptions)} - {"scale", "nonsubstantive"}
    assert rows == fields | collect  # and no table row names a key nobody reads


def test_readme_examples_follow_the_schema(tmp_path):
    blocks = re.findall(r"```toml\n(.*?)```", README.read_text("utf-8"), flags=re.DOTALL)
    assert len(blocks) == 3
    instrument, questionnaire, experiment = (tomllib.loads(b) for b in blocks)
    schema.InstrumentFile.model_validate(instrument)
    schema.ExperimentFile.model_validate(experiment)
    path = write(tmp_path, "readme.toml", blocks[0])
    assert load_instrument(path).name == "cetscale"
    # the questionnaire's items and scale, in an instrument of their own
    head = '[instrument]\nname = "q"\ncitation = "-"\n'
    items = load_instrument(write(tmp_path, "q.toml", head + blocks[1])).items
    assert [it.id for it in items] == ["selfLR", "TVnews", "trust", "vote"]
    assert items[3].nominal and items[1].scale.min == 0 and questionnaire["scale"]["min"] == 1


def test_schema_models_forbid_unknown_keys():
    for model in schema.MODELS:
        extra = model.model_config.get("extra")
        assert extra == ("allow" if model is schema.ModelSpec else "forbid"), model.__name__
        assert issubclass(model, BaseModel)


# --------------------------------------------------------------------------- shipped files


@pytest.mark.parametrize("name", builtin_instruments())
def test_every_builtin_instrument_loads(name):
    inst = load_instrument(name)
    assert inst.name == name and inst.n_items > 0


SHIPPED = [*builtin_experiments(), *sorted((ROOT / "examples").glob("*.toml"))]


@pytest.mark.parametrize("name", SHIPPED, ids=lambda x: str(getattr(x, "name", x)))
def test_every_shipped_experiment_loads_and_renders(name):
    experiment = load_experiment(name)
    assert experiment.build_prompts().user.size == experiment.n_prompts > 0
