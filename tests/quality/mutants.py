"""Planted-bug copies of ``triton_jfa``: each is one realistic bug, made by a one-line source edit.

A mutant is never a user-facing kernel: it is registered only by
``tests/quality/mutant_plugin.py`` (``--plugin``), under the name ``mutant-<name>``.
The edited source is written to a private temporary folder (Triton's JIT reads
kernel source from a file) and wrapped by the host code:

* ``target="kernels"`` (default): ``kernels/triton_jfa/_kernels.py`` is edited
  and runs behind the unchanged host code (``_autograd.py``).
* ``target="autograd"``: ``kernels/triton_jfa/_autograd.py`` is edited (a host
  bug) and drives the unchanged kernels.
* ``scheduler``: a scheduler bug: the real kernels and host code, fed a
  corrupted schedule (``old``/``new`` empty).

``gpu_only=True`` marks a mutant that only shows on inputs too large for the
CPU interpreter (``gpu_reason`` says why); CPU runs skip it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

_PKG = Path(__file__).resolve().parents[2] / "kernels" / "triton_jfa"
KERNEL_SOURCE = _PKG / "_kernels.py"
SOURCES = {"kernels": KERNEL_SOURCE, "autograd": _PKG / "_autograd.py"}


@dataclass(frozen=True)
class Mutant:
    """``old`` must occur exactly ``count`` times in the target's source; each is replaced by ``new``."""

    name: str
    description: str
    old: str = ""
    new: str = ""
    count: int = 1
    target: str = "kernels"
    scheduler: Optional[Callable] = None  # a factory of a buggy scheduler (scheduler mutants)
    gpu_only: bool = False
    gpu_reason: str = ""

    @property
    def source_path(self) -> Path:
        return SOURCES[self.target]

    def source(self) -> str:
        text = self.source_path.read_text()
        if self.scheduler is not None and not self.old:
            return text
        found = text.count(self.old)
        if found != self.count:
            raise AssertionError(
                f"mutant {self.name!r}: expected {self.count} occurrence(s) of {self.old!r} in {self.source_path}, "
                f"found {found}; update the mutant to the current source"
            )
        return text.replace(self.old, self.new)


# ----------------------------------------------------------------------------- scheduler bugs


def _buggy_scheduler(corrupt):
    """Zigzag forward/dQ, round-robin dK/dV on 3 programs, with ``corrupt(sm_tiles, workloads)`` applied."""
    from kernels.triton_jfa.scheduling import HostScheduler, PlannedPass

    class BuggyScheduler(HostScheduler):
        def __init__(self):
            super().__init__("zigzag", "round_robin", num_sms=3)

        def __call__(self, tiles, kind, problem):
            planned = super().__call__(tiles, kind, problem)
            sms = [list(t) for t in planned.schedule.sm_tiles]
            corrupt(sms, planned.workloads)
            broken = dataclasses.replace(planned.schedule, sm_tiles=tuple(map(tuple, sms)))
            return PlannedPass(kind, planned.workloads, broken, planned.cluster_size)

    return BuggyScheduler()


def _drop_last(sms, workloads):
    busiest = max(range(len(sms)), key=lambda i: len(sms[i]))
    if sms[busiest]:
        sms[busiest].pop()


def _repeat_first(sms, workloads):
    first = next((t for tiles in sms for t in tiles if not t.sentinel), None)
    if first is not None:
        sms[-1].append(first)


def _run_empty(sms, workloads):
    empty = next((t for t in workloads if t.rows == 0), None)
    if empty is not None:
        sms[0].append(empty)


_FWD_STORE_O = "tl.store(o_ptrs, _round_cast(o, O.dtype.element_ty, INTERPRET), mask=row_ok[:, None] & dv_ok[None, :])"
_DV_ACC = "dv += _dot(_round_cast(p_t, do.dtype, INTERPRET), do, INTERPRET, IEEE)"
_SHIFT = "shift = _causal_shift(q_len, k_len, BOTTOM_RIGHT)"

MUTANTS = {
    m.name: m
    for m in [
        # --- tile bounds and masks
        Mutant("kv_bound_minus_one",
               "forward KV loop bound off by one: the last key of a non-causal sequence is skipped",
               "            hi = k_len\n            full_end = k_len\n",
               "            hi = k_len - 1\n            full_end = k_len\n"),
        Mutant("kv_tail_dropped",
               "forward KV loop stops at the last full tile: a partial last KV tile is never visited",
               "            hi = k_len\n            full_end = k_len\n",
               "            hi = (k_len // BLOCK_N) * BLOCK_N\n            full_end = k_len\n"),
        Mutant("last_kv_tile_unmasked",
               "forward: the mask is missing on the last (partial / diagonal) KV tile",
               "HEAD_DIM, HEAD_DIM_V, True, CAUSAL, INTERPRET, IEEE)",
               "HEAD_DIM, HEAD_DIM_V, False, CAUSAL, INTERPRET, IEEE)"),
        Mutant("dq_causal_strict",
               "dQ: causal diagonal off by one (key j visible iff j < i + shift, not <=)",
               "visible = visible & (offs_n[None, :] <= offs_m[:, None] + shift)",
               "visible = visible & (offs_n[None, :] < offs_m[:, None] + shift)"),
        Mutant("dkdv_causal_start_late",
               "dK/dV causal loop starts one query tile past the first row that sees the KV tile",
               "m_lo = tl.maximum(n_blk * BLOCK_N - shift, 0) // BLOCK_M * BLOCK_M",
               "m_lo = (tl.maximum(n_blk * BLOCK_N - shift, 0) // BLOCK_M + 1) * BLOCK_M"),
        # --- offsets and indexing
        Mutant("offsets_at_b",
               "key length read as offsets[b] - offsets[b] (offsets read at b instead of b + 1)",
               "k_len = _load_offset(K_OFF, b + 1) - k_start",
               "k_len = _load_offset(K_OFF, b) - k_start"),
        Mutant("q_start_from_k_offsets",
               "cross attention: query start read from the key offsets",
               "q_start = _load_offset(Q_OFF, b)",
               "q_start = _load_offset(K_OFF, b)"),
        Mutant("int32_token_stride_overflow",
               "forward Q address computed as int32 token x stride: wraps past 2^31 elements",
               "q_ptrs = (Q + (q_start + offs_m)[:, None] * stride_qt",
               "q_ptrs = (Q + (q_start + offs_m).to(tl.int32)[:, None] * stride_qt",
               gpu_only=True,
               gpu_reason="needs a tensor of more than 2^31 elements (> 8 GiB in fp32), beyond the CPU interpreter"),
        Mutant("stride_ignored",
               "forward reads Q with a hard-coded contiguous stride (H * D) instead of stride_qt/stride_qh",
               "q_ptrs = (Q + (q_start + offs_m)[:, None] * stride_qt + h * stride_qh",
               "q_ptrs = (Q + (q_start + offs_m)[:, None] * (NUM_HEADS * HEAD_DIM) + h * HEAD_DIM"),
        Mutant("do_stride_from_o",
               "backward preprocess reads dO with O's token stride (non-contiguous dO stride ignored)",
               "do = tl.load(DO + rows[:, None] * stride_dot",
               "do = tl.load(DO + rows[:, None] * stride_ot"),
        # --- heads
        Mutant("gqa_bwd_head_map",
               "GQA head mapping wrong in the backward only: dK/dV sums query heads g * GROUP + h_kv",
               "h = h_kv * GROUP + g",
               "h = g * GROUP + h_kv"),
        Mutant("gqa_interleaved_heads",
               "GQA query head h mapped to KV head h % GROUP (interleaved) instead of h // GROUP",
               "h_kv = h // GROUP", "h_kv = h % GROUP", count=2),
        # --- causal alignment
        Mutant("causal_shift_batchwide",
               "causal diagonal from one batch-wide shift (sequence 0's, as a padded kernel's max_k - max_q) "
               "instead of per sequence",
               _SHIFT,
               "shift = _causal_shift(_load_offset(Q_OFF, 1) - _load_offset(Q_OFF, 0), "
               "_load_offset(K_OFF, 1) - _load_offset(K_OFF, 0), BOTTOM_RIGHT)",
               count=3),
        Mutant("alignment_swapped",
               "bottom-right and top-left causal alignment swapped",
               "    if BOTTOM_RIGHT:\n        shift = k_len - q_len",
               "    if not BOTTOM_RIGHT:\n        shift = k_len - q_len"),
        # --- online softmax
        Mutant("lse_log2",
               "LSE stored in base 2 (the final * ln 2 is missing)",
               "(m_i + tl.log2(tl.where(empty, 1.0, l_i))) * 0.6931471805599453)",
               "(m_i + tl.log2(tl.where(empty, 1.0, l_i))))"),
        Mutant("acc_not_rescaled",
               "the accumulator is not rescaled by exp(m_old - m_new) on the masked (last) KV iteration",
               "acc = acc * alpha[:, None] + _dot(",
               "acc = acc * (1.0 if MASK else alpha[:, None]) + _dot("),
        Mutant("rescale_in_bf16",
               "online-softmax rescale factor exp(m_old - m_new) computed in bf16 (accumulator rescaled with 8 bits)",
               "    alpha = tl.exp2(m_i - m_safe)\n",
               "    alpha = tl.exp2(m_i - m_safe).to(tl.bfloat16).to(tl.float32)\n"),
        Mutant("final_norm_skipped_one_tile",
               "final 1/l normalization skipped on query tile 1",
               "o = acc / tl.where(empty, 1.0, l_i)[:, None]",
               "o = acc / tl.where(empty | (m_blk == 1), 1.0, l_i)[:, None]"),
        Mutant("softmax_scale_off",
               "softmax scale off by 3 % in the forward",
               "s = _dot(q, kt, INTERPRET, IEEE) * qk_scale",
               "s = _dot(q, kt, INTERPRET, IEEE) * (qk_scale * 1.03)"),
        Mutant("empty_seq_nan",
               "l == 0 guard dropped: a row with no visible key (empty sequence) divides 0 by 0 (NaN)",
               "o = acc / tl.where(empty, 1.0, l_i)[:, None]",
               "o = acc / l_i[:, None]"),
        Mutant("no_safe_max",
               "safe-max guard dropped: a row fully masked in a KV block computes exp(-inf - -inf) = NaN",
               'm_safe = tl.where(m_new == float("-inf"), 0.0, m_new)',
               "m_safe = m_new"),
        Mutant("rows_unwritten",
               "forward leaves the last output row of every sequence unwritten",
               _FWD_STORE_O,
               _FWD_STORE_O.replace("mask=row_ok[:, None]", "mask=(offs_m < q_len - 1)[:, None]")),
        # --- backward
        Mutant("dk_scale_missing",
               "dK not multiplied by the softmax scale",
               "dk = dk * sm_scale", "dk = dk * 1.0"),
        Mutant("dv_low_precision",
               "dV accumulator kept in bf16 (rounded after every query tile) whatever the input dtype",
               _DV_ACC,
               "dv = _round_cast(dv + _dot(_round_cast(p_t, do.dtype, INTERPRET), do, INTERPRET, IEEE), "
               "tl.bfloat16, INTERPRET).to(tl.float32)"),
        Mutant("preprocess_tile_size",
               "delta preprocess launched with BLOCK_N rows per tile while its tiles are BLOCK_M query tiles",
               'HEAD_DIM_V=problem.head_dim_v, BLOCK_M=cfg["BLOCK_M"], BLOCK_DV=cfg["BLOCK_DV"],',
               'HEAD_DIM_V=problem.head_dim_v, BLOCK_M=cfg["BLOCK_N"], BLOCK_DV=cfg["BLOCK_DV"],',
               target="autograd"),
        Mutant("bq_dq_missing_seq",
               "broadcast-Q: the dQ reduction over sequences drops sequence 0's partial",
               "dq = partial.view(problem.batch, l_q, h_q, problem.head_dim).sum(0).to(q.dtype)",
               "dq = partial.view(problem.batch, l_q, h_q, problem.head_dim)[1:].sum(0).to(q.dtype)",
               target="autograd"),
        Mutant("racy_dq",
               "broadcast-Q: non-atomic dQ update, modelled as last writer wins (only the last sequence's dQ)",
               "dq = partial.view(problem.batch, l_q, h_q, problem.head_dim).sum(0).to(q.dtype)",
               "dq = partial.view(problem.batch, l_q, h_q, problem.head_dim)[-1].to(q.dtype)",
               target="autograd"),
        # --- schedulers
        Mutant("sched_drops_last_tile", "scheduler drops the last tile of its busiest program",
               scheduler=lambda: _buggy_scheduler(_drop_last)),
        Mutant("sched_repeats_tile", "scheduler deals the first tile a second time to the last program",
               scheduler=lambda: _buggy_scheduler(_repeat_first)),
        Mutant("sched_runs_empty_tile", "scheduler runs the empty tile of a zero-length sequence",
               scheduler=lambda: _buggy_scheduler(_run_empty)),
    ]
}

_loaded: dict[str, object] = {}
_tmpdir = None


def _load_source(module_name: str, text: str):
    global _tmpdir
    if _tmpdir is None:
        _tmpdir = tempfile.TemporaryDirectory(prefix="jfa-mutants-")
    path = Path(_tmpdir.name) / f"{module_name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_mutant_module(name: str):
    """Import the mutated module of mutant ``name`` (its ``target``), cached per process."""
    if name not in _loaded:
        _loaded[name] = _load_source(f"jfa_mutant_{name}", MUTANTS[name].source())
    return _loaded[name]


def make_mutant_kernel(name: str):
    """The contract callable of mutant ``name``."""
    from jfa_verify.device import ensure_interpreter_matches_device

    ensure_interpreter_matches_device()
    from kernels.triton_jfa import _kernels
    from kernels.triton_jfa._autograd import make_jagged_attention
    from kernels.triton_jfa.scheduling import HostScheduler

    mutant = MUTANTS[name]
    if mutant.scheduler is not None:
        return make_jagged_attention(_kernels, scheduler=mutant.scheduler())
    scheduler = HostScheduler("zigzag", "round_robin")
    if mutant.target == "autograd":
        return load_mutant_module(name).make_jagged_attention(_kernels, scheduler=scheduler)
    return make_jagged_attention(load_mutant_module(name), scheduler=scheduler)


def mutant_kernel(name: str):
    """A :class:`kernels.registry.Kernel` for mutant ``name`` (not registered)."""
    from kernels.registry import Kernel
    from kernels.triton_jfa import CAPABILITIES

    return Kernel(f"mutant-{name}", MUTANTS[name].description, lambda: make_mutant_kernel(name), CAPABILITIES,
                  requires=("triton",))
