"""A peer for MXFP8 kernels: any dense kernel of the contract, run on the dequantized inputs.

:class:`DequantizedMXFP8` takes an MXFP8 call (float8 e4m3 ``q``, ``k``, ``v`` with ``block_scales=``,
:class:`~jfa_verify.core.mxfp8.BlockScales`), dequantizes the inputs into a dense dtype (bfloat16 by default: exact
while each value, an e4m3 value times a power of two, is a bfloat16 normal) with the contract's one rule
(:func:`~jfa_verify.core.mxfp8.dequantize`), and calls the dense kernel on them. It is the "dense kernel on
dequantized inputs" an MXFP8 fork is compared with (``jfa-verify matrix``): its P is rounded as the dense kernel
rounds it (bfloat16: the ``"bfloat16"`` rule of :data:`jfa_verify.core.conventions.P_QUANTIZATIONS`), not to e4m3.
"""

from __future__ import annotations

from typing import Callable

import torch

from jfa_verify.core.contract import JaggedProblem
from jfa_verify.core.dtypes import output_dtype
from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.mxfp8 import dequantize
from jfa_verify.protocol.adapting import ContractAdapter
from jfa_verify.protocol.kernel import Capabilities, KernelRun

__all__ = ["DequantizedMXFP8"]


class DequantizedMXFP8(ContractAdapter):
    """``dense`` (a contract callable ``dense(q, k, v, q_offsets, k_offsets, *, causal, causal_alignment,
    sm_scale[, window]) -> (o, lse)``) behind an MXFP8 front.

    Args:
        dense: the dense kernel's contract callable (it must take ``dtype`` inputs).
        capabilities: what the front declares (float8 inputs, ``mxfp8=...``); calls outside them are refused.
        dtype: the dense dtype the inputs are dequantized into (bfloat16, float16 or float32).

    Returns (a call): ``(o, lse)``, ``o`` ``[rows, H_q, D_v]`` in the float8 inputs' output dtype (bfloat16), ``lse``
    ``[H_q, rows]`` as the dense kernel gives it. Forward only (the inputs' gradients are not defined for float8).

    Raises:
        InvalidInput: a ``dtype`` that is not bfloat16, float16 or float32 (at construction); a call that breaks the
            contract. UnsupportedCase: a call outside ``capabilities``.
    """

    def __init__(self, dense: Callable, capabilities: Capabilities, dtype: torch.dtype = torch.bfloat16):
        if dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise InvalidInput(f"DequantizedMXFP8: dtype={dtype} is not a dense dtype; pass torch.bfloat16, "
                               f"torch.float16 or torch.float32")
        super().__init__(capabilities)
        self.dense, self.dtype = dense, dtype

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False,
               block_scales=None) -> KernelRun:
        """The dense kernel's forward on the dequantized inputs of ``problem`` (validated with its scales; a plain
        float8 problem, without scales, is upcast exactly)."""
        scales = block_scales if block_scales is not None else problem.block_scales
        if scales is None:
            dense = [x.to(self.dtype) for x in (q, k, v)]
        else:
            dense = [dequantize(x, s, self.dtype) for x, s in ((q, scales.q), (k, scales.k), (v, scales.v))]
        kw = dict(causal=problem.causal, causal_alignment=problem.causal_alignment, sm_scale=problem.sm_scale)
        if problem.window is not None:
            kw["window"] = problem.window
        with torch.no_grad():
            o, lse = self.dense(*dense, None if problem.mode == "broadcast_q" else q_offsets, k_offsets, **kw)
        return KernelRun(o.to(output_dtype(problem.dtype)), lse)
