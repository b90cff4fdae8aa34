"""The ``torch_varlen_attn`` adapter: the contract call on top of ``torch.nn.attention.varlen.varlen_attn``."""

from __future__ import annotations

from jfa_verify.core.contract import JaggedProblem
from jfa_verify.protocol.adapting import ContractAdapter, lse_rows, restore_rows, varlen_inputs
from jfa_verify.protocol.kernel import KernelRun

__all__ = ["VarlenAttn", "varlen_window"]


def varlen_window(problem: JaggedProblem) -> tuple[int, int]:
    """``window_size`` for ``varlen_attn``: causal is ``(-1, 0)``, a causal window ``(left, 0)``."""
    left, right = problem.window if problem.window is not None else (-1, -1)
    return (left, 0) if problem.causal else (left, right)


class VarlenAttn(ContractAdapter):
    """The contract callable (and :meth:`launch`) for ``varlen_attn``."""

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False) -> KernelRun:
        from torch.nn.attention.varlen import AuxRequest, varlen_attn

        call = varlen_inputs(problem, q, k, v, q_offsets, k_offsets)
        extra = {"enable_gqa": True} if problem.group_size != 1 else {}
        o, lse = varlen_attn(call.q, call.k, call.v, call.cu_q, call.cu_k, call.max_q, call.max_k,
                             return_aux=AuxRequest(lse=True), scale=problem.sm_scale,
                             window_size=varlen_window(problem), **extra)
        o, lse = restore_rows(problem, o, lse_rows(lse.detach(), problem))
        return KernelRun(o, lse)
