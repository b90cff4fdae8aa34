"""The project's own Triton JFA forward and backward (``triton_jfa`` and its variants).

Registration only (this module is the ``jfa_verify.kernels`` entry point):
Triton is imported when a kernel is first used, never at import time. Under
``TRITON_INTERPRET=1`` the same kernels run on CPU tensors.
"""

from __future__ import annotations

import dataclasses

from jfa_verify.protocol.registry import register_kernel

from ._config import CAPABILITIES, FP8_CAPABILITIES, MXFP8_CAPABILITIES, tile_sizes

__all__ = ["build", "build_mxfp8"]


def build(*, kernels_module=None, host_module=None, scheduler=None, tf32: bool = False):
    """The ``triton_jfa`` implementation on the given modules (defaults: the shipped ``_kernels`` and
    ``_host``) with a scheduler hook (:mod:`jfa_verify.scheduling.planning`; default zigzag forward, round-robin
    dK/dV, one program per SM). The mutation engine builds planted-bug copies through this.
    """
    from jfa_verify.core.device import ensure_interpreter_matches_device
    from jfa_verify.scheduling.planning import PersistentScheduler

    ensure_interpreter_matches_device()
    if kernels_module is None:
        from . import _kernels as kernels_module
    if host_module is None:
        from . import _host as host_module
    return host_module.TritonJFA(kernels_module, scheduler=scheduler or PersistentScheduler(), tf32=tf32)


def build_mxfp8(**options):
    """``triton_jfa_mxfp8``'s implementation: :func:`build` (same ``options``) behind the MXFP8 front
    (:class:`~jfa_verify.kernels.triton_jfa._mxfp8.TritonMXFP8`, which takes ``block_scales=``). Planted-bug copies
    of its kernels are built through this (``tests/mxfp8_mutants.json``)."""
    from ._mxfp8 import TritonMXFP8

    return TritonMXFP8(build(**options))


def _register(name: str, doc: str, *, capabilities=CAPABILITIES, **options):
    def load():
        if options.get("scheduler") == "grid":
            from jfa_verify.scheduling.planning import GridScheduler

            return build(scheduler=GridScheduler(), tf32=options.get("tf32", False))
        if options.get("scheduler") == "dynamic":
            from jfa_verify.scheduling.planning import PersistentScheduler

            return build(scheduler=PersistentScheduler("dynamic", "dynamic"))
        if options.get("mxfp8"):
            return build_mxfp8()
        return build(tf32=options.get("tf32", False))

    register_kernel(name, capabilities=capabilities, tile_sizes=tile_sizes, description=doc,
                    requires=("triton",))(load)


_register("triton_jfa", "Project Triton JFA, persistent: zigzag forward/dQ, round-robin dK/dV (one program per SM).")
_register("triton_jfa_grid", "Same kernels, one tile per program in launch order (no persistent schedule).",
          scheduler="grid")
_register("triton_jfa_dynamic",
          "Same kernels, persistent, host-simulated dynamic (CLC-style) schedules for every pass.", scheduler="dynamic")
_register("triton_jfa_tf32", "triton_jfa with TF32 matmuls for float32 inputs (judged by the float32-tf32 row).",
          capabilities=dataclasses.replace(CAPABILITIES, tf32=True), tf32=True)
_register("triton_jfa_fp8", "triton_jfa's forward on float8 e4m3 inputs (P rounded to e4m3 before P V, O in "
          "bfloat16); stands in for external fp8 kernels.", capabilities=FP8_CAPABILITIES)
_register("triton_jfa_mxfp8", "triton_jfa's forward on MXFP8 inputs (e4m3 data, E8M0 scales per 32 of the head dim "
          "applied to each tile after its load; P rounded to e4m3 before P V, O in bfloat16).",
          capabilities=MXFP8_CAPABILITIES, mxfp8=True)
