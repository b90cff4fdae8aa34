"""Pieces shared by the references: slicing one sequence and its visibility mask."""

from __future__ import annotations

import torch

from jfa_verify.contract import JaggedProblem


def visible_mask(q_len: int, k_len: int, causal: bool, alignment: str, device) -> torch.Tensor:
    """Bool ``[q_len, k_len]``: True where query ``i`` may see key ``j``.

    Causal top-left: ``j <= i``; bottom-right: ``j <= i + k_len - q_len``
    (per sequence, see :mod:`jfa_verify.contract`).
    """
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    if not causal:
        return torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    shift = 0 if alignment == "top_left" else k_len - q_len
    return j <= i + shift


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
