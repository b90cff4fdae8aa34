"""The exact reference: float64, explicit formulas on the tensors' device, sequences padded in groups.

Forward, per sequence and head: ``S = sm_scale * Q K^T`` masked to the visible
keys (the mask and, for a block-sparse call, the selected blocks), ``lse = logsumexp(S)`` (natural log),
``P = exp(S - lse)``, ``O = P V``.
Backward (the softmax Jacobian, as in FlashAttention-2, Dao 2023,
arXiv:2307.08691, Algorithm 2): ``dV = P^T dO``, ``dP = dO V^T``,
``Delta = rowsum(dO * O)``, ``dS = P * (dP - Delta)``, ``dQ = sm_scale dS K``,
``dK = sm_scale dS^T Q``. Written out instead of autograd so that rows with no
visible key give exact zeros (autograd through ``logsumexp`` of ``-inf`` gives NaN).

Sequences of similar lengths run as one padded batch (:func:`sequence_groups`): a few dozen device operations
per group instead of per sequence (a 256-sequence MovieLens batch was about 10,000 launches). Padded rows and keys
are masked, so they add exact zeros.
"""

from __future__ import annotations

from typing import Optional

import torch

from jfa_verify.core.contract import JaggedProblem

from ._common import (
    check_output_grad,
    dequantized_inputs,
    expand_kv_heads,
    group_indices,
    host_to_device,
    length_groups,
    reduce_kv_heads,
    visible_masks,
)

__all__ = ["reference_attention", "sequence_groups"]

# Most scores one group holds (elements of one [n, H, Lq, Lk] float64 tensor: 128 MiB; about ten such tensors are
# alive at once). A sequence larger than this runs alone, in blocks of query rows of at most this many scores.
GROUP_SCORE_ELEMENTS = 1 << 24


def sequence_groups(problem: JaggedProblem) -> list[list[int]]:
    """The groups :func:`reference_attention` pads into one batch each: :func:`~._common.length_groups` with at most
    :data:`GROUP_SCORE_ELEMENTS` padded scores a group."""
    return length_groups(problem, GROUP_SCORE_ELEMENTS)


def _gather(x: torch.Tensor, index: torch.Tensor, valid: torch.Tensor, group: int) -> torch.Tensor:
    """``x[index]`` in float64 as ``[n, width, H * group, D]``, zero on padded rows (so that ``0 * inf`` never
    reaches a sum)."""
    n, width = index.shape
    # index_select, not x[index]: the same rows; CPU advanced indexing is 5x slower, 100x with its threads contended
    rows = expand_kv_heads(x.index_select(0, index.reshape(-1)).to(torch.float64), group)
    rows = rows.reshape(n, width, *rows.shape[1:])
    return torch.where(valid[:, :, None, None], rows, torch.zeros((), dtype=rows.dtype, device=rows.device))


def _add_rows(total: torch.Tensor, index: torch.Tensor, rows: torch.Tensor) -> None:
    """``total[index[i]] += rows[i]`` for every ``i``, in order (repeated indices add up).

    On the CPU through ``index_put_(accumulate=True)``: the same sums in the same order as ``index_add_``, bit for
    bit, in one serial pass, where the CPU's ``index_add_`` runs threaded (microseconds either way on an idle core;
    on a busy 2-core machine ``index_add_`` took up to 50x longer, most of a small case's reference). Elsewhere
    ``index_add_``, as before (CUDA's is one kernel; its ``index_put_`` would sort the indices first).
    """
    if total.device.type == "cpu":
        total.index_put_((index,), rows, accumulate=True)
    else:
        total.index_add_(0, index, rows)


def reference_attention(
    problem: JaggedProblem,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: Optional[torch.Tensor] = None,
    *,
    by_sequence: bool = False,
) -> dict[str, torch.Tensor]:
    """Exact JFA outputs (and gradients when ``do`` is given) in float64.

    Args:
        problem: the call's :class:`~jfa_verify.core.contract.JaggedProblem`, from
            :func:`jfa_verify.core.contract.validate_inputs` on these tensors (validated once, by the caller).
        q, k, v: the inputs, as in the contract.
        do: the output gradient, shaped like ``o`` (``[rows, H_q, D_v]``), any float dtype; None for
            the forward only.
        by_sequence: also return each magnitude below per sequence, as ``"<term>_by_sequence"`` (``[B]``
            float64 on the host; 0 for a sequence with no rows): a packed case's parts are judged on their own
            sequences' magnitudes (:mod:`jfa_verify.judge.packing`).

    Returns: ``{"o": [rows, H_q, D_v], "lse": [H_q, rows]}`` and, with ``do``,
    ``"dq"`` (shape of ``q``), ``"dk"``, ``"dv"`` (shapes of ``k``, ``v``); all
    float64 on the inputs' device. Also, as 0-dim float64 scalars, the
    magnitudes rounding errors scale with (used by :mod:`jfa_verify.judge.compare`):

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
    q, k, v = dequantized_inputs(p, q, k, v)  # MXFP8: the exact values the inputs stand for
    g = p.group_size
    o = torch.zeros(p.total_q_rows, p.num_heads_q, p.head_dim_v, dtype=f64, device=dev)
    lse = torch.full((p.num_heads_q, p.total_q_rows), float("-inf"), dtype=f64, device=dev)
    check_output_grad(p, do)
    if do is not None:
        dq = torch.zeros(q.shape, dtype=f64, device=dev)
        dk = torch.zeros(k.shape, dtype=f64, device=dev)
        dv = torch.zeros(v.shape, dtype=f64, device=dev)
    # Running maxima stay on the device (0-dim tensors): one host sync per call, not one per sequence.
    terms = {name: torch.zeros((), dtype=f64, device=dev) for name in (
        "o_lowp", "dq_lowp", "dk_lowp", "dv_lowp", "o_acc", "lse_acc", "dq_acc", "dk_acc", "dv_acc")}

    per_sequence = {name: torch.zeros(p.batch, dtype=f64, device=dev) for name in terms} if by_sequence else None
    group_index: Optional[torch.Tensor] = None  # the sequences of the group being computed

    def keep(name: str, value: torch.Tensor) -> None:
        if value.numel():
            terms[name] = torch.maximum(terms[name], value.max())
            if per_sequence is not None:  # every kept magnitude is [n, ...]: sequence first
                per_sequence[name][group_index] = torch.maximum(per_sequence[name][group_index],
                                                                value.reshape(value.shape[0], -1).amax(1))

    for group in sequence_groups(p):
        n = len(group)
        rows = group_indices(p, group, dev)
        q_rows, o_rows, k_rows, q_lens, k_lens = rows.q, rows.out, rows.k, rows.q_lengths, rows.k_lengths
        lq_max, lk_max = max(q_lens), max(k_lens)
        small = host_to_device(dict(group=torch.tensor(group), lengths=torch.tensor([q_lens, k_lens])), dev)
        group_index, lengths = small["group"], small["lengths"]
        qb = _gather(q, q_rows.index, q_rows.valid, 1)  # [n, Lq, H, D], zero on padded rows
        kb = _gather(k, k_rows.index, k_rows.valid, g)  # [n, Lk, H, D]: KV heads expanded to the query heads
        vb = _gather(v, k_rows.index, k_rows.valid, g)
        masks = visible_masks(lengths[0], lengths[1], lq_max, lk_max, p.causal, p.causal_alignment,
                              p.window, p.block_selection, group)[:, None]  # [n, 1, Lq, Lk], False on padding
        dob = _gather(do, o_rows.index, o_rows.valid, 1) if do is not None else None
        ob = torch.empty(n, lq_max, p.num_heads_q, p.head_dim_v, dtype=f64, device=dev)
        row_lse = torch.empty(n, p.num_heads_q, lq_max, dtype=f64, device=dev)
        if do is not None:  # sums over query rows, added up over the row blocks below
            dq_b = torch.empty_like(qb)
            dk_b, dv_b = torch.zeros_like(kb), torch.zeros(vb.shape, dtype=f64, device=dev)
            key_terms = {name: torch.zeros(vb.shape if name.startswith("dv") else kb.shape, dtype=f64, device=dev)
                         for name in ("dk_lowp", "dv_lowp", "dk_acc", "dv_acc")}
        # Query rows in blocks of at most GROUP_SCORE_ELEMENTS scores: a sequence too large for one group (25k x 25k
        # held 63 GiB at once) runs in row blocks; an ordinary group is one block.
        block = max(1, GROUP_SCORE_ELEMENTS // max(1, n * p.num_heads_q * lk_max))
        for r0 in range(0, lq_max, block):
            r = slice(r0, min(lq_max, r0 + block))
            qr, mask = qb[:, r], masks[:, :, r]
            s = torch.einsum("nihd,njhd->nhij", qr, kb) * p.sm_scale
            s = s.masked_fill(~mask, float("-inf"))
            lse_r = (torch.logsumexp(s, dim=-1) if lk_max > 0
                     else torch.full(s.shape[:-1], float("-inf"), dtype=f64, device=dev))
            row_lse[:, :, r] = lse_r
            safe = torch.where(torch.isinf(lse_r), torch.zeros_like(lse_r), lse_r)
            prob = torch.exp(s - safe[..., None]).masked_fill(~mask, 0.0)  # [n, H, rows, Lk]
            ob_r = torch.einsum("nhij,njhd->nihd", prob, vb)  # [n, rows, H, Dv]
            ob[:, r] = ob_r
            keep("o_lowp", torch.einsum("nhij,njhd->nihd", prob, vb.abs()))
            s_abs = torch.where(mask, s.abs(), torch.zeros_like(s))  # 0 where masked
            weight = prob * (1.0 + s_abs + safe.abs()[..., None])  # relative float32 error of P, in eps
            keep("o_acc", torch.einsum("nhij,njhd->nihd", weight, vb.abs()))
            keep("lse_acc", 1.0 + (prob * s_abs).sum(-1))
            if do is None:
                continue
            dor = dob[:, r]
            dv_b += torch.einsum("nhij,nihd->njhd", prob, dor)
            dp = torch.einsum("nihd,njhd->nhij", dor, vb)
            delta = (dor * ob_r).sum(-1).transpose(1, 2)  # [n, H, rows]
            ds = prob * (dp - delta[..., None])
            if lk_max:
                scale = abs(p.sm_scale)
                # Delta uses O as stored (rounded to the input dtype): that shifts dS_ij by up to
                # P_ij * eps/2 * (|dO_i| . |O_i|); add it to the rounding of dS itself.
                delta_err = (dor.abs() * ob_r.abs()).sum(-1).transpose(1, 2)[..., None]  # [n, H, rows, 1]
                ds_mag = ds.abs() + prob * delta_err
                keep("dq_lowp", scale * torch.einsum("nhij,njhd->nihd", ds_mag, kb.abs()))
                key_terms["dk_lowp"] += scale * torch.einsum("nhij,nihd->njhd", ds_mag, qr.abs())
                key_terms["dv_lowp"] += torch.einsum("nhij,nihd->njhd", prob, dor.abs())
                mag = weight * (dp.abs() + delta.abs()[..., None])  # dS's terms before they cancel
                keep("dq_acc", scale * torch.einsum("nhij,njhd->nihd", mag, kb.abs()))
                key_terms["dk_acc"] += scale * torch.einsum("nhij,nihd->njhd", mag, qr.abs())
                key_terms["dv_acc"] += torch.einsum("nhij,nihd->njhd", weight, dor.abs())
            dq_b[:, r] = torch.einsum("nhij,njhd->nihd", ds, kb) * p.sm_scale
            dk_b += torch.einsum("nhij,nihd->njhd", ds, qr) * p.sm_scale
        o[o_rows.rows] = q_rows.take(ob)
        lse[:, o_rows.rows] = q_rows.take(row_lse.transpose(1, 2)).T
        if do is None:
            continue
        if lk_max:
            for name, value in key_terms.items():
                keep(name, value)
        # accumulated: broadcast-Q sequences share their query rows, and each adds its dQ there
        _add_rows(dq, q_rows.rows, q_rows.take(dq_b))
        _add_rows(dk, k_rows.rows, reduce_kv_heads(k_rows.take(dk_b), g))
        _add_rows(dv, k_rows.rows, reduce_kv_heads(k_rows.take(dv_b), g))
    out = {"o": o, "lse": lse}
    if do is not None:
        out.update(dq=dq, dk=dk, dv=dv)
    forward_terms = ("o_lowp", "o_acc", "lse_acc")
    out.update({name: value.cpu() for name, value in terms.items() if do is not None or name in forward_terms})
    if per_sequence is not None:
        out.update({f"{name}_by_sequence": value.cpu() for name, value in per_sequence.items()
                    if do is not None or name in forward_terms})
    return out
