"""``nested_sdpa``: ``scaled_dot_product_attention`` on nested tensors (jagged layout) behind the contract (a peer).

Q, K and V become nested tensors over the packed values and the offsets
(``torch.nested.nested_tensor_from_jagged``), transposed to ``[B, H, j, D]``, and go through SDPA; O comes
back as the nested output's values. SDPA returns no LSE (``returns_lse=False``: only O and the gradients
are judged). Causal is SDPA's ``is_causal`` (top-left); torch 2.13's CPU (math) backend refuses it for
nested tensors, so a causal case on the CPU is unsupported with that reason (the CUDA backends take it).
No GQA (nested matmuls do not broadcast heads), no windows, no broadcast-Q. Seen on the CPU: a batch
whose every sequence is empty raises in ``to_padded_tensor`` (a finding, reported as such).
"""

from __future__ import annotations

from jfa_verify.protocol.kernel import Capabilities
from jfa_verify.protocol.registry import register_kernel

CAPABILITIES = Capabilities(
    min_head_dim=1,
    max_head_dim=256,
    modes=("self", "cross"),
    causal_alignments=("top_left",),
    masks=("none", "causal"),
    gqa=False,
    gqa_backward=False,
    returns_lse=False,
    deterministic=False,
)


@register_kernel("nested_sdpa", capabilities=CAPABILITIES,
                 description="peer: SDPA on nested (jagged-layout) tensors; O and gradients, no LSE")
def _load():
    from ._adapter import NestedSDPA

    return NestedSDPA(CAPABILITIES)
