"""The exact reference: float64, per sequence, explicit formulas on the tensors' device.

Forward, per sequence and head: ``S = sm_scale * Q K^T`` masked to the visible
keys, ``lse = logsumexp(S)`` (natural log), ``P = exp(S - lse)``, ``O = P V``.
Backward (the softmax Jacobian, as in FlashAttention-2, Dao 2023,
arXiv:2307.08691, Algorithm 2): ``dV = P^T dO``, ``dP = dO V^T``,
``Delta = rowsum(dO * O)``, ``dS = P * (dP - Delta)``, ``dQ = sm_scale dS K``,
``dK = sm_scale dS^T Q``. Written out instead of autograd so that rows with no
visible key give exact zeros (autograd through ``logsumexp`` of ``-inf`` gives NaN).
"""

from __future__ import annotations

from typing import Optional

import torch

from jfa_verify.contract import JaggedProblem

from ._common import expand_kv_heads, reduce_kv_heads, sequence_slices, visible_mask

__all__ = ["reference_attention"]


def reference_attention(
    problem: JaggedProblem,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: Optional[torch.Tensor] = None,
) -> dict[str, torch.Tensor]:
    """Exact JFA outputs (and gradients when ``do`` is given) in float64.

    Args:
        problem: the call's :class:`~jfa_verify.contract.JaggedProblem`, from
            :func:`jfa_verify.contract.validate_inputs` on these tensors (validated once, by the caller).
        q, k, v: the inputs, as in the contract.
        do: the output gradient, shaped like ``o`` (``[rows, H_q, D_v]``), any float dtype; None for
            the forward only.

    Returns: ``{"o": [rows, H_q, D_v], "lse": [H_q, rows]}`` and, with ``do``,
    ``"dq"`` (shape of ``q``), ``"dk"``, ``"dv"`` (shapes of ``k``, ``v``); all
    float64 on the inputs' device. Also, as 0-dim float64 scalars, the
    magnitudes rounding errors scale with (used by :mod:`jfa_verify.compare`):

    * ``"<out>_lowp"`` for o, dq, dk, dv: the largest element of ``P |V|``,
      ``sm_scale M |K|``, ``sm_scale M^T |Q|``, ``P^T |dO|`` with
      ``M = |dS| + P (|dO| . |O|)``: rounding ``P`` or ``dS`` to the input dtype
      before its matmul, and ``Delta`` taken from the stored (rounded) ``O``
      (as FlashAttention kernels do), move each output element by at most
      ``eps/2`` times these (first order);
    * ``"<out>_acc"`` for every output: the same sums with ``P`` weighted by
      ``W = P (1 + |S| + |lse|)`` and, for dQ/dK, ``dS`` replaced by its terms
      before they cancel, ``W (|dP| + |Delta|)``: ``S`` is rounded in float32
      and ``P = exp(S - lse)`` is recomputed from large numbers, so float32
      moves ``P`` by about ``eps (|S| + |lse|)`` relative (large logits), and
      with one visible key dQ and dK are exactly 0 yet computed from terms of
      size ``|dO| |V|``. LSE's is ``1 + max sum_j P |S|``. Without ``do`` the forward
      terms (``o_lowp``, ``o_acc``, ``lse_acc``) are still returned. Rows outside every sequence and rows with no
    visible key: ``o = 0``, ``lse = -inf``, zero gradients.

    Raises:
        InvalidInput: ``do`` is not shaped like ``o``.
    """
    p = problem
    f64 = torch.float64
    dev = q.device
    g = p.group_size
    o = torch.zeros(p.total_q_rows, p.num_heads_q, p.head_dim_v, dtype=f64, device=dev)
    lse = torch.full((p.num_heads_q, p.total_q_rows), float("-inf"), dtype=f64, device=dev)
    if do is not None:
        if tuple(do.shape) != tuple(o.shape):
            from jfa_verify.errors import InvalidInput

            raise InvalidInput(f"do.shape={tuple(do.shape)} must equal o.shape={tuple(o.shape)}")
        dq = torch.zeros(q.shape, dtype=f64, device=dev)
        dk = torch.zeros(k.shape, dtype=f64, device=dev)
        dv = torch.zeros(v.shape, dtype=f64, device=dev)
    # Running maxima stay on the device (0-dim tensors): one host sync per call, not one per sequence.
    terms = {name: torch.zeros((), dtype=f64, device=dev) for name in (
        "o_lowp", "dq_lowp", "dk_lowp", "dv_lowp", "o_acc", "lse_acc", "dq_acc", "dk_acc", "dv_acc")}

    def keep(name: str, value: torch.Tensor) -> None:
        if value.numel():
            terms[name] = torch.maximum(terms[name], value.max())

    for b in range(p.batch):
        q_rows, o_rows, k_rows = sequence_slices(p, b)
        lq, lk = p.q_lengths[b], p.k_lengths[b]
        if lq == 0:
            continue
        qb = q[q_rows].to(f64)
        kb = expand_kv_heads(k[k_rows].to(f64), g)
        vb = expand_kv_heads(v[k_rows].to(f64), g)
        mask = visible_mask(lq, lk, p.causal, p.causal_alignment, dev, p.window)  # [lq, lk]
        s = torch.einsum("ihd,jhd->hij", qb, kb) * p.sm_scale
        s = s.masked_fill(~mask, float("-inf"))
        row_lse = torch.logsumexp(s, dim=-1) if lk > 0 else torch.full((p.num_heads_q, lq), float("-inf"), dtype=f64, device=dev)
        safe = torch.where(torch.isinf(row_lse), torch.zeros_like(row_lse), row_lse)
        prob = torch.exp(s - safe[..., None]).masked_fill(~mask, 0.0)  # [H, lq, lk]
        ob = torch.einsum("hij,jhd->ihd", prob, vb)
        o[o_rows] = ob
        lse[:, o_rows] = row_lse
        keep("o_lowp", torch.einsum("hij,jhd->ihd", prob, vb.abs()))
        s_abs = torch.where(mask, s.abs(), torch.zeros_like(s))  # [H, lq, lk], 0 where masked
        weight = prob * (1.0 + s_abs + safe.abs()[..., None])  # relative float32 error of P, in eps
        keep("o_acc", torch.einsum("hij,jhd->ihd", weight, vb.abs()))
        keep("lse_acc", 1.0 + (prob * s_abs).sum(-1))
        if do is None:
            continue
        dob = do[o_rows].to(f64)
        dv_h = torch.einsum("hij,ihd->jhd", prob, dob)
        dp = torch.einsum("ihd,jhd->hij", dob, vb)
        delta = (dob * ob).sum(-1).transpose(0, 1)  # [H, lq]
        ds = prob * (dp - delta[..., None])
        if lk:
            scale = abs(p.sm_scale)
            # Delta uses O as stored (rounded to the input dtype): that shifts dS_ij by up to
            # P_ij * eps/2 * (|dO_i| . |O_i|); add it to the rounding of dS itself.
            delta_err = (dob.abs() * ob.abs()).sum(-1).transpose(0, 1)[..., None]  # [H, lq, 1]
            ds_mag = ds.abs() + prob * delta_err
            keep("dq_lowp", scale * torch.einsum("hij,jhd->ihd", ds_mag, kb.abs()))
            keep("dk_lowp", scale * torch.einsum("hij,ihd->jhd", ds_mag, qb.abs()))
            keep("dv_lowp", torch.einsum("hij,ihd->jhd", prob, dob.abs()))
            mag = weight * (dp.abs() + delta.abs()[..., None])  # dS's terms before they cancel
            keep("dq_acc", scale * torch.einsum("hij,jhd->ihd", mag, kb.abs()))
            keep("dk_acc", scale * torch.einsum("hij,ihd->jhd", mag, qb.abs()))
            keep("dv_acc", torch.einsum("hij,ihd->jhd", weight, dob.abs()))
        dq[q_rows] += torch.einsum("hij,jhd->ihd", ds, kb) * p.sm_scale
        dk[k_rows] += reduce_kv_heads(torch.einsum("hij,ihd->jhd", ds, qb) * p.sm_scale, g)
        dv[k_rows] += reduce_kv_heads(dv_h, g)
    out = {"o": o, "lse": lse}
    if do is not None:
        out.update(dq=dq, dk=dk, dv=dv)
    forward_terms = ("o_lowp", "o_acc", "lse_acc")
    out.update({name: value.cpu() for name, value in terms.items() if do is not None or name in forward_terms})
    return out
