"""``flex_document_mask``: ``torch.nn.attention.flex_attention`` with a document mask, behind the contract (a peer).

The packed sequences are one "batch" of one long row each for Q and K/V; a block mask keeps key ``j``
for query ``i`` only when both belong to the same sequence (a document mask), and adds the causal
and sliding-window conditions around each sequence's aligned diagonal (both alignments). Compiled
(``torch.compile``) on CUDA, eager on the CPU, where torch (2.13) has no flex backward: the CPU kernel
is forward only (:attr:`~jfa_verify.protocol.kernel.Capabilities.backward_device_types`). LSE comes back
through ``return_aux`` (``return_lse`` on older torch). Block-sparse calls (``block_selection=``) add the
selection to the mask (any block sizes).
"""

from __future__ import annotations

from jfa_verify.core.selection import BLOCK_SIZES
from jfa_verify.protocol.kernel import Capabilities
from jfa_verify.protocol.registry import register_kernel

CAPABILITIES = Capabilities(
    min_head_dim=16,
    max_head_dim=256,
    masks=("none", "causal", "window", "causal+window"),
    backward_device_types=("cuda",),
    deterministic=False,
    # a peer of block-sparse kernels: the selection is one more mask_mod condition, any block sizes
    block_sparse=tuple((m, n) for m in BLOCK_SIZES for n in BLOCK_SIZES),
)


@register_kernel("flex_document_mask", capabilities=CAPABILITIES, requires=("torch.nn.attention.flex_attention",),
                 description="peer: flex_attention with a document (+causal/window) block mask; compiled on CUDA")
def _load():
    from ._adapter import FlexDocumentMask

    return FlexDocumentMask(CAPABILITIES)
