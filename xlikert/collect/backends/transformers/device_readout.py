"""The next-token readout on the model's device, in float64 (torch twin of the host rules).

:func:`xlikert.kernels.readout.next_token_readout` turns full-vocabulary logits rows
into the answer tokens' log-probabilities, the decoding grid and the top-k list,
in float64 numpy on the host. On a GPU that means copying every
``(batch, contexts, vocabulary)`` logits block to the host and running the
rules on one CPU core, which can take longer than the forward pass itself
(``benchmarks/bench_gpu.py`` reports the readout's share of the time).
:func:`next_token_readout_torch` applies the same rules to the logits where
they are, in float64 (cheap on a GPU next to the forward pass), and moves only
the small results to the host.

The rules are those of :data:`~xlikert.kernels.readout.DECODING_TIE_RULE`; the
top-k list is ordered by descending probability, ties by id. The two
implementations agree to rounding (a test compares them on rows with ties and
masked tokens to 1e-12); a nucleus boundary that falls exactly on a running sum
equal to ``top_p`` to the last bit could in principle be read differently by two
summation orders, as it could by two numpy builds.

The transformers backend uses it when the model is not on the CPU
(:attr:`xlikert.collect.backends.transformers.LocalModel.readout_device`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...foreign import Tensor

__all__ = ["next_token_readout_torch"]


def next_token_readout_torch(
    logits: Tensor,
    need: np.ndarray,
    temperatures: Sequence[float],
    top_ps: Sequence[float],
    top_k: int = 0,
    pooled: Sequence[int] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~xlikert.kernels.readout.next_token_readout` for a batch, on the logits' device.

    Parameters
    ----------
    logits : torch.Tensor
        ``(B, C, V)`` logits of the next token after each of ``B`` prompts
        followed by each of ``C`` answer contexts (any float dtype, any device).
    need : np.ndarray
        Token ids the answer rule needs.
    temperatures, top_ps : sequence of float
        The decoding grid.
    top_k : int
        How many of the most probable tokens after context 0 to list (0: none).
    pooled : np.ndarray, optional
        Token ids wanted only as a sum: one more column, the log of their summed
        probability (:func:`~xlikert.kernels.readout.nucleus_logprobs`).

    Returns
    -------
    raw, grid, topk_id, topk_logprob : np.ndarray
        ``(B, C, len(need) [+ 1])``, ``(B, C, T, P, len(need) [+ 1])`` float64 log-probabilities
        and ``(B, k)`` ids and log-probabilities: for each prompt, what
        :func:`~xlikert.kernels.readout.next_token_readout` returns for its ``(C, V)`` rows.

    Examples
    --------
    >>> import torch
    >>> z = torch.log(torch.tensor([[[0.5, 0.3, 0.2]]]))
    >>> raw, grid, ids, lp = next_token_readout_torch(z, np.array([2]), [1.0], [0.8], top_k=2)
    >>> np.exp(raw).round(6).tolist(), np.exp(grid).round(6).ravel().tolist(), ids.tolist()
    ([[[0.2]]], [0.0], [[0, 1]])
    """
    import torch

    z = logits.to(torch.float64)
    b, c, v = z.shape
    idx = torch.as_tensor(np.asarray(need, dtype=np.int64), device=z.device)
    temps, tops = [float(t) for t in temperatures], [float(p) for p in top_ps]
    zn = z.index_select(-1, idx)
    zp = None
    if pooled is not None:
        zp = z.index_select(
            -1, torch.as_tensor(np.asarray(pooled, dtype=np.int64), device=z.device)
        )
    n = idx.numel()
    raw = zn - _logsumexp(z)
    if zp is not None:
        raw = torch.cat([raw, _logsumexp(zp) - _logsumexp(z)], -1)
    grid = torch.full((b, c, len(temps), len(tops), raw.shape[-1]), float("nan"),
                      dtype=torch.float64, device=z.device)  # fmt: skip
    cut = [pi for pi, p in enumerate(tops) if p < 1]
    zs = torch.sort(z, dim=-1, descending=True).values if cut else None
    for ti, temp in enumerate(temps):
        lse = _logsumexp(z / temp)
        lp = zn / temp - lse
        for pi, top_p in enumerate(tops):
            if top_p >= 1:
                grid[:, :, ti, pi, :n] = lp
                if zp is not None:
                    grid[:, :, ti, pi, n:] = _logsumexp(zp / temp) - lse
        if zs is None:
            continue
        sp = torch.exp(zs / temp - lse)
        csum = torch.cumsum(sp, dim=-1)
        for pi in cut:
            reached = csum >= tops[pi]
            # the first position whose running mass reaches top_p; none: the last value
            k = torch.where(reached.any(-1), reached.to(torch.int8).argmax(-1), v - 1)
            thr = zs.gather(-1, k.unsqueeze(-1))  # every value tied with it is kept
            mass = torch.where(zs >= thr, sp, torch.zeros_like(sp)).sum(-1, keepdim=True)
            minus_inf = torch.full_like(lp, float("-inf"))
            grid[:, :, ti, pi, :n] = torch.where(zn >= thr, lp - torch.log(mass), minus_inf)
            if zp is not None:  # the pooled tokens inside the nucleus, summed
                inside = torch.where(zp >= thr, zp / temp, torch.full_like(zp, float("-inf")))
                grid[:, :, ti, pi, n:] = _logsumexp(inside) - lse - torch.log(mass)
    k = min(int(top_k), v)
    if k > 0:
        first = z[:, 0] - _logsumexp(z[:, 0])  # context () is the prompt itself
        # descending, ties by id: a stable sort keeps equal values in id order
        order = torch.sort(first, dim=-1, descending=True, stable=True).indices[:, :k]
        topk_id, topk_lp = order.cpu().numpy(), first.gather(-1, order).cpu().numpy()
    else:
        topk_id, topk_lp = np.empty((b, 0), dtype=np.int64), np.empty((b, 0))
    return raw.cpu().numpy(), grid.cpu().numpy(), topk_id, topk_lp


def _logsumexp(z: Tensor) -> Tensor:
    """``log(sum(exp(z)))`` over the last axis, kept; a row of ``-inf`` gives ``-inf``."""
    import torch

    m = z.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return m + torch.log(torch.exp(z - m).sum(-1, keepdim=True))
