"""A tiny random-weight Llama with an in-process tokenizer, for collection tests.

The tokenizer splits text into single characters, plus added whole tokens: the
chat markers and several surface forms of the scale digits (``"▁3"``, ``"Ġ5"``,
``" 6"``) next to distractors that must never count as valid (``"seven"``,
``"17"``, ``"7."``).
"""

from __future__ import annotations

import os
import signal
import string
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
EXTRA = ["▁1", "▁3", "Ġ5", " 6", "Ġ7", "seven", "17", "7.", "▁seven"]
SPECIAL = ["<pad>", "<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]


def _char_tokenizer(vocab: dict[str, int], pattern: str, fuse: bool = False):
    """A fast tokenizer that splits text at every match of ``pattern`` (unknown pieces:
    ``<unk>``), with the special tokens of :data:`SPECIAL`."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    if fuse:  # decode by joining the tokens' text
        tk.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tk,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=SPECIAL[4:],
    )


def build_tokenizer(digits: bool = True, chat: bool = True):
    chars = [c for c in string.printable if c not in "\x0b\x0c\r"]
    if not digits:
        chars = [c for c in chars if not c.isdigit()]
    extra = EXTRA if digits else ["seven"]
    tok = _char_tokenizer({t: i for i, t in enumerate(SPECIAL + chars + extra)}, ".")
    if chat:
        tok.chat_template = CHAT_TEMPLATE
    return tok


def build_model(vocab_size: int, seed: int = 0, scale: float = 8.0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
    )
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():  # sharper than uniform, so top-p truncation bites
        model.lm_head.weight.mul_(scale)
    return model.eval()


def save_tiny(path: Path, digits: bool = True, chat: bool = True, seed: int = 0) -> Path:
    tok = build_tokenizer(digits=digits, chat=chat)
    model = build_model(len(tok), seed=seed)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def nucleus(p: np.ndarray, temp: float = 1.0, top_p: float = 1.0) -> np.ndarray:
    """A sampler's next-token distribution, written plainly: softmax at ``temp`` of the
    log-probabilities ``log p``, then greedy top-p (add tokens until the mass reaches it)."""
    q = np.exp(np.log(p) / temp - np.max(np.log(p) / temp))
    q /= q.sum()
    keep = np.zeros(q.size, bool)
    mass = 0.0
    for j in np.argsort(-q, kind="stable"):
        keep[j] = True
        mass += q[j]
        if mass >= top_p:
            break
    return np.where(keep, q, 0.0) / q[keep].sum()


SYSTEM = "Rate 1-7. Respond with ONLY the digit."
ITEMS = [
    "{P} should buy {A} goods.",
    "Imports hurt {P}.",
    "A real {A} buys {A}.",
    "Only buy what {P} cannot make.",
    "Foreign goods are fine.",
]
LEX = {
    "USA": ("Americans", "American"),
    "France": ("the French", "French"),
    "Chad": ("Chadians", "Chadian"),
}


def tiny_prompts(n_targets: int = 3, n_items: int = 5, systems: int = 1) -> xr.Dataset:
    targets = list(LEX)[:n_targets]
    items = ITEMS[:n_items]
    user = [[t.format(P=LEX[g][0], A=LEX[g][1]) for t in items] for g in targets]
    ds = xr.Dataset(
        {"user": (("target", "item"), np.array(user, dtype=str))},
        coords={
            "target": targets,
            "item": [str(i + 1) for i in range(len(items))],
            "reverse_keyed": ("item", np.arange(len(items)) == len(items) - 1),
        },
        attrs={"instrument": "tiny", "scale_min": 1, "scale_max": 7},
    )
    if systems == 1:
        ds["system"] = xr.DataArray(SYSTEM)
    else:
        ds["system"] = ("target", [f"{SYSTEM} ({g})" for g in targets])
    return ds


# ----------------------------------------------------------------------------- reasoning
#: A chat template with a thinking switch, like Qwen3's: thinking off renders an empty thought.
THINK_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}"
)
MICRO_CHARS = ["1", "2", "3", "4", "5", "6", "7", " ", "\n", "x", "y", "z"]
MICRO_WORDS = ["Answer:", "<think>", "</think>"]


def build_micro_tokenizer(thinking: bool = True):
    """A tokenizer of 22 tokens (prompt characters outside it are ``<unk>``): digits, a
    space, a newline, three letters and the whole words ``Answer:``, ``<think>``,
    ``</think>``; decoding joins the tokens' text. Every 2-token trace can be enumerated."""
    vocab = {t: i for i, t in enumerate(SPECIAL + MICRO_CHARS)}
    tok = _char_tokenizer(vocab, r"[\s\S]", fuse=True)
    tok.add_tokens(MICRO_WORDS)
    tok.chat_template = THINK_TEMPLATE if thinking else CHAT_TEMPLATE
    return tok


def save_micro(path: Path, seed: int = 1, scale: float = 2.0, thinking: bool = True) -> Path:
    tok = build_micro_tokenizer(thinking)
    model = build_model(len(tok), seed=seed, scale=scale)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


# ----------------------------------------------------------------------------- kill -9
HERE = Path(__file__).parent


def kill_then_resume(model_dir: Path, tmp_path: Path, *extra: str, glob: str, units: int):
    """The resume child's run killed (SIGKILL) in a process of its own as soon as
    ``units`` saved units match ``glob``, then resumed to the end, beside a clean run
    (the resume and the clean run in this process: what they read is the killed
    process's saved progress).

    Returns the clean and the resumed file (opened, loaded, their date/history attrs
    dropped), the number of saved units at the kill, and a function that runs the
    resume again on the resumed output.
    """
    from support import resume_child

    env = dict(
        os.environ, PYTHONPATH=f"{HERE.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    )
    child = HERE / "resume_child.py"
    clean, killed = tmp_path / "clean.nc", tmp_path / "killed.nc"
    proc = subprocess.Popen([sys.executable, child, model_dir, killed, "0.5", *extra], env=env)
    resume_child.run(model_dir, clean, 0.0, *extra)  # while the child starts
    partial = tmp_path / "killed.nc.partial"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(partial.glob(glob))) < units:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_done = len(list(partial.glob(glob)))
    assert not killed.exists()  # nothing looks complete
    with pytest.warns(UserWarning, match="took over the lock .* that process is gone"):
        resume_child.run(model_dir, killed, 0.0, *extra)
    assert not partial.exists()
    files = []
    for path in (clean, killed):
        with xr.open_dataset(path) as ds:
            ds = ds.load()
        for key in ("date_created", "history", "collection_seconds_last_session"):
            ds.attrs.pop(key)
        files.append(ds)
    return files[0], files[1], n_done, lambda: resume_child.run(model_dir, killed, 0.0, *extra)


def save_answering_tiny(path: Path, seed: int = 1) -> Path:
    """A tiny model whose digit tokens are boosted, so that greedy replies write answers
    (at the first position for some prompts, later for others)."""
    import torch

    tok = build_tokenizer()
    model = build_model(len(tok), seed=seed)
    ids = tok.convert_tokens_to_ids([str(y) for y in range(1, 8)])
    with torch.no_grad():
        model.lm_head.weight[ids] *= 1.6
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def save_word_tiny(path: Path, labels, seed: int = 2, boost: float = 2.5) -> Path:
    """A tiny model that writes word labels: a flatter head (``scale`` 2) with the labels'
    characters boosted, so that every label has a share of the mass after a prompt and
    the labels' walk has a tree of several levels to read."""
    import torch

    tok = build_tokenizer()
    model = build_model(len(tok), seed=seed, scale=2.0)
    ids = tok.convert_tokens_to_ids(sorted(set("".join(labels))))
    with torch.no_grad():
        model.lm_head.bias = None
        model.lm_head.weight[ids] *= boost
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
