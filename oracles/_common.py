"""Pieces shared by the references: slicing one sequence, grouping sequences by length, GQA head expansion and
reduction, padded row indices."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from jfa_verify.core.contract import JaggedProblem, visible_mask, visible_masks

__all__ = ["GroupIndices", "GroupRows", "check_output_grad", "dequantized_inputs", "expand_kv_heads", "group_indices",
           "group_rows", "host_to_device", "length_groups", "reduce_kv_heads", "sequence_slices", "visible_mask",
           "visible_masks"]


def sequence_slices(problem: JaggedProblem, b: int) -> tuple[slice, slice, slice]:
    """Rows of sequence ``b`` in ``q``, in ``o``/``lse``, and in ``k``/``v``."""
    lq, lk = problem.q_lengths[b], problem.k_lengths[b]
    qs, os_, ks = problem.q_starts[b], problem.out_starts[b], problem.k_starts[b]
    return slice(qs, qs + lq), slice(os_, os_ + lq), slice(ks, ks + lk)


# A batch this small (padded scores per head) runs as one group: another call costs more than its padding.
SMALL_BATCH_SCORES = 1 << 14
# A batch whose padding to its longest sequence multiplies its scores by at most this runs as one group.
PADDING_FACTOR = 4


def length_groups(problem: JaggedProblem, max_scores: int) -> list[list[int]]:
    """The sequences with queries, as groups that a reference pads into one ``[n, H, Lq, Lk]`` batch each.

    The whole batch is one group when that pads it no more than the buckets below may (to 4x its scores), or when
    it is small (:data:`SMALL_BATCH_SCORES`), and fits ``max_scores``. Otherwise a group's sequences share the
    power-of-two range of their query length and of their key length (``[2^(k-1), 2^k)``: padding stays under
    twice each length, so a skewed batch is not padded to its longest sequence), and hold at most ``max_scores``
    padded scores (``n * H_q * Lq * Lk``; a sequence larger than that runs alone). Sequences with no query row are
    left out (they have no output).
    """
    p = problem
    with_queries = [b for b in range(p.batch) if p.q_lengths[b]]
    if with_queries:
        lq, lk = max(p.q_lengths[b] for b in with_queries), max(p.k_lengths[b] for b in with_queries)
        padded = len(with_queries) * lq * lk
        scores = sum(p.q_lengths[b] * p.k_lengths[b] for b in with_queries)
        if p.num_heads_q * padded <= max_scores and (padded <= PADDING_FACTOR * scores or padded <= SMALL_BATCH_SCORES):
            return [with_queries]
    by_size: dict[tuple[int, int], list[int]] = {}
    for b in with_queries:
        by_size.setdefault((p.q_lengths[b].bit_length(), p.k_lengths[b].bit_length()), []).append(b)
    groups = []
    for members in (by_size[key] for key in sorted(by_size)):
        lq, lk = max(p.q_lengths[b] for b in members), max(p.k_lengths[b] for b in members)
        step = max(1, max_scores // max(1, p.num_heads_q * lq * lk))
        groups += [members[i:i + step] for i in range(0, len(members), step)]
    return groups


def dequantized_inputs(problem: JaggedProblem, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(q, k, v)`` as the values they stand for: an MXFP8 problem's (``problem.block_scales``) dequantized by
    :func:`jfa_verify.core.mxfp8.dequantize` (``x * 2^(e - 127)`` per 32-element block of the head dim) into
    ``dtype`` (float64: exact; bfloat16: exact while each product is a bfloat16 normal); others unchanged.
    Shapes as the inputs'."""
    scales = problem.block_scales
    if scales is None:
        return q, k, v
    from jfa_verify.core.mxfp8 import dequantize

    return dequantize(q, scales.q, dtype), dequantize(k, scales.k, dtype), dequantize(v, scales.v, dtype)


def check_output_grad(problem: JaggedProblem, do) -> None:
    """Raise :class:`~jfa_verify.core.errors.InvalidInput` unless ``do`` (when given) is shaped like ``o``:
    ``[rows, H_q, D_v]``."""
    want = (problem.total_q_rows, problem.num_heads_q, problem.head_dim_v)
    if do is not None and tuple(do.shape) != want:
        from jfa_verify.core.errors import InvalidInput

        raise InvalidInput(f"do.shape={tuple(do.shape)} must equal o.shape={want}: one output-gradient row per "
                           f"query row (total_q_rows), per query head, of the value head dim")


def expand_kv_heads(x: torch.Tensor, group: int) -> torch.Tensor:
    """``[L, H_kv, D] -> [L, H_kv * group, D]``: query head ``h`` reads KV head ``h // group``."""
    return x.repeat_interleave(group, dim=1) if group > 1 else x


def reduce_kv_heads(x: torch.Tensor, group: int) -> torch.Tensor:
    """``[L, H_q, D] -> [L, H_kv, D]``: sum each KV head's query-head group (GQA backward)."""
    if group == 1:
        return x
    length, heads, dim = x.shape
    return x.reshape(length, heads // group, group, dim).sum(2)


def host_to_device(tensors: dict, device) -> dict:
    """CPU tensors made from host lengths, moved to ``device`` without a synchronization: on CUDA through pinned
    memory, non-blocking (a copy from pageable memory waits for the stream: one host round trip per tensor, per
    group); elsewhere unchanged."""
    device = torch.device(device)
    if device.type != "cuda":
        return {name: t.to(device) for name, t in tensors.items()}
    return {name: t.pin_memory().to(device, non_blocking=True) for name, t in tensors.items()}


@dataclass(frozen=True)
class GroupRows:
    """Where ``n`` sequences' rows lie in a packed tensor, padded to ``[n, width]``; made by :func:`group_rows`.

    ``index``/``valid``: ``[n, width]`` long/bool, row ``starts[s] + i`` of the packed tensor for sequence ``s``,
    valid for ``i < lengths[s]`` (index 0 on padding, a row that exists whenever some sequence has one).
    ``flat``: ``[V]`` long, the valid positions ``s * width + i`` in increasing order, so that
    :meth:`take` is ``x[valid]`` without the device-to-host synchronization a boolean mask costs on CUDA;
    ``rows``: ``[V]`` long, ``index[valid]``.
    """

    index: torch.Tensor
    valid: torch.Tensor
    flat: torch.Tensor
    rows: torch.Tensor

    def take(self, x: torch.Tensor) -> torch.Tensor:
        """``x[valid]`` for ``x`` of shape ``[n, width, ...]``: ``[V, ...]``, sequence-major."""
        return x.reshape(-1, *x.shape[2:]).index_select(0, self.flat)


def group_rows(starts, lengths, width: int, device) -> GroupRows:
    """:class:`GroupRows` of sequences starting at packed rows ``starts`` with ``lengths`` rows (host ints), padded
    to ``width``; built on the host, moved with :func:`host_to_device`."""
    start = torch.tensor(list(starts), dtype=torch.long)
    length = torch.tensor(list(lengths), dtype=torch.long)
    pos = torch.arange(width)[None, :]
    valid = pos < length[:, None]
    index = torch.where(valid, start[:, None] + pos, torch.zeros_like(pos))
    # sequence s's valid positions are s * width + i, i < lengths[s]: one arange shifted per sequence
    shift = torch.arange(len(length)) * width - (torch.cumsum(length, 0) - length)
    flat = torch.arange(int(length.sum())) + torch.repeat_interleave(shift, length)
    rows = index.reshape(-1)[flat]
    moved = host_to_device(dict(index=index, valid=valid, flat=flat, rows=rows), device)
    return GroupRows(**moved)


@dataclass(frozen=True)
class GroupIndices:
    """The rows of one group of sequences of a problem, as both references pad it (:func:`group_indices`):
    ``q``/``out``/``k`` :class:`GroupRows` of its query, output and key rows, ``q_lengths``/``k_lengths`` host ints."""

    q: GroupRows
    out: GroupRows
    k: GroupRows
    q_lengths: list
    k_lengths: list


def group_indices(problem, group, device) -> GroupIndices:
    """:class:`GroupIndices` of sequences ``group`` (indices, host ints) of the validated ``problem``, each
    padded to the group's longest; every index made on the host and moved without a synchronization (no boolean-mask
    selection either)."""
    q_lens, k_lens = [problem.q_lengths[b] for b in group], [problem.k_lengths[b] for b in group]
    width_q, width_k = max(q_lens), max(k_lens)
    return GroupIndices(group_rows([problem.q_starts[b] for b in group], q_lens, width_q, device),
                        group_rows([problem.out_starts[b] for b in group], q_lens, width_q, device),
                        group_rows([problem.k_starts[b] for b in group], k_lens, width_k, device), q_lens, k_lens)
