"""``triton_jfa_mxfp8``: ``triton_jfa``'s forward taking MXFP8 calls (``block_scales=``).

A thin front of :class:`~jfa_verify.kernels.triton_jfa._host.TritonJFA`: the call is validated with its block
scales (:func:`jfa_verify.core.contract.validate_inputs`), whose problem then carries them
(``JaggedProblem.block_scales``) into the same launches, where ``_forward`` hands them to the kernel's ``MX`` path
(``_kernels.py``'s module docstring).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from jfa_verify.core.contract import JaggedProblem, validate_inputs
from jfa_verify.core.mxfp8 import BlockScales
from jfa_verify.protocol.kernel import KernelRun

__all__ = ["TritonMXFP8"]


class TritonMXFP8:
    """``triton_jfa`` (``inner``, a :class:`~jfa_verify.kernels.triton_jfa._host.TritonJFA`) with MXFP8 calls: the
    contract callable with ``block_scales=``, and :meth:`launch` for the framework. Other attributes are
    ``inner``'s."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"TritonMXFP8({self.inner!r})"

    def __call__(self, q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None,
                 window=None, block_scales: Optional[BlockScales] = None):
        """The contract call with MXFP8 inputs (``q``, ``k``, ``v`` float8 e4m3 and ``block_scales``, a
        :class:`~jfa_verify.core.mxfp8.BlockScales`; None: plain float8): returns ``(o, lse)``, ``o`` in bfloat16
        ``[rows, H_q, D_v]``, ``lse`` float32 ``[H_q, rows]``. Forward only. The offsets and the scales' maxima are
        read once (validation).

        Raises:
            InvalidInput: inputs break the contract (bad scales included).
            UnsupportedCase: valid inputs outside the kernel's capabilities.
        """
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale, window=window, block_scales=block_scales)
        return self.launch(problem, q, k, v, q_offsets, k_offsets).outputs()

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False,
               block_scales: Optional[BlockScales] = None) -> KernelRun:
        """``inner.launch`` on ``problem`` (validated with its scales); ``block_scales``, when given, replaces the
        problem's (the framework passes the problem's own)."""
        if block_scales is not None and block_scales is not problem.block_scales:
            problem = dataclasses.replace(problem, block_scales=block_scales)
        return self.inner.launch(problem, q, k, v, q_offsets, k_offsets, instrument=instrument)

    def with_programs(self, num_programs: int) -> Optional["TritonMXFP8"]:
        """As :meth:`TritonJFA.with_programs <jfa_verify.kernels.triton_jfa._host.TritonJFA.with_programs>`."""
        inner = self.inner.with_programs(num_programs)
        return None if inner is None else TritonMXFP8(inner)
