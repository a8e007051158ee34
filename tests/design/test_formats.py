"""Response formats as a factor: design, answer labels per level, storage, report.

The collection checks run on a tiny random-weight model built in process
(:mod:`support.tiny`); the real-model checks are in
``test_formats_smollm2.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from xlikert import reflect_reverse_keyed
from xlikert.collect import CollectOptions
from xlikert.core.errors import (
    AnswerLabelError,
    ConfigError,
    FormatNotShownError,
    LabelMappingError,
)
from xlikert.design import experiment_from_dict, load_experiment
from xlikert.design.formats import builtin_format, format_from_table

CET = {1: "Strongly disagree", 7: "Strongly agree"}


def _table(levels, **head) -> dict:
    return {
        "experiment": {
            "instrument": "cetscale",
            "items": ["1", "2"],
            "system": "Response format: {anchors}. Answer with one of {answer_labels}.",
            **head,
        },
        "factors": {"target": {"levels": ["USA"]}, "fmt": {"kind": "format", "levels": levels}},
    }


# --------------------------------------------------------------------------- design


def test_builtin_levels_map_their_labels_onto_the_scores():
    assert builtin_format("original").labels_by_score(1, 7) == {y: str(y) for y in range(1, 8)}
    assert builtin_format("reversed").labels_by_score(1, 7) == {y: str(8 - y) for y in range(1, 8)}
    assert builtin_format("letters", 5).labels_by_score(1, 5) == dict(
        zip(range(1, 6), "ABCDE", strict=True)
    )
    rev = builtin_format("reversed").fields(1, 7, CET)
    assert (rev["scale_min"], rev["min_label"], rev["max_label"]) == (
        "1",
        "Strongly agree",
        "Strongly disagree",
    )
    every = builtin_format("labelled").fields(1, 7, CET)["anchors"].split(", ")
    assert len(every) == 7 and every[3] == "4=Neither agree nor disagree"
    assert builtin_format("numbers").fields(1, 7, CET)["anchors"] == "1, 2, 3, 4, 5, 6, 7"
    custom = format_from_table("rl", {"base": "letters", "order": "reversed"}, 7)
    assert custom.labels_by_score(1, 7)[7] == "A"  # shown first, means the highest score


def test_experiment_with_a_format_factor_renders_each_level_and_stores_the_labels():
    levels = {
        "original": "original",
        "reversed": "reversed",
        "letters": "letters",
        "rev_letters": {"base": "letters", "order": "reversed", "anchors": "ends"},
        "words": {"labels": ["a", "b", "c", "d", "e", "f", "g"]},
    }
    exp = experiment_from_dict(_table(levels))
    assert exp.format_factor.name == "fmt" and exp.factor("fmt").kind == "format"
    ds = exp.build_prompts()
    sys = {lv: str(ds.system.sel(fmt=lv, target="USA", item="1").item()) for lv in levels}
    assert "1=Strongly disagree, 7=Strongly agree" in sys["original"]
    assert "1=Strongly agree, 7=Strongly disagree" in sys["reversed"]
    assert "A=Strongly disagree, G=Strongly agree" in sys["letters"]
    assert "A=Strongly agree, G=Strongly disagree" in sys["rev_letters"]
    assert sys["words"].endswith("one of a, b, c, d, e, f, g.")
    lab = ds["answer_label"]
    assert lab.dims == ("fmt", "score") and list(lab.score.values) == list(range(1, 8))
    assert list(lab.sel(fmt="reversed").values) == list("7654321")
    assert list(lab.sel(fmt="rev_letters").values) == list("GFEDCBA")
    # the built-in experiment
    f = load_experiment("formats")
    assert f.factors["format"] == ["original", "reversed", "letters"]
    assert f.factors["target"] == load_experiment("demo").factors["target"]


def test_labels_that_are_not_a_bijection_are_a_named_error():
    with pytest.raises(LabelMappingError, match=r"not a bijection onto the scale 1\.\.7.*3 labels"):
        experiment_from_dict(_table({"abc": {"labels": "A B C"}}))
    with pytest.raises(LabelMappingError, match="repeat"):
        experiment_from_dict(_table({"dup": {"labels": list("AABCDEF")}}))
    with pytest.raises(LabelMappingError, match="bijection"):
        CollectOptions(scale=(1, 2, 3), answer_labels=("A", "B"))
    # another problem in the same file: a plain ConfigError listing both
    with pytest.raises(ConfigError) as info:
        experiment_from_dict(_table({"abc": {"labels": "A B C"}, "x": "revresed"}))
    assert type(info.value) is ConfigError and "did you mean 'reversed'" in str(info.value)


def test_a_format_factor_whose_labels_are_never_shown_is_a_named_error():
    with pytest.raises(FormatNotShownError, match="no prompt shows the answer labels"):
        experiment_from_dict(_table(["original", "reversed"], system="Answer with a digit."))
    # {scale_min}/{scale_max} show the labels too (the paper's framing)
    exp = experiment_from_dict(_table(["original", "letters"], system=None, framing="v0_original"))
    assert "A-G (A=Strongly disagree" in str(
        exp.build_prompts().system.sel(fmt="letters")[0, 0].item()
    )


def test_schema_accepts_kind_format_and_refuses_arrays_elsewhere():
    with pytest.raises(ConfigError, match="must be strings"):
        experiment_from_dict(
            {
                "experiment": {"instrument": "cetscale"},
                "factors": {"target": {"levels": {"USA": {"country": ["a", "b"]}}}},
            }
        )
    with pytest.raises(ConfigError, match="only one factor may set the response format"):
        t = _table(["original"])
        t["factors"]["fmt2"] = {"kind": "format", "levels": ["letters"]}
        experiment_from_dict(t)


# --------------------------------------------------------------------------- collection

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_tiny, tiny_prompts  # noqa: E402

from xlikert.collect import collect  # noqa: E402
from xlikert.core.io import open_results  # noqa: E402

LABELS = {
    "original": list("1234567"),
    "reversed": list("7654321"),
    "letters": list("ABCDEFG"),
}


def format_prompts(levels=("original", "reversed", "letters"), labels=LABELS) -> xr.Dataset:
    """The tiny prompts crossed with format levels; the texts are the same at every level,
    so two levels differ only in the labels read."""
    base = tiny_prompts(n_targets=2, n_items=3)
    ds = base[["user"]].expand_dims(format=list(levels), axis=1)
    ds["system"] = base["system"]
    ds["answer_label"] = (("format", "score"), np.array([labels[lv] for lv in levels]))
    return ds.assign_coords(score=np.arange(1, 8))


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def collected(tiny_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("fmt") / "results.nc"
    spec = [{"name": "tiny", "source": str(tiny_dir)}]
    ds = collect(format_prompts(), spec, out, progress=False, batch_size=4, chunk_size=4)
    return ds, out


def _independent(model_dir, text: str, append=()) -> np.ndarray:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = tok(text, add_special_tokens=False).input_ids + list(append)
    with torch.no_grad():
        z = model(torch.tensor([ids])).logits[0, -1].double()
    return tok, torch.softmax(z, -1).numpy()


def test_reversed_level_is_the_original_read_in_reverse(collected):
    ds, _ = collected
    orig = ds.pmf.sel(format="original")
    rev = ds.pmf.sel(format="reversed")
    np.testing.assert_allclose(rev.values, orig.values[..., ::-1], atol=1e-12)
    np.testing.assert_allclose(
        ds.valid_mass.sel(format="reversed"), ds.valid_mass.sel(format="original"), rtol=1e-12
    )
    assert not np.allclose(rev.values, orig.values, atol=1e-3)  # the test can fail


def test_letters_level_reads_the_letter_tokens(collected, tiny_dir):
    ds, _ = collected
    cell = ds.sel(model="tiny", format="letters", target="USA", item="2")
    tok, p0 = _independent(tiny_dir, str(cell.prompt_text.values))
    vocab = tok.get_vocab()
    space = vocab[" "]
    _, p1 = _independent(tiny_dir, str(cell.prompt_text.values), (space,))
    mass = np.array([p0[vocab[x]] + p0[space] * p1[vocab[x]] for x in "ABCDEFG"])
    np.testing.assert_allclose(float(cell.valid_mass), mass.sum(), rtol=1e-6)
    np.testing.assert_allclose(cell.pmf.values, mass / mass.sum(), atol=1e-6)
    info = ds.likert.attrs["models"]["tiny"]["valid_tokens_by_labels"]
    assert {r["token"] for r in info["A B C D E F G"]} == set("ABCDEFG")
    assert {r["score"] for r in info["7 6 5 4 3 2 1"] if r["token"] == "1"} == {7}


def test_reverse_keyed_items_compose_with_a_reversed_format(collected):
    ds, _ = collected
    assert bool(ds.reverse_keyed.sel(item="3")) and not bool(ds.reverse_keyed.sel(item="1"))
    scored = reflect_reverse_keyed(ds.pmf)
    # reverse-keyed item under a reversed format: the two reflections cancel on the digits
    np.testing.assert_allclose(
        scored.sel(format="reversed", item="3"), ds.pmf.sel(format="original", item="3"), atol=1e-12
    )
    np.testing.assert_allclose(
        scored.sel(format="reversed", item="1"), ds.pmf.sel(format="reversed", item="1")
    )


def test_answer_label_is_stored_and_round_trips(collected):
    ds, out = collected
    back = open_results(out)
    for d in (ds, back):
        assert d["answer_label"].dims == ("format", "score")
        assert list(d["answer_label"].sel(format="letters").values) == list("ABCDEFG")
    xr.testing.assert_equal(back["answer_label"], ds["answer_label"])
    np.testing.assert_array_equal(back.pmf.values, ds.pmf.values)


def test_units_hold_one_format_and_each_label_set_is_resolved_once(tiny_dir, monkeypatch):
    from xlikert.collect.backends import inprocess
    from xlikert.collect.backends import transformers as local

    calls = []
    real = local.LocalModel.score

    def score(self, prompts):
        calls.append(self.options.answer_labels)
        return real(self, prompts)

    resolved = []
    rule = inprocess.answer_rule

    def counting_rule(*a, **k):
        resolved.append(k.get("labels"))
        return rule(*a, **k)

    monkeypatch.setattr(local.LocalModel, "score", score)
    monkeypatch.setattr(inprocess, "answer_rule", counting_rule)
    spec = [{"name": "tiny", "source": str(tiny_dir)}]
    collect(format_prompts(), spec, progress=False, chunk_size=2)
    assert len(calls) == 3 * 3  # 6 prompts per format in units of 2
    assert calls == [None] * 3 + [tuple("7654321")] * 3 + [tuple("ABCDEFG")] * 3
    assert len(resolved) == 2  # reversed and letters, once each (the digits at load)


def test_labels_that_are_not_single_tokens_are_read_whole_in_process_and_refused_by_servers(
    tiny_dir,
):
    """In process, a label of several tokens is read by the multi-token rule (word labels,
    tests/collect/answers/test_item_options.py checks the numbers); a server gives next-token
    log-probabilities only and refuses it by name."""
    from support.fake_server import FakeServer

    labels = {**LABELS, "pairs": ["AA", "BB", "CC", "DD", "EE", "FF", "GG"]}
    prompts = format_prompts(("original", "pairs"), labels)
    ds = collect(prompts, [{"name": "tiny", "source": str(tiny_dir)}], progress=False)
    rule = ds.likert.attrs["models"]["tiny"]["valid_tokens_by_labels"]
    assert "AA BB CC DD EE FF GG" in rule
    assert bool((ds.valid_mass.sel(format="pairs") > 0).all())
    srv = FakeServer(tiny_dir)
    try:
        entry = {"name": "m", "source": "openai:tiny", "base_url": srv.url, "backoff": 0.01,
                 "timeout": 30, "tokenizer": str(tiny_dir)}  # fmt: skip
        # a server of no known kind cannot be sent the walk's nodes: refused by name
        with pytest.raises(AnswerLabelError, match=r"need several tokens.*servers only"):
            collect(prompts, [entry], progress=False, top_k=6)
    finally:
        srv.close()


def test_report_has_the_format_section_and_reliability_per_format(collected, tmp_path):
    from xlikert.analysis.construct import variance_shares
    from xlikert.report import write_report

    ds = collected[0]
    ds = ds.assign(pmf=ds.pmf.fillna(1 / 7))
    page = write_report(ds, tmp_path / "report", figures=False)
    md = (page.parent / "report.md").read_text()
    assert "## Response format" in md or "Response format" in md
    assert "The format main effect explains" in md
    assert "format interaction explains" in md or "× format interaction explains" in md
    assert "Reliability" in md and "one population per model, format" in md
    # the shares of every term add up to the variance of the mean composite over the cells
    from xlikert.analysis.construct import composite, decompose, summary_table

    table = summary_table(decompose(ds.pmf))
    shares = variance_shares(table)
    np.testing.assert_allclose(shares["share"].sum(), 1.0)
    comp = composite(ds.pmf)
    mean = (comp * comp["score"]).sum("score")
    np.testing.assert_allclose(shares["variance"].sum(), float(mean.var()), rtol=1e-8)


@pytest.mark.parametrize("variant", ["exact", "topk-by-text"])
def test_server_backend_reads_each_levels_labels(tiny_dir, variant):
    """The OpenAI-compatible backend against a loopback server: exact mode equals the
    transformers backend (one-token rule) at every level; a text listing with no
    tokenizer bounds it."""
    from support.fake_server import FakeServer

    prompts = format_prompts()
    local = collect(prompts, [{"name": "m", "source": str(tiny_dir)}], progress=False,
                    split_space=False)  # fmt: skip
    srv = FakeServer(tiny_dir, reject_extras=variant != "exact")
    try:
        entry = {"name": "m", "source": "openai:tiny", "base_url": srv.url, "backoff": 0.01,
                 "timeout": 30}  # fmt: skip
        if variant == "exact":
            entry["tokenizer"] = str(tiny_dir)
        ds = collect(prompts, [entry], progress=False, top_k=6)
    finally:
        srv.close()
    assert list(ds.answer_label.sel(format="reversed").values) == list("7654321")
    if variant == "exact":
        np.testing.assert_allclose(ds.pmf, local.pmf, atol=1e-6)
        np.testing.assert_allclose(
            ds.pmf.sel(format="reversed"), ds.pmf.sel(format="original")[..., ::-1], atol=1e-12
        )
    else:
        eps = 1e-9
        assert bool((ds.pmf_lower - eps <= local.pmf).all())
        assert bool((local.pmf <= ds.pmf_upper + eps).all())
        np.testing.assert_allclose(
            ds.pmf_lower.sel(format="reversed"), ds.pmf_lower.sel(format="original")[..., ::-1]
        )
