"""``torch_varlen_attn``: ``torch.nn.attention.varlen.varlen_attn`` behind the contract (a peer, CUDA only).

``varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=AuxRequest(lse=True),
scale=, window_size=(left, right))`` (torch 2.10+): FlashAttention underneath, so causal and windows
are bottom-right aligned, and causal is the window ``(-1, 0)`` (a causal window ``(left, 0)``); LSE comes
through ``return_aux``. GQA only where the installed torch has ``enable_gqa`` (2.13 has it). On the CPU
(torch 2.13) the function exists but its op has no CPU kernel (``aten::_flash_attention_forward``): the
kernel declares CUDA only. Offsets, maxima, broadcast-Q and the +inf LSE convention as ``torch_fa2_varlen``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
from pathlib import Path

from jfa_verify.kernels.torch_fa2_varlen import CAPABILITIES as FA2_CAPABILITIES
from jfa_verify.protocol.registry import register_kernel


def _has_gqa() -> bool:
    """``varlen_attn`` takes ``enable_gqa``: read from its signature in the module's source, without importing it
    (the import pulls in torch._dynamo, about 1.5 s of every jfa-verify process, worker and mutant process)."""
    spec = importlib.util.find_spec("torch.nn.attention.varlen")
    if spec is None:
        return False
    try:
        tree = ast.parse(Path(spec.origin).read_text())
    except (OSError, TypeError, SyntaxError, ValueError):  # no readable source (a frozen or compiled install)
        tree = None
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.FunctionDef) and node.name == "varlen_attn":
            args = node.args
            return any(a.arg == "enable_gqa" for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
    # not a plain top-level def (re-exported, wrapped): ask the function itself
    from torch.nn.attention.varlen import varlen_attn

    return "enable_gqa" in inspect.signature(varlen_attn).parameters


# FlashAttention underneath: torch_fa2_varlen's capabilities, GQA as the installed signature allows.
_GQA = _has_gqa()
CAPABILITIES = dataclasses.replace(FA2_CAPABILITIES, gqa=_GQA, gqa_backward=_GQA)


@register_kernel("torch_varlen_attn", capabilities=CAPABILITIES, requires=("torch.nn.attention.varlen",),
                 description="peer: torch.nn.attention.varlen.varlen_attn (LSE via return_aux)")
def _load():
    from ._adapter import VarlenAttn

    return VarlenAttn(CAPABILITIES)
