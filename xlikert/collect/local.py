"""Transformers backend: exact next-token PMFs, one forward pass per (condition, item).

Protocol (paper §3 "Constraint", DESIGN.md §5):

* chat models: the tokenizer's chat template with the generation prompt; the
  templated text is tokenised with ``add_special_tokens=False`` (the template
  already holds BOS where the model wants it, as in ``apply_chat_template``), and
  a doubled leading BOS is removed;
* models without a chat template (base models) get the plain format
  :data:`PLAIN_FORMAT`, preceded by the BOS token when the tokenizer adds one;
  the stored ``prompt`` is always the exact text, tokenised without added tokens;
* left padding with explicit position ids, ``logits_to_keep=1``;
* log-softmax over the FULL vocabulary in float64, then gather the valid tokens
  (:mod:`xlikert.collect.tokens`);
* the system-prompt prefix shared by a group of prompts is run once and its KV
  cache reused for every item (checked against an uncached pass at run time).

Everything heavy is imported inside functions so that importing this module
stays cheap; torch and transformers load with the first model.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import CollectionError
from .tokens import (
    ANSWER_RULE,
    SPACED_ANSWER_RULE,
    AnswerSequences,
    ValidTokens,
    find_answer_sequences,
    find_valid_tokens,
    needs_sequences,
    spaced_answers,
)
from .zoo import ZOO, cache_dir, resolve_gguf, sha256_file

__all__ = [
    "DECODING_TIE_RULE",
    "PLAIN_FORMAT",
    "LoadedModel",
    "decoding_grid",
    "load_model",
    "score_answers",
    "score_logits",
]

#: Prompt format for models without a chat template (base models).
PLAIN_FORMAT = "{system}\n\n{user}\nAnswer:"

#: How the nucleus is formed; stored in the results' attrs.
DECODING_TIE_RULE = (
    "probabilities p_T = softmax(logits / T) over the full vocabulary (float64); the nucleus "
    "for top_p < 1 is every token whose p_T is >= the p_T of the token at which the cumulative "
    "mass, in descending order, first reaches top_p (tokens tied with it are all kept, so the "
    "result does not depend on sort order); top_p = 1 keeps every token; the item PMF is the "
    "valid tokens' mass inside the nucleus renormalised, decoding_valid_mass is that mass over "
    "the nucleus mass (NaN PMF where no valid token is in the nucleus)"
)


def _is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    msg = str(exc).lower()
    return isinstance(exc, (RuntimeError, MemoryError)) and (
        "out of memory" in msg or "can't allocate memory" in msg or isinstance(exc, MemoryError)
    )


@dataclass
class LoadedModel:
    """A model ready to score prompts, with its provenance."""

    name: str
    model: Any
    tokenizer: Any
    valid: ValidTokens
    prompt_format: str  # "chat" or "plain"
    provenance: dict[str, Any] = field(default_factory=dict)
    #: Token spellings of every value when one next-token read is not enough (multi-token
    #: scales, or a tokenizer that keeps the leading space apart), else None.
    answers: AnswerSequences | None = None

    @property
    def device(self):
        return self.model.device

    def __repr__(self) -> str:
        return (
            f"<LoadedModel {self.name!r} source={self.provenance.get('source')!r} "
            f"format={self.prompt_format} valid_tokens={len(self.valid.ids)} "
            + (f"answer_spellings={len(self.answers.sequences)} " if self.answers else "")
            + f"device={self.provenance.get('device')} dtype={self.provenance.get('dtype')}>"
        )

    # ------------------------------------------------------------------ prompts
    def render(self, system: str, user: str) -> str:
        """The exact text sent to the model for one (system, user) pair."""
        if self.prompt_format == "plain":
            return self._plain_bos() + PLAIN_FORMAT.format(system=system, user=user)
        msgs = [{"role": "user", "content": user}]
        if system:
            msgs.insert(0, {"role": "system", "content": system})
        try:
            return self.tokenizer.apply_chat_template(
                msgs, tokenize=False, add_generation_prompt=True
            )
        except Exception as exc:  # template without a system role
            if not system:
                raise CollectionError(f"model {self.name!r}: chat template failed: {exc}") from exc
            merged = [{"role": "user", "content": f"{system}\n\n{user}"}]
            self.provenance["system_merged_into_user"] = "true"
            return self.tokenizer.apply_chat_template(
                merged, tokenize=False, add_generation_prompt=True
            )

    def _plain_bos(self) -> str:
        # The plain format starts with BOS exactly when the tokenizer itself adds one.
        tok = self.tokenizer
        if tok.bos_token is None:
            return ""
        ids = tok("x", add_special_tokens=True)["input_ids"]
        return tok.bos_token if ids and ids[0] == tok.bos_token_id else ""

    def encode(self, text: str) -> list[int]:
        """Token ids of a rendered prompt (no duplicated BOS)."""
        tok = self.tokenizer
        ids = list(tok(text, add_special_tokens=False)["input_ids"])
        bos = tok.bos_token_id
        if bos is not None and len(ids) >= 2 and ids[0] == bos and ids[1] == bos:
            ids = ids[1:]
        if not ids:
            raise CollectionError(f"model {self.name!r}: prompt {text!r} encodes to no tokens")
        return ids


# ---------------------------------------------------------------------------- loading
def _torch_dtype(dtype: str | None, device: str):
    import torch

    if dtype in (None, "auto"):
        if device.startswith("cuda") and torch.cuda.is_available():
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in table:
        raise CollectionError(f"unknown dtype {dtype!r}; choose one of {sorted(table)} or 'auto'")
    return table[dtype]


def _default_device(device: str | None) -> str:
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise CollectionError(
            f"unknown device {device!r}; use 'cpu', 'cuda', 'cuda:1', 'mps' or 'auto' ({exc})"
        ) from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise CollectionError(f"device {device!r} requested but CUDA is not available")
    return device


def _load_gguf(gguf_path: Path, sha: str, label: str, torch_dtype):
    """Dequantise a GGUF file once (float32) and cache it as safetensors keyed by sha256."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    target = cache_dir() / "models" / f"{label}-{sha[:16]}"
    marker = target / "xlikert-complete.json"
    if not marker.is_file():
        import functools

        import transformers.modeling_gguf_pytorch_utils as gguf_utils
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

        # transformers' GGUF reader uses tqdm.auto directly: keep xlikert's bar alone.
        gguf_utils.tqdm = functools.partial(gguf_utils.tqdm, disable=True)
        folder, fname = str(gguf_path.parent), gguf_path.name
        config = AutoConfig.from_pretrained(folder, gguf_file=fname)
        # from_config + load_gguf_checkpoint: transformers' GGUF path without accelerate.
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        state = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model)
        result = model.load_state_dict(state["tensors"], strict=False)
        missing = [k for k in result.missing_keys if "lm_head" not in k]
        if missing or (
            "lm_head.weight" in result.missing_keys
            and not getattr(model.config, "tie_word_embeddings", False)
        ):
            raise CollectionError(
                f"GGUF file {gguf_path} lacks weights {result.missing_keys[:5]} for "
                f"{type(model).__name__}"
            )
        model.tie_weights()
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "xlikert-complete.json").write_text(
            json.dumps({"gguf": str(gguf_path), "sha256": sha, "xlikert": __version__})
        )
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, target)
        del model
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch_dtype)
    tokenizer = AutoTokenizer.from_pretrained(target)
    return model, tokenizer


def load_model(
    spec: dict[str, Any] | str,
    scale: range | list[int],
    *,
    device: str | None = None,
    dtype: str | None = None,
    device_map: str | None = None,
    trust_remote_code: bool = False,
    split_space: bool = True,
) -> LoadedModel:
    """Load a model for collection.

    Parameters
    ----------
    spec
        A built-in zoo name, a Hugging Face id, a local directory or ``.gguf`` file,
        or a dict with ``name``, ``source`` and optional ``revision``, ``dtype``,
        ``device``, ``device_map``, ``gguf_file``, ``trust_remote_code``,
        ``prompt_format`` (``"chat"``/``"plain"``).
    scale
        Scale values whose valid tokens are looked up.
    device, dtype, device_map
        Defaults for keys missing from ``spec``; ``dtype="auto"`` is float32 on
        CPU and bf16 (else fp16) on CUDA; softmax is always float64.
    trust_remote_code
        Off unless asked.
    split_space
        Also count answers whose leading space is a token of its own (``"▁"``
        then ``"5"``), exactly, in the same forward pass
        (:data:`~xlikert.collect.tokens.SPACED_ANSWER_RULE`). Off: the paper's
        one-token rule, where such answers are constraint failures.

    Examples
    --------
    >>> lm = load_model("smollm2-135m-instruct", range(1, 8))  # doctest: +SKIP
    >>> lm.prompt_format  # doctest: +SKIP
    'chat'
    """
    import transformers

    if isinstance(spec, str):
        spec = {"name": spec, "source": spec}
    spec = dict(spec)
    source = str(spec.get("source") or spec.get("name"))
    name = str(spec.get("name") or source)
    device = _default_device(spec.get("device", device))
    dev_map = spec.get("device_map", device_map)
    torch_dtype = _torch_dtype(spec.get("dtype", dtype), device)
    trc = bool(spec.get("trust_remote_code", trust_remote_code))
    prov: dict[str, Any] = {"source": source, "revision": "", "sha256": ""}
    t0 = time.perf_counter()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    try:
        lm = _load(spec, source, name, device, dev_map, torch_dtype, trc, prov, scale, split_space)
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    lm.provenance["load_seconds"] = round(time.perf_counter() - t0, 2)
    return lm


def _load(
    spec, source, name, device, dev_map, torch_dtype, trc, prov, scale, split_space
) -> LoadedModel:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_file = spec.get("gguf_file")
    path = Path(source).expanduser()
    if source in ZOO:
        zm = ZOO[source]
        gguf = resolve_gguf(source)
        model, tokenizer = _load_gguf(gguf, zm.sha256, source, torch_dtype)
        prov.update(revision=zm.package_version, sha256=zm.sha256, upstream=zm.hf_id)
        prov["gguf_file"] = zm.filename
        prov["tokenizer_name"] = f"{zm.hf_id} (from GGUF)"
    elif path.suffix == ".gguf" or gguf_file:
        gguf = path / gguf_file if gguf_file else path
        if not gguf.is_file():
            raise CollectionError(f"model {name!r}: GGUF file {gguf} does not exist")
        sha = sha256_file(gguf)
        if spec.get("sha256") and spec["sha256"] != sha:
            raise CollectionError(
                f"checksum mismatch for model {name!r}: {gguf} has sha256 {sha}, "
                f"expected {spec['sha256']}"
            )
        model, tokenizer = _load_gguf(gguf, sha, gguf.stem, torch_dtype)
        prov.update(sha256=sha, gguf_file=gguf.name)
    else:
        looks_local = path.exists() or source.startswith((".", "/", "~"))
        if looks_local and not path.is_dir():
            raise CollectionError(
                f"unknown model {source!r}: not a built-in ({', '.join(ZOO)}), and no such "
                "local directory"
            )
        if not looks_local and source.count("/") != 1:
            raise CollectionError(
                f"unknown model {source!r}; built-in models are {', '.join(ZOO)}, or give a "
                "Hugging Face id (owner/name) or a local directory"
            )
        kwargs: dict[str, Any] = {"dtype": torch_dtype, "trust_remote_code": trc}
        if spec.get("revision"):
            kwargs["revision"] = spec["revision"]
        if dev_map:
            import importlib.util

            if importlib.util.find_spec("accelerate") is None:
                raise CollectionError(
                    f"model {name!r}: device_map={dev_map!r} needs the 'accelerate' package "
                    "(pip install accelerate)"
                )
            kwargs["device_map"] = dev_map
        try:
            model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
            tokenizer = AutoTokenizer.from_pretrained(
                source, trust_remote_code=trc, revision=spec.get("revision")
            )
        except OSError as exc:
            raise CollectionError(f"cannot load model {name!r} from {source!r}: {exc}") from exc
        prov["revision"] = str(
            spec.get("revision") or getattr(model.config, "_commit_hash", None) or ""
        )
        if path.is_dir():
            weights = sorted(
                p for p in path.iterdir() if p.suffix in (".safetensors", ".bin", ".pt")
            )
            if weights:
                import hashlib

                h = hashlib.sha256()
                for w in weights:
                    h.update(f"{w.name}:{sha256_file(w)}\n".encode())
                prov["sha256"] = h.hexdigest()
                prov["sha256_of"] = "sha256 of '<file>:<sha256>' lines of the weight files"
    if not dev_map:
        model.to(device)
    model.eval()

    fmt = spec.get("prompt_format") or ("chat" if tokenizer.chat_template else "plain")
    if fmt not in ("chat", "plain"):
        raise CollectionError(
            f"model {name!r}: prompt_format must be 'chat' or 'plain', got {fmt!r}"
        )
    if fmt == "chat" and not tokenizer.chat_template:
        raise CollectionError(
            f"model {name!r}: prompt_format='chat' but the tokenizer has no chat template"
        )
    answers = None
    if needs_sequences(scale):
        answers = find_answer_sequences(tokenizer, scale)
    else:
        try:
            valid = find_valid_tokens(tokenizer, scale)
        except CollectionError:
            answers = find_answer_sequences(tokenizer, scale)  # raises when none exist
        else:
            if split_space:
                answers = spaced_answers(tokenizer, valid)
    if answers is not None and answers.continuation is not None:
        # the one-token answers, for the record; scoring uses every spelling
        singles = [
            (s[0], y) for s, y in zip(answers.sequences, answers.scores, strict=True) if len(s) == 1
        ]
        valid = ValidTokens(
            ids=tuple(i for i, _ in singles),
            surfaces=tuple(tokenizer.convert_ids_to_tokens(i) for i, _ in singles),
            scores=tuple(y for _, y in singles),
            scale=tuple(int(v) for v in scale),
        )
    n_vocab = model.get_output_embeddings().weight.shape[0]
    used = list(valid.ids) + ([i for s in answers.sequences for i in s] if answers else [])
    if used and max(used) >= n_vocab:
        raise CollectionError(f"model {name!r}: valid token ids exceed the model's vocabulary")
    prov.update(
        tokenizer=f"{type(tokenizer).__name__}:"
        + str(prov.pop("tokenizer_name", None) or getattr(tokenizer, "name_or_path", "")),
        dtype=str(torch_dtype).replace("torch.", ""),
        device=str((dev_map and f"device_map={dev_map}") or model.device),
        prompt_format=fmt,
        prompt_template=PLAIN_FORMAT
        if fmt == "plain"
        else "chat template, add_generation_prompt=True",
        architecture=type(model).__name__,
        transformers=transformers.__version__,
        torch=torch.__version__,
    )
    if answers is not None and answers.continuation is None:
        prov["answers"] = "one token or split space (exact, same pass): " + SPACED_ANSWER_RULE
    elif answers is not None:
        prov["answers"] = "multi-token (exact, teacher forced): " + ANSWER_RULE
    else:
        prov["answers"] = "one token: the next token is a valid token"
    return LoadedModel(name, model, tokenizer, valid, fmt, prov, answers)


# ---------------------------------------------------------------------------- scoring
def score_logits(
    logits,
    valid: ValidTokens,
    *,
    top_k: int = 20,
    temperatures=(0.1, 0.5, 1.0, 1.3),
    top_ps=(0.8, 0.9, 1.0),
) -> dict[str, np.ndarray]:
    """Map last-position logits ``(batch, vocab)`` to item PMFs and the decoding grid.

    All arithmetic is in float64 over the full vocabulary.

    Returns
    -------
    dict
        ``pmf (B, S)``, ``valid_mass (B,)``, ``topk_id (B, k)``, ``topk_logprob (B, k)``,
        ``decoding_pmf (B, T, P, S)``, ``decoding_valid_mass (B, T, P)``.

    Examples
    --------
    >>> out = score_logits(torch.randn(2, 50), vt)  # doctest: +SKIP
    >>> out["pmf"].sum(-1)  # doctest: +SKIP
    array([1., 1.])
    """
    import torch

    z = logits.to(torch.float64)
    ids = torch.as_tensor(valid.ids, device=z.device)
    s_index = torch.as_tensor(
        [valid.scale.index(s) for s in valid.scores], device=z.device, dtype=torch.long
    )
    n_s = len(valid.scale)
    logp = torch.log_softmax(z, dim=-1)
    pv = logp[:, ids].exp()
    vm = pv.sum(-1)
    pmf = torch.zeros(z.shape[0], n_s, dtype=torch.float64, device=z.device)
    pmf.index_add_(1, s_index, pv)
    pmf = pmf / vm[:, None]
    k = min(top_k, z.shape[-1])
    tk = logp.topk(k, dim=-1)
    dpmf, dvm = decoding_grid(z, ids, s_index, n_s, temperatures, top_ps)
    return {
        "pmf": pmf.cpu().numpy(),
        "valid_mass": vm.cpu().numpy(),
        "topk_id": tk.indices.cpu().numpy(),
        "topk_logprob": tk.values.cpu().numpy(),
        "decoding_pmf": dpmf.cpu().numpy(),
        "decoding_valid_mass": dvm.cpu().numpy(),
    }


def _grid_logprobs(z, need, temperatures, top_ps):
    """log q_{T,p} of the tokens ``need`` for every decoding setting (tie rule above).

    ``z`` are float64 logits ``(..., V)``; yields ``(ti, pi, logq)`` with ``logq``
    of shape ``(..., len(need))`` (``-inf`` outside the nucleus). As in
    :func:`decoding_grid`, one descending sort serves every temperature, and only
    the nucleus threshold and mass touch the whole vocabulary.
    """
    import torch

    zn = z[..., need]
    need_sort = any(tp < 1 for tp in top_ps)
    zs = z.sort(dim=-1, descending=True).values if need_sort else None
    for ti, temp in enumerate(temperatures):
        if not temp > 0:
            raise CollectionError(f"temperature must be > 0, got {temp}")
        lse = torch.logsumexp(z / float(temp), dim=-1, keepdim=True)
        lp = zn / float(temp) - lse
        if need_sort:
            sp = torch.exp(zs / float(temp) - lse)
            csum = sp.cumsum(-1)
        for pi, top_p in enumerate(top_ps):
            if not 0 < top_p <= 1:
                raise CollectionError(f"top_p must be in (0, 1], got {top_p}")
            if top_p >= 1:
                yield ti, pi, lp
                continue
            target = torch.full((*z.shape[:-1], 1), float(top_p), dtype=z.dtype, device=z.device)
            kidx = torch.searchsorted(csum, target).clamp(max=z.shape[-1] - 1)
            thr = zs.gather(-1, kidx)  # logit of the last admitted token
            # every token tied with it is admitted: the nucleus is {t : z_t >= thr}
            znuc = torch.where(zs >= thr, sp, torch.zeros_like(sp)).sum(-1, keepdim=True)
            yield ti, pi, torch.where(zn >= thr, lp - torch.log(znuc), float("-inf"))


def decoding_grid(z, ids, s_index, n_scores, temperatures, top_ps):
    """Item PMF and valid mass a sampler would see for every (temperature, top_p).

    See :data:`DECODING_TIE_RULE`. ``z`` are float64 logits ``(B, V)``; the valid
    mass is the nucleus-renormalised mass of the valid tokens.
    """
    import torch

    B = z.shape[0]
    out = torch.full(
        (B, len(temperatures), len(top_ps), n_scores),
        float("nan"),
        dtype=torch.float64,
        device=z.device,
    )
    outm = torch.zeros((B, len(temperatures), len(top_ps)), dtype=torch.float64, device=z.device)
    for ti, pi, logq in _grid_logprobs(z, ids, temperatures, top_ps):
        agg = torch.zeros(B, n_scores, dtype=torch.float64, device=z.device)
        agg.index_add_(1, s_index, logq.exp())
        m = agg.sum(-1)
        outm[:, ti, pi] = m
        ok = m > 0
        out[ok, ti, pi] = agg[ok] / m[ok, None]
    return out, outm


def answer_leaves(answers: AnswerSequences) -> tuple[list[tuple[int, ...]], list[int]]:
    """Maximal spellings (no spelling extends them) and, per spelling, a leaf it starts.

    One teacher-forced row per leaf yields the logits after every prefix of the
    leaf, so every spelling and its stop probability are read off some leaf row.
    Without a stop check (``answers.continuation is None``) a spelling needs only
    the logits after its proper prefixes, so the leaves are maximal proper
    prefixes: for the split-space rule, one row per space token.
    """
    seqs = list(answers.sequences)
    if answers.continuation is None:
        seqs = [s[:-1] for s in seqs]
    leaves = [s for s in seqs if not any(len(t) > len(s) and t[: len(s)] == s for t in seqs)]
    leaves = list(dict.fromkeys(leaves))
    owner = [next(i for i, leaf in enumerate(leaves) if leaf[: len(s)] == s) for s in seqs]
    return leaves, owner


def score_answers(
    logits,
    answers: AnswerSequences,
    n_prompts: int,
    *,
    top_k: int = 20,
    temperatures=(0.1, 0.5, 1.0, 1.3),
    top_ps=(0.8, 0.9, 1.0),
) -> dict[str, np.ndarray]:
    """Exact multi-token answer PMFs from teacher-forced leaf rows.

    Parameters
    ----------
    logits
        ``(n_prompts * n_leaves, keep, V)``: for prompt ``b`` and leaf ``l`` (row
        ``b * n_leaves + l``, see :func:`answer_leaves`), the logits at the last
        ``keep = max leaf length + 1`` positions of ``prompt + leaf`` (left padded).
    answers
        Every spelling of every value (:func:`~xlikert.collect.tokens.find_answer_sequences`).

    Returns
    -------
    dict
        As :func:`score_logits`; ``pmf`` and ``valid_mass`` follow
        :data:`~xlikert.collect.tokens.ANSWER_RULE`, the decoding grid applies the
        temperature and nucleus at every answer position (stop included), and the
        top-k tokens are those of the first answer position.

    Examples
    --------
    >>> out = score_answers(logits, answers, 2)  # doctest: +SKIP
    >>> out["pmf"].sum(-1)  # doctest: +SKIP
    array([1., 1.])
    """
    import torch

    leaves, owner = answer_leaves(answers)
    L = len(leaves)
    keep = logits.shape[1]
    V = logits.shape[-1]
    z = logits.to(torch.float64).reshape(n_prompts, L, keep, V)
    dev = z.device
    check_stop = answers.continuation is not None
    # only these tokens' probabilities enter an answer: its spellings and the continuations
    need = sorted({t for seq in answers.sequences for t in seq} | set(answers.continuation or ()))
    col = {t: j for j, t in enumerate(need)}
    cont = torch.as_tensor(
        [col[t] for t in answers.continuation or ()], dtype=torch.long, device=dev
    )
    need_t = torch.as_tensor(need, dtype=torch.long, device=dev)
    n_s = len(answers.scale)
    s_index = torch.as_tensor(
        [answers.scale.index(y) for y in answers.scores], dtype=torch.long, device=dev
    )

    def pos(leaf: int, k: int) -> int:  # kept index of the logits after k leaf tokens
        return keep - 1 - len(leaves[leaf]) + k

    def masses(logq):  # logq (B, L, keep, len(need)) -> answer masses (B, A)
        if check_stop:  # P(next token does not continue the number) = 1 - P(continuation)
            going = logq[..., cont].exp().sum(-1)
            log_stop = torch.log1p(-going.clamp(max=1.0))
        cols = []
        for a, seq in enumerate(answers.sequences):
            leaf = owner[a]
            lp = sum(logq[:, leaf, pos(leaf, k), col[t]] for k, t in enumerate(seq))
            if check_stop:
                lp = lp + log_stop[:, leaf, pos(leaf, len(seq))]
            cols.append(torch.exp(lp))
        return torch.stack(cols, dim=-1)

    def aggregate(m):
        agg = torch.zeros(m.shape[0], n_s, dtype=torch.float64, device=dev)
        agg.index_add_(1, s_index, m)
        return agg

    logp = torch.log_softmax(z, dim=-1)
    agg = aggregate(masses(logp[..., need_t]))
    vm = agg.sum(-1)
    pmf = agg / vm[:, None]
    first = logp[:, 0, pos(0, 0), :]
    k = min(top_k, V)
    tk = first.topk(k, dim=-1)
    dpmf = torch.full(
        (n_prompts, len(temperatures), len(top_ps), n_s), float("nan"), dtype=torch.float64
    )
    dvm = torch.zeros((n_prompts, len(temperatures), len(top_ps)), dtype=torch.float64)
    for ti, pi, logq in _grid_logprobs(z, need_t, temperatures, top_ps):
        a = aggregate(masses(logq)).cpu()
        m = a.sum(-1)
        dvm[:, ti, pi] = m
        ok = m > 0
        dpmf[ok, ti, pi] = a[ok] / m[ok, None]
    return {
        "pmf": pmf.cpu().numpy(),
        "valid_mass": vm.cpu().numpy(),
        "topk_id": tk.indices.cpu().numpy(),
        "topk_logprob": tk.values.cpu().numpy(),
        "decoding_pmf": dpmf.numpy(),
        "decoding_valid_mass": dvm.numpy(),
    }


class Scorer:
    """Runs batches of prompts through a :class:`LoadedModel` with a cached prefix."""

    def __init__(self, lm: LoadedModel, *, prefix_cache: bool = True):
        self.lm = lm
        self.prefix_cache = prefix_cache
        self._checked = False
        params = inspect.signature(lm.model.forward).parameters
        self._keep = "logits_to_keep" in params

    @property
    def input_device(self):
        return self.lm.model.get_input_embeddings().weight.device

    def prefix_state(self, prefix: list[int]):
        """Run ``prefix`` once; returns its KV cache (or None when caching is off/empty)."""
        import torch

        if not self.prefix_cache or not prefix:
            return None
        ids = torch.tensor([prefix], device=self.input_device)
        with torch.inference_mode():
            out = self.lm.model(input_ids=ids, use_cache=True, **self._kw())
        return out.past_key_values

    def _kw(self, keep: int = 1) -> dict:
        return {"logits_to_keep": keep} if self._keep else {}

    def forward(self, prefix: list[int], cache, suffixes: list[list[int]]):
        """Last-position logits ``(B, V)`` of ``prefix + suffix`` for each suffix."""
        return self.forward_rows(prefix, cache, suffixes, keep=1)[:, -1, :]

    def forward_rows(self, prefix: list[int], cache, suffixes: list[list[int]], keep: int = 1):
        """Logits ``(B, keep, V)`` at the last ``keep`` positions of ``prefix + suffix``.

        Rows are left padded, so position ``-j`` is the j-th last token of every row.
        """
        import torch

        dev = self.input_device
        B = len(suffixes)
        L = max(len(s) for s in suffixes)
        pad = self.lm.tokenizer.pad_token_id
        pad = 0 if pad is None else pad
        ids = torch.full((B, L), pad, dtype=torch.long)
        att = torch.zeros((B, L), dtype=torch.long)
        for r, s in enumerate(suffixes):
            ids[r, L - len(s) :] = torch.tensor(s)
            att[r, L - len(s) :] = 1
        ids, att = ids.to(dev), att.to(dev)
        with torch.inference_mode():
            if cache is not None:
                P = len(prefix)
                pos = P + (att.cumsum(-1) - 1).clamp(min=0)
                full_att = torch.cat([torch.ones((B, P), dtype=att.dtype, device=dev), att], 1)
                past = copy.deepcopy(cache)
                if B > 1:
                    past.batch_repeat_interleave(B)
                out = self.lm.model(
                    input_ids=ids,
                    attention_mask=full_att,
                    position_ids=pos,
                    past_key_values=past,
                    use_cache=True,
                    **self._kw(keep),
                )
            else:
                if prefix:
                    pre = torch.tensor(prefix, device=dev).expand(B, -1)
                    ids = torch.cat([pre, ids], 1)
                    att = torch.cat([torch.ones_like(pre), att], 1)
                pos = (att.cumsum(-1) - 1).clamp(min=0)
                out = self.lm.model(
                    input_ids=ids,
                    attention_mask=att,
                    position_ids=pos,
                    use_cache=False,
                    **self._kw(keep),
                )
        return out.logits[:, -keep:, :]

    def check_prefix_cache(self, prefix, cached_logits, suffix, atol: float = 1e-4) -> float:
        """Compare one prompt's cached-prefix logits with an uncached pass.

        Disables caching (with a warning) when any probability differs by more than
        ``atol``. Returns the max absolute difference.
        """
        import torch

        a = torch.softmax(cached_logits.double(), -1)
        b = torch.softmax(self.forward(prefix, None, [suffix])[0].double(), -1)
        diff = float((a - b).abs().max())
        if diff > atol:
            warnings.warn(
                f"model {self.lm.name!r}: prefix-cached and uncached probabilities differ by "
                f"{diff:.2e}; prefix caching disabled for this model",
                stacklevel=2,
            )
            self.prefix_cache = False
        # A statement, not the value: the value depends on which prompt was checked first,
        # and a resumed run must write the same file as an uninterrupted one.
        self.lm.provenance["prefix_cache"] = (
            f"on; checked against an uncached pass (max |dp| <= {atol:g})"
            if self.prefix_cache
            else f"off; cached and uncached passes differed by more than {atol:g}"
        )
        self._checked = True
        return diff
