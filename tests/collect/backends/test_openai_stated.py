"""``stated`` on an OpenAI-compatible server, against a stand-in server whose chat reply
is a fixed text: the request is the user's text with the instruction (the cell's own
labels for ``{options}``) at temperature 0 and ``stated_tokens``; the stored reply is the
server's; an ``ok`` reply's PMF sits on the item's own points with bounds equal to it, any
other reply has none."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest

from xlikert.collect.backends.openai.elicit import score_elicited_on_server
from xlikert.collect.backends.openai.plan import RequestPlan
from xlikert.collect.backends.openai.spec import parse_openai_spec
from xlikert.collect.options import CollectOptions
from xlikert.collect.stated import parse_stated


class _Transport:
    """Answers every chat request with ``reply`` (one listed token per word), kept."""

    def __init__(self, reply: str, finish: str):
        self.reply, self.finish, self.sent = reply, finish, []

    def request(self, method: str, path: str, body: dict) -> dict:
        self.sent.append((path, body))
        words = [w + " " for w in self.reply.split(" ")]
        words[-1] = words[-1][:-1]
        content = [{"token": w, "logprob": -0.1, "top_logprobs": []} for w in words]
        return {"choices": [{"message": {"role": "assistant", "content": self.reply},
                             "logprobs": {"content": content},
                             "finish_reason": self.finish}]}  # fmt: skip


def _run(reply: str, finish: str = "stop"):
    opts = CollectOptions(scale=(1, 2, 3), top_k=2, stated_tokens=17,
                          stated_instruction="Chances of {options}?")  # fmt: skip
    spec = parse_openai_spec({"name": "m", "source": "openai:x", "base_url": "http://h:1"})
    transport = _Transport(reply, finish)
    with ThreadPoolExecutor(1) as pool:
        model = SimpleNamespace(name="m", options=opts, spec=spec, tokenizer=None, pool=pool,
                                plan=RequestPlan(spec, transport, 2, "other"),
                                readout=SimpleNamespace(ids_ok=False))  # fmt: skip
        res = score_elicited_on_server(model, [("S", "Q")], "stated", opts, ["Yes", "", "No"])
    return res.data, transport.sent


def test_the_request_is_the_users_text_with_the_instruction_at_temperature_zero():
    d, sent = _run('{"No": "25%", "Yes": 75}')
    ((path, body),) = sent
    assert path == "/chat/completions"
    want = [{"role": "system", "content": "S"},
            {"role": "user", "content": "Q\n\nChances of Yes, No?"}]  # fmt: skip
    assert body["messages"] == want and json.loads(d["prompt_text"][0]) == want
    assert body["temperature"] == 0.0 and body["max_tokens"] == 17 and body["top_p"] == 1.0


@pytest.mark.parametrize(
    ("reply", "status"),
    [('{"No": "25%", "Yes": 75}', "ok"), ("Yes: 40%", "missing_options"),
     ("I cannot say.", "not_a_distribution"), ("", "no_reply")],
)  # fmt: skip
def test_the_stored_reply_is_the_servers_and_is_parsed(reply, status):
    d, _ = _run(reply, "length")
    assert d["reply_text"][0] == reply and d["reply_end"][0] == "length"
    assert d["stated_status"][0] == status
    reading = parse_stated(reply, ["Yes", "No"])
    assert d["stated_numbers"][0] == reading.numbers_json(["Yes", "No"])
    if status == "ok":
        np.testing.assert_allclose(d["pmf"][0], [0.75, 0.0, 0.25])
        for bound in ("pmf_lower", "pmf_upper"):
            np.testing.assert_array_equal(d[bound][0], d["pmf"][0])
        assert d["valid_mass"][0] == d["valid_mass_lower"][0] == d["valid_mass_upper"][0] == 1
        assert d["stated_sum"][0] == 100.0
    else:
        for name in ("pmf", "pmf_lower", "pmf_upper", "valid_mass", "valid_mass_lower"):
            assert np.isnan(d[name][0]).all(), name
