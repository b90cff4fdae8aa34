"""The ``tlx_jfa`` adapter: every conversion between the contract and Meta's TLX JFA custom op.

The op, as its tests call it: ``tlx_jagged_flash_attention(query=, key=, value=, query_offset=,
key_offset=, max_seq_len_q=, max_seq_len_kv=, output_offset=None, sm_scale=None, window_size=None,
broadcast_q=False, cpu_query_offset=None, cpu_key_offset=None) -> (o, M)``, differentiable.

* ``q``, ``k``, ``v`` contiguous ``[T, H, D]``; offsets rebased to 0 and cast to int32 (the kernel
  reads int32); rows before the first sequence are put back as O = 0, LSE = -inf;
* ``max_seq_len_q``/``max_seq_len_kv``: the exact maxima (smaller values silently truncate);
* ``M`` is returned as it is, log2 ``[H, rows]`` float32: the kernel declares ``lse_base="2"`` and
  the framework converts (``M * ln 2``);
* a window ``(w, w)`` is ``window_size=w``; no window is ``None``;
* broadcast-Q: ``query [L_q, H, D]``, ``query_offset=[0, L_q]``, ``broadcast_q=True`` and
  ``output_offset = arange(0, B * L_q + 1, L_q)``, where sequence ``b``'s rows of ``O [B * L_q, H, D]`` start;
* the balanced variant passes CPU copies of the offsets (from the validated problem: no device sync);
* dO is made contiguous before it reaches the kernel's backward.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import torch

from jfa_verify.core.contract import JaggedProblem
from jfa_verify.core.errors import KernelUnavailable
from jfa_verify.protocol.adapting import ContractAdapter, restore_rows, varlen_inputs
from jfa_verify.protocol.kernel import KernelRun

__all__ = ["SOURCE", "TLXJaggedAttention", "load_tlx_function"]

SOURCE = Path("tlx_jfa") / "src" / "tlx_jagged_flash_attention.py"
FUNCTION = "tlx_jagged_flash_attention"


def load_tlx_function(checkout=None):
    """Import ``SOURCE`` from ``checkout`` (default ``$JFA_TLX_CHECKOUT``) and return its op.

    The source's folder goes on ``sys.path`` (its modules import each other by name); the module gets a
    name unique to its path, so two checkouts load side by side.

    Raises:
        KernelUnavailable: no checkout named, the file is missing, it fails to import (no TLX Triton),
            or it defines no ``tlx_jagged_flash_attention``.
    """
    from . import CHECKOUT_ENV

    checkout = checkout or os.environ.get(CHECKOUT_ENV)
    if not checkout:
        raise KernelUnavailable(f"tlx_jfa needs a checkout of Meta's TLX JFA: set {CHECKOUT_ENV}=/path/to/checkout "
                                f"(the folder holding {SOURCE})")
    path = (Path(checkout) / SOURCE).resolve()
    if not path.is_file():
        raise KernelUnavailable(f"{CHECKOUT_ENV}={checkout}: no {SOURCE} there; point it at the fork's checkout")
    name = f"_jfa_tlx_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    module = sys.modules.get(name)
    if module is None:
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # Triton without TLX, no GPU, a broken checkout
            raise KernelUnavailable(f"{path} does not import here: {type(e).__name__}: {e}") from None
        sys.modules[name] = module
    fn = getattr(module, FUNCTION, None)
    if fn is None:
        raise KernelUnavailable(f"{path} defines no {FUNCTION}")
    return fn


class _ContiguousGrad(torch.autograd.Function):
    """Identity forward; the backward hands the kernel a contiguous dO (a strided dO breaks its TMA loads)."""

    @staticmethod
    def forward(ctx, o):
        return o.view_as(o)

    @staticmethod
    def backward(ctx, do):
        return do.contiguous()


class TLXJaggedAttention(ContractAdapter):
    """The contract callable (and :meth:`launch`) over TLX JFA's op ``fn``; ``balanced`` passes CPU offsets."""

    def __init__(self, fn, *, balanced: bool = False, capabilities=None):
        super().__init__(capabilities)
        self.fn, self.balanced = fn, balanced

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False) -> KernelRun:
        dev = q.device
        broadcast = problem.mode == "broadcast_q"
        if broadcast:  # the kernel's own broadcast-Q: no replication
            call = varlen_inputs(problem, q[:0], k, v, None, k_offsets)
            l_q = q.shape[0]
            query, cpu_q = q, [0, l_q]
            cu_q = torch.tensor(cpu_q, dtype=torch.int32, device=dev)
            out_offset = torch.arange(0, problem.batch * l_q + 1, max(l_q, 1), dtype=torch.int32, device=dev)
            if l_q == 0:
                out_offset = torch.zeros(problem.batch + 1, dtype=torch.int32, device=dev)
        else:
            call = varlen_inputs(problem, q, k, v, q_offsets, k_offsets)
            query, cu_q, out_offset = call.q, call.cu_q, None
            cpu_q = [0]
            for n in problem.q_lengths:
                cpu_q.append(cpu_q[-1] + n)
        cpu_k = [0]
        for n in problem.k_lengths:
            cpu_k.append(cpu_k[-1] + n)
        extra = {}
        if self.balanced:
            extra = dict(cpu_query_offset=torch.tensor(cpu_q, dtype=torch.int32),
                         cpu_key_offset=torch.tensor(cpu_k, dtype=torch.int32))
        o, m = self.fn(
            query=query.contiguous(), key=call.k.contiguous(), value=call.v.contiguous(),
            query_offset=cu_q, key_offset=call.cu_k, max_seq_len_q=problem.max_seqlen_q,
            max_seq_len_kv=problem.max_seqlen_k, output_offset=out_offset, sm_scale=problem.sm_scale,
            window_size=problem.window[0] if problem.window is not None else None, broadcast_q=broadcast, **extra)
        o, m = restore_rows(problem, _ContiguousGrad.apply(o), m.detach())
        return KernelRun(o, m)
