"""Sequential administration through the ordinary runner: a factor, resumable, shardable.

A prompts Dataset with an ``administration`` factor runs its sequential conditions as
conversations (one unit each) through :func:`xlikert.collect.collect`: the file holds
what :func:`~xlikert.collect.context.administer` reads for the same battery, a run
killed between units resumes to the file of a clean run, shards merge to it, and an
item-order factor asks the items in each level's order.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.results import without_session
from support.tiny import save_tiny, tiny_prompts

from xlikert.collect import collect, merge_shards
from xlikert.collect.context import Battery, administer
from xlikert.collect.context.administration import item_orders
from xlikert.collect.options import CollectOptions
from xlikert.core.errors import CollectionError

KW = {"progress": False, "batch_size": 4, "chunk_size": 2, "top_k": 3}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(save_tiny(tmp_path_factory.mktemp("seqrun") / "model"))


def spec(tiny: str) -> list[dict[str, str]]:
    return [{"name": "tiny", "source": tiny}]


def prompts() -> xr.Dataset:
    return tiny_prompts(n_targets=2, n_items=3).expand_dims(
        administration=["isolated", "sequential"]
    )


@pytest.fixture(scope="module")
def clean(tiny, tmp_path_factory) -> tuple[Path, xr.Dataset]:
    out = tmp_path_factory.mktemp("clean") / "clean.nc"
    collect(prompts(), spec(tiny), out, **KW)
    return out, without_session(out)


@pytest.fixture(scope="module")
def model(tiny):
    import xlikert.collect.backends.transformers as backend

    opts = CollectOptions(scale=range(1, 8), top_k=3, batch_size=4)
    m = backend.open({"name": "tiny", "source": tiny}, opts)
    yield m
    m.close()


def test_the_file_holds_what_the_conversation_reads(clean, model):
    _, ds = clean
    seq = ds.sel(model="tiny", administration="sequential")
    for target in seq["target"].values:
        cond = prompts().sel(administration="sequential", target=target)
        b = Battery(str(cond.system.values), tuple(str(u) for u in cond.user.values),
                    tuple(str(y) for y in range(1, 8)), ("1", "2", "3"))  # fmt: skip
        res = administer(model, b)
        m, j = res.marginals(), res.joints()
        got = seq.sel(target=target)
        np.testing.assert_allclose(got.pmf.values, m["pmf"], atol=1e-12, rtol=0)
        np.testing.assert_allclose(got.valid_mass.values, m["valid_mass"], atol=1e-12, rtol=0)
        np.testing.assert_allclose(got.context_joint.values, j["joint"], atol=1e-12, rtol=0)
        assert (got.context_error.values == 0).all() and (got.context_tol_met == 1).all()
        assert (got.context_passes == 1 + 7 + 49).all()
        assert got.context_position.values.tolist() == [0, 1, 2]
        # every history read is stored beside its item: its answers, P(h) and PMF
        tree, paths = res.tree, res.tree.paths
        for n in range(tree.size):
            k = int(tree.item[n])
            answers = ",".join(str(a + 1) for a in paths[n, :k])
            row = list(got.history_answers.values[k]).index(answers)
            np.testing.assert_allclose(
                got.history_pmf.values[k, row], tree.pmf[n], atol=1e-12, rtol=0
            )
        # the isolated cells are as before: no context variables
        iso = ds.sel(model="tiny", administration="isolated", target=target)
        assert np.isnan(iso.context_error).all() and (iso.context_position == -1).all()
    assert ds.attrs["sequential_tol"] == 0.0 and "history_rule" in ds.attrs
    assert "failure" in ds.attrs["history_rule"]


def test_joints_marginalise_and_the_first_item_is_its_isolated_prompt(clean):
    _, ds = clean
    seq = ds.sel(model="tiny", administration="sequential")
    joint = seq.context_joint
    first = joint.sum("other_score")
    xr.testing.assert_allclose(first, seq.pmf.broadcast_like(first).transpose(*first.dims))
    second = joint.sum("score").transpose("target", "item", "other_item", "other_score")
    pmf = seq.pmf.transpose("target", "item", "score").values
    np.testing.assert_allclose(second.values, np.broadcast_to(pmf[:, None], second.shape),
                               atol=1e-12, rtol=0)  # fmt: skip
    iso = ds.sel(model="tiny", administration="isolated")
    np.testing.assert_allclose(
        seq.pmf.isel(item=0).values, iso.pmf.isel(item=0).values, atol=1e-6, rtol=0
    )


def test_a_run_stopped_between_units_resumes_to_the_clean_file(tiny, clean, tmp_path):
    out = tmp_path / "r.nc"
    saved = []

    def stop(done, total):
        saved.append(done)
        if done == 4:  # the 3 isolated units of 2 cells, and one of the 2 conversations
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        collect(prompts(), spec(tiny), out, on_unit=stop, **KW)
    assert not out.exists() and len(list((tmp_path / "r.nc.partial").glob("m*-u*.npz"))) == 4
    ds = collect(prompts(), spec(tiny), out, **KW)
    assert ds.attrs["cells_computed"] == 12  # the saved units are this run's own
    xr.testing.assert_identical(without_session(out), clean[1])


def test_shards_merge_to_the_one_run_file(tiny, clean, tmp_path):
    parts = [tmp_path / f"part{i}.nc" for i in (1, 2)]
    for i, p in enumerate(parts, 1):
        collect(prompts(), spec(tiny), p, shard=f"{i}/2", **KW)
    merged = merge_shards(parts, tmp_path / "merged.nc")
    ref = clean[1]
    for v in ("pmf", "valid_mass", "context_joint", "context_error", "history_pmf",
              "history_answers", "context_position", "cell_key"):  # fmt: skip
        xr.testing.assert_identical(merged[v], ref[v])


def test_an_item_order_factor_asks_the_items_in_each_levels_order(tiny, clean, tmp_path):
    orders = item_orders(["1", "2", "3"], ["as_listed", "reversed"])
    base = tiny_prompts(n_targets=2, n_items=3).expand_dims(administration=["sequential"])
    pos = [[order.index(k) for k in range(3)] for order in orders.values()]
    p = base.expand_dims(item_order=list(orders))
    p["item_position"] = (("item_order", "item"), np.asarray(pos))
    ds = collect(p, spec(tiny), tmp_path / "order.nc", **KW).sel(model="tiny")
    listed = ds.sel(item_order="as_listed", administration="sequential")
    rev = ds.sel(item_order="reversed", administration="sequential")
    assert rev.context_position.values[0].tolist() == [2, 1, 0]
    seq = clean[1].sel(model="tiny", administration="sequential")
    xr.testing.assert_allclose(listed.pmf.drop_vars("item_order"), seq.pmf, atol=1e-12)
    # reversed: item 3 is asked first, so its PMF is its isolated prompt's
    iso = clean[1].sel(model="tiny", administration="isolated")
    np.testing.assert_allclose(rev.pmf.sel(item="3"), iso.pmf.sel(item="3"), atol=1e-6, rtol=0)
    assert float(abs(rev.pmf - listed.pmf).max()) > 1e-4  # the order moves them
    # the order is a factor: the distributional ANOVA gives its effect and interactions
    import xlikert as xl

    dec = xl.decompose(ds.pmf.squeeze("administration", drop=True))
    assert "item_order" in dec.children and any(
        "item_order:" in c or ":item_order" in c for c in dec.children
    )
    assert np.isfinite(dec["item_order"].E.values).all()


def test_an_item_order_factor_under_isolated_administration_is_refused(tiny):
    p = prompts().expand_dims(asked=["as_listed", "reversed"])
    p["item_position"] = (("asked", "item"), np.asarray([[0, 1, 2], [2, 1, 0]]))
    with pytest.raises(CollectionError, match=r"item-order factor 'asked'.*changes no prompt"):
        collect(p, spec(tiny), **KW)
    with pytest.raises(CollectionError, match=r"item-order factor 'asked'"):
        collect(p.sel(administration=["isolated"]), spec(tiny), **KW)
    p["item_position"] = (("asked", "item"), np.asarray([[0, 1, 2], [2, 2, 0]]))
    with pytest.raises(CollectionError, match=r"level 'reversed'.*not a permutation"):
        collect(p.sel(administration=["sequential"]), spec(tiny), **KW)


def test_unknown_levels_and_a_server_backend_are_refused_before_anything_loads(tiny):
    bad = tiny_prompts(n_targets=1, n_items=2).expand_dims(administration=["together"])
    with pytest.raises(
        CollectionError, match=r"'administration': unknown level\(s\) \['together'\]"
    ):
        collect(bad, spec(tiny), **KW)
    server = [{"name": "api", "source": "openai:gpt-4o-mini", "base_url": "http://127.0.0.1:9"}]
    with pytest.raises(CollectionError, match=r"model 'api': sequential administration.*server"):
        collect(prompts(), server, **KW)


def test_a_budget_spent_stores_the_bound_reached(tiny, clean, tmp_path):
    p = prompts().sel(administration=["sequential"])
    with pytest.warns(RuntimeWarning, match="max_passes=5"):
        ds = collect(p, spec(tiny), tmp_path / "b.nc", tol=1e-6, max_passes=5, **KW)
    seq = ds.sel(model="tiny", administration="sequential")
    exact = clean[1].sel(model="tiny", administration="sequential")
    assert (seq.context_tol_met == 0).all() and (seq.context_passes == 5).all()
    err = abs(seq.pmf - exact.pmf).max("score")
    assert (err <= seq.context_error + 1e-12).all() and float(seq.context_error.max()) > 1e-6
    assert ds.attrs["sequential_max_passes"] == 5
    with pytest.raises(CollectionError, match="tol must be a finite number >= 0"):
        collect(p, spec(tiny), tol=-1.0, **KW)


def test_reuse_copies_the_isolated_cells_and_reads_the_conversations_again(tiny, clean, tmp_path):
    """A conversation is reused only from the run's own saved progress; its cells' keys are
    not the isolated ones (the same prompt text, asked in another context)."""
    path, ref = clean
    ds = collect(prompts(), spec(tiny), tmp_path / "again.nc", reuse=[path], **KW)
    assert ds.attrs["cells_reused"] == 6 and ds.attrs["cells_computed"] == 6
    seq = ds.sel(administration="sequential")
    assert (seq.reused_from == "").all()
    iso_keys = set(ds.cell_key.sel(administration="isolated").values.ravel())
    assert not iso_keys & set(seq.cell_key.values.ravel())
    for v in ("pmf", "context_joint", "history_pmf", "cell_key"):
        xr.testing.assert_identical(ds[v], ref[v])


def test_items_with_their_own_answers_and_options_run_as_one_interview(tiny, tmp_path):
    # a questionnaire as fielded (support.survey): 'trust' 1..4 answered with letters, its
    # "Don't know" and "Refused" lettered E and F, then the nominal 'vote' answered with
    # the candidates' names; once refused by name, now one conversation branching on each
    # item's own answers (tests/collect/context/test_sequential_questionnaire.py checks the numbers)
    from support.survey import survey_experiment

    exp = survey_experiment(tmp_path, '[factors.administration]\nlevels = ["isolated", "sequential"]\n')  # fmt: skip
    prompts = exp.build_prompts().sel(party=["Democrat"], item=["trust", "vote"])
    ds = collect(prompts, spec(tiny), tmp_path / "r.nc", **KW).sel(model="tiny", party="Democrat")
    seq, iso = ds.sel(administration="sequential"), ds.sel(administration="isolated")
    # the first item is its isolated prompt; its options measured as in isolation
    for v in ("pmf", "valid_mass", "nonsubstantive_mass"):
        np.testing.assert_allclose(seq[v].sel(item="trust"), iso[v].sel(item="trust"), atol=1e-6)
    vote = seq.sel(item="vote")
    answers = [str(a) for a in vote.history_answers.values if str(a)]
    assert sorted(answers) == ["1", "2", "3", "4", "Don't know", "Refused"]
    assert int(vote.context_passes) == 1 + 6 and float(vote.context_error) == 0
    np.testing.assert_allclose(float(vote.history_probability.sum()), 1.0, atol=1e-12)
    assert np.isnan(vote.nonsubstantive_mass).all()  # the vote offers no option
    assert "Whom did you vote for?" in str(vote.prompt_text.values)  # the returned file is lazy
    np.testing.assert_allclose(float(vote.pmf.sum()), 1.0, atol=1e-12)


def test_a_sequential_run_reads_the_kv_cache_by_its_current_name(tiny):
    """transformers renamed a model output's ``past_key_values`` to ``cache``; the old name
    logs a deprecation notice (once per process: the cache of ``warning_once`` is
    cleared first), and the history-tree reader must not use it."""
    import logging
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.warning_once.cache_clear()
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    library = logging.getLogger("transformers")
    library.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ds = collect(prompts(), spec(tiny), **KW)
    finally:
        library.removeHandler(handler)
    assert int(ds.attrs["cells_computed"]) > 0  # the conversations were read here
    said = [r.getMessage() for r in records] + [str(w.message) for w in caught]
    assert not [s for s in said if "past_key_values" in s or "deprecated" in s.lower()], said


def test_a_conversation_reports_its_progress_and_the_run_shows_it(model, tiny, capsys):
    """The sequential tree tells the progress seam its passes, bound, unread mass and time
    after every round; through the runner they are on the progress bar."""
    cond = prompts().sel(administration="sequential").isel(target=0)
    battery = Battery(str(np.ravel(cond.system.values)[0]), tuple(str(u) for u in cond.user.values),
                      tuple(str(y) for y in range(1, 8)), tuple(cond.item.values.astype(str)),
                      tuple(range(1, 8)))  # fmt: skip
    seen = []
    spent = r"max_passes=30 forward passes were spent before the certified error met tol"
    with pytest.warns(RuntimeWarning, match=spent):  # a budget spent is said, and stored
        res = administer(model, battery, tol=1e-3, max_passes=30, batch=4, progress=seen.append)
    assert seen and seen[-1].passes == res.passes and seen[-1].budget == 30
    assert [p.passes for p in seen] == sorted(p.passes for p in seen)
    assert (seen[-1].bound <= 1e-3) == res.tol_met and seen[-1].unread >= 0
    assert {p.reading for p in seen} == {"sequential"}
    with pytest.warns(RuntimeWarning, match=spent):
        collect(prompts().sel(administration=["sequential"]).isel(target=[0]), spec(tiny),
                **{**KW, "progress": True, "tol": 1e-3, "max_passes": 30})  # fmt: skip
    err = capsys.readouterr().err
    assert re.search(r"sequential: \d+/30 passes, bound \S+ \(tol 0\.001\), unread \S+, "
                     r"\dm\d\ds", err), err[-2000:]  # fmt: skip
