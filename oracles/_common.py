"""Pieces shared by the references: slicing one sequence, GQA head expansion and reduction."""

from __future__ import annotations

import torch

from jfa_verify.contract import JaggedProblem, visible_mask, visible_masks

__all__ = ["expand_kv_heads", "padded_row_index", "reduce_kv_heads", "sequence_slices", "visible_mask",
           "visible_masks"]


def sequence_slices(problem: JaggedProblem, b: int) -> tuple[slice, slice, slice]:
    """Rows of sequence ``b`` in ``q``, in ``o``/``lse``, and in ``k``/``v``."""
    lq, lk = problem.q_lengths[b], problem.k_lengths[b]
    qs, os_, ks = problem.q_starts[b], problem.out_starts[b], problem.k_starts[b]
    return slice(qs, qs + lq), slice(os_, os_ + lq), slice(ks, ks + lk)


def expand_kv_heads(x: torch.Tensor, group: int) -> torch.Tensor:
    """``[L, H_kv, D] -> [L, H_kv * group, D]``: query head ``h`` reads KV head ``h // group``."""
    return x.repeat_interleave(group, dim=1) if group > 1 else x


def reduce_kv_heads(x: torch.Tensor, group: int) -> torch.Tensor:
    """``[L, H_q, D] -> [L, H_kv, D]``: sum each KV head's query-head group (GQA backward)."""
    if group == 1:
        return x
    length, heads, dim = x.shape
    return x.reshape(length, heads // group, group, dim).sum(2)


def padded_row_index(starts, lengths, width: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(index, valid)``, both ``[n, width]``: row ``starts[s] + i`` of the packed tensor for sequence ``s``, valid
    for ``i < lengths[s]`` (index 0 on padding, a row that exists whenever some sequence has one)."""
    pos = torch.arange(width, device=device)[None, :]
    start = torch.tensor(list(starts), dtype=torch.long, device=device)[:, None]
    length = torch.tensor(list(lengths), dtype=torch.long, device=device)[:, None]
    valid = pos < length
    return torch.where(valid, start + pos, torch.zeros_like(pos)), valid
