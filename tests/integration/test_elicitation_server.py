"""The elicitation levels ``prefix`` and ``greedy`` on a real OpenAI-compatible server
(llama-cpp-python's, the session's SmolLM2 GGUF server), one cell each: CETSCALE item 15,
target China, whose greedy reply writes its answer after a preamble ("The answer is 1-7.":
the default parsing rule reads 1, the standalone rule no answer).

The server lists top-k log-probabilities only, so both levels are bounded; the bounds at
a small ``top_k`` must hold the server's own values read with every token listed. The
independent readings: the prefix's prompt is the tokenizer's own chat template with the
prefix as the start of the assistant turn (``continue_final_message``), and the greedy
reply is the server's own temperature-0 chat completion asked without xlikert.
"""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("transformers")

from xlikert.collect import collect
from xlikert.collect.backends.openai import CACHE_RESET
from xlikert.design import load_experiment

PREFIX, CAP, FULL = "My answer is", 8, 49152


def _prompts(levels):
    ds = load_experiment("demo").build_prompts().sel(target=["China"], item=["15"])
    return ds.expand_dims(elicitation=levels)


def _entry(srv, tok):
    return [{"name": "m", "source": "openai:smol", "base_url": srv.url, "backoff": 0.05,
             "tokenizer": str(tok), "concurrency": 1, "mode": "topk"}]  # fmt: skip


def test_prefix_and_greedy_on_a_server_hold_the_servers_own_values(llamacpp_smol,
                                                                   smollm2_folder):  # fmt: skip
    from transformers import AutoTokenizer

    kw = {"progress": False, "answer_prefix": PREFIX}
    entry = _entry(llamacpp_smol, smollm2_folder)
    small = collect(_prompts(["prefix", "greedy"]), entry, top_k=5, reply_tokens=CAP, **kw)
    info = small.likert.attrs["models"]["m"]
    assert info["server_kind"] == "llama-cpp-python"
    assert "elicitation_greedy_protocol" in info and "elicitation_prefix_protocol" in info
    s = small.sel(model="m", target="China", item="15")
    g = s.sel(elicitation="greedy")
    assert int(g.reply_answered) == 1, str(g.reply_text.values)
    t = int(g.reply_answer_position)
    # every token listed (the greedy reply cut right after its answer: the same reply up
    # to there, a listing of the whole vocabulary at each position): the intervals shrink
    # to the server's round-off, and the small top-k's intervals hold those values
    full = collect(_prompts(["prefix", "greedy"]), entry, top_k=FULL, reply_tokens=t + 1, **kw)
    f = full.sel(model="m", target="China", item="15")
    assert str(g.reply_text.values).startswith(str(f.sel(elicitation="greedy").reply_text.values))
    for level in ("prefix", "greedy"):
        a, b = s.sel(elicitation=level), f.sel(elicitation=level)
        assert float((b.pmf_upper - b.pmf_lower).max()) < 1e-3, level
        assert bool(((a.pmf_lower <= b.pmf) & (b.pmf <= a.pmf_upper)).all()), level
        assert float(a.valid_mass_lower) <= float(b.valid_mass) <= float(a.valid_mass_upper)
        assert float((a.pmf_upper - a.pmf_lower).max()) > 1e-3, level  # really only bounded
    # prefix: the prompt is the tokenizer's chat template continuing the assistant turn
    tok = AutoTokenizer.from_pretrained(smollm2_folder)
    p = _prompts(["prefix"]).sel(target="China", item="15", elicitation="prefix")
    msgs = [{"role": r, "content": str(p[r].values)} for r in ("system", "user")]
    text = tok.apply_chat_template([*msgs, {"role": "assistant", "content": PREFIX}],
                                   tokenize=False, continue_final_message=True)  # fmt: skip
    assert str(s.prompt_text.sel(elicitation="prefix").values) == text
    # greedy: the reply is the server's own temperature-0 reply, asked without xlikert
    # (after the same one-token completion that resets its prompt cache)
    url = llamacpp_smol.url
    httpx.post(f"{url}/completions", json={"model": "smol", **CACHE_RESET}, timeout=120)
    body = {"model": "smol", "messages": msgs, "temperature": 0.0, "max_tokens": CAP}
    own = httpx.post(f"{url}/chat/completions", json=body, timeout=120).json()
    assert str(g.reply_text.values) == own["choices"][0]["message"]["content"]
    # the stricter rule: "1-7" is a range, not an answer (the same reply, parsed again)
    strict = collect(_prompts(["greedy"]), entry, top_k=5, reply_tokens=CAP,
                     answer_parse="standalone", **kw)  # fmt: skip
    st = strict.sel(model="m", target="China", item="15", elicitation="greedy")
    assert str(st.reply_text.values) == str(g.reply_text.values)
    assert int(st.reply_answered) == 0, str(st.reply_text.values)
    print(f"\nserver greedy reply {str(g.reply_text.values)!r}: answer {float(g.reply_answer)} "
          f"at {t}; in-text pmf width (top-5) "
          f"{float((g.pmf_upper - g.pmf_lower).max()):.3f}")  # fmt: skip


STATED_CAP = 32


def test_stated_on_a_server_is_the_servers_own_greedy_reply_parsed(llamacpp_smol,
                                                                   smollm2_folder, tmp_path):  # fmt: skip
    """``stated`` on the server: the stored reply is the server's temperature-0 chat reply
    to the user's text with the instruction (labels filled in the test), asked without
    xlikert; its status, numbers and PMF the parser's reading; a second run reuses it."""
    import json

    import numpy as np

    from xlikert.collect.options import CollectOptions
    from xlikert.collect.stated import parse_stated

    kw = {"progress": False, "top_k": 5, "stated_tokens": STATED_CAP}
    entry = _entry(llamacpp_smol, smollm2_folder)
    out = tmp_path / "stated.nc"
    ds = collect(_prompts(["stated"]), entry, out, **kw)
    info = ds.likert.attrs["models"]["m"]
    assert "elicitation_stated_protocol" in info
    c = ds.sel(model="m", target="China", item="15", elicitation="stated")
    p = _prompts(["stated"]).sel(target="China", item="15", elicitation="stated")
    labels = [str(y) for y in range(1, 8)]  # the demo's 7-point scale, answered by digits
    instruction = CollectOptions().stated_instruction
    user = str(p.user.values) + "\n\n" + instruction.replace("{options}", ", ".join(labels))
    msgs = [{"role": "system", "content": str(p.system.values)}, {"role": "user", "content": user}]
    assert json.loads(str(c.prompt_text.values)) == msgs
    url = llamacpp_smol.url
    httpx.post(f"{url}/completions", json={"model": "smol", **CACHE_RESET}, timeout=120)
    body = {"model": "smol", "messages": msgs, "temperature": 0.0, "max_tokens": STATED_CAP}
    own = httpx.post(f"{url}/chat/completions", json=body, timeout=120).json()["choices"][0]
    assert str(c.reply_text.values) == own["message"]["content"]
    assert str(c.reply_end.values) == ("length" if own["finish_reason"] == "length" else "eos")
    reading = parse_stated(own["message"]["content"], labels)
    assert str(c.stated_status.values) == reading.status
    assert json.loads(str(c.stated_numbers.values)) == json.loads(reading.numbers_json(labels))
    if reading.pmf is None:
        assert np.isnan(c.pmf.values).all() and np.isnan(float(c.valid_mass))
    else:  # read exactly: the bounds are the point
        np.testing.assert_allclose(c.pmf.values, reading.pmf)
        assert (c.pmf_lower == c.pmf).all() and (c.pmf_upper == c.pmf).all()
        assert float(c.valid_mass) == 1.0
    again = collect(_prompts(["stated"]), entry, tmp_path / "again.nc", reuse=[out], **kw)
    assert int(again.attrs["cells_computed"]) == 0, again.attrs["cells_computed"]
    assert (again["reply_text"] == ds["reply_text"]).all()
    print(f"\nserver stated reply ({reading.status}): {own['message']['content']!r}")
