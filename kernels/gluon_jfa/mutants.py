"""Planted pipeline bugs of ``gluon_jfa``'s kernels: each is one realistic bug, one exact-string edit.

A mutant is ``(name, description, old, new, count)``: ``old`` must occur exactly ``count``
times in ``_kernels.py`` and each occurrence is replaced by ``new``. The edited source is
written to a private temporary folder (Triton and Gluon read a kernel's source from its
file) and imported as a module; :func:`make_mutant_attention` binds the unchanged host code
(:func:`._host.make_gluon_attention`) to it.

The bugs are of the kinds a warp-specialized TMA/wgmma pipeline gets wrong: mbarrier
phases, buffers released before the asynchronous MMA that reads them has completed, a
missing proxy fence, ring-slot arithmetic, producer credit. Several are races: whether one
shows depends on timing, so a GPU run that does not kill one is evidence, not proof, that
the check is weak for that class. Every mutant still compiles for sm_90a
(``tests/test_gluon_codegen.py`` checks that the strings match; ``codegen --mutant NAME``
compiles one).
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

KERNEL_SOURCE = Path(__file__).resolve().parent / "_kernels.py"


class Mutant(NamedTuple):
    name: str
    description: str
    old: str
    new: str
    count: int = 1


_I20 = " " * 20  # indentation of the consumer's KV loop body

MUTANTS: list[Mutant] = [
    Mutant(
        "k_phase_not_flipped",
        "consumer waits K-ready with parity 0 on every pass of the ring: from the second pass on the "
        "wait returns at once and Q K^T reads a stale K (the block STAGES earlier)",
        "mbarrier.wait(k_ready.index(s), (c // STAGES) & 1)",
        "mbarrier.wait(k_ready.index(s), 0)",
    ),
    Mutant(
        "q_phase_constant",
        "consumer waits Q-ready with parity 0 for every unit: from the second unit of a CTA on, "
        "Q K^T may read the previous unit's Q",
        "mbarrier.wait(q_ready, unit & 1)",
        "mbarrier.wait(q_ready, 0)",
    ),
    Mutant(
        "v_released_before_mma",
        "V buffer released (empty barrier arrived) before warpgroup_mma_wait: the producer may "
        "overwrite V while P V still reads it",
        "acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))\n" + _I20 + "mbarrier.arrive(v_empty.index(sp), count=1)",
        "mbarrier.arrive(v_empty.index(sp), count=1)\n" + _I20 + "acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))",
    ),
    Mutant(
        "k_released_before_mma",
        "K buffer released before the Q K^T wgmma completed (arrive moved above its wait)",
        "qk = warpgroup_mma_wait(1, deps=(qk, ))  # S_j done, P V may still run\n" + _I20
        + "mbarrier.arrive(k_empty.index(s), count=1)",
        "mbarrier.arrive(k_empty.index(s), count=1)\n" + _I20
        + "qk = warpgroup_mma_wait(1, deps=(qk, ))  # S_j done, P V may still run",
    ),
    Mutant(
        "missing_fence_before_tma_store",
        "fence_async_shared() missing between the register writes of O to shared memory and the "
        "TMA store that reads it (generic and async proxies unordered)",
        "                fence_async_shared()  # order the generic-proxy writes before the async-proxy read\n",
        "",
    ),
    Mutant(
        "v_stage_off_by_one",
        "consumer takes block j - 1's V from ring slot j % STAGES instead of (j - 1) % STAGES",
        "sp = (c - 1) % STAGES",
        "sp = c % STAGES",
    ),
    Mutant(
        "bq_dq_partials_collide",
        "broadcast-Q backward: every sequence writes its dQ partial to the same rows (the shared Q's rows "
        "instead of its own output rows): a non-atomic many-to-one reduction, last writer wins",
        "dq_row = o_row  # a float32 partial per sequence, summed over the batch by the host",
        "dq_row = q_row  # a float32 partial per sequence, summed over the batch by the host",
    ),
    Mutant(
        "gqa_bwd_head_map",
        "GQA head mapping wrong in the dK/dV pass only: KV head hk sums query heads g * GROUP + hk",
        "h = hk * GROUP + g",
        "h = g * GROUP + hk",
        count=2,
    ),
    Mutant(
        "dq_kv_released_before_mma",
        "dQ pass releases the K/V slot before the dS K wgmma that reads K has completed",
        "dq, ds_op = warpgroup_mma_wait(0, deps=(dq, ds_op))\n" + " " * 16
        + "mbarrier.arrive(kv_empty.index(s), count=1)",
        "mbarrier.arrive(kv_empty.index(s), count=1)\n" + " " * 16
        + "dq, ds_op = warpgroup_mma_wait(0, deps=(dq, ds_op))",
    ),
    Mutant(
        "producer_one_ahead",
        "producer credit off by one: the (STAGES + 1)-th V load of a CTA does not wait for slot 0 to "
        "be released, so STAGES + 1 V blocks are in flight in a ring of STAGES buffers",
        "mbarrier.wait(v_empty.index(s), phase ^ 1)",
        "mbarrier.wait(v_empty.index(s), phase ^ 1, pred=c != STAGES)",
    ),
]

MUTANT_NAMES = [m.name for m in MUTANTS]
_BY_NAME = {m.name: m for m in MUTANTS}


def mutant_source(name: str) -> str:
    """The source of ``_kernels.py`` with mutant ``name`` applied.

    Raises:
        KeyError: unknown name. AssertionError: ``old`` does not occur exactly ``count`` times
        (the kernel changed: update the mutant).
    """
    m = _BY_NAME[name]
    text = KERNEL_SOURCE.read_text()
    found = text.count(m.old)
    if found != m.count:
        raise AssertionError(f"mutant {name!r}: expected {m.count} occurrence(s) of {m.old!r} in {KERNEL_SOURCE}, "
                             f"found {found}; update the mutant to the current source")
    return text.replace(m.old, m.new)


_loaded: dict = {}
_tmpdir = None


def load_mutant_module(name: str):
    """Import the mutated kernel module of ``name`` (written to a temporary file), cached per process."""
    global _tmpdir
    if name not in _loaded:
        if _tmpdir is None:
            _tmpdir = tempfile.TemporaryDirectory(prefix="gluon-jfa-mutants-")
        module_name = f"gluon_jfa_mutant_{name}"
        path = Path(_tmpdir.name) / f"{module_name}.py"
        path.write_text(mutant_source(name))
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        _loaded[name] = module
    return _loaded[name]


def make_mutant_attention(name: str):
    """The contract callable of ``gluon_jfa`` running mutant ``name``'s kernels."""
    from ._host import make_gluon_attention

    return make_gluon_attention(load_mutant_module(name))
