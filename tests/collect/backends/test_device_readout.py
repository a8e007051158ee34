"""The readout on the model's device (float64 torch) against the host rules (float64 numpy).

On a GPU the transformers backend reads the answer where the logits are
(:mod:`xlikert.collect.backends.transformers.device_readout`); these tests run that code on the CPU and
compare it with :func:`xlikert.kernels.readout.next_token_readout`, row by row, and
end to end through ``collect()``.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from support.tiny import save_tiny, tiny_prompts  # noqa: E402

from xlikert.collect import collect  # noqa: E402
from xlikert.collect.backends.transformers import LocalModel, load_model  # noqa: E402
from xlikert.collect.backends.transformers.device_readout import next_token_readout_torch  # noqa: E402
from xlikert.kernels.readout import next_token_readout  # noqa: E402

TEMPS, TOPS = (0.1, 0.5, 1.0, 1.3), (0.8, 0.9, 1.0)


def _rows(seed: int, b: int = 5, c: int = 2, v: int = 3000) -> np.ndarray:
    """Logits with the hard cases: ties (bf16-like rounding), masked tokens, a peaked row."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 3, (b, c, v)).astype(np.float32)
    z[0] = np.round(z[0] * 4) / 4  # many exact ties, also at the top-k and nucleus edges
    z[1, :, ::7] = -np.inf  # masked tokens
    z[2, 0, 5] = 60.0  # one token holds the whole mass
    return z


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_device_readout_equals_the_host_rules(seed):
    z = _rows(seed)
    need = np.array([3, 17, 42, 5, 999, 0, 2999, 7])
    raw, grid, ids, lp = next_token_readout_torch(torch.from_numpy(z), need, TEMPS, TOPS, 20)
    for b in range(z.shape[0]):
        want = next_token_readout(z[b], need, TEMPS, TOPS, 20)
        np.testing.assert_allclose(raw[b], want[0], rtol=0, atol=1e-12)
        # -inf outside the nucleus in both; finite values within 1e-12
        assert np.array_equal(np.isneginf(grid[b]), np.isneginf(want[1]))
        fin = np.isfinite(want[1])
        np.testing.assert_allclose(grid[b][fin], want[1][fin], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(ids[b], want[2])  # descending, ties by id
        np.testing.assert_allclose(lp[b], want[3], rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pooled_column_is_the_sum_of_its_tokens_on_host_and_device(seed):
    """A multi-token answer's continuation tokens, read as one summed column, equal the sum
    of their own columns under every decoding setting, on the host and on the device."""
    z = _rows(seed)
    need = np.array([3, 17, 42])
    pooled = np.arange(100, 1100)  # a third of the vocabulary
    raw, grid, _, _ = next_token_readout_torch(torch.from_numpy(z), need, TEMPS, TOPS, 0, pooled)
    for b in range(z.shape[0]):
        host = next_token_readout(z[b], need, TEMPS, TOPS, 0, pooled)
        whole = next_token_readout(z[b], np.concatenate([need, pooled]), TEMPS, TOPS, 0)
        want_raw = np.concatenate(
            [whole[0][..., :3], np.log(np.exp(whole[0][..., 3:]).sum(-1, keepdims=True))], -1
        )
        with np.errstate(divide="ignore"):
            want_grid = np.concatenate(
                [whole[1][..., :3], np.log(np.exp(whole[1][..., 3:]).sum(-1, keepdims=True))], -1
            )
        for got in (host[0], raw[b]):
            np.testing.assert_allclose(got, want_raw, rtol=0, atol=1e-12)
        for got in (host[1], grid[b]):
            assert np.array_equal(np.isneginf(got), np.isneginf(want_grid))
            fin = np.isfinite(want_grid)
            np.testing.assert_allclose(got[fin], want_grid[fin], rtol=0, atol=1e-12)


def test_top_k_ties_are_listed_by_id_on_host_and_device():
    z = np.zeros((1, 10), dtype=np.float32)
    z[0, [8, 3]] = 2.0  # two tied leaders, then eight tied tokens
    host = next_token_readout(z, np.array([0]), [1.0], [1.0], top_k=4)[2]
    dev = next_token_readout_torch(torch.from_numpy(z[None]), np.array([0]), [1.0], [1.0], 4)[2]
    assert host.tolist() == dev[0].tolist() == [3, 8, 0, 1]


def test_collect_with_the_device_readout_equals_the_host_readout(tmp_path, monkeypatch):
    """The backend's device path (forced on the CPU) gives the host path's file."""
    folder = save_tiny(tmp_path / "tiny")
    lm = load_model(str(folder), range(1, 8))
    spec = [{"name": "tiny", "source": str(folder)}]

    def run():
        return collect(tiny_prompts(), spec, progress=False, batch_size=4,
                       loader=lambda s, o, probe=None: LocalModel(lm, o))  # fmt: skip

    host = run()
    monkeypatch.setattr(LocalModel, "readout_on_device", property(lambda self: True))
    dev = run()
    assert "readout" in dev.likert.attrs["models"]["tiny"]
    assert "readout" not in host.likert.attrs["models"]["tiny"]
    for v in ("pmf", "valid_mass", "decoding_pmf", "decoding_valid_mass", "topk_logprob"):
        np.testing.assert_allclose(dev[v], host[v], rtol=0, atol=1e-12, err_msg=v)
    np.testing.assert_array_equal(dev.topk_token, host.topk_token)
