"""Helpers for adapters that put a peer's varlen attention behind the contract (``kernels/torch_*``, ``tlx_jfa``).

A peer kernel takes packed ``[T, H, D]`` tensors with ``cu_seqlens`` starting at 0 and its own maxima;
the contract also allows offsets that start later (rows before the first sequence belong to none) and
broadcast-Q. :func:`varlen_inputs` maps a validated call onto the peer's form, :func:`restore_rows`
maps the peer's outputs back (rows outside every sequence: O = 0, LSE = -inf, as the contract says),
and :func:`lse_rows` reads a padded ``[B, H, max_q]`` LSE as the contract's ``[H, rows]``. Every mapping
is differentiable (slices, ``repeat``, ``cat``), so gradients flow back through autograd; none of them
changes a value the peer computed for a row of a sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from jfa_verify.core.contract import JaggedProblem

__all__ = ["ContractAdapter", "VarlenCall", "lse_rows", "restore_rows", "varlen_inputs"]


class ContractAdapter:
    """Base of the peer adapters: the contract call validates once, refuses what the adapter's capabilities
    leave out (the framework checks them before :meth:`launch`; a direct caller gets the same answer), and
    hands the problem to :meth:`launch` (``launch(problem, q, k, v, q_offsets, k_offsets, *,
    instrument=False) -> KernelRun``, the adapter's job; a block-sparse call's ``block_selection=`` tensors are
    passed on to it as that keyword, their host view being ``problem.block_selection``; an MXFP8 call's
    ``block_scales=`` likewise, also on ``problem.block_scales``). Returns ``(o, lse)``,
    or ``o`` alone for a peer without LSE.

    Raises:
        InvalidInput: the call breaks the contract. UnsupportedCase: outside ``capabilities``.
    """

    def __init__(self, capabilities=None):
        self.capabilities = capabilities

    def __call__(self, q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None,
                 window=None, block_selection=None, block_scales=None):
        from jfa_verify.core.contract import validate_inputs
        from jfa_verify.core.errors import UnsupportedCase

        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale, window=window, block_selection=block_selection,
                                  block_scales=block_scales)
        reason = None if self.capabilities is None else self.capabilities.unsupported_reason(problem)
        if reason is not None:
            raise UnsupportedCase(f"{type(self).__name__}: {reason}")
        sparse = {} if block_selection is None else {"block_selection": block_selection}
        if block_scales is not None:
            sparse["block_scales"] = block_scales
        return self.launch(problem, q, k, v, q_offsets, k_offsets, **sparse).outputs()

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False):
        raise NotImplementedError


@dataclass(frozen=True)
class VarlenCall:
    """A call in the peer's form.

    ``q`` ``[T_q', H_q, D]`` (broadcast-Q: Q repeated once per sequence, ``B * L_q`` rows), ``k``, ``v``
    ``[T_k', H_kv, D(_v)]``, all starting at the first sequence's first row; ``cu_q``, ``cu_k``: ``[B + 1]``
    int32 (or the requested dtype) from 0, on the inputs' device; ``max_q``, ``max_k``: the exact maxima
    (ints, from the validated problem: a peer given smaller maxima may silently truncate).
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    cu_q: torch.Tensor
    cu_k: torch.Tensor
    max_q: int
    max_k: int


def varlen_inputs(problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *,
                  offsets_dtype: torch.dtype = torch.int32) -> VarlenCall:
    """Map a validated call onto ``(q, k, v, cu_q, cu_k, max_q, max_k)`` with offsets from 0.

    The offsets tensors are rebased on the device (``offsets - offsets[0]``, no host synchronization)
    and cast to ``offsets_dtype``; broadcast-Q's Q is repeated per sequence (autograd sums dQ back).
    The varlen ops need a unit stride along the head dim (FlashAttention's "contiguous last
    dimension") and rows at 16-byte boundaries (its kernels load rows in 16-byte vectors), neither
    of which the contract promises: a view without them is copied (:func:`vector_ready`).
    """
    k_first = problem.k_starts[0] if problem.batch else k.shape[0]
    cu_k = (k_offsets - k_offsets[:1]).to(offsets_dtype).contiguous()
    if problem.mode == "broadcast_q":
        l_q = q.shape[0]
        q_packed = q.repeat(problem.batch, 1, 1)
        cu_q = torch.arange(0, problem.batch * l_q + 1, max(l_q, 1), dtype=offsets_dtype, device=q.device)
        if l_q == 0:
            cu_q = torch.zeros(problem.batch + 1, dtype=offsets_dtype, device=q.device)
    else:
        q_first = problem.q_starts[0] if problem.batch else q.shape[0]
        q_packed = q[q_first:]
        cu_q = (q_offsets - q_offsets[:1]).to(offsets_dtype).contiguous()
    q_packed, k, v = (t if vector_ready(t) else t.contiguous() for t in (q_packed, k[k_first:], v[k_first:]))
    return VarlenCall(q_packed, k, v, cu_q, cu_k, problem.max_seqlen_q, problem.max_seqlen_k)


def vector_ready(t: torch.Tensor) -> bool:
    """Whether ``t`` (``[T, H, D]``) can be read in 16-byte vectors as FlashAttention's varlen kernels read rows: unit
    stride along D, every other stride (of a dimension longer than one) a multiple of 16 bytes, and the data 16-byte
    aligned. A view of odd strides (a slice of a buffer one column wider, say) is not: passed as it is, the peer
    would read misaligned vectors, not compute the contract's answer."""
    if t.numel() == 0:
        return True
    size = t.element_size()
    return (t.stride(-1) == 1 and t.data_ptr() % 16 == 0
            and all(stride * size % 16 == 0 for n, stride in zip(t.shape[:-1], t.stride()[:-1]) if n > 1))


def restore_rows(problem: JaggedProblem, o: torch.Tensor, lse=None):
    """The peer's ``o`` ``[T_q', H, D_v]`` (and ``lse`` ``[H, T_q']``) with the rows before the first
    sequence put back: ``o`` 0 there and ``lse`` -inf (the contract's rows outside every sequence).
    Returns ``(o, lse)``; ``lse`` None stays None."""
    pad = problem.total_q_rows - o.shape[0]
    if pad <= 0:
        return o, lse
    o = torch.cat([o.new_zeros(pad, *o.shape[1:]), o])
    if lse is not None:
        lse = torch.cat([lse.new_full((lse.shape[0], pad), float("-inf")), lse], dim=1)
    return o, lse


def lse_rows(lse: torch.Tensor, problem: JaggedProblem) -> torch.Tensor:
    """A peer's LSE as the contract's ``[H, rows']`` float32 (rows from the first sequence's first row).

    Accepts the unpadded ``[H, T_q']`` layout as it is, and the padded ``[B, H, >= max_q]`` layout
    (FlashAttention's older varlen kernels), whose row ``i`` of sequence ``b`` goes to packed row
    ``cu_q[b] + i``.
    """
    if lse.dim() == 2:
        return lse.float()
    rows = []
    for b, n in enumerate(problem.q_lengths):
        rows.append(lse[b, :, :n])
    heads = lse.shape[1]
    return torch.cat(rows, dim=1).float() if rows else lse.new_zeros(heads, 0, dtype=torch.float32)
