"""Jagged flash attention for NVIDIA Hopper (sm_90a) in Gluon (Triton 3.6.0): TMA, wgmma, warp specialization,
scheduled tiles.

Registration only (a ``jfa_verify.kernels`` entry point): Gluon and Triton are imported when the
kernel is first used. It runs on an sm_90 GPU only; elsewhere every case is reported unsupported,
and its code generation is checked on any machine (``codegen.py``, ``tests/test_gluon_codegen.py``).
"""

from __future__ import annotations

import torch

from jfa_verify.protocol.kernel import Capabilities, TileSizes
from jfa_verify.protocol.registry import register_kernel

__all__ = ["CAPABILITIES", "build"]

CAPABILITIES = Capabilities(
    dtypes=(torch.bfloat16, torch.float16),
    head_dims=(64, 128),
    distinct_value_head_dim=False,
    strided_inputs=False,  # TMA descriptors over contiguous [T, H * D] views
    device_types=("cuda",),
    min_compute_capability=(9, 0),
    max_compute_capability=(9, 0),  # wgmma and setmaxnreg are sm_90a instructions
    deterministic=True,  # no atomics: dK/dV and dQ each written by one program
    instrumented=True,  # launch(instrument=True) returns its LaunchPlan (no visits: the plan is judged alone)
)


def _tile_sizes(problem) -> TileSizes:
    """The forward's and dQ's 128-row query tiles; dK/dV run 128-key tiles."""
    return TileSizes(128, 128)


def build(*, kernels_module=None, host_module=None, scheduler=None):
    """``gluon_jfa`` on the given modules (defaults: the shipped ``_kernels`` and ``_host``) with a
    scheduler hook for its query tiles and its dK/dV tiles (default: zigzag over the device's SMs for both);
    the mutation engine builds planted-bug copies through this."""
    from jfa_verify.scheduling.planning import PersistentScheduler

    from ._adapter import GluonJFA

    if kernels_module is None:
        from . import _kernels as kernels_module
    if host_module is None:
        from . import _host as host_module
    # dK/dV tiles by zigzag (measured: _host._plan_backward's docstring)
    return GluonJFA(kernels_module, host_module, scheduler or PersistentScheduler(backward="zigzag"))


@register_kernel("gluon_jfa", capabilities=CAPABILITIES, tile_sizes=_tile_sizes, requires=("triton",),
                 sanitizer_control="jfa_verify.kernels.gluon_jfa.sanitizer_control")
def load():
    """Hopper Gluon JFA: TMA-fed, warp-specialized (load warp + 2 MMA/softmax warp groups), CTAs walking zigzag
    programs."""
    return build()
