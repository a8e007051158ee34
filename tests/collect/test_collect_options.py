"""One options object at every entry point: CollectOptions, collect(), xlikert run, [collect].

Also the model-entry keys every backend refuses, the vLLM entry's engine_args in the
run's fingerprint, and the loader's documented call.
"""

from __future__ import annotations

import importlib.util
import re
import typing
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.tiny import save_tiny, tiny_prompts

from xlikert.collect import DEFAULT_TEMPERATURES, DEFAULT_TOP_PS, CollectOptions, collect
from xlikert.collect.entries import RUN_WIDE_OPTIONS
from xlikert.core.errors import CollectionError
from xlikert.kernels.readout import DECODING_TIE_RULE


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("opts") / "model")


@pytest.fixture(scope="module")
def tiny_spec(tiny_dir):
    return [{"name": "tiny", "source": str(tiny_dir)}]


class Recorder:
    """A loader that records its calls and loads the entry's backend model as ``open`` would."""

    def __init__(self):
        self.calls = []

    def __call__(self, spec, options, probe):
        from xlikert.collect.backends.transformers import open as open_local

        self.calls.append((spec["name"], probe))
        return open_local(spec, options, probe)


# ----------------------------------------------------------------------------- CollectOptions
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"temperatures": (0.0, 1.0)}, r"temperatures must hold finite numbers > 0; got 0\.0"),
        ({"temperatures": (float("nan"),)}, r"temperatures must hold finite numbers > 0"),
        ({"temperatures": (float("inf"),)}, r"temperatures must hold finite numbers > 0"),
        ({"temperatures": ()}, r"temperatures is empty"),
        ({"temperatures": "1.0"}, r"temperatures must be a number or a list"),
        ({"top_ps": (0.9, 1.5)}, r"top_ps must hold finite numbers in \(0, 1\]; got 1\.5"),
        ({"top_ps": (0.0,)}, r"top_ps must hold finite numbers in \(0, 1\]; got 0\.0"),
        ({"top_ps": (0.9, 0.9)}, r"top_ps repeats a value"),
        ({"top_k": 0}, r"top_k must be an integer >= 1, got 0"),
        ({"top_k": 2.5}, r"top_k must be an integer >= 1"),
        ({"top_k": True}, r"top_k must be an integer >= 1"),
        ({"batch_size": 0}, r"batch_size must be an integer >= 1 or 'auto', got 0"),
        ({"batch_size": "big"}, r"batch_size must be an integer >= 1 or 'auto'"),
        ({"chunk_size": 0}, r"chunk_size must be an integer >= 1"),
        ({"scale": (3, 2, 1)}, r"scale must hold at least two increasing integers"),
        ({"scale": (1,)}, r"scale must hold at least two increasing integers"),
        ({"scale": (1.5, 2)}, r"scale must be a list of integers"),
        ({"split_space": "no"}, r"split_space must be true or false, got 'no'"),
        ({"dtype": "int4"}, r"unknown dtype 'int4'; choose one of"),
        ({"max_answer_positions": 0}, r"max_answer_positions must be an integer >= 1, got 0"),
        ({"max_answer_positions": True}, r"max_answer_positions must be an integer >= 1"),
        (
            {"answer_tol": -1e-3},
            r"answer_tol must be a finite number >= 0 \(0: exact\), got -0.001",
        ),
        ({"answer_tol": float("nan")}, r"answer_tol must be a finite number >= 0"),
        ({"answer_max_passes": 0}, r"answer_max_passes must be an integer >= 1, got 0"),
    ],
)
def test_options_are_validated_when_built(changes, message):
    with pytest.raises(CollectionError, match=message):
        CollectOptions(**changes)
    with pytest.raises(CollectionError, match=r"^exp\.toml \[collect\]: " + message):
        CollectOptions.from_mapping(changes, where="exp.toml [collect]")


def test_options_defaults_live_in_one_place_and_normalise():
    import xlikert.collect.run.runner as runner
    from xlikert.datasets import synthetic_results

    o = CollectOptions()
    assert o.temperatures == DEFAULT_TEMPERATURES and o.top_ps == DEFAULT_TOP_PS
    assert not hasattr(runner, "DEFAULT_TEMPERATURES")  # no second copy
    ds = synthetic_results()
    assert tuple(ds.temperature.values) == DEFAULT_TEMPERATURES
    assert tuple(ds.top_p.values) == DEFAULT_TOP_PS
    o = CollectOptions(scale=range(1, 6), temperatures=1, top_ps=[np.float64(0.9), 1])
    assert o.scale == (1, 2, 3, 4, 5) and o.temperatures == (1.0,) and o.top_ps == (0.9, 1.0)
    assert o.replace(top_k=5).top_k == 5 and o.top_k == 20


def test_from_mapping_refuses_unknown_keys_naming_them_and_the_valid_ones():
    with pytest.raises(CollectionError) as err:
        CollectOptions.from_mapping({"top_p": [0.9], "temprature": 1}, where="e.toml [collect]")
    msg = str(err.value)
    assert msg.startswith("e.toml [collect]: unknown key(s) ['top_p', 'temprature']")
    assert "did you mean 'top_ps'?" in msg
    assert "valid keys: " + ", ".join(CollectOptions.fields()) in msg
    o = CollectOptions.from_mapping({"top_ps": [0.9, 1.0], "top_k": 5}, where="x")
    assert (o.top_ps, o.top_k, o.temperatures) == ((0.9, 1.0), 5, DEFAULT_TEMPERATURES)


# ----------------------------------------------------------------------------- collect()
def test_a_bad_grid_value_fails_before_any_model_loads(tiny_spec):
    for bad in ({"top_ps": (0.9, 1.2)}, {"temperatures": (0.0,)}, {"top_k": 0}):
        rec = Recorder()
        with pytest.raises(CollectionError):
            collect(tiny_prompts(1, 1), tiny_spec, progress=False, loader=rec, **bad)
        assert rec.calls == [], bad
    rec = Recorder()
    with pytest.raises(CollectionError, match=r"collect\(\): unknown key\(s\) \['top_p'\]"):
        collect(tiny_prompts(1, 1), tiny_spec, progress=False, loader=rec, top_p=0.9)
    with pytest.raises(CollectionError, match=r"options must be a CollectOptions"):
        collect(tiny_prompts(1, 1), tiny_spec, progress=False, options={"top_k": 5})
    assert rec.calls == []


def test_collect_takes_an_options_object_and_keyword_overrides(tiny_spec):
    opts = CollectOptions(temperatures=(0.5, 1.0), top_ps=(0.8, 1.0), top_k=3)
    ds = collect(tiny_prompts(1, 2), tiny_spec, options=opts, top_ps=(1.0,), progress=False)
    assert ds.temperature.values.tolist() == [0.5, 1.0]
    assert ds.top_p.values.tolist() == [1.0]  # the keyword over the object
    assert ds.sizes["rank"] == 3
    np.testing.assert_allclose(ds.decoding_pmf.sel(temperature=1.0, top_p=1.0), ds.pmf, atol=1e-12)


def test_the_loader_is_documented_as_it_is_called(tiny_spec):
    """collect(loader=...) is called with (entry, options, probe), as its docs say."""
    hint = typing.get_type_hints(collect)["loader"]
    (fn,) = [a for a in typing.get_args(hint) if a is not type(None)]
    assert len(typing.get_args(fn)[0]) == 3  # (model entry, options, probe)
    assert "``(model entry, options, probe) -> Model``" in collect.__doc__
    rec = Recorder()
    collect(tiny_prompts(1, 1), tiny_spec, progress=False, loader=rec)
    ((name, probe),) = rec.calls
    assert name == "tiny" and isinstance(probe, tuple) and len(probe) == 2
    assert all(isinstance(x, str) for x in probe)


# ----------------------------------------------------------------------------- model entries
def _fake_vllm(monkeypatch):
    """Let the vLLM backend's check run without vLLM (it only asks whether it is there)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: object() if n == "vllm" else real(n, *a)
    )


@pytest.mark.parametrize("backend", ["transformers", "vllm", "openai"])
@pytest.mark.parametrize("key", RUN_WIDE_OPTIONS)
def test_every_backend_refuses_run_wide_options_in_a_model_entry(
    backend, key, tiny_dir, monkeypatch
):
    _fake_vllm(monkeypatch)
    spec = {"name": "m", "source": str(tiny_dir), "backend": backend, key: [0.9, 1.0]}
    if backend == "openai":
        spec.update(source="openai:tiny", base_url="http://127.0.0.1:9/v1")
    rec = Recorder()
    with pytest.raises(CollectionError, match=rf"model 'm': {key} is a run-wide option.*"
                       r"\[collect\] table.*--top-p"):  # fmt: skip
        collect(tiny_prompts(1, 1), [spec], progress=False, loader=rec)
    assert rec.calls == []


@pytest.mark.parametrize("backend", ["transformers", "vllm", "openai"])
def test_every_backend_refuses_keys_it_does_not_know(backend, tiny_dir, monkeypatch):
    _fake_vllm(monkeypatch)
    spec = {"name": "m", "source": str(tiny_dir), "backend": backend, "temprature": 0.5}
    if backend == "openai":
        spec.update(source="openai:tiny", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(CollectionError, match=rf"model 'm': unknown field\(s\) \['temprature'\] "
                       rf"for the {backend} backend; known: \["):  # fmt: skip
        collect(tiny_prompts(1, 1), [spec], progress=False, loader=Recorder())


def test_in_process_backends_check_the_dtype_before_loading(tiny_dir, monkeypatch):
    _fake_vllm(monkeypatch)
    for backend in ("transformers", "vllm"):
        spec = {"name": "m", "source": str(tiny_dir), "backend": backend, "dtype": "int8"}
        rec = Recorder()
        with pytest.raises(CollectionError, match=r"model 'm': unknown dtype 'int8'"):
            collect(tiny_prompts(1, 1), [spec], progress=False, loader=rec)
        assert rec.calls == []


def test_vllm_engine_args_are_in_the_fingerprint(tiny_dir, tmp_path, monkeypatch):
    """engine_args can change the numbers (a dtype, a quantization): a run made with other
    engine_args is not resumed into, nor reopened as finished; the device layout may change."""
    from xlikert.collect.backends.transformers import LocalModel, load_model

    _fake_vllm(monkeypatch)
    lm = load_model(str(tiny_dir), range(1, 8))

    def loader(spec, options, probe):
        return LocalModel(lm, options)  # the numbers of a stand-in engine

    def entry(**kw):
        return [{"name": "m", "source": str(tiny_dir), "backend": "vllm", **kw}]

    out = tmp_path / "r.nc"
    kw = {"progress": False, "chunk_size": 2, "loader": loader}

    def stop_after_one(done, total):
        if done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        collect(tiny_prompts(2, 2), entry(engine_args={"swap_space": 1}), out,
                on_unit=stop_after_one, **kw)  # fmt: skip
    with pytest.warns(UserWarning, match=r"kept 1 saved unit\(s\) of other configurations"), \
            pytest.warns(UserWarning, match=r"1 saved unit\(s\) of another configuration.*"
                         r"model 'm' changed \(engine_args: \{'swap_space': 1\} -> "):  # fmt: skip
        collect(tiny_prompts(2, 2), entry(engine_args={"swap_space": 2}), out, **kw)
    with pytest.raises(CollectionError, match="made by a different run configuration"):
        collect(tiny_prompts(2, 2), entry(engine_args={"quantization": "fp8"}), out, **kw)
    # the layout on devices does not change the numbers: the finished file is reopened
    again = collect(tiny_prompts(2, 2), entry(engine_args={"swap_space": 2},
                                              tensor_parallel_size=2), out, **kw)  # fmt: skip
    assert (
        again.attrs["xlikert_fingerprint"]
        == collect(tiny_prompts(2, 2), entry(engine_args={"swap_space": 2}), out, **kw).attrs[
            "xlikert_fingerprint"
        ]
    )
    for bad, message in [
        ({"dtype": "float16"}, r"engine_args sets \['dtype'\]: give them as the model entry"),
        ({"logits_processors": []}, r"engine_args sets \['logits_processors'\], which xlikert"),
    ]:
        with pytest.raises(CollectionError, match=message):
            collect(tiny_prompts(1, 1), entry(engine_args=bad), **kw)


# ----------------------------------------------------------------------------- what was done
def test_results_say_what_the_transformers_backend_did(tiny_spec):
    ds = collect(tiny_prompts(1, 1), tiny_spec, progress=False)
    info = ds.likert.attrs["models"]["tiny"]
    assert info["collection_protocol"].startswith("one forward pass per (condition, item)")
    assert ds.attrs["collection_protocol"].startswith(info["collection_protocol"])
    assert info["decoding_rule"] == DECODING_TIE_RULE == ds.decoding_pmf.attrs["description"]


# ----------------------------------------------------------------------------- xlikert run
TOML = """[experiment]
name = "tinyexp"
instrument = "cetscale"
items = ["1", "2", "3"]

[factors.target]
levels = ["USA", "France"]

[[models]]
name = "tiny"
source = "{model}"
"""


def _run(cfg, out, *args):
    from click.testing import CliRunner

    from xlikert.cli import main

    return CliRunner().invoke(main, ["run", str(cfg), "-o", str(out), "--quiet", *args])


def test_cli_flags_reach_the_stored_decoding_grid(tiny_dir, tmp_path):
    from xlikert.core.io import open_results

    cfg = tmp_path / "exp.toml"
    cfg.write_text(TOML.format(model=tiny_dir))
    out = tmp_path / "r.nc"
    res = _run(cfg, out, "--top-p", "0.9,1.0", "--temperature", "1.0", "--top-k", "4")
    assert res.exit_code == 0, res.output
    ds = open_results(out)
    assert ds.top_p.values.tolist() == [0.9, 1.0] and ds.temperature.values.tolist() == [1.0]
    assert ds.decoding_pmf.sizes == {"model": 1, "target": 2, "item": 3, "temperature": 1,
                                     "top_p": 2, "score": 7}  # fmt: skip
    assert ds.sizes["rank"] == 4
    np.testing.assert_allclose(ds.decoding_pmf.sel(top_p=1.0).squeeze("temperature"), ds.pmf,
                               atol=1e-12)  # fmt: skip


def test_toml_collect_table_reaches_the_stored_grid_and_flags_take_precedence(tiny_dir, tmp_path):
    from xlikert.core.io import open_results
    from xlikert.design import load_experiment

    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        TOML.format(model=tiny_dir)
        + "\n[collect]\ntemperatures = [0.5, 1.0]\ntop_ps = [0.8]\ntop_k = 3\n"
    )
    assert load_experiment(cfg).collect == {"temperatures": [0.5, 1.0], "top_ps": [0.8],
                                            "top_k": 3}  # fmt: skip
    out = tmp_path / "r.nc"
    res = _run(cfg, out)
    assert res.exit_code == 0, res.output
    ds = open_results(out)
    assert ds.temperature.values.tolist() == [0.5, 1.0] and ds.top_p.values.tolist() == [0.8]
    assert ds.sizes["rank"] == 3
    # a flag over the table, the table's other keys kept: --top-p wins, temperatures stay
    res = _run(cfg, tmp_path / "r2.nc", "--top-p", "1.0")
    assert res.exit_code == 0, res.output
    ds = open_results(tmp_path / "r2.nc")
    assert ds.temperature.values.tolist() == [0.5, 1.0] and ds.top_p.values.tolist() == [1.0]
    assert ds.sizes["rank"] == 3


def test_bad_options_in_the_file_or_the_flags_fail_before_loading(tiny_dir, tmp_path):
    cfg = tmp_path / "exp.toml"
    base = TOML.format(model=tiny_dir.parent / "not-loaded")  # a load would fail otherwise
    cases = [
        (
            "[collect]\ntop_p = [0.9]\n",
            [],
            r"exp\.toml \[collect\]: unknown key\(s\) \['top_p'\] "
            r"\(did you mean 'top_ps'\?\); valid keys: scale, top_k",
        ),
        ("[collect]\ntop_ps = [0.9, 2.0]\n", [], r"exp\.toml \[collect\]: top_ps must hold"),
        ("[collect]\nscale = [1, 2, 3]\n", [], r"\[collect\]: 'scale' is not set here"),
        ("", ["--top-p", "0.9,x"], r"Invalid value for '--top-p': expected numbers separated"),
        ("", ["--top-p", "0.9,1.5"], r"Invalid value for '--top-p': top_ps must hold finite"),
        ("", ["--temperature", "0"], r"Invalid value for '--temperature': temperatures must"),
        ("", ["--top-k", "0"], r"Invalid value for '--top-k': top_k must be an integer >= 1"),
        ("", ["--batch-size", "0"], r"Invalid value for '--batch-size'"),
    ]
    for extra, flags, message in cases:
        cfg.write_text(base + "\n" + extra)
        res = _run(cfg, tmp_path / "x.nc", *flags)
        assert res.exit_code != 0, (extra, flags)
        assert re.search(message, " ".join(res.output.split())), res.output
        assert "not-loaded" not in res.output  # failed before the model was looked up
    assert not (tmp_path / "x.nc").exists()


# ----------------------------------------------------------------------------- shared base
def test_both_in_process_backends_end_a_turn_at_the_same_ids(tmp_path):
    """One end-of-turn rule: the tokenizer's, config.json's and the generation config's
    eos ids; without generation_config.json it is derived from config.json (as vLLM and
    transformers derive it). The vLLM backend passes these ids to its engine."""
    import json

    from xlikert.collect.backends.inprocess import InProcessModel, _end_of_turn_ids
    from xlikert.collect.backends.transformers import LocalModel, load_model
    from xlikert.collect.backends.vllm import model as backend
    from xlikert.collect.reasoning import check_reasoning

    d = save_tiny(tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    cfg["eos_token_id"] = 5
    (d / "config.json").write_text(json.dumps(cfg))
    reasoning = check_reasoning({"name": "m", "reasoning": {"traces": 1}})
    opts = CollectOptions(scale=range(1, 8))
    for generation, extra in (({"eos_token_id": [6, 7]}, {6, 7}), (None, set())):
        gen_file = d / "generation_config.json"
        gen_file.unlink(missing_ok=True)
        if generation is not None:
            gen_file.write_text(json.dumps(generation))
        lm = load_model(str(d), range(1, 8))
        want = {lm.tokenizer.eos_token_id, 5} | extra
        local = LocalModel(lm, opts, reasoning)
        assert isinstance(local, InProcessModel) and local.stop_ids == want
        assert _end_of_turn_ids(lm.tokenizer, *backend._configs(str(d), False)) == want
        assert local.provenance()["end_of_turn_ids"] == sorted(want)
