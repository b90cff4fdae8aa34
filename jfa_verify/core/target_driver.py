"""A Triton driver that knows only its target: compile kernels for a GPU on a machine without one.

``triton.runtime.driver.set_active(TargetOnlyDriver(90))`` lets ``JITFunction.warmup`` (and Gluon's)
compile for ``sm_90a`` on a CPU-only machine, so code generation (PTX: ``wgmma``, ``cp.async.bulk``,
``mbarrier``) can be checked in CPU CI. Launching anything through it is not possible.
"""

from __future__ import annotations

import torch

__all__ = ["TargetOnlyDriver"]


class TargetOnlyDriver:
    """What ``JITFunction.warmup`` asks of a driver, for a machine without the GPU.

    Args:
        arch: the compute capability as an int (``90`` for Hopper, ``100`` for Blackwell).
    """

    def __init__(self, arch: int = 90):
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", arch, 32)

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        return torch.device("cpu")
