"""Planted-bug copies of ``triton_jfa``: each is one realistic bug, made by a one-line source edit.

A mutant is never a user-facing kernel: it is registered only by
``tests/quality/mutant_plugin.py`` (``--plugin``), under the name ``mutant-<name>``.
The edited ``_kernels.py`` is written to a private temporary folder (Triton's
JIT reads kernel source from a file) and wrapped by the unchanged host code.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

KERNEL_SOURCE = Path(__file__).resolve().parents[2] / "kernels" / "triton_jfa" / "_kernels.py"


@dataclass(frozen=True)
class Mutant:
    """``old`` must occur exactly ``count`` times in the kernel source; each is replaced by ``new``."""

    name: str
    description: str
    old: str
    new: str
    count: int = 1

    def source(self) -> str:
        text = KERNEL_SOURCE.read_text()
        found = text.count(self.old)
        if found != self.count:
            raise AssertionError(
                f"mutant {self.name!r}: expected {self.count} occurrence(s) of {self.old!r} in {KERNEL_SOURCE}, "
                f"found {found}; update the mutant to the kernel's current source"
            )
        return text.replace(self.old, self.new)


MUTANTS = {
    m.name: m
    for m in [
        Mutant(
            "kv_bound_minus_one",
            "forward KV loop bound off by one: the last key of a non-causal sequence is skipped",
            "            hi = k_len\n            full_end = k_len\n",
            "            hi = k_len - 1\n            full_end = k_len\n",
        ),
        Mutant(
            "kv_tail_dropped",
            "forward KV loop stops at the last full tile: a partial last KV tile is never visited",
            "            hi = k_len\n            full_end = k_len\n",
            "            hi = (k_len // BLOCK_N) * BLOCK_N\n            full_end = k_len\n",
        ),
    ]
}

_loaded: dict[str, object] = {}
_tmpdir = None


def load_mutant_module(name: str):
    """Import the mutated ``_kernels`` module for mutant ``name`` (cached per process)."""
    global _tmpdir
    if name in _loaded:
        return _loaded[name]
    if _tmpdir is None:
        _tmpdir = tempfile.TemporaryDirectory(prefix="jfa-mutants-")
    path = Path(_tmpdir.name) / f"jfa_mutant_{name}.py"
    path.write_text(MUTANTS[name].source())
    spec = importlib.util.spec_from_file_location(f"jfa_mutant_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    _loaded[name] = module
    return module


def make_mutant_kernel(name: str):
    """The contract callable of mutant ``name`` (the real host wrapper around the mutated kernels)."""
    from jfa_verify.device import ensure_interpreter_matches_device

    ensure_interpreter_matches_device()
    from kernels.triton_jfa._autograd import make_jagged_attention
    from kernels.triton_jfa.scheduling import HostScheduler

    return make_jagged_attention(load_mutant_module(name), scheduler=HostScheduler("zigzag", "round_robin"))
