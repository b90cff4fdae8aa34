"""``tlx_jfa``: Meta's TLX Jagged Flash Attention (B200, Triton with TLX) behind the contract (a peer).

The source is never vendored: the loader imports ``tlx_jfa/src/tlx_jagged_flash_attention.py`` from a
checkout named by the environment variable :data:`CHECKOUT_ENV` (or :func:`build`'s ``checkout``), a
public fork of facebookresearch/ads_model_kernel_library. Without it, or on anything but a B200
(sm_100), every case is unsupported with a reason naming what is missing.

Two registrations: ``tlx_jfa`` (device offsets only) and ``tlx_jfa_balanced`` (CPU copies of the offsets
passed too, which turns on the kernel's host-side load balancing). The conversions are in
:mod:`._adapter`; the kernel's conventions: ``M`` is LSE in log2 (declared ``lse_base="2"``, converted by
the framework), no causal mode, a symmetric window ``|i - j| <= w`` (top-left indices), GQA in the
forward only, head dim <= 128 with ``D == D_v``, 2-byte dtypes.
"""

from __future__ import annotations

import torch

from jfa_verify.protocol.kernel import Capabilities
from jfa_verify.protocol.registry import register_kernel

__all__ = ["CAPABILITIES", "CHECKOUT_ENV", "build"]

CHECKOUT_ENV = "JFA_TLX_CHECKOUT"

CAPABILITIES = Capabilities(
    dtypes=(torch.bfloat16, torch.float16),
    min_head_dim=16,
    max_head_dim=128,
    distinct_value_head_dim=False,
    causal_alignments=("top_left",),
    masks=("none", "window"),
    symmetric_window=True,
    gqa=True,
    gqa_backward=False,
    lse_base="2",
    device_types=("cuda",),
    min_compute_capability=(10, 0),
    max_compute_capability=(10, 3),
    deterministic=False,
    hardware=f"a B200 (sm_100) with Meta's Triton fork (TLX) and a TLX JFA checkout named by ${CHECKOUT_ENV}",
)


def build(*, checkout=None, balanced: bool = False, capabilities=CAPABILITIES):
    """The adapter over the TLX JFA of ``checkout`` (default: ``$JFA_TLX_CHECKOUT``); ``balanced`` passes
    CPU copies of the offsets (host load balancing); ``capabilities`` bound what a direct call accepts.

    Raises:
        KernelUnavailable: no checkout named, or it has no ``tlx_jfa/src/tlx_jagged_flash_attention.py``.
    """
    from ._adapter import TLXJaggedAttention, load_tlx_function

    return TLXJaggedAttention(load_tlx_function(checkout), balanced=balanced, capabilities=capabilities)


register_kernel("tlx_jfa", capabilities=CAPABILITIES,
                description="peer: Meta's TLX JFA (B200) via its custom op; device offsets only")(lambda: build())
register_kernel("tlx_jfa_balanced", capabilities=CAPABILITIES,
                description="peer: Meta's TLX JFA with CPU offsets (host load balancing)")(
    lambda: build(balanced=True))
