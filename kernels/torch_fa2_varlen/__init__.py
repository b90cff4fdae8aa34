"""``torch_fa2_varlen``: torch's FlashAttention-2 varlen op behind the contract (a peer, CUDA only).

``torch.ops.aten._flash_attention_forward`` / ``_flash_attention_backward`` with ``cum_seq_q``/``cum_seq_k``
(the op SDPA's flash backend calls). What the adapter does and does not map:

* offsets are rebased to 0 and cast to int32 on the device, the maxima are the exact ones; rows before
  the first sequence (``offsets[0] > 0``) are cut off and put back as O = 0, LSE = -inf;
* broadcast-Q: Q repeated once per sequence (how FlashAttention users run it; dQ is summed by autograd);
* causal and windows: bottom-right aligned (FlashAttention >= 2.1), ``window_size_left/right``;
  top-left only where it coincides (every sequence ``L_q == L_k``);
* a convention declared, not converted: LSE = +inf for rows that see no key
  (:data:`jfa_verify.core.conventions.CONVENTIONS` ``lse_plus_inf_empty_rows``);
* the op's own errors (for example on empty tensors) are the kernel's findings: nothing is worked around.

Registration only: the op is looked up when the kernel is first used.
"""

from __future__ import annotations

import torch

from jfa_verify.protocol.kernel import Capabilities
from jfa_verify.protocol.registry import register_kernel

CAPABILITIES = Capabilities(
    dtypes=(torch.float16, torch.bfloat16),
    min_head_dim=8,
    max_head_dim=256,
    # the raw op asks for "a multiple of 8, this is ensured by padding" (SDPA pads; the op does not):
    # seen on the H200, docs/evidence/gpu-2026-12-01
    head_dims=tuple(range(8, 257, 8)),
    distinct_value_head_dim=False,
    causal_alignments=("bottom_right",),
    masks=("none", "causal", "window", "causal+window"),
    conventions=("lse_plus_inf_empty_rows",),
    device_types=("cuda",),
    min_compute_capability=(8, 0),
    deterministic=False,  # the backward accumulates dQ with atomics
    hardware="an NVIDIA GPU of compute capability 8.0+ (FlashAttention-2)",
)


@register_kernel("torch_fa2_varlen", capabilities=CAPABILITIES,
                 description="peer: torch.ops.aten._flash_attention_forward/_backward (FlashAttention-2 varlen)")
def _load():
    from ._adapter import FlashAttentionVarlen

    return FlashAttentionVarlen(CAPABILITIES)
