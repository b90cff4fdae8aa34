"""The ``nested_sdpa`` adapter: the contract call as SDPA on jagged nested tensors."""

from __future__ import annotations

import warnings

import torch

from jfa_verify.core.contract import JaggedProblem
from jfa_verify.core.errors import UnsupportedCase
from jfa_verify.protocol.adapting import ContractAdapter, restore_rows, varlen_inputs
from jfa_verify.protocol.kernel import KernelRun

__all__ = ["NestedSDPA"]


def _nested(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """``[T, H, D]`` values + offsets -> nested ``[B, H, j, D]`` (a view: gradients reach ``values``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prototype-stage warning of nested tensors
        return torch.nested.nested_tensor_from_jagged(values, offsets).transpose(1, 2)


class NestedSDPA(ContractAdapter):
    """The contract callable (and :meth:`launch`) for SDPA on jagged nested tensors; returns ``o`` alone."""

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False) -> KernelRun:
        if problem.causal and q.device.type == "cpu":
            raise UnsupportedCase("nested-tensor SDPA: torch's CPU (math) backend refuses is_causal for nested "
                                  f"tensors (torch {torch.__version__}); run causal cases on CUDA")
        call = varlen_inputs(problem, q, k, v, q_offsets, k_offsets, offsets_dtype=torch.int64)
        # one offsets tensor for K and V (and Q in self-attention): one ragged structure, as SDPA needs
        cu_q = call.cu_k if problem.mode == "self" else call.cu_q
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # prototype-stage warnings from inside nested SDPA
            out = torch.nn.functional.scaled_dot_product_attention(
                _nested(call.q, cu_q), _nested(call.k, call.cu_k), _nested(call.v, call.cu_k),
                is_causal=problem.causal, scale=problem.sm_scale)
        o, _ = restore_rows(problem, out.transpose(1, 2).values())
        return KernelRun(o, None)
