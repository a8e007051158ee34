"""Prompts that share a respondent's prefix: the groups found on tokens, the prefix run once
a group, and the numbers equal to one uncached pass per prompt (tiny random-weight model)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import xarray as xr
from support.tiny import save_tiny

from xlikert.collect import collect
from xlikert.collect.prefixes import common_prefix, prefix_groups

pytest.importorskip("torch")
pytest.importorskip("transformers")

PERSONAS = [
    "You are a 43-year-old woman from Leeds who left school at 16.",
    "You are a 61-year-old man from Kent who works as a nurse.",
    "You are a 29-year-old man from Hull.",
    "You are a 35-year-old woman from York with two children.",
]
ITEMS = ["Imports hurt us.", "Buy local goods.", "Trade is fine.", "Tariffs help."]


def _cost(encoded, start, groups, overhead):
    """Tokens run by a cut into groups, as prefix_groups counts them."""
    total = 0
    for p, members in groups:
        if len(members) == 1:
            total += len(encoded[members[0]]) - start
        else:
            total += p - start + sum(len(encoded[r]) - p for r in members) + overhead
    return total


def test_groups_cover_every_prompt_once_and_share_their_prefix():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 8))
        start = int(rng.integers(0, 3))
        head = rng.integers(0, 3, size=start).tolist()
        encoded = [head + rng.integers(0, 3, size=int(rng.integers(1, 7))).tolist()
                   for _ in range(n)]  # fmt: skip
        groups = prefix_groups(encoded, start, overhead=1)
        assert sorted(r for _, g in groups for r in g) == list(range(n))
        for p, g in groups:
            assert p >= start and all(p < len(encoded[r]) for r in g)
            assert all(encoded[r][:p] == encoded[g[0]][:p] for r in g)


def test_groups_are_the_least_cost_cut_of_the_sorted_prompts():
    """Against every cut of the sorted prompts into runs (brute force, n <= 6)."""
    rng = np.random.default_rng(5)
    for _ in range(150):
        n = int(rng.integers(2, 7))
        encoded = [rng.integers(0, 2, size=int(rng.integers(2, 7))).tolist() for _ in range(n)]
        overhead = int(rng.integers(0, 3))
        order = sorted(range(n), key=lambda r: (tuple(encoded[r]), r))
        best = None
        for cuts in itertools.product([0, 1], repeat=n - 1):
            runs, cur = [], [order[0]]
            for c, r in zip(cuts, order[1:], strict=True):
                if c:
                    runs.append(cur)
                    cur = []
                cur.append(r)
            runs.append(cur)
            groups = [(common_prefix([encoded[r] for r in g]) if len(g) > 1 else 0, g)
                      for g in runs]  # fmt: skip
            cost = _cost(encoded, 0, groups, overhead)
            best = cost if best is None else min(best, cost)
        assert _cost(encoded, 0, prefix_groups(encoded, 0, overhead), overhead) == best


def test_each_respondents_items_form_one_group():
    encoded = [[9, 9, *(ord(c) for c in p), 0, *(ord(c) for c in it)]
               for p in PERSONAS for it in ITEMS]  # fmt: skip
    groups = prefix_groups(encoded, common_prefix(encoded))
    assert sorted(sorted(g) for _, g in groups) == [list(range(4 * k, 4 * k + 4)) for k in range(4)]
    assert [p for p, _ in groups] == [len(p) + 3 for p in sorted(PERSONAS)]


def respondents_prompts(where: str) -> xr.Dataset:
    """Respondent x item prompts, the persona in the system or the user turn."""
    coords = {"respondent": [f"r{k}" for k in range(len(PERSONAS))],
              "item": [str(i + 1) for i in range(len(ITEMS))]}  # fmt: skip
    attrs = {"instrument": "tiny", "scale_min": 1, "scale_max": 7}
    if where == "user":
        user = [[f"{p}\n{it}\nRate 1-7:" for it in ITEMS] for p in PERSONAS]
        system = xr.DataArray("Answer with ONLY the digit.")
    else:
        user = [[f"{it}\nRate 1-7:" for it in ITEMS] for _ in PERSONAS]
        system = xr.DataArray([f"{p} Answer with ONLY the digit." for p in PERSONAS],
                              dims="respondent")  # fmt: skip
    ds = xr.Dataset({"user": (("respondent", "item"), np.array(user))}, coords=coords, attrs=attrs)
    ds["system"] = system
    return ds


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from xlikert.collect.backends.transformers import load_model

    path = save_tiny(tmp_path_factory.mktemp("tiny") / "model")
    return path, load_model(str(path), range(1, 8))


def _loader(lm):
    from xlikert.collect.backends.transformers import LocalModel

    return lambda s, o, probe=None: LocalModel(lm, o)


@pytest.mark.parametrize("where", ["user", "system"])
def test_prefix_shared_collection_equals_one_uncached_pass_per_prompt(tiny, where, tmp_path):
    """Each respondent's prefix run once (persona in the user turn: several respondents in
    a unit, read from their groups' prefixes; in the system prompt: a unit each), equal
    to one uncached pass per prompt; the cells' keys are the same either way, and a cell
    collected either way is reused by the other."""
    path, lm = tiny
    spec = [{"name": "tiny", "source": str(path)}]
    prompts = respondents_prompts(where)
    fast = collect(prompts, spec, tmp_path / "fast.nc", progress=False, batch_size=8,
                   loader=_loader(lm))  # fmt: skip
    slow = collect(prompts, spec, progress=False, batch_size=1, prefix_cache=False,
                   loader=_loader(lm))  # fmt: skip
    for v in ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass", "topk_logprob"):
        np.testing.assert_allclose(fast[v], slow[v], atol=1e-5, rtol=0, err_msg=v)
    np.testing.assert_array_equal(fast.cell_key, slow.cell_key)
    assert (fast.prompt_text == slow.prompt_text).all()
    calls = []
    hook = lm.model.register_forward_pre_hook(lambda m, a, kw: calls.append(1), with_kwargs=True)
    again = collect(prompts, spec, progress=False, batch_size=1, prefix_cache=False,
                    reuse=[tmp_path / "fast.nc"], loader=_loader(lm))  # fmt: skip
    hook.remove()
    assert calls == []  # every cell found by its key: nothing run
    np.testing.assert_array_equal(again.pmf, fast.pmf)


def test_each_persona_runs_once_not_once_per_item(tiny, monkeypatch):
    """Persona in the user turn, the four respondents in one unit: the tokens run (padding
    left out) against the same collection with every prompt its own group."""
    from xlikert.collect.backends.transformers import model as backend

    path, lm = tiny
    spec = [{"name": "tiny", "source": str(path)}]
    prompts = respondents_prompts("user")
    pad = lm.tokenizer.pad_token_id
    real = []
    hook = lm.model.register_forward_pre_hook(
        lambda m, a, kw: real.append(int((kw["input_ids"] != pad).sum())), with_kwargs=True
    )
    run = lambda: collect(prompts, spec, progress=False, batch_size=8, loader=_loader(lm))  # noqa: E731
    run()  # the cache checks of this loaded model (once per path) out of the counts
    real.clear()
    grouped = run()
    shared = sum(real)
    real.clear()
    monkeypatch.setattr(
        backend, "prefix_groups", lambda enc, start: [(start, [r]) for r in range(len(enc))]
    )
    alone = run()
    hook.remove()
    np.testing.assert_allclose(grouped.pmf, alone.pmf, atol=1e-5, rtol=0)
    encoded = [lm.encode(str(t)) for t in np.asarray(grouped.prompt_text).ravel()]
    persona = [len(lm.tokenizer.encode(p, add_special_tokens=False)) for p in PERSONAS]
    # the persona's tokens past the unit's common prefix ("You are a ", one token a
    # character) and the newline after it are saved on every item but the first
    assert sum(real) - shared == sum((n - 10 + 1) * (len(ITEMS) - 1) for n in persona)
    assert shared < sum(len(e) for e in encoded)


def test_vllm_keeps_its_prefix_cache_on():
    """The in-process vLLM engine shares a respondent's prefix through its prefix cache,
    which xlikert sets itself: an entry's engine_args may not turn it off."""
    from xlikert.collect.backends.vllm.model import ENGINE_OWN, check_engine_args
    from xlikert.core.errors import CollectionError

    assert "enable_prefix_caching" in ENGINE_OWN
    check_engine_args({"name": "m", "engine_args": {"swap_space": 1}})
    with pytest.raises(CollectionError, match=r"engine_args sets \['enable_prefix_caching'\]"):
        check_engine_args({"name": "m", "engine_args": {"enable_prefix_caching": False}})
