"""Reasoning mode on tiny random-weight models: sampled traces, exact answers after them.

The estimator is checked against the analytic marginal on a model small enough to
enumerate every trace (22 tokens, traces of at most 2 tokens): this is a test of
an estimator, so it simulates; the answer PMF after a fixed trace is checked
against an independent forward pass, exactly.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch
from support.tiny import (
    kill_then_resume,
    nucleus,
    save_micro,
    save_tiny,
    tiny_prompts,
)

import xlikert as xl
from xlikert.collect import collect, merge_shards
from xlikert.collect.reasoning import (
    COT_INSTRUCTION,
    COT_PREFILL,
    check_reasoning,
    trace_seed,
    trace_texts,
)
from xlikert.core.codecs import decode_text
from xlikert.core.errors import CollectionError, XlikertError

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def micro_dir(tmp_path_factory) -> Path:
    return save_micro(tmp_path_factory.mktemp("micro") / "model")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


@functools.lru_cache(maxsize=4)
def _load(model_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    return tok, model


def next_probs(model_dir: Path, rows: list[list[int]]) -> np.ndarray:
    """Full-vocabulary next-token probabilities after each row of ids (float64),
    rows of one length at a time, no padding, no cache: a plain forward pass."""
    _, model = _load(model_dir)
    out = np.zeros((len(rows), model.config.vocab_size))
    by_len: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        by_len.setdefault(len(r), []).append(i)
    with torch.no_grad():
        for idx in by_len.values():
            x = torch.tensor([rows[i] for i in idx])
            logits = model(x).logits[:, -1].double()
            out[idx] = torch.softmax(logits, -1).numpy()
    return out


def answer_pmfs(model_dir: Path, contexts: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Renormalised answer PMF and valid mass after each context, the rule written plainly:
    the digit token, or the space token then the digit token."""
    tok, _ = _load(model_dir)
    vocab = tok.get_vocab()
    digit = [vocab[str(y)] for y in range(1, 8)]
    space = vocab[" "]
    q0 = next_probs(model_dir, contexts)
    q1 = next_probs(model_dir, [[*c, space] for c in contexts])
    mass = q0[:, digit] + q0[:, [space]] * q1[:, digit]
    return mass / mass.sum(1, keepdims=True), mass.sum(1)


def enumerate_traces(model_dir, prompt_ids, marker, after, forced, temp=1.0, top_p=1.0):
    """Every trace of at most 2 tokens with its probability, closed by the rule:
    ended by end-of-turn (dropped) or cut at 2 tokens -> ``forced``; the marker -> ``after``."""
    tok, _ = _load(model_dir)
    eos = tok.eos_token_id
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    after_ids, forced_ids = enc(after), enc(forced)
    V = len(tok)
    p1 = nucleus(next_probs(model_dir, [prompt_ids])[0][:V], temp, top_p)
    firsts = [t for t in range(V) if p1[t] > 0 and t != eos and t != marker]
    p2s = next_probs(model_dir, [[*prompt_ids, t] for t in firsts])
    out = []  # (weight, trace ids, closing ids, truncated)
    if p1[eos] > 0:
        out.append((p1[eos], [], forced_ids, False))
    if p1[marker] > 0:
        out.append((p1[marker], [marker], after_ids, False))
    for t1, p2 in zip(firsts, p2s, strict=True):
        p2 = nucleus(p2[:V], temp, top_p)
        for t2 in np.flatnonzero(p2 > 0):
            t2 = int(t2)
            w = p1[t1] * p2[t2]
            if t2 == eos:
                out.append((w, [t1], forced_ids, False))
            elif t2 == marker:
                out.append((w, [t1, t2], after_ids, False))
            else:
                out.append((w, [t1, t2], forced_ids, True))
    return out


def one_prompt():
    return tiny_prompts(1, 1)


@pytest.mark.parametrize(
    ("framing", "temp", "top_p"),
    [("thinking", 1.0, 1.0), ("cot", 1.0, 1.0), ("thinking", 0.7, 0.9)],
    ids=["thinking", "cot", "thinking-T0.7-p0.9"],
)
def test_estimator_is_unbiased_for_the_enumerated_marginal(micro_dir, framing, temp, top_p):
    """The mean over many traces of the exact answer PMFs equals the analytic marginal
    sum over every trace of P(trace) x PMF(answer | trace), within the stated SE; the
    stored SE is the analytic one; the first traces replay from their seeds alone and
    their PMF equals an independent forward pass."""
    n = 600
    r = {"traces": n, "max_new_tokens": 2, "seed": 7, "framing": framing,
         "temperature": temp, "top_p": top_p}  # fmt: skip
    spec = [{"name": "m", "source": str(micro_dir), "reasoning": r}]
    ds = collect(one_prompt(), spec, progress=False, batch_size=256)
    cell = ds.isel(model=0, target=0, item=0)
    tok, _ = _load(micro_dir)
    vocab = tok.get_vocab()
    text = str(cell.prompt_text.values)
    info = ds.likert.attrs["models"]["m"]["reasoning_format"]
    if framing == "thinking":
        assert text.endswith("<|assistant|>")  # enable_thinking=True: the model opens it
        assert info == {"framing": "thinking", "end_marker": "</think>",
                        "closing_after_marker": "\n\n", "closing_forced": "\n</think>\n\n"}  # fmt: skip
    else:  # thinking off (enable_thinking=False) plus the chain-of-thought framing
        assert COT_INSTRUCTION in text and text.endswith("<think>\n\n</think>\n\n" + COT_PREFILL)
        assert (info["end_marker"], info["closing_forced"]) == ("Answer:", "\nAnswer:")
    prompt_ids = tok(text, add_special_tokens=False)["input_ids"]
    marker = vocab[info["end_marker"]]
    traces = enumerate_traces(micro_dir, prompt_ids, marker, info["closing_after_marker"],
                              info["closing_forced"], temp, top_p)  # fmt: skip
    w = np.array([t[0] for t in traces])
    assert abs(w.sum() - 1) < 1e-9
    pmfs, vm = answer_pmfs(micro_dir, [prompt_ids + t[1] + t[2] for t in traces])
    marginal = w @ pmfs
    var = w @ pmfs**2 - marginal**2  # variance of one trace's PMF: the M = 1 estimator
    se = np.sqrt(var / n)
    got = cell.pmf.values
    assert np.all(np.abs(got - marginal) <= 4.5 * se), (got, marginal, se)
    np.testing.assert_allclose(cell.pmf_se.values, se, rtol=0.25)
    assert abs(float(cell.valid_mass) - w @ vm) <= 4.5 * np.sqrt((w @ vm**2 - (w @ vm) ** 2) / n)
    np.testing.assert_allclose(got, cell.trace_pmf.mean("trace"), atol=1e-12)
    trunc = w @ np.array([t[3] for t in traces])
    assert abs(float((cell.trace_truncated == 1).mean()) - trunc) < 4.5 * np.sqrt(trunc / n)

    # replay the first traces from their seeds alone (numpy PCG64, inverse CDF of a plain
    # softmax + nucleus) and read their answer with an independent forward pass
    eos = tok.eos_token_id
    for k in range(20):
        seed = trace_seed(7, text, k)
        assert int(cell.trace_seed[k]) == seed
        rng = np.random.Generator(np.random.PCG64(seed))
        ids: list[int] = []
        end = "length"
        for _ in range(2):
            q = nucleus(next_probs(micro_dir, [prompt_ids + ids])[0], temp, top_p)
            t = int(np.searchsorted(np.cumsum(q), rng.random() * q.sum(), side="right"))
            if t == eos:
                end = "eos"
                break
            ids.append(t)
            if t == marker:
                end = "marker"
                break
        assert decode_text(str(cell.trace_text[k].values)) == tok.decode(ids)
        assert int(cell.trace_truncated[k]) == (end == "length")
        assert int(cell.trace_length[k]) == len(ids) + (end == "eos")
        closing = info["closing_after_marker"] if end == "marker" else info["closing_forced"]
        ctx = prompt_ids + ids + tok(closing, add_special_tokens=False)["input_ids"]
        p, m = answer_pmfs(micro_dir, [ctx])
        np.testing.assert_allclose(cell.trace_pmf[k].values, p[0], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(float(cell.trace_valid_mass[k]), m[0], rtol=1e-6)


def test_variance_is_at_most_that_of_sampling_the_answer(micro_dir):
    """Per trace, the exact PMF vs one answer drawn from it (what a sampler of the whole
    response would return): the Rao-Blackwell estimator's variance is the variance of the
    conditional PMF, at most that of the drawn answer, analytically and as measured."""
    n = 600
    spec = [{"name": "m", "source": str(micro_dir),
             "reasoning": {"traces": n, "max_new_tokens": 2, "seed": 3}}]  # fmt: skip
    ds = collect(one_prompt(), spec, progress=False, batch_size=256)
    cell = ds.isel(model=0, target=0, item=0)
    tok, _ = _load(micro_dir)
    text = str(cell.prompt_text.values)
    prompt_ids = tok(text, add_special_tokens=False)["input_ids"]
    info = ds.likert.attrs["models"]["m"]["reasoning_format"]
    traces = enumerate_traces(micro_dir, prompt_ids, tok.get_vocab()["</think>"],
                              info["closing_after_marker"], info["closing_forced"])  # fmt: skip
    w = np.array([t[0] for t in traces])
    pmfs, _ = answer_pmfs(micro_dir, [prompt_ids + t[1] + t[2] for t in traces])
    y = np.arange(1, 8.0)
    marginal = w @ pmfs
    # analytic: per score and for the mean answer
    var_rb = w @ pmfs**2 - marginal**2
    var_answer = marginal * (1 - marginal)
    assert np.all(var_rb <= var_answer) and np.all(var_answer - var_rb > 1e-3)
    mu = pmfs @ y
    vmean_rb = w @ mu**2 - (w @ mu) ** 2
    vmean_answer = marginal @ y**2 - (marginal @ y) ** 2
    assert vmean_rb < 0.5 * vmean_answer  # a random model: most variance is the answer's own
    # measured on the same traces: one answer drawn per trace from its exact PMF
    tp = cell.trace_pmf.values
    c = np.cumsum(tp, -1)
    drawn = (c <= np.random.default_rng(0).random(n)[:, None] * c[:, -1:]).sum(-1)
    onehot = np.eye(7)[drawn]
    emp_rb, emp_answer = tp.var(0, ddof=1), onehot.var(0, ddof=1)
    assert np.all(emp_rb < emp_answer)
    np.testing.assert_allclose(emp_rb, var_rb, rtol=0.3)
    np.testing.assert_allclose(emp_answer, var_answer, rtol=0.3)
    np.testing.assert_allclose((tp @ y).var(ddof=1), vmean_rb, rtol=0.3)
    np.testing.assert_allclose(y[drawn].var(ddof=1), vmean_answer, rtol=0.3)


def test_sample_tokens_inverts_the_cdf_of_the_decoding_rule():
    """The sampler's draw is the inverse CDF of nucleus_logprobs over the vocabulary in
    vocabulary order, for top_p = 1 (its own shorter path) and top_p < 1 alike; a masked
    (-inf) tail is never drawn."""
    from xlikert.collect.reasoning import sample_tokens
    from xlikert.kernels.readout import nucleus_logprobs

    rng = np.random.default_rng(4)
    z = rng.normal(scale=3.0, size=(8, 3000))
    z[:, -50:] = -np.inf
    for temp, top_p in ((1.0, 1.0), (0.7, 1.0), (1.3, 0.9)):
        q = np.exp(nucleus_logprobs(z, np.arange(z.shape[1]), [temp], [top_p])[:, 0, 0])
        for u in (rng.random(8), np.full(8, 1 - 1e-16), np.zeros(8)):
            c = np.cumsum(q, -1)
            last = z.shape[1] - 1 - np.argmax((q > 0)[:, ::-1], axis=-1)
            want = np.minimum((c <= u[:, None] * c[:, -1:]).sum(-1), last)
            assert (want < z.shape[1] - 50).all()
            np.testing.assert_array_equal(sample_tokens(z, u, temp, top_p), want)


# ----------------------------------------------------------------------------- the file
@pytest.fixture(scope="module")
def mixed(tiny_dir) -> xr.Dataset:
    """An exact model and two reasoning models (2 and 3 traces) in one run."""
    return collect(tiny_prompts(2, 3), _mixed_specs(tiny_dir), progress=False, batch_size=4)


def _mixed_specs(tiny_dir):
    r = {"max_new_tokens": 5, "seed": 1}
    return [
        {"name": "off", "source": str(tiny_dir)},
        {"name": "on2", "source": str(tiny_dir), "reasoning": {**r, "traces": 2}},
        {"name": "on3", "source": str(tiny_dir), "reasoning": {**r, "traces": 3}},
    ]


def test_results_file_layout(mixed, tmp_path):
    ds = mixed
    assert ds.sizes["trace"] == 3 and list(ds.trace.values) == [0, 1, 2]
    assert ds.likert.attrs["reasoning_models"] == ["on2", "on3"]
    assert "carry Monte Carlo error" in ds.attrs["sampling_error"]
    assert "pmf_se" in ds.attrs["sampling_error"] and "reasoning_rule" in ds.attrs
    assert ds.trace_pmf.dims == ("model", "target", "item", "trace", "score")
    off, on2, on3 = (ds.sel(model=m) for m in ("off", "on2", "on3"))
    # the exact model: pmf_se 0, no traces; its numbers equal a run without reasoning models
    assert (off.pmf_se == 0).all() and off.trace_pmf.isnull().all()
    assert (off.trace_truncated == -1).all() and (off.trace_seed == -1).all()
    assert (off.trace_text == "").all()
    alone = collect(tiny_prompts(2, 3), _mixed_specs(ds.likert.attrs["models"]["off"]["source"])[:1],
                    progress=False, batch_size=4)  # fmt: skip
    np.testing.assert_allclose(off.pmf, alone.pmf.isel(model=0), atol=1e-6)
    assert "pmf_se" not in alone and "trace" not in alone.dims
    # two traces in a file of three: the third is fill
    assert on2.trace_pmf.isel(trace=2).isnull().all() and (on2.trace_seed.isel(trace=2) == -1).all()
    assert on2.trace_pmf.isel(trace=slice(2)).notnull().all()
    for cell in (on2, on3):
        m = int(cell.trace_pmf.notnull().all("score").sum("trace").max())
        tp = cell.trace_pmf.isel(trace=slice(m))
        np.testing.assert_allclose(cell.pmf, tp.mean("trace"), atol=1e-12)
        np.testing.assert_allclose(cell.pmf_se, tp.std("trace", ddof=1) / np.sqrt(m), atol=1e-12)
        np.testing.assert_allclose(
            cell.valid_mass, cell.trace_valid_mass.isel(trace=slice(m)).mean("trace"), atol=1e-12
        )
        np.testing.assert_allclose(cell.pmf.sum("score"), 1, atol=1e-12)
        assert (cell.topk_token == "").all()
    # thinking off and the chain-of-thought framing: the reasoning prompt holds the instruction
    assert str(on2.prompt_text.values[0, 0]).endswith(COT_PREFILL)
    assert COT_INSTRUCTION not in str(off.prompt_text.values[0, 0])
    # compressed text round-trips through netCDF, ints stay ints
    path = tmp_path / "r.nc"
    xl.to_netcdf(ds, path)
    back = xl.open_results(path)
    assert back.trace_truncated.dtype == np.int8 and back.trace_seed.dtype == np.int64
    xr.testing.assert_equal(trace_texts(back), trace_texts(ds))
    texts = trace_texts(back).sel(model="on3").values.ravel()
    assert all(isinstance(t, str) and t for t in texts)
    np.testing.assert_array_equal(back.trace_seed, ds.trace_seed)
    info = back.likert.attrs["models"]["on3"]
    assert info["reasoning"]["traces"] == 3 and info["reasoning_format"]["framing"] == "cot"
    assert "reasoning" not in back.likert.attrs["models"]["off"]


def test_batching_and_units_do_not_change_the_traces(tiny_dir):
    spec = [{"name": "r", "source": str(tiny_dir),
             "reasoning": {"traces": 3, "max_new_tokens": 6, "seed": 5}}]  # fmt: skip
    a = collect(tiny_prompts(2, 3), spec, progress=False, batch_size=1, chunk_size=1)
    b = collect(tiny_prompts(2, 3), spec, progress=False, batch_size=16, chunk_size=6,
                prefix_cache=False)  # fmt: skip
    np.testing.assert_array_equal(a.trace_text, b.trace_text)
    np.testing.assert_array_equal(a.trace_seed, b.trace_seed)
    for v in ("trace_pmf", "trace_valid_mass", "pmf", "pmf_se", "decoding_pmf"):
        np.testing.assert_allclose(a[v], b[v], atol=1e-6, rtol=0, err_msg=v)
    # another seed: other traces
    other = collect(tiny_prompts(2, 3), [{**spec[0], "reasoning": {**spec[0]["reasoning"],
                                                                   "seed": 6}}], progress=False)  # fmt: skip
    assert (other.trace_text != a.trace_text).any()
    assert other.attrs["xlikert_fingerprint"] != a.attrs["xlikert_fingerprint"]


def test_trace_read_is_checked_even_after_the_prefix_was(tiny_dir):
    """The answer read on a trace's sampling cache is its own cached path: a loaded
    model whose prefix cache an exact run already checked still checks it, once."""
    from xlikert.collect.backends.transformers import LocalModel, load_model

    lm = load_model(str(tiny_dir), range(1, 8))
    uncached = []
    lm.model.register_forward_pre_hook(
        lambda m, a, kw: uncached.append(not kw["use_cache"]), with_kwargs=True
    )
    reasoning = {"traces": 2, "max_new_tokens": 4, "seed": 1}

    def run(spec):
        return collect(tiny_prompts(1, 3), [{"name": "r", "source": str(tiny_dir), **spec}],
                       progress=False,
                       loader=lambda s, o, probe=None: LocalModel(lm, o, check_reasoning(s)))  # fmt: skip

    run({})
    assert sum(uncached) == 1 and lm.cache_checked == {"prefix"}
    uncached.clear()
    first = run({"reasoning": reasoning})
    assert sum(uncached) == 1  # the trace read's own check
    assert lm.cache_checked == {"prefix", "trace read"}
    uncached.clear()
    again = run({"reasoning": reasoning})
    assert sum(uncached) == 0
    np.testing.assert_array_equal(again.trace_pmf, first.trace_pmf)
    plain = collect(tiny_prompts(1, 3), [{"name": "r", "source": str(tiny_dir),
                                          "reasoning": reasoning}],
                    progress=False, prefix_cache=False)  # fmt: skip
    np.testing.assert_array_equal(first.trace_text, plain.trace_text)
    np.testing.assert_allclose(first.trace_pmf, plain.trace_pmf, atol=1e-5, rtol=0)


def test_shards_merge_with_traces(tiny_dir, tmp_path, mixed):
    kw = {"progress": False, "batch_size": 4, "chunk_size": 2}
    p1, p2 = tmp_path / "s1.nc", tmp_path / "s2.nc"
    specs = _mixed_specs(tiny_dir)
    collect(tiny_prompts(2, 3), specs, p1, shard="1/2", **kw)
    collect(tiny_prompts(2, 3), specs, p2, shard="2/2", **kw)
    merged = merge_shards([p1, p2])
    full = collect(tiny_prompts(2, 3), specs, **kw)
    for v in ("pmf", "pmf_se", "trace_pmf", "trace_truncated", "trace_seed", "trace_length"):
        np.testing.assert_allclose(merged[v], full[v], atol=1e-6, err_msg=v)
    np.testing.assert_array_equal(merged.trace_text, full.trace_text)
    assert merged.trace_truncated.dtype == np.int8


def test_resume_after_sigkill_equals_clean_run(tiny_dir, tmp_path):
    a, b, n_done, _ = kill_then_resume(tiny_dir, tmp_path, "reasoning", glob="m001-u*.npz", units=2)
    assert 2 <= n_done < 8  # interrupted inside the reasoning model (8 units)
    assert "trace_text" in a and a.sizes["trace"] == 2
    xr.testing.assert_identical(a, b)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("reasoning", "match"),
    [
        ({"traces": 2, "max_tokens": 3}, r"unknown key\(s\) \['max_tokens'\] in reasoning"),
        ({"traces": 0}, r"reasoning.traces must be an integer >= 1, got 0"),
        ({"traces": True}, r"reasoning.traces must be an integer >= 1, got True"),
        ({"traces": 2.5}, r"reasoning.traces must be an integer >= 1"),
        ({"max_new_tokens": 0}, r"reasoning.max_new_tokens must be an integer >= 1, got 0"),
        ({"seed": "0"}, r"reasoning.seed must be an integer, got '0'"),
        ({"temperature": 0}, r"reasoning.temperature must be a number > 0"),
        ({"top_p": 1.5}, r"reasoning.top_p must be a number in \(0, 1\]"),
        ({"framing": "fast"}, r"reasoning.framing must be one of \['auto', 'thinking', 'cot'\]"),
        ({"instruction": " "}, r"reasoning.instruction must be a non-empty string"),
        ([8, 256], r"reasoning must be a table"),
    ],
)
def test_bad_reasoning_entries(tiny_dir, tmp_path, reasoning, match):
    spec = [{"name": "m", "source": str(tiny_dir), "reasoning": reasoning}]
    with pytest.raises(CollectionError, match=match):
        collect(tiny_prompts(1, 1), spec, tmp_path / "r.nc", progress=False)
    assert not list(tmp_path.iterdir())  # refused before anything runs


def test_reasoning_table_defaults_and_fingerprint():
    a = check_reasoning({"name": "m", "reasoning": {"traces": 8}})
    b = check_reasoning({"name": "m", "reasoning": {"traces": 8, "seed": 0, "top_p": 1}})
    assert a == b and a["max_new_tokens"] == 256 and a["temperature"] == 1.0
    assert check_reasoning({"name": "m"}) is None


def test_framing_thinking_needs_a_thinking_template(tiny_dir):
    spec = [{"name": "m", "source": str(tiny_dir), "reasoning": {"framing": "thinking"}}]
    with pytest.raises(CollectionError, match=r"no thinking .* use framing = 'cot'"):
        collect(tiny_prompts(1, 1), spec, progress=False)


def test_thinking_switch_is_off_without_reasoning(micro_dir):
    ds = collect(one_prompt(), [{"name": "m", "source": str(micro_dir)}], progress=False)
    assert str(ds.prompt_text.values.ravel()[0]).endswith("<|assistant|><think>\n\n</think>\n\n")
    assert "enable_thinking=False" in ds.likert.attrs["models"]["m"]["prompt_template"]


def test_other_backends_refuse_reasoning(tiny_dir):
    entry = {"reasoning": {"traces": 2}}
    with pytest.raises(CollectionError, match=r"reasoning mode .* openai backend"):
        collect(tiny_prompts(1, 1), [{"name": "m", "source": "openai:gpt-x", **entry}],
                progress=False)  # fmt: skip


# ----------------------------------------------------------------------------- analysis
def test_composite_and_decompose_take_a_reasoning_file(mixed):
    comp = xl.composite(mixed)
    assert comp.dims == ("model", "target", "score")
    np.testing.assert_allclose(comp.sum("score"), 1, atol=1e-12)
    dec = xl.decompose(mixed)
    assert sorted(dec.children) == ["grand", "model", "model:target", "target"]


def test_trace_se_is_the_jackknife_over_traces(mixed):
    one = mixed.sel(model=["off", "on3"])
    se = xl.trace_se(one, lambda p: p)  # a linear summary: the jackknife is exact
    np.testing.assert_allclose(se.sel(model="on3"), one.pmf_se.sel(model="on3"), atol=1e-12)
    assert (se.sel(model="off") == 0).all()
    # the composite mean: sample SD over traces of the per-trace composite means / sqrt(M)
    e = lambda p: xl.summarize(xl.composite(p), dim="score")["E"]  # noqa: E731
    se_e = xl.trace_se(one, e)
    tp = one.trace_pmf.sel(model="on3")
    m = (tp * tp.score).sum("score")
    # the composite reflects the reverse-keyed item (y -> y_min + y_max - y) before summing
    m = xr.where(tp.reverse_keyed, int(tp.score.min() + tp.score.max()) - m, m)
    per_trace = m.sum("item")
    np.testing.assert_allclose(
        se_e.sel(model="on3"), per_trace.std("trace", ddof=1) / np.sqrt(3), rtol=1e-9
    )
    # a whole decomposition: every summary gets its SE, same shape as the table
    table = lambda p: xl.summary_table(xl.decompose(p))  # noqa: E731
    t = xl.trace_se(one, table)
    base = table(one)
    assert list(t.columns) == list(base.columns) and (t["level"] == base["level"]).all()
    assert (t["E"].iloc[1:] > 0).all()
    with pytest.raises(XlikertError, match=r"different numbers of traces.*on2: 2.*on3: 3"):
        xl.trace_se(mixed, lambda p: p)
    with pytest.raises(XlikertError, match="no 'trace_pmf'"):
        xl.trace_se(mixed.drop_vars("trace_pmf"), lambda p: p)


def test_report_shows_trace_se_and_thinking_off(mixed, tmp_path):
    from xlikert.report import write_report

    ds = mixed.sel(model=["off", "on3"])
    write_report(ds, tmp_path / "rep", figures=False)
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Reasoning traces" in md
    assert "on3" in md and "thinking off" in md
    tables = tmp_path / "rep" / "tables"
    comp = (tables / "reasoning_composite.csv").read_text()
    assert "SE" in comp and "on3" in comp
    assert (tables / "reasoning_vs_thinking_off.csv").exists()
    assert (tables / "reasoning_effects.csv").exists()


@pytest.mark.parametrize("framing", ["thinking", "cot"])
def test_every_trace_pmf_recomputes_from_the_files_token_ids(micro_dir, tmp_path, framing):
    """The file alone (plain xarray, no xlikert code but read_sequence) gives the ids the
    model read; one plain forward pass over them gives every stored trace PMF."""
    from xlikert.collect import read_sequence
    from xlikert.collect.reasoning import ReasoningFormat

    r = {"traces": 3, "max_new_tokens": 3, "seed": 5, "framing": framing}
    spec = [{"name": "m", "source": str(micro_dir), "reasoning": r}]
    out = tmp_path / "r.nc"
    collect(tiny_prompts(2, 2), spec, out, progress=False)
    ds = xr.load_dataset(out)
    tok, _ = _load(micro_dir)
    info = xl.core.io.read_attrs(ds)["models"]["m"]["reasoning_format"]
    fmt = ReasoningFormat(info["framing"], info["end_marker"], info["closing_after_marker"],
                          info["closing_forced"], "")  # fmt: skip
    contexts, want, valid = [], [], []
    for target in ds.target.values:
        for item in ds.item.values:
            cell = ds.sel(model="m", target=target, item=item)
            prompt = read_sequence(ds, model="m", target=target, item=item).ids
            # the prompt's ids are the tokenised prompt_text
            assert prompt.tolist() == tok(str(cell.prompt_text.values),
                                          add_special_tokens=False)["input_ids"]  # fmt: skip
            for k in range(3):
                seq = read_sequence(ds, model="m", target=target, item=item, trace=k)
                assert seq.prompt.tolist() == prompt.tolist()
                text = decode_text(str(cell.trace_text.isel(trace=k).values))
                assert tok.decode(seq.trace, skip_special_tokens=False) == text
                wrote = text.endswith(info["end_marker"])
                assert seq.closing.tolist() == fmt.closing_ids(tok)[wrote]
                contexts.append(seq.ids.tolist())
                want.append(cell.trace_pmf.isel(trace=k).values)
                valid.append(float(cell.trace_valid_mass.isel(trace=k)))
    pmfs, vm = answer_pmfs(micro_dir, contexts)
    np.testing.assert_allclose(np.array(want), pmfs, atol=1e-5, rtol=0)
    np.testing.assert_allclose(valid, vm, rtol=1e-5)
    with pytest.raises(CollectionError, match=r"needs one level of each of \['item'\]"):
        read_sequence(ds, model="m", target=ds.target.values[0], trace=0)
    with pytest.raises(CollectionError, match="trace 3 out of range"):
        read_sequence(ds, model="m", target=ds.target.values[0], item="1", trace=3)
