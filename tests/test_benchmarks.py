"""The benchmarks' own machinery: the FLOP count.

No timing is asserted here (speed goals live in ``benchmarks/``); these tests only
keep the code the benchmarks run from rotting.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"

torch = pytest.importorskip("torch")


def _import(name: str, path: Path):
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def flops():
    sys.path.insert(0, str(BENCH))
    try:
        yield _import("_flops", BENCH / "_flops.py")
    finally:
        sys.path.remove(str(BENCH))


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)  # fmt: skip
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval()


def test_flop_counter_reads_every_call_shape(flops):
    model = _tiny_llama()
    cfg = model.config
    # parameters one token touches: every Linear of the decoder layers
    linear = sum(
        m.weight.numel() for m in model.model.layers.modules() if isinstance(m, torch.nn.Linear)
    )
    assert flops.body_params(cfg) == linear
    ids = torch.randint(0, 97, (3, 5))
    with flops.FlopCounter(model) as fc, torch.no_grad():
        out = model(input_ids=ids, use_cache=True)  # every position's logits
        model(input_ids=ids[:, :2], past_key_values=out.past_key_values, logits_to_keep=1)
    head = 2 * 32 * 97
    keys = 4 * 2 * 4 * 8  # 4 x layers x heads x head_dim per key
    first = 3 * (2 * linear * 5 + keys * (1 + 2 + 3 + 4 + 5) + 5 * head)
    second = 3 * (2 * linear * 2 + keys * (6 + 7) + 1 * head)
    assert fc.calls == 2 and fc.tokens == 3 * 7
    assert fc.flops == pytest.approx(first + second, rel=1e-12)
    # useful: the shared prefix once, each row's own tokens, one lm_head row each
    rows = [[1, 2, 3, 4], [1, 2, 3, 9, 9]]
    want = flops.span_flops(cfg, 0, 3) + flops.span_flops(cfg, 3, 4) + flops.span_flops(cfg, 3, 5)
    assert flops.useful_flops(cfg, [rows]) == pytest.approx(want + 2 * head)
