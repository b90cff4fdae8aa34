"""The FlashAttention algorithm itself, in plain torch: online softmax over tiles.

Run in float64 it must agree with :mod:`oracles.float64` to rounding (any
difference is an algorithmic error); run with ``compute_dtype=float32`` and
``round_p=True`` it rounds like a typical kernel (``P`` cast to the input
dtype before ``P V``), which tells a kernel's algorithmic error from its rounding.

Forward recurrence per query tile (Dao et al., 2022, arXiv:2205.14135, Alg. 1;
Milakov & Gimelshein, 2018, arXiv:1805.02867): ``m' = max(m, rowmax(S))``,
``l' = exp(m - m') l + rowsum(exp(S - m'))``,
``acc' = exp(m - m') acc + exp(S - m') V``; finally ``O = acc / l`` and
``lse = m + log l``. Backward per key tile from the saved ``lse``
(FlashAttention-2, arXiv:2307.08691, Alg. 2).
"""

from __future__ import annotations

from typing import Optional

import torch

from jfa_verify.core.contract import JaggedProblem

from ._common import (
    check_output_grad,
    dequantized_inputs,
    expand_kv_heads,
    reduce_kv_heads,
    sequence_slices,
    visible_mask,
)

__all__ = ["blockwise_attention"]


def blockwise_attention(
    problem: JaggedProblem,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: Optional[torch.Tensor] = None,
    *,
    block_m: int = 32,
    block_n: int = 16,
    compute_dtype: torch.dtype = torch.float64,
    round_p: bool = False,
) -> dict[str, torch.Tensor]:
    """Tiled online-softmax JFA (forward, and backward with ``do``).

    Args: as :func:`jfa_verify.oracles.float64.reference_attention`, plus ``block_m`` and
    ``block_n`` (tile rows for queries and keys), ``compute_dtype`` (the
    accumulation dtype) and ``round_p`` (round ``P`` and ``dS`` to the input
    dtype before their products, as kernels do).

    Returns: the same keys and shapes as the float64 reference, in
    ``compute_dtype`` (``lse`` in ``compute_dtype`` too).

    Raises:
        InvalidInput: a block size < 1, or ``do`` not shaped like ``o``.
    """
    p = problem
    check_output_grad(p, do)
    if block_m < 1 or block_n < 1:
        from jfa_verify.core.errors import InvalidInput

        raise InvalidInput(f"block_m={block_m}, block_n={block_n}: tile sizes must be >= 1")
    cd, dev, g = compute_dtype, q.device, p.group_size
    input_dtype = q.dtype
    q, k, v = dequantized_inputs(p, q, k, v)  # MXFP8: the exact values the inputs stand for

    def rnd(x: torch.Tensor) -> torch.Tensor:
        return x.to(input_dtype).to(cd) if round_p else x

    o = torch.zeros(p.total_q_rows, p.num_heads_q, p.head_dim_v, dtype=cd, device=dev)
    lse = torch.full((p.num_heads_q, p.total_q_rows), float("-inf"), dtype=cd, device=dev)
    grads = None
    if do is not None:
        grads = {n: torch.zeros(t.shape, dtype=cd, device=dev) for n, t in (("dq", q), ("dk", k), ("dv", v))}
    for b in range(p.batch):
        q_rows, o_rows, k_rows = sequence_slices(p, b)
        lq, lk = p.q_lengths[b], p.k_lengths[b]
        if lq == 0:
            continue
        qb = q[q_rows].to(cd)
        kb = expand_kv_heads(k[k_rows].to(cd), g)
        vb = expand_kv_heads(v[k_rows].to(cd), g)
        mask = visible_mask(lq, lk, p.causal, p.causal_alignment, dev, p.window, p.block_selection, b)
        ob = torch.zeros(lq, p.num_heads_q, p.head_dim_v, dtype=cd, device=dev)
        lse_b = torch.full((p.num_heads_q, lq), float("-inf"), dtype=cd, device=dev)
        for m0 in range(0, lq, block_m):
            qt = qb[m0 : m0 + block_m]
            rows = qt.shape[0]
            m = torch.full((p.num_heads_q, rows), float("-inf"), dtype=cd, device=dev)
            l = torch.zeros(p.num_heads_q, rows, dtype=cd, device=dev)
            acc = torch.zeros(p.num_heads_q, rows, p.head_dim_v, dtype=cd, device=dev)
            for n0 in range(0, lk, block_n):
                tile_mask = mask[m0 : m0 + block_m, n0 : n0 + block_n]
                if not tile_mask.any():
                    continue
                s = torch.einsum("ihd,jhd->hij", qt, kb[n0 : n0 + block_n]) * p.sm_scale
                s = s.masked_fill(~tile_mask, float("-inf"))
                m_new = torch.maximum(m, s.amax(-1))
                m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                alpha = torch.exp(m - m_safe)
                pt = torch.exp(s - m_safe[..., None])
                l = alpha * l + pt.sum(-1)
                acc = alpha[..., None] * acc + torch.einsum("hij,jhd->hid", rnd(pt), vb[n0 : n0 + block_n])
                m = m_new
            has = l > 0
            ob[m0 : m0 + rows] = torch.where(has[..., None], acc / torch.where(has, l, 1)[..., None], 0).transpose(0, 1)
            lse_b[:, m0 : m0 + rows] = torch.where(has, m + torch.log(torch.where(has, l, 1)), float("-inf"))
        o[o_rows] = ob
        lse[:, o_rows] = lse_b
        if grads is None:
            continue
        dob = do[o_rows].to(cd)
        delta = (dob * ob).sum(-1).transpose(0, 1)  # [H, lq]
        lse_pos = torch.where(torch.isinf(lse_b), torch.full_like(lse_b, float("inf")), lse_b)
        dk_h = torch.zeros_like(kb)
        dv_h = torch.zeros_like(vb)
        dq_b = torch.zeros_like(qb)
        for n0 in range(0, lk, block_n):
            kt, vt = kb[n0 : n0 + block_n], vb[n0 : n0 + block_n]
            for m0 in range(0, lq, block_m):
                tile_mask = mask[m0 : m0 + block_m, n0 : n0 + block_n]
                if not tile_mask.any():
                    continue
                s = torch.einsum("ihd,jhd->hij", qb[m0 : m0 + block_m], kt) * p.sm_scale
                pt = torch.exp(s - lse_pos[:, m0 : m0 + block_m, None]).masked_fill(~tile_mask, 0.0)
                dot = dob[m0 : m0 + block_m]
                dv_h[n0 : n0 + block_n] += torch.einsum("hij,ihd->jhd", rnd(pt), dot)
                dp = torch.einsum("ihd,jhd->hij", dot, vt)
                ds = pt * (dp - delta[:, m0 : m0 + block_m, None])
                dk_h[n0 : n0 + block_n] += torch.einsum("hij,ihd->jhd", rnd(ds), qb[m0 : m0 + block_m]) * p.sm_scale
                dq_b[m0 : m0 + block_m] += torch.einsum("hij,jhd->ihd", rnd(ds), kt) * p.sm_scale
        grads["dq"][q_rows] += dq_b
        grads["dk"][k_rows] += reduce_kv_heads(dk_h, g)
        grads["dv"][k_rows] += reduce_kv_heads(dv_h, g)
    out = {"o": o, "lse": lse}
    if grads is not None:
        out.update(grads)
    return out
