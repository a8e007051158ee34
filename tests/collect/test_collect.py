"""Collection mechanics on a tiny random-weight model built in process."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch
from support.tiny import (
    EXTRA,
    build_tokenizer,
    kill_then_resume,
    nucleus,
    save_tiny,
    tiny_prompts,
)

from xlikert.collect import collect, find_valid_tokens, merge_shards
from xlikert.collect.answers.spellings import _find_space_tokens
from xlikert.core.errors import CollectionError

HERE = Path(__file__).parent
VALID_RE = re.compile(r"^[ ▁Ġ]?[1-7]$")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tiny_spec(tiny_dir):
    return [{"name": "tiny", "source": str(tiny_dir)}]


@pytest.fixture(scope="module")
def base(tiny_spec) -> xr.Dataset:
    return collect(tiny_prompts(), tiny_spec, progress=False, batch_size=4)


@functools.lru_cache(maxsize=4)
def _tiny(model_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    return tok, model


def independent(model_dir: Path, text: str, append: tuple[int, ...] = ()) -> np.ndarray:
    """Full-vocabulary probabilities of the next token after ``text`` + ``append`` ids."""
    tok, model = _tiny(model_dir)
    ids = tok(text, add_special_tokens=False).input_ids + list(append)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].double()
    return torch.softmax(logits, -1).numpy()


def rule_masses(model_dir, text, temp=1.0, top_p=1.0, split_space=True) -> np.ndarray:
    """P(answer = y) for y = 1..7, by the answer rule written plainly.

    A valid token (digit with optional marker) as the next token, plus, with
    ``split_space``, a bare space token followed by a marker-less digit token.
    """
    vocab = build_tokenizer().get_vocab()
    valid = {i: int(t.lstrip(" ▁Ġ")) for t, i in vocab.items() if VALID_RE.match(t)}
    bare = {vocab[str(y)]: y for y in range(1, 8)}  # the digits without a marker
    spaces = [i for t, i in vocab.items() if t in (" ", "▁", "Ġ")]
    q0 = nucleus(independent(model_dir, text), temp, top_p)
    mass = np.zeros(7)
    for i, y in valid.items():
        mass[y - 1] += q0[i]
    if split_space:
        for s in spaces:
            q1 = nucleus(independent(model_dir, text, (s,)), temp, top_p)
            for i, y in bare.items():
                mass[y - 1] += q0[s] * q1[i]
    return mass


def test_valid_tokens_surface_forms():
    tok = build_tokenizer()
    vt = find_valid_tokens(tok, range(1, 8))
    surf = set(vt.surfaces)
    assert {"1", "7", "▁1", "▁3", "Ġ5", " 6", "Ġ7"} <= surf
    assert not surf & {"seven", "17", "7.", "▁seven", "8", "0"}
    for s, y in zip(vt.surfaces, vt.scores, strict=True):
        assert s.lstrip(" ▁Ġ") == str(y)
    assert vt.ids == tuple(tok.convert_tokens_to_ids(list(vt.surfaces)))
    # the one bare space token of this tokenizer; "▁1", "Ġ5" are digits with a marker
    assert _find_space_tokens(tok) == (tok.get_vocab()[" "],)


def test_pmf_sums_and_valid_mass_match_independent_pass(base, tiny_dir):
    assert base.pmf.dims == ("model", "target", "item", "score")
    np.testing.assert_allclose(base.pmf.sum("score"), 1.0, atol=1e-12)
    assert "reverse_keyed" in base.coords and base.attrs["instrument"] == "tiny"
    tok = build_tokenizer()
    vocab = tok.get_vocab()
    valid = {i: int(t.lstrip(" ▁Ġ")) for t, i in vocab.items() if VALID_RE.match(t)}
    assert len(valid) == 7 + len([e for e in EXTRA if VALID_RE.match(e)])
    assert base.likert.attrs["models"]["tiny"]["answers"].startswith("one token or split space")
    for target in ("USA", "Chad"):
        for item in ("1", "5"):
            cell = base.sel(model="tiny", target=target, item=item)
            text = str(cell.prompt_text.values)
            assert text.startswith("<s><|system|>") and text.endswith("<|assistant|>")
            assert not text.startswith("<s><s>")
            mass = rule_masses(tiny_dir, text)
            np.testing.assert_allclose(float(cell.valid_mass), mass.sum(), rtol=1e-6)
            np.testing.assert_allclose(cell.pmf.values, mass / mass.sum(), atol=1e-6)
            p = independent(tiny_dir, text)
            top = np.argsort(-p)[:5]
            np.testing.assert_allclose(np.exp(cell.topk_logprob.values[:5]), p[top], rtol=1e-5)
            # stored as text: a leading marker is the space it stands for; ids beside it
            shown = [t[:1].replace("Ġ", " ").replace("▁", " ") + t[1:]
                     for t in tok.convert_ids_to_tokens(top.tolist())]  # fmt: skip
            assert list(cell.topk_token.values[:5]) == shown
            assert list(cell.topk_token_id.values[:5]) == top.tolist()


def test_one_token_rule_and_split_space(base, tiny_spec, tiny_dir):
    """split_space=False is the paper's one-token rule; the split space adds P(' ') P(y | ' ')."""
    one = collect(tiny_prompts(), tiny_spec, progress=False, batch_size=4, split_space=False)
    assert one.likert.attrs["models"]["tiny"]["answers"].startswith("one token:")
    assert one.attrs["xlikert_fingerprint"] != base.attrs["xlikert_fingerprint"]
    vocab = build_tokenizer().get_vocab()
    space = vocab[" "]
    bare = [vocab[str(y)] for y in range(1, 8)]
    for target, item in [("USA", "2"), ("France", "4")]:
        text = str(base.prompt_text.sel(model="tiny", target=target, item=item).values)
        p0 = independent(tiny_dir, text)
        p1 = independent(tiny_dir, text, (space,))
        mass = rule_masses(tiny_dir, text, split_space=False)
        cell = one.sel(model="tiny", target=target, item=item)
        np.testing.assert_allclose(float(cell.valid_mass), mass.sum(), rtol=1e-6)
        np.testing.assert_allclose(cell.pmf.values, mass / mass.sum(), atol=1e-6)
        added = float(base.valid_mass.sel(model="tiny", target=target, item=item) - cell.valid_mass)
        np.testing.assert_allclose(added, p0[space] * p1[bare].sum(), rtol=0, atol=1e-8)
        assert added > 1e-5  # the split-space path really carries mass here
    assert (one.prompt_text == base.prompt_text).all()
    np.testing.assert_array_equal(one.topk_token, base.topk_token)


def test_batched_equals_unbatched_and_cached_equals_uncached(base, tiny_spec):
    one = collect(tiny_prompts(), tiny_spec, progress=False, batch_size=1, prefix_cache=False)
    cached = collect(tiny_prompts(), tiny_spec, progress=False, batch_size=1, prefix_cache=True)
    for v in ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass", "topk_logprob"):
        np.testing.assert_allclose(base[v], one[v], atol=1e-5, rtol=0, err_msg=v)
        np.testing.assert_allclose(cached[v], one[v], atol=1e-5, rtol=0, err_msg=v)
    assert (base.prompt_text == one.prompt_text).all()
    # prompts whose system text differs by condition: several prefix groups
    multi = tiny_prompts(systems=3)
    a = collect(multi, tiny_spec, progress=False, batch_size=3)
    b = collect(multi, tiny_spec, progress=False, batch_size=1, prefix_cache=False)
    np.testing.assert_allclose(a.pmf, b.pmf, atol=1e-5, rtol=0)


def _given_cache(kwargs):
    """The KV cache a forward call was given (``cache``; ``past_key_values`` before
    transformers renamed it), or None."""
    return kwargs.get("cache", kwargs.get("past_key_values"))


def test_shared_prefix_runs_once_across_units_and_is_checked_once_per_model(base, tiny_dir):
    """Units with the same system prompt reuse its KV cache; the check against an
    uncached pass is made once per loaded model, not per collect call."""
    from xlikert.collect.backends.transformers import LocalModel, load_model

    lm = load_model(str(tiny_dir), range(1, 8))
    calls = []

    def record(module, args, kwargs):
        ids, cache = kwargs["input_ids"], _given_cache(kwargs)
        held = 0 if cache is None else cache.get_seq_length()
        calls.append((ids.shape[0], held == 0, kwargs["use_cache"]))

    lm.model.register_forward_pre_hook(record, with_kwargs=True)

    def run(**kw):
        return collect(tiny_prompts(), [{"name": "tiny", "source": str(tiny_dir)}],
                       progress=False, batch_size=4,
                       loader=lambda s, o, probe=None: LocalModel(lm, o), **kw)  # fmt: skip

    chunked = run(chunk_size=4)  # 15 prompts, one system prompt: 4 units
    prefix_runs = [c for c in calls if c == (1, True, True)]
    uncached = [c for c in calls if not c[2]]
    assert len(prefix_runs) == 1 and len(uncached) == 1
    for v in ("pmf", "valid_mass", "decoding_pmf", "topk_logprob"):
        np.testing.assert_allclose(chunked[v], base[v], atol=1e-5, rtol=0, err_msg=v)
    calls.clear()
    # one unit of 15 prompts: groups of them share more than the system prompt (an item's
    # opening words), read from their group prefixes (the tree's path, checked once)
    again = run()
    assert len([c for c in calls if not c[2]]) == 1 and "tree" in lm.cache_checked
    calls.clear()
    np.testing.assert_array_equal(again.pmf, run(chunk_size=64).pmf)
    assert [c for c in calls if not c[2]] == []  # checked already: no uncached pass
    assert again.likert.attrs["models"]["tiny"]["prefix_cache"].startswith("on; checked")
    for v in ("pmf", "valid_mass", "decoding_pmf", "topk_logprob"):
        np.testing.assert_allclose(again[v], base[v], atol=1e-5, rtol=0, err_msg=v)


def test_a_failed_cache_check_turns_caching_off_for_the_loaded_model(base, tiny_dir, monkeypatch):
    """When a cached pass differs from the uncached one, the batch is recomputed
    without the cache, the file says caching is off, and later calls on the same
    loaded model make no cached pass at all."""
    from xlikert.collect.backends.transformers import LocalModel, Scorer, load_model

    # a tolerance no difference can meet: the check fails on every model
    monkeypatch.setattr(Scorer.check_prefix_cache, "__defaults__", (-1.0, "prefix"))
    lm = load_model(str(tiny_dir), range(1, 8))
    calls = []
    lm.model.register_forward_pre_hook(
        lambda m, a, kw: calls.append(_given_cache(kw) is not None), with_kwargs=True
    )

    def run():
        return collect(tiny_prompts(), [{"name": "tiny", "source": str(tiny_dir)}],
                       progress=False, batch_size=4,
                       loader=lambda s, o, probe=None: LocalModel(lm, o))  # fmt: skip

    with pytest.warns(UserWarning, match="caching disabled"):
        first = run()
    assert first.likert.attrs["models"]["tiny"]["prefix_cache"].startswith("off")
    for v in ("pmf", "valid_mass", "decoding_pmf", "topk_logprob"):
        np.testing.assert_allclose(first[v], base[v], atol=1e-5, rtol=0, err_msg=v)
    calls.clear()
    second = run()
    assert calls and not any(calls)  # no pass on a cache
    assert not lm.cache_ok
    np.testing.assert_array_equal(second.pmf, first.pmf)


def test_decoding_grid(base, tiny_dir):
    native = base.decoding_pmf.sel(temperature=1.0, top_p=1.0)
    np.testing.assert_allclose(native, base.pmf, atol=1e-12)
    np.testing.assert_allclose(
        base.decoding_valid_mass.sel(temperature=1.0, top_p=1.0), base.valid_mass, atol=1e-12
    )
    # an independent nucleus computation for one prompt and every grid point:
    # temperature and nucleus at the first token and, after a space token, at the second
    cell = base.sel(model="tiny", target="France", item="2")
    text = str(cell.prompt_text.values)
    q = nucleus(independent(tiny_dir, text), 1.0, 0.8)
    assert (q == 0).any()  # the grid really truncates something
    for temp in base.temperature.values:
        for top_p in base.top_p.values:
            mass = rule_masses(tiny_dir, text, temp, top_p)
            got = cell.decoding_valid_mass.sel(temperature=temp, top_p=top_p)
            np.testing.assert_allclose(float(got), mass.sum(), atol=1e-6)
            if mass.sum() > 0:
                got_pmf = cell.decoding_pmf.sel(temperature=temp, top_p=top_p).values
                np.testing.assert_allclose(got_pmf, mass / mass.sum(), atol=1e-6)


def test_resume_after_sigkill_equals_clean_run(tiny_dir, tmp_path):
    a, b, n_done, rerun = kill_then_resume(tiny_dir, tmp_path, glob="m*-u*.npz", units=3)
    assert 3 <= n_done < 16  # 2 models x 8 units; really interrupted
    xr.testing.assert_identical(a, b)
    # a finished run is not recomputed
    killed = tmp_path / "killed.nc"
    mtime = killed.stat().st_mtime_ns
    rerun()
    assert killed.stat().st_mtime_ns == mtime


def test_shards_and_merge(tiny_spec, tmp_path, base):
    kw = {"progress": False, "batch_size": 4, "chunk_size": 4}
    full = collect(tiny_prompts(), tiny_spec, **kw)
    p1, p2 = tmp_path / "s1.nc", tmp_path / "s2.nc"
    s1 = collect(tiny_prompts(), tiny_spec, p1, shard="1/2", **kw)
    collect(tiny_prompts(), tiny_spec, p2, shard="2/2", **kw)
    assert 0 < int(s1.computed.sum()) < s1.computed.size
    merged = merge_shards([p1, p2], tmp_path / "all.nc")
    np.testing.assert_array_equal(merged.pmf, full.pmf)
    assert "computed" not in merged and (merged.prompt_text == full.prompt_text).all()
    with pytest.raises(CollectionError, match="overlap"):
        merge_shards([p1, p1])
    with pytest.raises(CollectionError, match="missing cells"):
        merge_shards([p1])
    from click.testing import CliRunner

    from xlikert.cli import main

    res = CliRunner().invoke(main, ["merge", str(p1), "-o", str(tmp_path / "x.nc")])
    assert res.exit_code != 0 and "missing cells" in res.output
    assert not (tmp_path / "x.nc").exists()
    res = CliRunner().invoke(main, ["merge", str(p1), str(p2), "-o", str(tmp_path / "y.nc")])
    assert res.exit_code == 0, res.output
    # the merged file is the unsharded run's result: rerunning that run opens it
    again = collect(tiny_prompts(), tiny_spec, tmp_path / "all.nc", **kw)
    assert again.attrs["merged_from"] == merged.attrs["merged_from"]
    # a shard made with another answer rule is refused, naming the files
    p3 = tmp_path / "s2-one-token.nc"
    collect(tiny_prompts(), tiny_spec, p3, shard="2/2", split_space=False, **kw)
    with pytest.raises(CollectionError, match=r"different configurations.*s2-one-token"):
        merge_shards([p1, p3])


def test_provenance_recorded(base, tiny_dir, tmp_path):
    import xlikert as xl
    from xlikert.collect.run.runner import write_results_file
    from xlikert.core.io import open_results

    write_results_file(base, tmp_path / "r.nc")
    ds = open_results(tmp_path / "r.nc")
    info = ds.likert.attrs["models"]["tiny"]
    assert info["source"] == str(tiny_dir)
    assert len(info["sha256"]) == 64
    assert info["dtype"] == "float32" and info["device"] == "cpu"
    assert info["prompt_format"] == "chat" and info["tokenizer"].endswith(str(tiny_dir))
    # "▁3", "Ġ5" and " 6" in the vocabulary: stored as their text
    assert {r["token"] for r in info["valid_tokens"]} >= {" 3", " 5", " 6"}
    assert ds.attrs["date_created"]
    # the one version (xlikert/_version.py), as the metadata and `xlikert --version` read it
    assert ds.attrs["xlikert_version"] == xl.__version__
    assert f": xlikert {xl.__version__} collect (" in ds.attrs["history"]
    text = json.dumps(ds.attrs, default=str)
    assert "token=" not in text.lower() and "hf_" not in text


def test_collected_dataset_is_netcdf_ready_the_xarray_way(base, tmp_path):
    """collect() -> ds.to_netcdf -> xr.open_dataset -> the analysis: no xlikert io needed."""
    import xlikert as xl

    assert isinstance(base.attrs["models"], str)  # provenance as JSON text
    assert base.likert.attrs["models"]["tiny"]["dtype"] == "float32"  # read as structure
    base.to_netcdf(tmp_path / "plain.nc")
    with xr.open_dataset(tmp_path / "plain.nc") as plain:
        plain = plain.load()
    xr.testing.assert_identical(plain, base)
    xr.testing.assert_identical(xl.open_results(tmp_path / "plain.nc"), base)
    assert plain.likert.attrs["models"] == base.likert.attrs["models"]
    # a one-model run decomposes: the model is held constant
    dec = xl.decompose(plain)
    assert sorted(dec.children) == ["grand", "target"]
    assert xl.core.io.read_attrs(dec)["decompose_constant_factors"] == {"model": "tiny"}
    pd_a, pd_b = xl.summary_table(dec), xl.summary_table(xl.decompose(base))
    assert pd_a.equals(pd_b)
    xr.testing.assert_identical(xl.consensus(plain), xl.consensus(base))
    # and what the analysis returns writes the xarray way too
    dec.to_netcdf(tmp_path / "dec.nc")
    xl.consensus(plain).to_netcdf(tmp_path / "cns.nc")


def test_plain_format_for_model_without_chat_template(tmp_path):
    d = save_tiny(tmp_path / "base", chat=False)
    ds = collect(tiny_prompts(1, 2), [{"name": "b", "source": str(d)}], progress=False)
    text = str(ds.prompt_text.values.ravel()[0])
    from xlikert.collect.templates import PLAIN_FORMAT

    user = "Americans should buy American goods."
    assert text == PLAIN_FORMAT.format(system="Rate 1-7. Respond with ONLY the digit.", user=user)
    assert ds.likert.attrs["models"]["b"]["prompt_format"] == "plain"


# ----------------------------------------------------------------------------- bad input
def test_unknown_model_lists_builtins(tiny_spec):
    with pytest.raises(CollectionError, match=r"smollm2-135m-instruct.*gemma-3-270m"):
        collect(tiny_prompts(1, 1), ["no-such-model"], progress=False)


def test_checksum_mismatch(monkeypatch, tmp_path):
    import dataclasses

    from xlikert.collect import zoo

    bad = dataclasses.replace(zoo.ZOO["smollm2-135m-instruct"], sha256="0" * 64)
    monkeypatch.setitem(zoo.ZOO, "smollm2-135m-instruct", bad)
    monkeypatch.setenv("XLIKERT_CACHE", str(tmp_path))
    with pytest.raises(CollectionError, match=r"checksum mismatch.*expected 0000"):
        zoo.resolve_gguf("smollm2-135m-instruct")


def test_moved_transformers_gguf_helpers_are_named(monkeypatch, tmp_path):
    """Dequantising uses transformers' internal GGUF helpers: where a release lacks them,
    the error names the versions the collect extra allows."""
    import types

    from xlikert.collect import zoo

    pytest.importorskip("gguf")
    pytest.importorskip("safetensors")
    moved = types.ModuleType("transformers.modeling_gguf_pytorch_utils")
    monkeypatch.setitem(sys.modules, moved.__name__, moved)
    with pytest.raises(CollectionError, match=r"lacks the GGUF helpers.*transformers>=5\.19,<6"):
        zoo._write_shards(tmp_path / "m.gguf", None, tmp_path)


def test_chunked_assembly_checksum_leaves_nothing(monkeypatch, tmp_path):
    import dataclasses

    from xlikert.collect import zoo

    # a chunked model whose chunks are two copies of a small file
    small = Path(__file__)
    fake = dataclasses.replace(
        zoo.ZOO["qwen2.5-coder-0.5b-instruct"],
        name="fake",
        sha256="f" * 64,
        chunks=(("tests", small.name), ("tests", small.name)),
    )
    monkeypatch.setattr(zoo, "_chunk_paths", lambda m: [small, small])
    monkeypatch.setitem(zoo.ZOO, "fake", fake)
    monkeypatch.setenv("XLIKERT_CACHE", str(tmp_path))
    with pytest.raises(CollectionError, match="checksum mismatch"):
        zoo.resolve_gguf("fake")
    assert list((tmp_path / "gguf").iterdir()) == []


def test_progress_of_another_configuration_is_kept_with_a_warning(tiny_spec, tmp_path):
    out = tmp_path / "r.nc"
    kw = {"progress": False, "batch_size": 4, "chunk_size": 4}
    calls = []

    def stop_after_two(done, total):
        calls.append(done)
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        collect(tiny_prompts(), tiny_spec, out, on_unit=stop_after_two, **kw)
    assert len(list((tmp_path / "r.nc.partial").glob("m*-u*.npz"))) == 2
    # the run says what it keeps when it starts, and again when it ends
    end = r"kept 2 saved unit\(s\) of other configurations in .*r\.nc\.partial"
    with (
        pytest.warns(UserWarning, match=end),
        pytest.warns(
            UserWarning, match=r"2 saved unit\(s\) of another configuration.*top_k"
        ) as seen,
    ):
        collect(tiny_prompts(), tiny_spec, out, top_k=5, **kw)
    assert {w.filename for w in seen} == {__file__}  # the caller's line: kept, and kept still
    assert out.exists()  # and the other configuration's units are still there
    assert len(list((tmp_path / "r.nc.partial").glob("m*-u*.npz"))) == 2


def test_oom_backs_off(monkeypatch, tiny_spec, base):
    from xlikert.collect.backends import transformers as backend

    real = backend.Scorer.forward_rows
    calls = []

    def flaky(self, prefix, cache, suffixes, keep=1):
        calls.append(len(suffixes))
        if len(suffixes) > 1:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, prefix, cache, suffixes, keep)

    monkeypatch.setattr(backend.Scorer, "forward_rows", flaky)
    # every prompt from the unit's common prefix (no group prefixes: that path's own test
    # is test_oom_backs_off_on_the_groups_path)
    monkeypatch.setattr(backend.model, "prefix_groups", lambda enc, start: [(start, [0])])
    ds = collect(tiny_prompts(), tiny_spec, progress=False, batch_size=4)
    assert 4 in calls and 2 in calls and calls[-1] == 1
    np.testing.assert_allclose(ds.pmf, base.pmf, atol=1e-5)
    assert ds.likert.attrs["models"]["tiny"]["oom_backoffs"] == 2

    def always(self, prefix, cache, suffixes, keep=1):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(backend.Scorer, "forward_rows", always)
    with pytest.raises(CollectionError, match="out of memory even on a batch of 1"):
        collect(tiny_prompts(1, 1), tiny_spec, progress=False)


def test_oom_backs_off_on_the_groups_path(monkeypatch, tiny_spec, base):
    """Prompts read from their groups' prefixes (the tree's reader): a pass of more than one
    row runs out of memory, the batch halves down to one prompt, the numbers are the same."""
    from xlikert.collect.backends import transformers as backend

    real = backend.Scorer.forward_on_cache
    calls = []

    def flaky(self, past, seen, n_real, rows, keep=1):
        calls.append(len(rows))
        if len(rows) > 1:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, past, seen, n_real, rows, keep)

    monkeypatch.setattr(backend.Scorer, "forward_on_cache", flaky)
    ds = collect(tiny_prompts(), tiny_spec, progress=False, batch_size=4)
    assert max(calls) > 1 and calls[-1] == 1
    np.testing.assert_allclose(ds.pmf, base.pmf, atol=1e-5)
    assert ds.likert.attrs["models"]["tiny"]["oom_backoffs"] >= 1


def test_unknown_device_is_a_clear_error(tiny_spec):
    with pytest.raises(CollectionError, match=r"unknown device 'tpu'"):
        collect(tiny_prompts(1, 1), tiny_spec, progress=False, device="tpu")


def test_tokenizer_without_digits(tmp_path):
    d = save_tiny(tmp_path / "nodigits", digits=False)
    with pytest.raises(CollectionError, match=r"no single-token surface form for scale value"):
        collect(tiny_prompts(1, 1), [{"name": "x", "source": str(d)}], progress=False)
    with pytest.raises(CollectionError, match=r"\[1, 2, 3, 4, 5, 6, 7\]"):
        find_valid_tokens(build_tokenizer(digits=False), range(1, 8))


def test_unwritable_output(tiny_spec, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CollectionError, match="cannot write output"):
        collect(tiny_prompts(1, 1), tiny_spec, blocker / "out.nc", progress=False)
    # the final write fails half-way: no file left looking complete
    out = tmp_path / "out.nc"

    def broken(self, path, *a, **k):
        Path(path).write_bytes(b"CDF\x01 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", broken)
    with pytest.raises(CollectionError, match="No space left"):
        collect(tiny_prompts(1, 1), tiny_spec, out, progress=False)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert (tmp_path / "out.nc.partial").is_dir()  # finished units kept for the rerun
    monkeypatch.undo()
    ds = collect(tiny_prompts(1, 1), tiny_spec, out, progress=False)
    assert out.exists() and not (tmp_path / "out.nc.partial").exists()
    assert ds.valid_mass.notnull().all()


def test_existing_output_from_other_config(tiny_spec, tmp_path):
    out = tmp_path / "r.nc"
    collect(tiny_prompts(1, 2), tiny_spec, out, progress=False)
    with pytest.raises(CollectionError, match="different run configuration"):
        collect(tiny_prompts(2, 2), tiny_spec, out, progress=False)
    ds = collect(tiny_prompts(2, 2), tiny_spec, out, progress=False, overwrite=True)
    assert ds.sizes["target"] == 2


def test_bad_arguments(tiny_spec):
    with pytest.raises(CollectionError, match="shard"):
        collect(tiny_prompts(1, 1), tiny_spec, shard="3/2", progress=False)
    with pytest.raises(CollectionError, match="lacks variable 'system'"):
        collect(tiny_prompts(1, 1).drop_vars("system"), tiny_spec, progress=False)
    with pytest.raises(CollectionError, match="unique"):
        collect(tiny_prompts(1, 1), tiny_spec * 2, progress=False)


def test_import_is_light():
    # numba (llvmlite) too: vLLM's CPU worker re-imports the user's script and crashes on it
    code = (
        "import sys, xlikert, xlikert.collect, xlikert.cli.collect; "
        "print(any(m in sys.modules for m in ('torch', 'transformers', 'numba', 'llvmlite')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cli_run(tiny_dir, tmp_path):
    from click.testing import CliRunner

    from xlikert.cli import main
    from xlikert.core.io import open_results

    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        '[experiment]\nname = "tinyexp"\ninstrument = "cetscale"\n\n'
        '[factors.target]\nlevels = ["USA", "France"]\n\n'
        f'[[models]]\nname = "tiny"\nsource = "{tiny_dir}"\n'
    )
    out = tmp_path / "r.nc"
    res = CliRunner().invoke(main, ["run", str(cfg), "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    ds = open_results(out)
    assert ds.pmf.sizes == {"model": 1, "target": 2, "item": 17, "score": 7}
    assert ds.attrs["experiment"] == "tinyexp" and "reverse_keyed" in ds.coords
    res = CliRunner().invoke(main, ["run", str(cfg), "-o", str(out), "--quiet"])  # no recompute
    assert res.exit_code == 0, res.output
    assert "already complete (34 prompts" in res.output and "wrote" not in res.output
    bad = tmp_path / "bad.toml"
    bad.write_text(cfg.read_text().replace(str(tiny_dir), "no-such-model"))
    res = CliRunner().invoke(main, ["run", str(bad), "-o", str(tmp_path / "b.nc"), "--quiet"])
    assert res.exit_code != 0 and "smollm2-135m-instruct" in res.output
    assert not (tmp_path / "b.nc").exists()


def test_vllm_backend_entry_errors_are_clear(tiny_dir):
    import importlib.util

    bad = [{"name": "m", "source": str(tiny_dir), "backend": "vllm", "tp": 2}]
    with pytest.raises(CollectionError, match=r"unknown field\(s\) \['tp'\] for the vllm"):
        collect(tiny_prompts(1, 1), bad, progress=False)
    with pytest.raises(CollectionError, match=r"unknown backend 'vlm'"):
        collect(tiny_prompts(1, 1), [{"name": "m", "source": "x/y", "backend": "vlm"}])
    if importlib.util.find_spec("vllm") is None:  # this suite's main environment
        spec = [{"name": "m", "source": str(tiny_dir), "backend": "vllm"}]
        with pytest.raises(CollectionError, match=r"backend 'vllm' needs vLLM"):
            collect(tiny_prompts(1, 1), spec, progress=False)


def test_an_untested_vllm_release_is_named():
    """The readout plugs into vLLM internals: a release it was not tested with warns."""
    import warnings

    from xlikert.collect.backends.vllm import model as backend

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backend._check_vllm_version("0.32.0+cpu")
        backend._check_vllm_version("0.32.4")
    for version in ("0.33.0", "0.11.2", "1.0.0", "nightly"):
        with pytest.warns(UserWarning, match=rf"vLLM {version} is not a release .*\(0\.32\)"):
            backend._check_vllm_version(version)


def test_vllm_runner_switch_is_set_only_while_the_engine_starts(monkeypatch):
    """vLLM reads the model-runner switch from the environment: it is set for the start
    of an engine, and the caller's environment is as it was afterwards, even on a failure."""
    import os

    from xlikert.collect.backends.vllm import model as backend

    var = backend.RUNNER_VARIABLE
    monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XLIKERT_TEST_KEPT", "1")
    with backend._environ({var: "0", "XLIKERT_TEST_KEPT": "2"}):
        assert os.environ[var] == "0" and os.environ["XLIKERT_TEST_KEPT"] == "2"
    assert var not in os.environ and os.environ["XLIKERT_TEST_KEPT"] == "1"
    with pytest.raises(RuntimeError), backend._environ({var: "0"}):
        raise RuntimeError("the engine did not start")
    assert var not in os.environ


@pytest.mark.parametrize(
    ("body", "guarded"),
    [
        ("from xlikert.collect import collect\ncollect(p, m)\n", False),
        ("def main():\n    pass\n\nif __name__ == '__main__':\n    main()\n", True),
        ("def main():\n    pass\n\nif '__main__' == __name__:\n    main()\n", True),
        ("if __name__ != '__main__':\n    pass\n", False),
    ],
)
def test_vllm_spawn_without_main_guard_is_named(tmp_path, monkeypatch, body, guarded):
    """vLLM spawns its engine: a script without the main guard runs collect again in the child."""
    import multiprocessing
    import types

    from xlikert.collect.backends.vllm import model as backend

    script = tmp_path / "run.py"
    script.write_text(body, encoding="utf-8")
    main_module = types.ModuleType("__main__")
    main_module.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main_module)
    # a spawned child runs the script as __mp_main__ (multiprocessing aliases the two)
    monkeypatch.setitem(sys.modules, "__mp_main__", main_module)
    assert backend.unguarded_main_script() == (None if guarded else str(script))
    # in the spawned child, still importing the script: stop at once, naming the fix
    spec = {"name": "m", "source": "smollm2-135m-instruct", "backend": "vllm"}
    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(CollectionError, match=r"inside a process that vLLM spawned.*run\.py.*"
                       r"if __name__ == \"__main__\":"):  # fmt: skip
        collect(tiny_prompts(1, 1), [spec], progress=False)
