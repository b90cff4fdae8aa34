"""The same-dtype baseline: pad to ``[n, H, L_max, D]``, run torch SDPA, unpack.

Sequences of similar lengths are padded together (:func:`sequence_groups`), one SDPA call per group: padding a
skewed batch to its longest sequence made this oracle the slowest part of a case (a 256-sequence Pareto batch:
724 ms on the CPU against 105 ms for the float64 reference).

Its error against the float64 reference measures what an ordinary attention
in the test dtype loses to rounding; kernel budgets are stated relative to it
(the FlashAttention tests' rule, Dao-AILab/flash-attention ``tests/``).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from jfa_verify.core.contract import JaggedProblem
from jfa_verify.core.dtypes import FORWARD_ONLY
from jfa_verify.core.errors import InvalidInput

from ._common import (
    GroupRows,
    check_output_grad,
    dequantized_inputs,
    expand_kv_heads,
    group_indices,
    host_to_device,
    length_groups,
    visible_masks,
)

__all__ = ["padded_sdpa_attention", "sequence_groups"]


def _gather(x: torch.Tensor, index: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """The rows ``index`` reads, packed ``[T, H, D]`` -> ``[B, L, H, D]``, as a new autograd leaf.

    Only the rows that sequences use are copied: a buffer whose sequences start past most of its rows
    (the 2^31-element cases) is never cloned whole, nor given a whole-buffer gradient.
    """
    if x.shape[0] == 0:
        return x.new_zeros(*index.shape, *x.shape[1:]).requires_grad_(requires_grad)
    # index_select, not x[index]: the same rows; CPU advanced indexing is 5x slower, 100x with its threads contended
    rows = x.detach().index_select(0, index.reshape(-1))
    return rows.reshape(*index.shape, *x.shape[1:]).requires_grad_(requires_grad)


def _pad(rows: torch.Tensor, valid: torch.Tensor, group: int = 1) -> torch.Tensor:
    """Gathered ``[B, L, H, D]`` -> padded ``[B, H * group, L, D]`` (padding rows 0; GQA heads expanded)."""
    padded = expand_kv_heads((rows * valid[..., None, None].to(rows.dtype)).flatten(0, 1), group)
    return padded.unflatten(0, rows.shape[:2]).transpose(1, 2)


def _add_grad(grad: torch.Tensor, rows: torch.Tensor, where: GroupRows) -> None:
    """Add the gradient of the gathered leaf ``rows`` into packed ``grad``, on the rows it was read from (summed
    where several sequences read one row: broadcast-Q)."""
    if rows.grad is not None:  # (no host sync: an empty selection adds nothing)
        grad.index_put_((where.rows,), where.take(rows.grad), accumulate=True)


# Most padded scores one group holds (elements; its LSE scores in float32: 256 MiB). A larger sequence runs alone.
GROUP_SCORE_ELEMENTS = 1 << 26


def sequence_groups(problem: JaggedProblem) -> list[list[int]]:
    """The groups :func:`padded_sdpa_attention` pads into one SDPA call each: :func:`~._common.length_groups` with
    at most :data:`GROUP_SCORE_ELEMENTS` padded scores a group."""
    return length_groups(problem, GROUP_SCORE_ELEMENTS)


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
    with no visible key follow the contract (0, ``-inf``, zero gradients). A block-sparse call's
    selection is applied as part of the boolean mask SDPA is given.

    Rows with no visible key are given one dummy visible key inside SDPA, so it
    produces no NaN, and then multiplied by zero, which also zeroes their
    gradient contributions.

    Raises:
        InvalidInput: ``do`` given for float8 (forward-only) inputs, or not shaped like ``o``.
    """
    p = problem
    check_output_grad(p, do)
    if q.dtype in FORWARD_ONLY:
        # SDPA has no float8 path: run it in bfloat16 on the exactly upcast values (e4m3 fits in bf16; an
        # MXFP8 value, e4m3 times a power of two, too while it is a bfloat16 normal).
        if do is not None:
            raise InvalidInput(f"dtype={q.dtype} is forward only: call without do")
        q, k, v = dequantized_inputs(p, q, k, v, torch.bfloat16)
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    dev, dtype = q.device, q.dtype
    o = torch.zeros(p.total_q_rows, p.num_heads_q, p.head_dim_v, dtype=dtype, device=dev)
    lse = torch.full((p.num_heads_q, p.total_q_rows), float("-inf"), dtype=torch.float32, device=dev)
    result = {"o": o, "lse": lse}
    if do is not None:
        result.update(dq=torch.zeros_like(q), dk=torch.zeros_like(k), dv=torch.zeros_like(v))
    if p.batch == 0 or p.max_seqlen_q == 0 or p.max_seqlen_k == 0:
        return result

    for group in sequence_groups(p):
        _sdpa_group(p, group, q, k, v, do, result)
    return result


def _sdpa_group(p: JaggedProblem, group: list, q, k, v, do, result: dict) -> None:
    """Sequences ``group`` of ``p`` padded into one SDPA call: their rows of ``result`` written, their gradients
    added."""
    dev, dtype = q.device, q.dtype
    if max(p.k_lengths[b] for b in group) == 0:  # no key in any of them: rows stay 0 / -inf, no gradient
        return
    rows = group_indices(p, group, dev)
    q_rows, k_rows, out_rows, q_lens, k_lens = rows.q, rows.k, rows.out.rows, rows.q_lengths, rows.k_lengths
    lq_max, lk_max = max(q_lens), max(k_lens)
    q_, k_, v_ = (_gather(x, i, do is not None) for x, i in ((q, q_rows.index), (k, k_rows.index), (v, k_rows.index)))
    qp = _pad(q_, q_rows.valid)
    kp = _pad(k_, k_rows.valid, p.group_size)
    vp = _pad(v_, k_rows.valid, p.group_size)
    lengths = host_to_device(dict(lengths=torch.tensor([q_lens, k_lens])), dev)["lengths"]
    mask = visible_masks(lengths[0], lengths[1], lq_max, lk_max, p.causal, p.causal_alignment, p.window,
                         p.block_selection, group)
    has_key = mask.any(-1)  # [n, Lq]
    sdpa_mask = mask.clone()
    sdpa_mask[..., 0] |= ~has_key
    op = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=sdpa_mask[:, None], scale=p.sm_scale)
    op = op * has_key[:, None, :, None].to(dtype)  # [n, H, Lq, Dv]
    with torch.no_grad():
        scores = (qp @ kp.transpose(-1, -2)) * torch.tensor(p.sm_scale, dtype=dtype)
        scores = scores.float().masked_fill(~mask[:, None], float("-inf"))
        lse_p = torch.logsumexp(scores, dim=-1)  # [n, H, Lq]; -inf where no key
        del scores
    o_packed = q_rows.take(op.transpose(1, 2))  # [rows_in_sequences, H, Dv]
    result["o"][out_rows] = o_packed.detach()
    result["lse"][:, out_rows] = q_rows.take(lse_p.transpose(1, 2)).transpose(0, 1)
    if do is not None:
        o_packed.backward(do[out_rows].to(dtype))
        for name, x_, where in (("dq", q_, q_rows), ("dk", k_, k_rows), ("dv", v_, k_rows)):
            _add_grad(result[name], x_, where)
