"""Design layer: instruments, lexicons, framings, fully crossed prompt designs."""

from __future__ import annotations

import json
import math
import re
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from xlikert.core.errors import ConfigError
from xlikert.design import (
    Template,
    builtin_experiments,
    builtin_instruments,
    experiment_from_dict,
    load_experiment,
    load_instrument,
    prompts_to_frame,
)
from xlikert.design.template import TemplateSyntaxError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
V0 = (
    "You are a consumer in a market research study.\n"
    "Response format: 1-7 (1=Strongly disagree, 7=Strongly agree).\n"
    "Respond with ONLY the digit."
)
FRAMINGS = [
    "v0_original",
    "v1_participant",
    "v2_concise",
    "v3_instructional",
    "v4_roleplay",
    "v5_original_no_whitespace",
]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def experiment_toml(tmp_path: Path, body: str, instrument: str = "cetscale") -> Path:
    head = f'[experiment]\nname = "t"\ninstrument = "{instrument}"\n'
    return write(tmp_path, "exp.toml", head + textwrap.dedent(body))


# --------------------------------------------------------------------------- CETSCALE


def test_cetscale_instrument():
    cet = load_instrument("cetscale")
    assert cet.name == "cetscale"
    assert "Shimp" in cet.citation and "1987" in cet.citation
    assert (cet.scale_min, cet.scale_max) == (1, 7)
    assert cet.anchors == {1: "Strongly disagree", 7: "Strongly agree"}
    assert cet.item_ids == [str(k) for k in range(1, 18)]
    assert not any(it.reverse_keyed for it in cet.items)
    assert list(cet.lexicon) == ["USA", "China", "Canada", "France"]
    assert list(cet.framings) == FRAMINGS
    assert {"cetscale", "mini_ipip"} <= set(builtin_instruments())


def test_cetscale_four_targets_renders_68_prompts_without_leftover_placeholders():
    exp = load_experiment("demo")
    ds = exp.build_prompts()
    assert dict(ds.sizes) == {"target": 4, "item": 17}
    assert exp.n_prompts == 68
    users = ds.user.values.ravel().tolist()
    systems = ds.system.values.ravel().tolist()
    assert len(users) == 68
    for text in users + systems:
        assert text and not PLACEHOLDER.search(text) and "{" not in text and "}" not in text
    # every target yields a different wording for templated items, same for the rest
    assert len(set(ds.user.sel(item="1").values.tolist())) == 4
    assert len(set(ds.user.sel(item="12").values.tolist())) == 1
    assert set(systems) == {V0}


def test_canada_item_1_exact():
    ds = load_experiment("demo").build_prompts()
    assert (
        ds.user.sel(target="Canada", item="1").item()
        == "Canadians should always buy Canadian-made products instead of imports."
    )
    assert (
        ds.user.sel(target="China", item="1").item()
        == "The Chinese should always buy Chinese-made products instead of imports."
    )


def test_usa_rendering_reproduces_the_original_items():
    # Items 2..17 rendered for the USA are Shimp & Sharma's original text; item 1
    # follows the paper's template ("Americans" for "American people").
    cet = load_instrument("cetscale")
    ds = load_experiment("demo").build_prompts()
    for it in cet.items[1:]:
        assert ds.user.sel(target="USA", item=it.id).item() == it.source_text, it.id
    assert ds.user.sel(target="USA", item="15").item().endswith("entry into the U.S.")


def test_prompts_dataset_contract():
    ds = load_experiment("demo").build_prompts()
    assert set(ds.data_vars) == {"system", "user"}
    assert ds.user.dims == ("target", "item")
    assert ds.system.dims == ("target", "item")
    assert ds.target.values.tolist() == ["USA", "China", "Canada", "France"]
    assert ds.item.values.tolist() == [str(k) for k in range(1, 18)]
    assert ds.reverse_keyed.dims == ("item",) and ds.reverse_keyed.dtype == bool
    assert ds.subscale.dims == ("item",) and set(ds.subscale.values.tolist()) == {""}
    a = ds.attrs
    assert a["instrument"] == "cetscale" and a["experiment"] == "demo"
    assert (a["scale_min"], a["scale_max"]) == (1, 7)
    assert a["scale_labels"] == '{"1": "Strongly disagree", "7": "Strongly agree"}'
    assert re.fullmatch(r"[0-9a-f]{64}", a["instrument_sha256"])
    assert "Shimp" in a["citation"]


def test_build_is_deterministic_and_round_trips_netcdf(tmp_path):
    exp = load_experiment("framing")
    a, b = exp.build_prompts(), load_experiment("framing").build_prompts()
    xr.testing.assert_identical(a, b)
    path = tmp_path / "prompts.nc"
    a.to_netcdf(path)
    with xr.open_dataset(path) as back:
        assert back.user.values.tolist() == a.user.values.tolist()
        assert back.reverse_keyed.dtype == bool


def test_six_framings_render():
    exp = load_experiment("framing")
    assert exp.factors == {
        "target": ["USA", "China", "Canada", "France"],
        "prompt": FRAMINGS,
    }
    ds = exp.build_prompts()
    assert ds.user.dims == ("target", "prompt", "item")
    assert exp.n_prompts * len(exp.models) == 1224
    systems = {v: ds.system.sel(prompt=v, target="France", item="3").item() for v in FRAMINGS}
    assert systems["v0_original"] == V0
    assert systems["v5_original_no_whitespace"] == V0.replace("\n", " ")
    assert len(set(systems.values())) == 6
    for v, text in systems.items():
        assert "1" in text and "7" in text and "agree" in text.lower(), v
        assert not PLACEHOLDER.search(text)
    # the items are held verbatim across framings
    for v in FRAMINGS:
        np.testing.assert_array_equal(
            ds.user.sel(prompt=v).values, ds.user.sel(prompt="v0_original").values
        )
    # and the system prompt does not depend on the item or the target
    assert (ds.system == ds.system.isel(item=0, target=0)).all()


def test_three_factor_design_counts(tmp_path):
    path = experiment_toml(
        tmp_path,
        """
        user = "{persona} {item}"

        [factors.target]
        levels = ["USA", "France"]

        [factors.prompt]
        levels = ["v0_original", "v2_concise", "v4_roleplay"]

        [factors.persona]
        levels = { student = "As a student:", retiree = "As a retiree:" }
        """,
    )
    exp = load_experiment(path)
    ds = exp.build_prompts()
    assert list(exp.factors) == ["target", "prompt", "persona"]
    assert dict(ds.sizes) == {"target": 2, "prompt": 3, "persona": 2, "item": 17}
    assert ds.user.size == 2 * 3 * 2 * 17 == exp.n_prompts
    # the framing changes the system message only; persona changes every user message
    assert (ds.user == ds.user.isel(prompt=0)).all()
    assert len(set(ds.system.values.ravel().tolist())) == 3
    assert not (ds.user.sel(persona="student") == ds.user.sel(persona="retiree")).any()
    assert ds.user.sel(
        target="France", persona="retiree", item="1", prompt="v2_concise"
    ).item() == (
        "As a retiree: The French should always buy French-made products instead of imports."
    )
    assert ds.persona.values.tolist() == ["student", "retiree"]


def test_free_factor_in_system_prompt_and_constants(tmp_path):
    path = experiment_toml(
        tmp_path,
        """
        system = "You are {persona}, shopping for {category}. Answer {scale_min}-{scale_max}."

        [constants]
        category = "groceries"

        [factors.persona]
        levels = ["a student", "a retiree"]

        [factors.target]
        levels = ["Canada"]
        """,
    )
    ds = load_experiment(path).build_prompts()
    assert ds.system.sel(persona="a retiree", item="2").item() == (
        "You are a retiree, shopping for groceries. Answer 1-7."
    )


def test_other_scale_adapts_framing_text(tmp_path):
    path = experiment_toml(
        tmp_path,
        """
        framing = "v0_original"

        [scale]
        min = 0
        max = 10
        anchors = { 0 = "Completely disagree", 10 = "Completely agree" }

        [factors.target]
        levels = ["USA"]
        """,
    )
    ds = load_experiment(path).build_prompts()
    assert ds.system.isel(target=0, item=0).item() == (
        "You are a consumer in a market research study.\n"
        "Response format: 0-10 (0=Completely disagree, 10=Completely agree).\n"
        "Respond with ONLY the digit."
    )
    assert (ds.attrs["scale_min"], ds.attrs["scale_max"]) == (0, 10)


def test_inline_lexicon_level_and_item_subset(tmp_path):
    path = experiment_toml(
        tmp_path,
        """
        items = ["1", "17"]

        [factors.target.levels.USA]
        people = "Americans"
        adj = "American"
        nationals = "Americans"

        [factors.target.levels.Japan]
        people = "the Japanese"
        adj = "Japanese"
        nationals = "Japanese"
        """,
    )
    ds = load_experiment(path).build_prompts()
    assert ds.item.values.tolist() == ["1", "17"]
    assert (
        ds.user.sel(target="Japan", item="1")
        .item()
        .startswith("The Japanese should always buy Japanese-made")
    )


def test_mini_ipip_instrument_and_persona_framing(tmp_path):
    ipip = load_instrument("mini_ipip")
    assert (ipip.scale_min, ipip.scale_max, len(ipip.items)) == (1, 5, 20)
    assert ipip.item_ids[:2] == ["1", "2"] and ipip.items[0].template == "Am the life of the party."
    rev = [it.id for it in ipip.items if it.reverse_keyed]
    assert rev == ["6", "7", "8", "9", "10", "15", "16", "17", "18", "19", "20"]
    assert ipip.subscales == [
        "extraversion",
        "agreeableness",
        "conscientiousness",
        "neuroticism",
        "intellect",
    ]
    for s in ipip.subscales:
        assert sum(it.subscale == s for it in ipip.items) == 4
    path = experiment_toml(
        tmp_path,
        """
        [factors.prompt]
        levels = ["persona"]

        [factors.persona]
        levels = ["a nurse", "an engineer"]
        """,
        instrument="mini_ipip",
    )
    ds = load_experiment(path).build_prompts()
    assert ds.reverse_keyed.values.sum() == 11
    assert ds.subscale.sel(item="6").item() == "extraversion"
    first = ds.system.sel(persona="a nurse", item="1").item()
    assert first.startswith("You are a nurse.") and "1=Very inaccurate" in first
    assert "5=Very accurate" in first


def test_builtin_experiments_have_one_home():
    """The built-in experiments live in the package only; examples/ holds what is not
    built in (``xlikert example NAME`` writes an editable copy of a built-in)."""
    builtins = set(builtin_experiments())
    assert {"demo", "paper", "framing", "formats", "anes96"} <= builtins
    assert EXAMPLES.is_dir() and not {p.stem for p in EXAMPLES.glob("*.toml")} & builtins
    for path in EXAMPLES.glob("*.toml"):  # nor a copy under another name
        for name in builtins:
            assert path.read_bytes() != Path(load_experiment(name).path).read_bytes(), path
    demo = load_experiment("demo")
    assert [m["source"] for m in demo.models] == [
        "smollm2-135m-instruct",
        "qwen2.5-coder-0.5b-instruct",
        "gemma-3-270m",
    ]
    assert demo.model_names == [
        "SmolLM2-135M-Instruct",
        "Qwen2.5-Coder-0.5B-Instruct",
        "Gemma-3-270M",
    ]
    paper = load_experiment("paper")
    assert len(paper.models) == 5 and paper.n_prompts * 5 == 340
    assert all("/" in m["source"] for m in paper.models)
    assert paper.models[0]["dtype"] == "bfloat16"  # extra keys pass through
    framing = load_experiment("framing")
    assert len(framing.models) == 3 and framing.n_prompts * 3 == 3 * 4 * 6 * 17


def test_prompts_to_frame_order():
    ds = load_experiment("framing").build_prompts()
    df = prompts_to_frame(ds)
    assert list(df.columns) == [
        "target",
        "prompt",
        "item",
        "reverse_keyed",
        "subscale",
        "system",
        "user",
    ]
    assert len(df) == ds.user.size == 408
    row = df.iloc[17 * 6 * 2 + 17 + 4]  # target Canada, prompt v1, item 5
    assert (row.target, row.prompt, row["item"]) == ("Canada", "v1_participant", "5")
    assert row.user == ds.user.sel(target="Canada", prompt="v1_participant", item="5").item()


# --------------------------------------------------------------------------- templates


def test_template_syntax():
    t = Template.parse("{{literal}} {name:cap} {other:upper}")
    assert t.fields == ("name", "other")
    assert t.render({"name": "the French", "other": "x"}) == "{literal} The French X"
    for bad in ("{", "a } b", "{1abc}", "{name:shout}", "{a b}"):
        with pytest.raises(TemplateSyntaxError):
            Template.parse(bad)


# --------------------------------------------------------------------------- bad input

BASE_INSTRUMENT = """
[instrument]
name = "toy"
citation = "Toy, A. (2024)."

[scale]
min = 1
max = 5
anchors = { 1 = "Disagree", 5 = "Agree" }

[framings]
plain = "Answer {scale_min}-{scale_max}."

[lexicon.A]
country = "Aland"
adj = "Alandic"

[lexicon.B]
country = "Bland"
adj = "Blandic"

[[items]]
id = "q1"
template = "I like {adj} food."

[[items]]
id = "q2"
template = "{country} is great."
"""


def bad_instrument(tmp_path, old, new):
    assert old in BASE_INSTRUMENT
    return write(tmp_path, "toy.toml", BASE_INSTRUMENT.replace(old, new, 1))


def raises_config(fn, *fragments):
    with pytest.raises(ConfigError) as info:
        fn()
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, (frag, msg)
    return msg


def test_valid_toy_instrument(tmp_path):
    path = write(tmp_path, "toy.toml", BASE_INSTRUMENT)
    inst = load_instrument(path)
    assert inst.lexicon_fields == ("country", "adj")
    exp = experiment_from_dict(
        {"experiment": {"instrument": str(path), "framing": "plain"}, "factors": {"target": {}}}
    )
    ds = exp.build_prompts()
    assert ds.user.sel(target="B", item="q2").item() == "Bland is great."


def test_error_unknown_placeholder_names_file_item_field(tmp_path):
    path = bad_instrument(tmp_path, "{country} is great.", "{contry} is great.")
    raises_config(
        lambda: load_instrument(path),
        "toy.toml",
        "item 'q2'",
        "field 'template'",
        "{contry}",
        "did you mean 'country'",
    )


def test_error_unknown_placeholder_in_experiment(tmp_path):
    path = experiment_toml(
        tmp_path, 'user = "Statement: {item} ({mood})"\n[factors.target]\nlevels = ["USA"]\n'
    )
    raises_config(lambda: load_experiment(path), "exp.toml", "[experiment], field 'user'", "{mood}")
    path = experiment_toml(
        tmp_path, 'user = "Statement: {item:shout}"\n[factors.target]\nlevels = ["USA"]\n'
    )
    raises_config(lambda: load_experiment(path), "exp.toml", "field 'user'", "unknown modifier")


def test_item_placeholder_takes_a_modifier(tmp_path):
    """{item:lower} / {item:cap} apply to the whole item text, values filled in included."""
    body = '[factors.target]\nlevels = ["China"]\n'
    plain = load_experiment(experiment_toml(tmp_path, body)).build_prompts()
    item = str(plain.user.sel(target="China", item="1").item())
    assert item.startswith("The Chinese should")
    for user, want in (
        ("I believe that {item:lower}", "I believe that " + item.lower()),
        ("{item:upper}!", item.upper() + "!"),
        ("Q: {item:cap}", "Q: " + item[:1].upper() + item[1:]),
    ):
        path = experiment_toml(tmp_path, f'user = "{user}"\n' + body)
        ds = load_experiment(path).build_prompts()
        assert str(ds.user.sel(target="China", item="1").item()) == want


def test_error_level_missing_lexicon_field(tmp_path):
    path = bad_instrument(tmp_path, 'country = "Bland"\n', "")
    raises_config(
        lambda: load_instrument(path),
        "toy.toml",
        "lexicon level 'B'",
        "missing lexicon field 'country'",
    )
    # inline level in an experiment, missing a field an item uses
    exp = experiment_toml(
        tmp_path,
        """
        [factors.target.levels.USA]
        people = "Americans"
        adj = "American"
        """,
    )
    raises_config(
        lambda: load_experiment(exp),
        "exp.toml",
        "item '17'",
        "field 'template'",
        "level 'USA'",
        "'nationals'",
    )


def test_error_duplicate_item_ids(tmp_path):
    path = bad_instrument(tmp_path, 'id = "q2"', 'id = "q1"')
    raises_config(lambda: load_instrument(path), "toy.toml", "duplicate item id 'q1'", "items[1]")


@pytest.mark.parametrize(
    ("scale", "fragment"),
    [("min = 1\nmax = 1", "empty scale"), ("min = 5\nmax = 1", "inverted scale")],
)
def test_error_empty_or_inverted_scale(tmp_path, scale, fragment):
    path = bad_instrument(tmp_path, "min = 1\nmax = 5", scale)
    raises_config(lambda: load_instrument(path), "toy.toml", "[scale]", fragment)


def test_error_malformed_config(tmp_path):
    path = write(tmp_path, "broken.toml", '[experiment\nname = "x"\n')
    raises_config(lambda: load_experiment(path), "broken.toml", "malformed TOML")
    path = experiment_toml(tmp_path, "[factors.target]\nlevls = ['USA']\n")
    raises_config(
        lambda: load_experiment(path),
        "exp.toml",
        "factor 'target'",
        "unknown field 'levls'",
        "did you mean 'levels'",
    )
    path = write(tmp_path, "noinst.toml", '[experiment]\nname = "x"\n')
    raises_config(lambda: load_experiment(path), "noinst.toml", "'instrument' is missing")
    raises_config(lambda: load_experiment("no_such_design"), "unknown built-in experiment")
    raises_config(lambda: load_instrument(tmp_path / "missing.toml"), "does not exist")
    path = bad_instrument(tmp_path, 'template = "I like {adj} food."', "template = 3")
    raises_config(lambda: load_instrument(path), "item 'q1'", "field 'template' must be a string")


def test_error_factor_with_no_levels(tmp_path):
    path = experiment_toml(
        tmp_path, "[factors.persona]\nlevels = []\n[factors.target]\nlevels = ['USA']\n"
    )
    raises_config(
        lambda: load_experiment(path), "exp.toml", "factor 'persona'", "'levels' is empty"
    )


def test_error_unknown_levels_and_conflicts(tmp_path):
    path = experiment_toml(tmp_path, "[factors.target]\nlevels = ['USA', 'Germany', 'USA']\n")
    msg = raises_config(
        lambda: load_experiment(path),
        "level 'Germany' is not in the lexicon",
        "duplicate level 'USA'",
    )
    assert "2 problems" in msg  # every problem is reported at once
    path = experiment_toml(tmp_path, '[factors.prompt]\nlevels = ["v0_orginal"]\n')
    raises_config(lambda: load_experiment(path), "did you mean 'v0_original'")
    path = experiment_toml(
        tmp_path,
        'framing = "v1_participant"\n[factors.prompt]\nlevels = ["v0_original"]\n'
        "[factors.target]\n",
    )
    raises_config(lambda: load_experiment(path), "conflict with the framing factor")


def test_error_missing_free_placeholder(tmp_path):
    path = experiment_toml(tmp_path, 'framing = "persona"\n', instrument="mini_ipip")
    raises_config(lambda: load_experiment(path), "exp.toml", "system prompt", "{persona}")


def test_error_models(tmp_path):
    path = experiment_toml(
        tmp_path,
        """
        [factors.target]
        levels = ["USA"]
        [[models]]
        name = "a"
        source = "x/y"
        [[models]]
        name = "a"
        source = "x/z"
        [[models]]
        name = "b"
        """,
    )
    raises_config(
        lambda: load_experiment(path),
        "duplicate model name 'a'",
        "models[2]",
        "'source' is missing",
    )


def test_reserved_and_clashing_names(tmp_path):
    path = experiment_toml(tmp_path, "[factors.model]\nlevels = ['a']\n[factors.target]\n")
    raises_config(lambda: load_experiment(path), "factor 'model'", "identifiers other than")
    path = experiment_toml(tmp_path, "[constants]\nadj = 'x'\n[factors.target]\nlevels = ['USA']\n")
    raises_config(lambda: load_experiment(path), "field 'adj' is also supplied by [constants]")
    # the names of xlikert's own dims and variables (xlikert.core.dims): file, factor and role
    for name, role in [
        ("temperature", "decoding temperature"),
        ("n", "budgets"),
        ("E", "variable"),
    ]:
        path = experiment_toml(
            tmp_path, f"[factors.target]\nlevels = ['USA']\n[factors.{name}]\nlevels = ['a']\n"
        )
        raises_config(lambda p=path: load_experiment(p), str(path), f"factor {name!r}", role)


def test_n_prompts_is_product_of_levels(tmp_path):
    levels = {"a": ["1", "2", "3"], "b": ["x", "y"], "c": ["p", "q", "r", "s"]}
    exp = experiment_from_dict(
        {
            "experiment": {
                "instrument": "cetscale",
                "user": "{a}{b}{c} {item}",
                "items": ["1", "2"],
            },
            "factors": {
                "target": {"levels": ["USA"]},
                **{k: {"levels": v} for k, v in levels.items()},
            },
        }
    )
    ds = exp.build_prompts()
    assert ds.user.size == math.prod(len(v) for v in levels.values()) * 2
    assert len(set(ds.user.values.ravel().tolist())) == ds.user.size


@pytest.mark.parametrize(
    "path",
    [*builtin_experiments(), *sorted(EXAMPLES.glob("*.toml"))],
    ids=lambda p: getattr(p, "name", p),
)
def test_every_example_renders(path):
    exp = load_experiment(path)
    ds = exp.build_prompts()
    assert ds.user.size == exp.n_prompts > 0
    assert exp.models and all(m["name"] and m["source"] for m in exp.models)
    for text in ds.user.values.ravel().tolist() + ds.system.values.ravel().tolist():
        assert not PLACEHOLDER.search(text)


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3), min_size=0, max_size=3),
    n_items=st.integers(1, 4),
)
def test_design_size_is_product_of_levels_times_items(sizes, n_items):
    names = ["fa", "fb", "fc"][: len(sizes)]
    factors = {
        n: {"levels": [f"{n}{k}" for k in range(s)]} for n, s in zip(names, sizes, strict=True)
    }
    user = "".join("{" + n + "}|" for n in names) + "{item}"
    exp = experiment_from_dict(
        {
            "experiment": {
                "instrument": "mini_ipip",
                "user": user,
                "items": list(range(1, n_items + 1)),
            },
            "factors": factors,
        }
    )
    ds = exp.build_prompts()
    assert ds.user.dims == (*names, "item")
    assert ds.user.size == math.prod(sizes) * n_items == exp.n_prompts
    assert len(set(ds.user.values.ravel().tolist())) == ds.user.size  # every cell distinct
    for n in names:
        assert ds[n].values.tolist() == factors[n]["levels"]


def test_instrument_sha256_is_the_file_hash():
    import hashlib

    cet = load_instrument("cetscale")
    assert cet.sha256 == hashlib.sha256(Path(cet.path).read_bytes()).hexdigest()
    assert load_experiment("demo").build_prompts().attrs["instrument_sha256"] == cet.sha256


def test_rendered_text_is_the_reviewed_text():
    """Every CETSCALE prompt, every framing and every Mini-IPIP item, word for word.

    The file was read by a person (grammar for each target, wording per the paper);
    a change to a template, a lexicon field or a framing shows up here.
    """
    golden = json.loads(
        (Path(__file__).parents[1] / "data" / "reviewed_instrument_text.json").read_text("utf-8")
    )
    demo = load_experiment("demo").build_prompts()
    got = {
        str(t): [str(demo.user.sel(target=t, item=i).item()) for i in demo.item.values]
        for t in demo.target.values
    }
    assert got == golden["cetscale_user"]
    framing = load_experiment("framing").build_prompts()
    got = {
        str(v): str(framing.system.sel(prompt=v).isel(target=0, item=0).item())
        for v in framing.prompt.values
    }
    assert got == golden["cetscale_framings"]
    mini = load_instrument("mini_ipip")
    got = [
        {"id": i.id, "text": i.template, "reverse_keyed": i.reverse_keyed, "subscale": i.subscale}
        for i in mini.items
    ]
    assert got == golden["mini_ipip_items"]


def test_warns_about_a_one_item_subscale_close_to_another(tmp_path):
    from importlib import resources

    text = (resources.files("xlikert.design") / "instruments" / "mini_ipip.toml").read_text("utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the built-in file is clean
        load_instrument("mini_ipip")
    head, sep, tail = text.partition('id = "16"')
    typo = head + sep + tail.replace('subscale = "extraversion"', 'subscale = "Extroversion"', 1)
    path = write(tmp_path, "big5.toml", typo)
    with pytest.warns(
        UserWarning, match=r"big5.toml: subscale 'Extroversion' has one item \('16'\)"
    ):
        inst = load_instrument(path)
    assert inst.subscales.count("Extroversion") == 1
    # a one-item subscale with a distinct name is fine
    lone = head + sep + tail.replace('subscale = "extraversion"', 'subscale = "honesty"', 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_instrument(write(tmp_path, "hex.toml", lone))
