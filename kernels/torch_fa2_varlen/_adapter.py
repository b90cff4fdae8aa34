"""The ``torch_fa2_varlen`` adapter: the contract call on top of the aten FlashAttention-2 varlen ops."""

from __future__ import annotations

import torch

from jfa_verify.core.contract import JaggedProblem
from jfa_verify.protocol.adapting import ContractAdapter, lse_rows, restore_rows, varlen_inputs
from jfa_verify.protocol.kernel import KernelRun

__all__ = ["FlashAttentionVarlen", "window_sides"]


def window_sides(problem: JaggedProblem) -> tuple[int, int]:
    """FlashAttention's ``(window_size_left, window_size_right)`` (-1 unbounded) for ``problem``; causal is
    passed as ``is_causal`` and sets the right side to 0 inside the op."""
    if problem.window is None:
        return -1, -1
    left, right = problem.window
    return left, (0 if problem.causal else right)


class _FlashVarlen(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, left, right):
        out = torch.ops.aten._flash_attention_forward(
            q, k, v, cu_q, cu_k, max_q, max_k, 0.0, causal, False, scale=scale,
            window_size_left=left, window_size_right=right)
        o, lse, rng_state, unused = out[0], out[1], out[2], out[3]
        ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k, rng_state, unused)
        ctx.args = (max_q, max_k, causal, scale, left, right)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, dlse):
        q, k, v, o, lse, cu_q, cu_k, rng_state, unused = ctx.saved_tensors
        max_q, max_k, causal, scale, left, right = ctx.args
        dq, dk, dv = torch.ops.aten._flash_attention_backward(
            do.contiguous(), q, k, v, o, lse, cu_q, cu_k, max_q, max_k, 0.0, causal, rng_state, unused,
            scale=scale, window_size_left=left, window_size_right=right)
        return dq, dk, dv, None, None, None, None, None, None, None, None


class FlashAttentionVarlen(ContractAdapter):
    """The contract callable (and :meth:`launch`) for torch's FlashAttention-2 varlen op."""

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False) -> KernelRun:
        call = varlen_inputs(problem, q, k, v, q_offsets, k_offsets)
        left, right = window_sides(problem)
        o, lse = _FlashVarlen.apply(call.q, call.k, call.v, call.cu_q, call.cu_k, call.max_q, call.max_k,
                                    problem.causal, problem.sm_scale, left, right)
        o, lse = restore_rows(problem, o, lse_rows(lse, problem))
        return KernelRun(o, lse)
