"""The same-dtype baseline: pad to ``[B, H, L_max, D]``, run torch SDPA, unpack.

Its error against the float64 reference measures what an ordinary attention
in the test dtype loses to rounding; kernel budgets are stated relative to it
(the FlashAttention tests' rule, Dao-AILab/flash-attention ``tests/``).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from jfa_verify.contract import JaggedProblem
from jfa_verify.dtypes import FORWARD_ONLY
from jfa_verify.errors import InvalidInput

from ._common import expand_kv_heads, padded_row_index, visible_masks

__all__ = ["padded_sdpa_attention"]


def _gather(x: torch.Tensor, index: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """The rows ``index`` reads, packed ``[T, H, D]`` -> ``[B, L, H, D]``, as a new autograd leaf.

    Only the rows that sequences use are copied: a buffer whose sequences start past most of its rows
    (the 2^31-element cases) is never cloned whole, nor given a whole-buffer gradient.
    """
    if x.shape[0] == 0:
        return x.new_zeros(*index.shape, *x.shape[1:]).requires_grad_(requires_grad)
    return x.detach()[index].requires_grad_(requires_grad)


def _pad(rows: torch.Tensor, valid: torch.Tensor, group: int = 1) -> torch.Tensor:
    """Gathered ``[B, L, H, D]`` -> padded ``[B, H * group, L, D]`` (padding rows 0; GQA heads expanded)."""
    padded = expand_kv_heads((rows * valid[..., None, None].to(rows.dtype)).flatten(0, 1), group)
    return padded.unflatten(0, rows.shape[:2]).transpose(1, 2)


def _scatter_grad(x: torch.Tensor, rows: torch.Tensor, index: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The gradient of packed ``x`` from its gathered leaf ``rows``: summed into the rows it was read from."""
    grad = torch.zeros_like(x)
    if rows.grad is not None and bool(valid.any()):
        grad.index_put_((index[valid],), rows.grad[valid], accumulate=True)
    return grad


def _masks(p: JaggedProblem, device) -> torch.Tensor:
    lengths = torch.tensor([p.q_lengths, p.k_lengths], device=device).reshape(2, p.batch)
    return visible_masks(lengths[0], lengths[1], p.max_seqlen_q, p.max_seqlen_k, p.causal, p.causal_alignment,
                         p.window)


# Largest padded score block the LSE is computed from at once (elements; 1 GiB in float32).
LSE_CHUNK_ELEMENTS = 1 << 28


def padded_sdpa_attention(
    problem: JaggedProblem,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: Optional[torch.Tensor] = None,
) -> dict[str, torch.Tensor]:
    """JFA outputs from padded ``torch.nn.functional.scaled_dot_product_attention`` in the input dtype.

    Args: as :func:`jfa_verify.oracles.float64.reference_attention`.

    Returns: ``o`` ``[rows, H_q, D_v]`` in the input dtype; ``lse`` ``[H_q, rows]``
    float32, the logsumexp of scores computed in the input dtype; with ``do``,
    ``dq``, ``dk``, ``dv`` in the input dtype, from autograd through SDPA. Float8
    inputs (forward only) are computed in bfloat16 on their exact values. Rows
    with no visible key follow the contract (0, ``-inf``, zero gradients).

    Rows with no visible key are given one dummy visible key inside SDPA, so it
    produces no NaN, and then multiplied by zero, which also zeroes their
    gradient contributions.

    Raises:
        InvalidInput: ``do`` given for float8 (forward-only) inputs.
    """
    p = problem
    if q.dtype in FORWARD_ONLY:
        # SDPA has no float8 path: run it in bfloat16 on the exactly upcast values (e4m3 fits in bf16).
        if do is not None:
            raise InvalidInput(f"dtype={q.dtype} is forward only: call without do")
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    dev, dtype = q.device, q.dtype
    o = torch.zeros(p.total_q_rows, p.num_heads_q, p.head_dim_v, dtype=dtype, device=dev)
    lse = torch.full((p.num_heads_q, p.total_q_rows), float("-inf"), dtype=torch.float32, device=dev)
    result = {"o": o, "lse": lse}
    if do is not None:
        result.update(dq=torch.zeros_like(q), dk=torch.zeros_like(k), dv=torch.zeros_like(v))
    if p.batch == 0 or p.max_seqlen_q == 0 or p.max_seqlen_k == 0:
        return result

    qi, qvalid = padded_row_index(p.q_starts, p.q_lengths, p.max_seqlen_q, dev)
    ki, kvalid = padded_row_index(p.k_starts, p.k_lengths, p.max_seqlen_k, dev)
    oi, _ = padded_row_index(p.out_starts, p.q_lengths, p.max_seqlen_q, dev)
    q_, k_, v_ = (_gather(x, i, do is not None) for x, i in ((q, qi), (k, ki), (v, ki)))
    qp = _pad(q_, qvalid)
    kp = _pad(k_, kvalid, p.group_size)
    vp = _pad(v_, kvalid, p.group_size)
    mask = _masks(p, dev)  # [B, Lq, Lk]
    has_key = mask.any(-1)  # [B, Lq]
    sdpa_mask = mask.clone()
    sdpa_mask[..., 0] |= ~has_key
    op = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=sdpa_mask[:, None], scale=p.sm_scale)
    op = op * has_key[:, None, :, None].to(dtype)  # [B, H, Lq, Dv]
    with torch.no_grad():
        # In batch chunks of at most ~2^28 scores (1 GiB in float32): a padded score tensor of
        # a large batch (2^31-element cases) would not fit in memory at once.
        per_seq = p.num_heads_q * p.max_seqlen_q * p.max_seqlen_k
        step = max(1, LSE_CHUNK_ELEMENTS // max(1, per_seq))
        lse_p = torch.empty(p.batch, p.num_heads_q, p.max_seqlen_q, dtype=torch.float32, device=dev)
        for b0 in range(0, p.batch, step):
            chunk = slice(b0, b0 + step)
            scores = (qp[chunk] @ kp[chunk].transpose(-1, -2)) * torch.tensor(p.sm_scale, dtype=dtype)
            scores = scores.float().masked_fill(~mask[chunk, None], float("-inf"))
            lse_p[chunk] = torch.logsumexp(scores, dim=-1)  # [b, H, Lq]; -inf where no key
            del scores
    rows_valid = qvalid
    out_rows = oi[rows_valid]
    o_packed = op.transpose(1, 2)[rows_valid]  # [rows_in_sequences, H, Dv]
    o[out_rows] = o_packed.detach()
    lse[:, out_rows] = lse_p.transpose(1, 2)[rows_valid].transpose(0, 1)
    if do is not None:
        o_packed.backward(do[out_rows].to(dtype))
        result.update(dq=_scatter_grad(q, q_, qi, qvalid), dk=_scatter_grad(k, k_, ki, kvalid),
                      dv=_scatter_grad(v, v_, ki, kvalid))
    return result
