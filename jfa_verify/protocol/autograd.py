"""The autograd scaffold of the native-kernel kit: a kernel's forward and backward launches as one differentiable call.

A native kernel (``kernels/triton_jfa``, ``kernels/gluon_jfa``, a team's own) writes two launches, a forward
returning ``(o, lse)`` and a backward returning ``(dq, dk, dv)``, and hands them to :func:`differentiable_attention`.
The scaffold is the one home of what every such kernel must get right around them and otherwise rewrites:

* ``lse`` is an output the caller may read but never differentiates (``mark_non_differentiable``): the contract's
  gradients are those of ``o`` (``jfa_verify.core.contract``), as in FlashAttention's varlen API;
* the tensors the backward reads (inputs, outputs and any the kernel names, such as its offsets) are saved with
  ``save_for_backward``, so an in-place change between the forward and the backward is an error from torch
  rather than silently wrong gradients;
* the backward launch is reached once per backward, with no grad mode, and returns one gradient per input; ``do``
  is a tensor even where ``o`` took no part in the loss (torch materializes a zero gradient).
"""

from __future__ import annotations

from typing import Optional, Protocol

import torch

__all__ = ["AttentionPasses", "differentiable_attention"]


class AttentionPasses(Protocol):
    """A kernel's launches for one call (its plan and flags bound in): what :func:`differentiable_attention` runs."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                *saved: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(o [rows, H_q, D_v], lse [H_q, rows] float32)`` of the call."""

    def backward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                 do: torch.Tensor, *saved: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(dq, dk, dv)`` shaped like ``q``, ``k``, ``v``: the gradients of ``sum(o * do)``."""


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, passes, q, k, v, *saved):
        o, lse = passes.forward(q, k, v, *saved)
        ctx.passes, ctx.saved_count = passes, len(saved)
        ctx.save_for_backward(q, k, v, o, lse, *saved)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, dlse):
        q, k, v, o, lse, *saved = ctx.saved_tensors
        dq, dk, dv = ctx.passes.backward(q, k, v, o, lse, do, *saved)
        return (None, dq, dk, dv) + (None,) * ctx.saved_count


def differentiable_attention(passes: AttentionPasses, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             *saved: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``passes.forward`` as one differentiable call: ``(o, lse)``, ``o`` differentiable in ``q``, ``k``, ``v``.

    Args:
        passes: the kernel's launches for this call (:class:`AttentionPasses`); the backward's plan may be built
            lazily inside ``passes.backward``, so a forward-only call never pays for it.
        q, k, v: the contract's inputs (``[T_q, H_q, D]``, ``[T_k, H_kv, D]``, ``[T_k, H_kv, D_v]``).
        saved: further tensors both launches read, typically the offsets as the kernel reads them (``[B + 1]``
            int32/int64; None allowed, e.g. ``q_offsets`` under broadcast-Q), passed after ``q, k, v`` to
            ``forward`` and after ``do`` to ``backward``.

    Returns:
        ``(o, lse)`` as ``passes.forward`` returns them; ``lse`` (float32, natural log) is not differentiable.

    Raises:
        Whatever the launches raise (an ``UnsupportedCase`` from a forward-only kernel's backward, for one);
        ``RuntimeError`` from torch when a saved tensor was modified in place before the backward.
    """
    if not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)):
        # nothing to differentiate: the forward alone (autograd's node cost tens of microseconds of host time on
        # the H100, most of a small forward's, issue 38); its outputs are those the node returns, grad-free
        return passes.forward(q, k, v, *saved)
    return _Attention.apply(passes, q, k, v, *saved)
