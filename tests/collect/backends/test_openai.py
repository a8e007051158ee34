"""OpenAI-compatible server backend against a loopback server answering from a tiny model."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.fake_server import FakeServer
from support.tiny import save_tiny, tiny_prompts

from xlikert.collect import collect
from xlikert.core.errors import CollectionError

KEY = "sk-xlikert-test-DO-NOT-STORE-4242"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("srv") / "model", seed=1)


@pytest.fixture(scope="module")
def local(tiny_dir):
    # servers apply the one-token rule (they cannot condition on an appended space token)
    return collect(
        tiny_prompts(2, 3),
        [{"name": "m", "source": str(tiny_dir)}],
        progress=False,
        split_space=False,
    )


@pytest.fixture
def server(tiny_dir):
    made = []

    def make(**kw):
        made.append(FakeServer(tiny_dir, **kw))
        return made[-1]

    yield make
    for s in made:
        s.close()


def spec(srv, tiny_dir=None, **kw):
    out = {
        "name": "m",
        "source": "openai:tiny",
        "base_url": srv.url if hasattr(srv, "url") else srv,
        "api_key_env": "XLK_TEST_KEY",
        "backoff": 0.01,
        "max_retries": 6,
        "concurrency": 3,
        "timeout": 30,
    }
    if tiny_dir is not None:
        out["tokenizer"] = str(tiny_dir)
    out.update(kw)
    return [out]


def test_exact_mode_equals_local_backend_and_key_never_written(
    server, tiny_dir, local, tmp_path, monkeypatch
):
    monkeypatch.setenv("XLK_TEST_KEY", KEY)
    srv = server(key=KEY)
    out = tmp_path / "srv.nc"
    partial = tmp_path / "srv.nc.partial"
    scanned = []

    def scan(done, total):  # the key is in no file of the resumable state
        for f in partial.rglob("*"):
            if f.is_file():
                assert KEY.encode() not in f.read_bytes(), f
                scanned.append(f.name)

    ds = collect(
        tiny_prompts(2, 3), spec(srv, tiny_dir), out, progress=False, chunk_size=2, on_unit=scan
    )
    assert scanned and any(n.endswith(".npz") for n in scanned)
    assert KEY.encode() not in out.read_bytes()
    assert srv.seen_auth == {f"Bearer {KEY}"}
    for v in ("pmf", "valid_mass", "topk_logprob"):
        np.testing.assert_allclose(ds[v], local[v], atol=1e-6, rtol=1e-6, err_msg=v)
    assert (ds.topk_token == local.topk_token).all()
    assert ds.likert.attrs["models"]["m"]["answers"].startswith("one token:")
    assert "pmf_lower" not in ds
    t1 = ds.decoding_pmf.sel(temperature=1.0)
    known = t1.notnull()
    assert bool(known.sel(top_p=1.0).all())
    np.testing.assert_allclose(
        t1.where(known), local.decoding_pmf.sel(temperature=1.0).where(known), atol=1e-6
    )
    assert bool(ds.decoding_valid_mass.sel(temperature=0.5).isnull().all())
    # a long top-k list holds the whole nucleus for top_p < 1 at temperature 1
    wide = collect(tiny_prompts(2, 3), spec(srv, tiny_dir), progress=False, top_k=80)
    t1 = wide.decoding_pmf.sel(temperature=1.0)
    known = t1.notnull().all("score")
    assert int(known.sum()) > int(known.sel(top_p=1.0).sum())
    ref = local.decoding_pmf.sel(temperature=1.0)
    np.testing.assert_allclose(t1.where(known), ref.where(known), atol=1e-6)
    np.testing.assert_allclose(
        wide.decoding_valid_mass.sel(temperature=1.0).where(known),
        local.decoding_valid_mass.sel(temperature=1.0).where(known),
        atol=1e-6,
    )
    info = ds.likert.attrs["models"]["m"]
    assert info["mode"] == "exact" and info["server"] == srv.url
    # GET /models, the probe, then two requests per prompt: the listing and the valid ids
    assert info["http_requests_last_session"] == 2 + 2 * 6
    assert info["served_model"] == "tiny" and info["api_key_env"] == "XLK_TEST_KEY"
    assert KEY not in str(ds.attrs)


@pytest.mark.parametrize("variant", ["ignores-extensions", "rejects-extensions-no-tokenizer"])
def test_topk_mode_intervals_hold_the_truth(server, tiny_dir, local, variant):
    if variant == "ignores-extensions":
        srv, tok = server(ids=False), tiny_dir
    else:
        srv, tok = server(reject_extras=True), None
    ds = collect(tiny_prompts(2, 3), spec(srv, tok), progress=False, top_k=4)
    assert ds.likert.attrs["models"]["m"]["mode"] == "topk" and "bounds_rule" in ds.attrs
    lo, hi = ds.pmf_lower, ds.pmf_upper
    eps = 1e-9
    assert bool((lo - eps <= local.pmf).all()) and bool((local.pmf <= hi + eps).all())
    assert bool((ds.valid_mass_lower - eps <= local.valid_mass).all())
    assert bool((local.valid_mass <= ds.valid_mass_upper + eps).all())
    ok = ds.pmf.notnull()
    assert bool(((lo - eps <= ds.pmf) & (ds.pmf <= hi + eps)).where(ok, True).all())
    assert float((hi - lo).max()) > 1e-3  # really bounded, not exact
    # observed, not imputed: the lower bound is the observed mass, less the server's round-off
    rtol = ds.likert.attrs["models"]["m"]["logprob_rtol"]
    assert rtol == 2e-4 and "rtol" in ds.attrs["bounds_rule"]
    np.testing.assert_allclose(ds.valid_mass * (1 - rtol), ds.valid_mass_lower)
    assert bool((ds.topk_logprob.isel(rank=slice(0, 4)) <= 0).all())


def test_a_padded_listing_is_refused_not_certified(server, tiny_dir, tmp_path):
    # vLLM answers a top-k request batched with a logprob_token_ids request with the
    # sampled token and -9999 padding: bounds from it would not hold, so it is refused
    srv = server(padded=True)
    with pytest.raises(CollectionError, match=r"padding.*logprob_token_ids"):
        collect(tiny_prompts(2, 3), spec(srv, tiny_dir), tmp_path / "o.nc", progress=False)


def test_retries_429_and_dropped_connections(server, tiny_dir, local, tmp_path):
    srv = server(fail_every=3, drop_every=5)
    # almost half the requests fail: a request may fail several times in a row
    s = spec(srv, tiny_dir, max_retries=40, backoff=0.001)
    ds = collect(tiny_prompts(2, 3), s, tmp_path / "f.nc", progress=False)
    np.testing.assert_allclose(ds.pmf, local.pmf, atol=1e-6)
    assert ds.likert.attrs["models"]["m"]["http_retries_last_session"] > 0
    assert bool(ds.valid_mass.notnull().all())


def test_retry_after_as_an_http_date_is_honoured(server, tiny_dir, local, monkeypatch):
    import email.utils
    import time

    # a Retry-After may be an HTTP date as well as seconds (RFC 9110, 10.2.3)
    srv = server(
        fail_every=4, retry_after=lambda: email.utils.formatdate(time.time() + 20, usegmt=True)
    )
    waits = []
    monkeypatch.setattr(time, "sleep", waits.append)
    ds = collect(tiny_prompts(2, 3), spec(srv, tiny_dir), progress=False)
    np.testing.assert_allclose(ds.pmf, local.pmf, atol=1e-6)
    assert waits and all(18 <= w <= 22 for w in waits), waits


def test_server_failing_mid_run_resumes_without_loss(server, tiny_dir, local, tmp_path):
    out = tmp_path / "r.nc"
    bad = server(break_after=8)
    with pytest.raises(CollectionError, match="503"):
        collect(
            tiny_prompts(2, 3), spec(bad, tiny_dir, max_retries=2), out, progress=False,
            chunk_size=1,
        )  # fmt: skip
    saved = list((tmp_path / "r.nc.partial").glob("m*-u*.npz"))
    assert 0 < len(saved) < 6 and not out.exists()
    # same configuration, other transport settings (retries, concurrency, timeout): resumes
    s = spec(bad, tiny_dir, max_retries=5, concurrency=1, timeout=10)
    bad.break_after = 0
    before = bad.count
    ds = collect(tiny_prompts(2, 3), s, out, progress=False, chunk_size=1)
    assert bad.count - before < 2 * 6  # only the missing cells (+ checks) were asked again
    np.testing.assert_allclose(ds.pmf, local.pmf, atol=1e-6)


def test_base_url_query_goes_with_every_request_and_is_not_recorded(server, tiny_dir):
    srv = server()
    s = spec(f"{srv.url}?api-version=2024-10-21", tiny_dir)
    ds = collect(tiny_prompts(1, 2), s, progress=False)
    assert srv.queries == {"api-version=2024-10-21"}
    assert "api-version" not in json.dumps(ds.attrs, default=str)


def test_bad_input(server, tiny_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("XLK_TEST_KEY", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "x.nc"
    with pytest.raises(CollectionError, match=r"cannot reach server http://127\.0\.0\.1"):
        collect(
            tiny_prompts(1, 1), spec(f"http://127.0.0.1:{port}/v1", max_retries=1), out,
            progress=False,
        )  # fmt: skip
    assert not out.exists()
    srv = server()
    with pytest.raises(CollectionError, match=r"does not serve model 'nope'.*\['tiny'\]"):
        collect(tiny_prompts(1, 1), spec(srv, source="openai:nope"), progress=False)
    bare = server(models_endpoint=False)
    with pytest.raises(CollectionError, match=r"HTTP 404.*model `nope` does not exist"):
        collect(tiny_prompts(1, 1), spec(bare, source="openai:nope"), progress=False)
    silent = server(logprobs=False)
    with pytest.raises(CollectionError, match="returns no logprobs"):
        collect(tiny_prompts(1, 1), spec(silent, tiny_dir), progress=False)
    old = server(ids=False)
    with pytest.raises(CollectionError, match="mode='exact' but the server ignored"):
        collect(tiny_prompts(1, 1), spec(old, tiny_dir, mode="exact"), progress=False)
    locked = server(key=KEY)
    with pytest.raises(CollectionError, match=r"XLK_TEST_KEY, which is NOT set"):
        collect(tiny_prompts(1, 1), spec(locked, tiny_dir), progress=False)
    with pytest.raises(CollectionError, match="looks like a secret"):
        collect(tiny_prompts(1, 1), spec(srv, api_key="sk-123"), progress=False)
    nested = spec(srv, extra_body={"metadata": {"Api_Key": "sk-123"}})
    with pytest.raises(CollectionError, match=r"'extra_body\.metadata\.Api_Key' looks like a"):
        collect(tiny_prompts(1, 1), nested, progress=False)
    with pytest.raises(CollectionError, match="base_url"):
        collect(tiny_prompts(1, 1), spec("ftp://x"), progress=False)


def test_revision_pins_the_tokenizer(server, tiny_dir, monkeypatch):
    from transformers import AutoTokenizer

    srv = server()
    # a local folder has no revisions: refused, not ignored
    with pytest.raises(CollectionError, match=r"revision 'v1'.*local folder"):
        collect(tiny_prompts(1, 1), spec(srv, tiny_dir, revision="v1"), progress=False)
    # a Hugging Face id: the revision goes to the tokenizer's loader, and on record
    asked = []
    real = AutoTokenizer.from_pretrained

    def fake(name, **kw):
        asked.append((name, kw.get("revision")))
        return real(str(tiny_dir))

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", fake)
    ds = collect(tiny_prompts(1, 1), spec(srv, "org/tiny-tok", revision="0123abc"), progress=False)
    assert asked == [("org/tiny-tok", "0123abc")]
    info = ds.likert.attrs["models"]["m"]
    assert info["revision"] == "0123abc" and info["tokenizer"].endswith("org/tiny-tok@0123abc")
    # pinned, so a tokenizer that cannot be loaded is an error, not a text fallback
    named = server(served="org/tiny")
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", lambda *a, **k: 1 / 0)
    with pytest.raises(CollectionError, match="cannot load tokenizer 'org/tiny'"):
        collect(tiny_prompts(1, 1), spec(named, source="openai:org/tiny", revision="v2"),
                progress=False)  # fmt: skip


def test_the_tokenizer_is_loaded_once_per_process_until_its_folder_changes(
    server, tiny_dir, tmp_path, monkeypatch
):
    """A session's runs against one server share the tokenizer (and with it the valid
    sets, cached per tokenizer object); a tokenizer folder changed on disk is read again."""
    import shutil

    from transformers import AutoTokenizer

    folder = tmp_path / "tok"
    shutil.copytree(tiny_dir, folder)
    loads = []
    real = AutoTokenizer.from_pretrained

    def counted(name, **kw):
        if str(name) == str(folder):  # the fake server loads its own, from tiny_dir
            loads.append(str(name))
        return real(name, **kw)

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", counted)
    srv = server()
    first = collect(tiny_prompts(1, 2), spec(srv, folder), progress=False)
    again = collect(tiny_prompts(1, 2), spec(srv, folder), progress=False)
    assert loads == [str(folder)]
    xr.testing.assert_identical(first.pmf, again.pmf)
    config = folder / "tokenizer_config.json"
    config.write_text(config.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    collect(tiny_prompts(1, 2), spec(srv, folder), progress=False)
    assert loads == [str(folder), str(folder)]


def test_url_credentials_are_not_recorded(server, tiny_dir):
    srv = server()
    url = srv.url.replace("http://", "http://user:pa55word@")
    ds = collect(tiny_prompts(1, 2), spec(url, tiny_dir), progress=False)
    assert ds.likert.attrs["models"]["m"]["server"] == srv.url
    assert "pa55word" not in str(ds.attrs)
    assert srv.seen_auth == {"Basic dXNlcjpwYTU1d29yZA=="}


def test_cli_run_against_server(server, tiny_dir, tmp_path):
    from click.testing import CliRunner

    from xlikert.cli import main
    from xlikert.core.io import open_results

    srv = server()
    cfg = tmp_path / "exp.toml"
    cfg.write_text(
        '[experiment]\nname = "srvexp"\ninstrument = "cetscale"\n\n'
        '[factors.target]\nlevels = ["USA"]\n\n'
        f'[[models]]\nname = "served"\nsource = "openai:tiny"\nbase_url = "{srv.url}"\n'
        f'tokenizer = "{tiny_dir}"\nconcurrency = 4\n'
    )
    out = tmp_path / "r.nc"
    res = CliRunner().invoke(main, ["run", str(cfg), "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    ds = open_results(out)
    assert ds.pmf.sizes == {"model": 1, "target": 1, "item": 17, "score": 7}
    assert ds.likert.attrs["models"]["served"]["mode"] == "exact"


def test_results_say_what_the_server_backend_did(server, tiny_dir, local):
    """The file's collection_protocol and the decoding_pmf description are the server's
    (requests, certified intervals, temperature 1 on the listed tokens), not the
    transformers backend's one forward pass over the full vocabulary."""
    from xlikert.collect.backends.openai import DECODING_RULE, PROTOCOL

    srv = server()
    for mode in ("exact", "topk"):
        ds = collect(tiny_prompts(2, 3), spec(srv, tiny_dir, mode=mode), progress=False,
                     split_space=False)  # fmt: skip
        info = ds.likert.attrs["models"]["m"]
        assert info["collection_protocol"] == PROTOCOL[mode]
        assert ds.attrs["collection_protocol"].startswith(PROTOCOL[mode])
        assert "forward pass" not in ds.attrs["collection_protocol"]
        assert ds.decoding_pmf.attrs["description"] == DECODING_RULE
        assert "only temperature 1 is measured" in DECODING_RULE
    assert "certified intervals" in PROTOCOL["topk"]
    # a file of two backends names each model's
    both = collect(tiny_prompts(2, 3), [*spec(srv, tiny_dir), {"name": "t", "source": str(tiny_dir)}],
                   progress=False, split_space=False)  # fmt: skip
    desc = both.decoding_pmf.attrs["description"]
    assert desc.startswith("models 'm': " + DECODING_RULE) and "models 't': probabilities" in desc
    assert both.attrs["collection_protocol"].startswith("models 'm': " + PROTOCOL["exact"])
    assert "models 't': one forward pass" in both.attrs["collection_protocol"]


def test_multi_token_answers_are_read_exactly_on_a_vllm_server(server, tiny_dir):
    """0..10 ("1" is a prefix of "10") on a server with vLLM's requests (``/tokenize``, then
    one ``/completions`` request with ``logprob_token_ids`` per answer context): the
    multi-token rule, teacher forced, equals the transformers backend's; top-k mode and a
    server without the extension refuse it by name, as does an elicitation level."""
    from xlikert.collect.backends.openai.contexts import MULTI_TOKEN_PROTOCOL

    prompts, scale = tiny_prompts(1, 2), range(0, 11)
    local = collect(prompts, [{"name": "m", "source": str(tiny_dir)}], progress=False,
                    scale=scale, temperatures=(0.5, 1.0), top_ps=(0.9, 1.0))  # fmt: skip
    srv = server()
    ds = collect(prompts, spec(srv, tiny_dir), progress=False, scale=scale,
                 temperatures=(0.5, 1.0), top_ps=(0.9, 1.0))  # fmt: skip
    info = ds.likert.attrs["models"]["m"]
    assert info["mode"] == "exact" and info["answers"].startswith("multi-token")
    assert info["collection_protocol"].endswith(MULTI_TOKEN_PROTOCOL)
    assert any(len(r["ids"]) > 1 for r in info["answer_spellings"])
    assert float(local.valid_mass.min()) > 0  # the rule reads something
    for v in ("pmf", "valid_mass", "topk_logprob"):  # the server's float32 log-probabilities
        np.testing.assert_allclose(ds[v], local[v], atol=1e-6, rtol=1e-6, err_msg=v)
    one = {"temperature": 1.0, "top_p": 1.0}  # the full distribution: the only grid point
    np.testing.assert_allclose(ds.decoding_pmf.sel(one), local.decoding_pmf.sel(one), atol=1e-6)
    assert int(ds.decoding_pmf.notnull().sum()) == int(ds.decoding_pmf.sel(one).notnull().sum())
    # GET /models, the probe, its /tokenize; per prompt the listing, /tokenize and the contexts
    from xlikert.collect.answers.spellings import answer_rule
    from xlikert.collect.backends.openai.model import _pretrained

    _, answers, _ = answer_rule(_pretrained(str(tiny_dir), None, False, None), scale,
                                split_space=False)  # fmt: skip
    n = int(ds.attrs["cells_computed"])
    assert info["http_requests_last_session"] == 3 + n * (2 + len(answers.contexts))
    with pytest.raises(CollectionError, match=r"\[0, 1, 2.*needs multi-token answers"):
        collect(prompts, spec(srv, tiny_dir, mode="topk"), progress=False, scale=scale)
    old = server(ids=False)
    with pytest.raises(CollectionError, match=r"need several tokens.*in top-k mode: the server "
                                              r"ignored logprob_token_ids"):  # fmt: skip
        collect(prompts, spec(old, tiny_dir), progress=False, scale=scale)
    from xlikert.core.errors import ElicitationLevelError

    with pytest.raises(ElicitationLevelError, match="some answers need several tokens"):
        collect(prompts.expand_dims(elicitation=["first_token", "greedy"]), spec(srv, tiny_dir),
                progress=False, scale=scale)  # fmt: skip


def test_numbers_of_several_digits_are_walked_on_a_vllm_server_in_top_k_mode(server, tiny_dir):
    """0..10 on a vLLM server without ``logprob_token_ids`` (top-k mode) is read by the
    labels' walk from its ``/completions`` listings (:mod:`.openai.walk`), not refused: the
    stored bounds hold the transformers backend's exhaustive reading (``answer_tol=0``) with
    the top 3 tokens listed, and close on it with every token listed (the server's float32
    log-probabilities). A server of unknown kind in top-k mode still refuses, naming why."""
    prompts, scale = tiny_prompts(1, 2), range(0, 11)
    grid = {"scale": scale, "temperatures": (1.0,), "top_ps": (1.0,), "answer_tol": 0.0}
    local = collect(prompts, [{"name": "m", "source": str(tiny_dir)}], progress=False, **grid)
    assert float(local.answer_error.max()) == 0.0 and float(local.valid_mass.min()) > 0.01
    srv = server(logprob_ids=False)
    widths = []
    for k in (3, 113):  # 113: the tiny vocabulary
        # answer_tol 0 is not met from listings: the bound reached is stored and said
        with pytest.warns(RuntimeWarning, match=r"did not meet answer_tol=0 .*walk_logprobs"):
            ds = collect(prompts, spec(srv, tiny_dir, server="vllm", walk_logprobs=k,
                                       logprob_rtol=0), progress=False, **grid)  # fmt: skip
        info = ds.likert.attrs["models"]["m"]
        assert info["mode"] == "topk" and "certified walk" in info["answers"], info["answers"]
        assert info["exact_unavailable"].startswith("the server ignored logprob_token_ids")
        eps = 1e-6  # float32 log-probabilities
        for v in ("pmf", "valid_mass"):
            assert bool((ds[f"{v}_lower"] - eps <= local[v]).all()), (k, v)
            assert bool((local[v] <= ds[f"{v}_upper"] + eps).all()), (k, v)
        width = float((ds.valid_mass_upper - ds.valid_mass_lower).max())
        assert float(ds.answer_error.min()) >= width - 1e-12
        widths.append(max(width, float((ds.pmf_upper - ds.pmf_lower).max())))
    print("widths, top 3 and every token listed:", widths)
    assert widths[0] > 1e-4 and widths[1] < 1e-5  # bounded by the listings; closed when all listed
    np.testing.assert_allclose(ds.pmf, local.pmf, atol=1e-6)
    np.testing.assert_allclose(ds.valid_mass, local.valid_mass, atol=1e-6)
    # a server of unknown kind (no /models owner, no `server`) in top-k mode: refused by name
    with pytest.raises(CollectionError, match=r"need several tokens.*in top-k mode: the server "
                       r"ignored logprob_token_ids.*labels' walk .*\['vllm', 'llama-cpp-python'\] "
                       r"servers only, and this one is 'other'"):  # fmt: skip
        collect(prompts, spec(srv, tiny_dir), progress=False, **grid)
