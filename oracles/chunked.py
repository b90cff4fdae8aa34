"""A chunked reference: the exact references on chosen sequences and KV-head chunks of a huge jagged case.

A float64 reference of the whole buffer of a case past 2^31 elements does not fit beside the kernel's outputs (the
gradients alone are 3 x 16 GiB in float64). A planted int32 index overflow can only move the rows whose element
offsets pass the boundary, so the backward is judged there, plus on a sample of sequences elsewhere: each
:class:`Chunk` is one sequence and a range of KV heads (with their query heads), cut out of the full tensors and
handed as a problem of its own to :func:`~.float64.reference_attention` (and, for the judge's budget,
:func:`~.padded_sdpa_attention`): the same formulas, on a chunk that fits. Attention of one sequence and one head
depends on nothing else, so a chunk's reference is the full reference's restricted to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from jfa_verify.core.contract import JaggedProblem, validate_inputs
from jfa_verify.core.errors import InvalidInput

from ._common import check_output_grad
from .float64 import reference_attention
from .padded_sdpa import padded_sdpa_attention

__all__ = ["Chunk", "INT32_ELEMENTS", "chunked_reference", "reachable_sequences"]

INT32_ELEMENTS = 2**31  # the first element offset an int32 cannot hold


@dataclass
class Chunk:
    """One sequence and a range of KV heads of a problem, with its references.

    ``sequence``: the sequence index; ``kv_heads``, ``q_heads``: ``[start, stop)`` head ranges (the query heads are
    the KV heads' GQA groups); ``q_rows`` (rows of ``q``, ``dq``), ``out_rows`` (rows of ``o``, ``do``, columns of
    ``lse``), ``k_rows`` (rows of ``k``, ``v``, ``dk``, ``dv``): ``[start, stop)`` row ranges of the full tensors;
    ``problem``: the chunk as a problem of its own (one sequence); ``ref``: :func:`reference_attention` of the chunk
    (float64, with the magnitudes the judge scales by); ``sdpa``: :func:`padded_sdpa_attention` of the chunk, or None.
    """

    sequence: int
    kv_heads: tuple[int, int]
    q_heads: tuple[int, int]
    q_rows: tuple[int, int]
    out_rows: tuple[int, int]
    k_rows: tuple[int, int]
    problem: JaggedProblem
    ref: dict
    sdpa: Optional[dict] = None

    def of(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """The chunk's part of the full output ``name`` (``o``, ``lse``, ``dq``, ``dk``, ``dv``; shapes as in the
        contract): a view, shaped as the chunk's reference of the same name.

        Raises:
            InvalidInput: an unknown output name.
        """
        heads, kv = slice(*self.q_heads), slice(*self.kv_heads)
        rows = {"o": (slice(*self.out_rows), heads), "dq": (slice(*self.q_rows), heads),
                "dk": (slice(*self.k_rows), kv), "dv": (slice(*self.k_rows), kv), "lse": (heads, slice(*self.out_rows))}
        if name not in rows:
            raise InvalidInput(f"output name={name!r} unknown; choose from {sorted(rows)}")
        return full[rows[name]]


def _row_elements(problem: JaggedProblem) -> dict[str, int]:
    p = problem
    return {"q": p.num_heads_q * p.head_dim, "k": p.num_heads_kv * p.head_dim, "v": p.num_heads_kv * p.head_dim_v,
            "o": p.num_heads_q * p.head_dim_v}


def reachable_sequences(problem: JaggedProblem, *, limit: int = INT32_ELEMENTS, sample: int = 2) -> list[int]:
    """The sequences an int32 index overflow can move, and ``sample`` others: those with an element (in contiguous
    ``q``/``dq``, ``k``/``dk``, ``v``/``dv`` or ``o``/``do``/``dO``) at a flat offset ``>= limit`` (its last row
    ends past it), then ``sample`` sequences evenly spread over the rest (the first of them included), as a sorted
    list of ints. Sequences with no query row or no key are left out (no score, no gradient to judge).

    Raises:
        InvalidInput: ``limit < 1`` or ``sample < 0``, or a broadcast-Q problem.
    """
    if limit < 1 or sample < 0:
        raise InvalidInput(f"limit={limit} must be >= 1 and sample={sample} >= 0")
    p = problem
    if p.mode == "broadcast_q":
        raise InvalidInput("reachable_sequences: broadcast-Q's dQ sums every sequence; chunk a self or cross problem")
    per_row = _row_elements(p)
    past, rest = [], []
    for b in range(p.batch):
        lq, lk = p.q_lengths[b], p.k_lengths[b]
        if not lq or not lk:
            continue
        ends = ((p.q_starts[b] + lq) * per_row["q"], (p.out_starts[b] + lq) * per_row["o"],
                (p.k_starts[b] + lk) * per_row["k"], (p.k_starts[b] + lk) * per_row["v"])
        (past if max(ends) > limit else rest).append(b)
    n = min(sample, len(rest))
    picked = {rest[(i * len(rest)) // n] for i in range(n)} if n else set()
    return sorted(set(past) | picked)


def chunked_reference(problem: JaggedProblem, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      do: Optional[torch.Tensor], sequences: Sequence[int], *, kv_heads_per_chunk: Optional[int] = None,
                      with_sdpa: bool = False) -> list[Chunk]:
    """The exact references on ``sequences`` of ``problem``, one :class:`Chunk` per sequence and KV-head range.

    Args:
        problem: the whole call's validated problem (self or cross attention, no block selection).
        q, k, v: the whole call's inputs (``[T_q, H_q, D]``, ``[T_k, H_kv, D]``, ``[T_k, H_kv, D_v]``, any float
            dtype, any device); only the chunks' rows are read (copied in their dtype, then float64 per chunk).
        do: the output gradient ``[rows, H_q, D_v]`` (None: forward only).
        sequences: sequence indices (e.g. :func:`reachable_sequences`).
        kv_heads_per_chunk: KV heads per chunk (None: all of them in one chunk per sequence); a chunk holds
            ``H_q / H_kv`` query heads per KV head.
        with_sdpa: also the padded-SDPA oracle of each chunk (the judge's same-dtype baseline).

    Returns a list of :class:`Chunk` in the order of ``sequences`` then heads; every tensor on ``q``'s device. Each
    chunk's ``ref`` holds ``o``, ``lse`` and, with ``do``, ``dq``, ``dk``, ``dv``, as
    :func:`~.float64.reference_attention` returns them for that sequence and those heads alone.

    Raises:
        InvalidInput: a broadcast-Q, block-sparse or MXFP8 problem, a sequence index out of range, a bad
            ``kv_heads_per_chunk``, or ``do`` not shaped like ``o``.
    """
    p = problem
    if p.mode == "broadcast_q":
        raise InvalidInput("chunked_reference: broadcast-Q's dQ sums every sequence; chunk a self or cross problem")
    if p.block_selection is not None:
        raise InvalidInput("chunked_reference: a block-sparse problem's selection is not cut into chunks; judge it "
                           "with reference_attention")
    if p.block_scales is not None:
        raise InvalidInput("chunked_reference: an MXFP8 problem's block scales are not cut into chunks; judge it "
                           "with reference_attention")
    bad = [b for b in sequences if not 0 <= b < p.batch]
    if bad:
        raise InvalidInput(f"sequences {bad} out of range: the problem has {p.batch} sequences")
    step = p.num_heads_kv if kv_heads_per_chunk is None else kv_heads_per_chunk
    if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= p.num_heads_kv:
        raise InvalidInput(f"kv_heads_per_chunk={kv_heads_per_chunk!r} must be an int in [1, H_kv={p.num_heads_kv}]")
    check_output_grad(p, do)
    group = p.group_size
    chunks = []
    for b in sequences:
        lq, lk = p.q_lengths[b], p.k_lengths[b]
        q_rows = (p.q_starts[b], p.q_starts[b] + lq)
        out_rows = (p.out_starts[b], p.out_starts[b] + lq)
        k_rows = (p.k_starts[b], p.k_starts[b] + lk)
        for h0 in range(0, p.num_heads_kv, step):
            kv_heads = (h0, min(p.num_heads_kv, h0 + step))
            q_heads = (kv_heads[0] * group, kv_heads[1] * group)
            cut = lambda x, rows, heads: x[slice(*rows), slice(*heads)].contiguous()  # noqa: E731
            cq, ck, cv = cut(q, q_rows, q_heads), cut(k, k_rows, kv_heads), cut(v, k_rows, kv_heads)
            cdo = None if do is None else cut(do, out_rows, q_heads)
            q_off = torch.tensor([0, lq], dtype=torch.int64, device=q.device)
            k_off = q_off if (p.mode == "self" and lq == lk) else torch.tensor([0, lk], dtype=torch.int64,
                                                                                  device=q.device)
            sub = validate_inputs(cq, ck, cv, q_off, k_off, causal=p.causal, causal_alignment=p.causal_alignment,
                                  sm_scale=p.sm_scale, window=p.window)
            ref = reference_attention(sub, cq, ck, cv, do=cdo)
            sdpa = padded_sdpa_attention(sub, cq, ck, cv, do=cdo) if with_sdpa else None
            chunks.append(Chunk(b, kv_heads, q_heads, q_rows, out_rows, k_rows, sub, ref, sdpa))
    return chunks
