"""Option order as a factor: every rotation or permutation of the points, read back
onto the score axis (issue 36 item 4).

The design checks need nothing; the collection checks run on a tiny random-weight
model built in process (:mod:`support.tiny`). The real-model check is in
``tests/integration/test_formats_smollm2.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import xlikert as xl
from xlikert.core.errors import FormatError, FormatNotShownError, LabelMappingError
from xlikert.design import experiment_from_dict
from xlikert.design.formats import builtin_format, order_name
from xlikert.design.option_order import option_orders, permuted_formats

SYSTEM = "Response format: {anchors}. Answer with one of {answer_labels}."
THREE = {"1": "Disagree", "2": "Neither", "3": "Agree"}


def _table(factor: dict, system: str = SYSTEM, scale: dict | None = None) -> dict:
    return {
        "experiment": {"instrument": "cetscale", "items": ["1", "2"], "system": system},
        "scale": scale or {"min": 1, "max": 3, "anchors": THREE},
        "factors": {
            "target": {"levels": ["USA", "France"]},
            "option_order": {"kind": "format", **factor},
        },
    }


# --------------------------------------------------------------------------- design


def test_rotations_and_permutations_are_every_order_once():
    assert option_orders(4, "rotations") == [(1, 2, 3, 4), (2, 3, 4, 1), (3, 4, 1, 2), (4, 1, 2, 3)]
    every = option_orders(4, "all", max_levels=24)
    assert len(every) == len(set(every)) == 24 and set(every) == set(
        itertools.permutations(range(1, 5))
    )
    assert order_name((3, 4, 5, 1, 2)) == "34512"
    assert order_name(tuple(range(10, 0, -1))) == "10-9-8-7-6-5-4-3-2-1"


def test_a_permuted_format_means_by_each_label_the_point_shown_there():
    fmts = permuted_formats(builtin_format("labelled"), 5, "rotations")
    rot = fmts["34512"]
    # positional labels: the first label shown means the point shown first
    assert rot.labels_by_score(1, 5) == {3: "1", 4: "2", 5: "3", 1: "4", 2: "5"}
    assert rot.labels_by_score(11, 15) == {13: "11", 14: "12", 15: "13", 11: "14", 12: "15"}
    anchors = {1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}
    f = rot.fields(1, 5, anchors)
    assert f["anchors"] == "1=c, 2=d, 3=e, 4=a, 5=b"
    assert (f["min_label"], f["max_label"]) == ("c", "b")
    assert rot.permuted(1, 5) and not fmts["12345"].permuted(1, 5)
    assert "shown 34512" in rot.describe()


def test_permute_makes_the_levels_and_their_answer_labels():
    exp = experiment_from_dict(_table({"permute": "all"}))
    names = ["123", "132", "213", "231", "312", "321"]
    assert exp.factors["option_order"] == names
    ds = exp.build_prompts()
    assert ds.answer_label.dims == ("option_order", "score")
    for name in names:  # the label at position k means the point of rank name[k]
        ranks = [int(c) for c in name]
        expected = {r: str(k + 1) for k, r in enumerate(ranks)}
        assert list(ds.answer_label.sel(option_order=name).values) == [
            expected[y] for y in (1, 2, 3)
        ]
    text = str(ds.system.sel(option_order="231", target="France", item="1").item())
    assert text == ("Response format: 1=Neither, 2=Agree, 3=Disagree. Answer with one of 1, 2, 3.")
    rot = experiment_from_dict(_table({"permute": "rotations", "levels": ["letters"]}))
    assert rot.factors["option_order"] == ["123", "231", "312"]
    assert list(rot.build_prompts().answer_label.sel(option_order="312").values) == list("BCA")
    # a level table may give one order itself
    one = experiment_from_dict(_table({"levels": {"mid_first": {"order": "2 1 3"}}}))
    assert list(one.build_prompts().answer_label.values[0]) == ["2", "1", "3"]


def test_too_many_permutations_is_an_error_naming_the_count():
    seven = {"min": 1, "max": 7, "anchors": {str(y): f"p{y}" for y in range(1, 8)}}
    with pytest.raises(FormatError, match=r"makes 5040 levels, above the cap max_levels = 120"):
        experiment_from_dict(_table({"permute": "all"}, scale=seven))
    with pytest.raises(FormatError, match=r"makes 6 levels, above the cap max_levels = 5"):
        experiment_from_dict(_table({"permute": "all", "max_levels": 5}))
    assert (
        len(
            experiment_from_dict(_table({"permute": "rotations"}, scale=seven)).factors[
                "option_order"
            ]
        )
        == 7
    )


def test_orders_that_cannot_be_read_are_named_errors():
    with pytest.raises(LabelMappingError, match=r"not a permutation of the ranks 1\.\.3"):
        experiment_from_dict(_table({"levels": {"x": {"order": "1 2 2"}}}))
    with pytest.raises(
        LabelMappingError, match=r"style 'ends' gives no text for the score\(s\) \[2\]"
    ):
        experiment_from_dict(_table({"permute": "rotations", "levels": {"e": {"anchors": "ends"}}}))
    with pytest.raises(FormatNotShownError, match=r"only the points' texts tell.*\{anchors\}"):
        experiment_from_dict(
            _table({"permute": "rotations"}, system="Answer {scale_min}-{scale_max}.")
        )
    with pytest.raises(xl.core.errors.ConfigError, match="names at most one"):
        experiment_from_dict(_table({"permute": "rotations", "levels": ["original", "letters"]}))
    with pytest.raises(xl.core.errors.ConfigError, match="'max_levels' caps what 'permute' makes"):
        experiment_from_dict(_table({"levels": ["original"], "max_levels": 3}))
    bad = _table({"levels": ["original"]})
    bad["factors"]["target"]["permute"] = "all"
    with pytest.raises(xl.core.errors.ConfigError, match="are for factors of kind 'format'"):
        experiment_from_dict(bad)


# --------------------------------------------------------------------------- collection

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_tiny  # noqa: E402

from xlikert.collect import collect  # noqa: E402


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def collected(tiny_dir, tmp_path_factory):
    """Every permutation of three points with letters: 6 orders x 2 countries x 2 items."""
    exp = experiment_from_dict(_table({"permute": "all", "levels": ["letters"]}))
    out = tmp_path_factory.mktemp("order") / "results.nc"
    spec = [{"name": "tiny", "source": str(tiny_dir)}]
    return collect(exp.build_prompts(), spec, out, progress=False, batch_size=4, chunk_size=4)


def test_every_permutation_read_back_equals_an_independent_pass(collected, tiny_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32).eval()
    vocab = tok.get_vocab()
    space = vocab[" "]
    ds = collected
    for name, target, item in itertools.product(
        ds.option_order.values, ds.target.values, ds.item.values
    ):
        cell = ds.sel(model="tiny", option_order=name, target=target, item=item)
        ids = tok(str(cell.prompt_text.values), add_special_tokens=False).input_ids
        with torch.no_grad():
            z = model(torch.tensor([[*ids, space]])).logits[0, -2:].double()
        p0, p1 = torch.softmax(z, -1).numpy()
        # the letter at shown position k (A first) means the point of rank name[k]
        mass = np.zeros(3)
        for k, letter in enumerate("ABC"):
            mass[int(name[k]) - 1] = p0[vocab[letter]] + p0[space] * p1[vocab[letter]]
        np.testing.assert_allclose(float(cell.valid_mass), mass.sum(), rtol=1e-5)
        np.testing.assert_allclose(cell.pmf.values, mass / mass.sum(), atol=1e-6)
    # the orders change the answer: the check can fail
    assert float(np.ptp(ds.pmf.sel(score=1).values, axis=1).max()) > 1e-3


def test_decompose_gives_the_order_effects_exactly(collected):
    pmf = collected.pmf.squeeze("model", drop=True)
    dec = xl.decompose(pmf, factors=["option_order", "target"], subscale=None)
    comp = (pmf * pmf.score).sum(["score", "item"])
    grand = float(comp.mean())
    main = comp.mean("target") - grand  # the classical ANOVA components of the mean
    inter = comp - comp.mean("target") - comp.mean("option_order") + grand
    np.testing.assert_allclose(dec["option_order"]["E"].values, main.values, atol=1e-10)
    np.testing.assert_allclose(
        dec["target:option_order"]["E"].transpose(*inter.dims).values, inter.values, atol=1e-10
    )
    assert float(np.abs(main).max()) > 1e-4
