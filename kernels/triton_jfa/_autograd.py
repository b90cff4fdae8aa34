"""Host side of ``triton_jfa``: tiles, schedules, launches and the autograd Function.

Every Triton object is reached through the kernel module ``kmod`` given to
:func:`make_jagged_attention`, so a mutated copy of ``_kernels.py`` (a planted
bug) runs behind the very same wrapper.

Tiles and schedules:

* ``query_tiles(problem, block_m)``: ``[(b, m), ...]`` b-major, one per query
  block with at least one row (the forward and dQ work items; a tile whose
  rows see no key still runs and writes ``o = 0``, ``lse = -inf``).
* ``key_tiles(problem, block_n)``: ``[(b, n), ...]``, one per KV block with at
  least one key (the dK/dV work items).
* A *schedule* is a list of programs, each a list of tile indices into one of
  those lists; program ``p`` runs its tiles in order. The default gives one
  tile per program in b-major order. A *scheduler* is a callable
  ``scheduler(tiles, kind, problem) -> schedule`` with ``kind`` in
  ``("fwd", "dq", "dkdv")``.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import torch

from jfa_verify.contract import JaggedProblem, validate_inputs
from jfa_verify.device import interpreting
from jfa_verify.errors import UnsupportedCase

__all__ = [
    "make_jagged_attention",
    "run_jagged_attention",
    "query_tiles",
    "key_tiles",
    "default_schedule",
    "launch_config",
]

Schedule = Sequence[Sequence[int]]
Scheduler = Callable[[list, str, JaggedProblem], Schedule]


def _interpreter_index_shim() -> None:
    """Let runtime scalars bound ``range`` loops under ``TRITON_INTERPRET=1`` with NumPy >= 2.3.

    Triton 3.6's interpreter keeps scalars as 1-element arrays and implements
    ``tensor.__index__`` as ``int(array)``, which newer NumPy rejects
    ("only 0-dimensional arrays can be converted to Python scalars"), so any
    ``for i in range(lo, hi)`` with loaded bounds fails. Idempotent; GPU runs
    never call it.
    """
    from triton.runtime import interpreter

    if getattr(interpreter, "_jfa_index_shim", False):
        return
    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = patched
    interpreter._jfa_index_shim = True


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def query_tiles(problem: JaggedProblem, block_m: int) -> list[tuple[int, int]]:
    """``(sequence, query block)`` for every query block holding at least one row, b-major."""
    return [(b, m) for b in range(problem.batch) for m in range(_cdiv(problem.q_lengths[b], block_m))]


def key_tiles(problem: JaggedProblem, block_n: int) -> list[tuple[int, int]]:
    """``(sequence, key block)`` for every KV block holding at least one key, b-major."""
    return [(b, n) for b in range(problem.batch) for n in range(_cdiv(problem.k_lengths[b], block_n))]


def default_schedule(tiles: list, kind: str, problem: JaggedProblem) -> list[list[int]]:
    """One tile per program, in the tiles' (b-major) order."""
    return [[i] for i in range(len(tiles))]


def launch_config(problem: JaggedProblem) -> dict:
    """Tile sizes and launch options for ``problem`` (same BLOCK_M/BLOCK_N forward and backward)."""
    from kernels.triton_jfa import block_sizes

    head = max(problem.head_dim, problem.head_dim_v)
    block_m, block_n = block_sizes(head, problem.dtype, problem.device.type)
    # One padded width for both head dims: on the H200 (Triton 3.6) the forward
    # returned wrong O, with LSE correct, for D=40 / D_v=24 (BLOCK_D=64, BLOCK_DV=32);
    # found by the property tests, not root-caused. Equal widths compute correctly.
    block_d = block_dv = max(16, _next_pow2(max(problem.head_dim, problem.head_dim_v)))
    item = torch.tensor([], dtype=problem.dtype).element_size()
    fwd_stage = block_n * (block_d + block_dv) * item
    bwd_stage = block_m * (block_d + block_dv) * item
    return dict(
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=block_d,
        BLOCK_DV=block_dv,
        num_warps=4 if max(block_d, block_dv) <= 64 else 8,
        fwd_stages=max(1, min(3, (96 * 1024) // fwd_stage)),
        bwd_stages=max(1, min(2, (48 * 1024) // bwd_stage)),
    )


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _schedule_arrays(tiles, schedule: Schedule, device) -> dict:
    """Flatten a schedule into the kernel's ``TILE_SEQ``/``TILE_BLOCK``/``TILE_ID``/``PROG_TILE_START``."""
    order: list[int] = []
    starts = [0]
    for prog in schedule:
        for idx in prog:
            idx = int(idx)
            if not 0 <= idx < len(tiles):
                raise ValueError(f"schedule tile index {idx} outside [0, {len(tiles)}); a schedule lists tile indices")
            order.append(idx)
        starts.append(len(order))
    as_i32 = lambda xs: torch.tensor(xs, dtype=torch.int32, device=device)  # noqa: E731
    return dict(
        tile_seq=as_i32([tiles[i][0] for i in order]),
        tile_block=as_i32([tiles[i][1] for i in order]),
        tile_id=as_i32(order),
        prog_start=as_i32(starts),
        programs=len(starts) - 1,
    )


def _plan(problem: JaggedProblem, scheduler: Optional[Scheduler], device) -> dict:
    cfg = launch_config(problem)
    sched = scheduler or default_schedule
    q_t = query_tiles(problem, cfg["BLOCK_M"])
    k_t = key_tiles(problem, cfg["BLOCK_N"])
    q_default = _schedule_arrays(q_t, default_schedule(q_t, "fwd", problem), device)
    fwd_schedule = [list(prog) for prog in sched(q_t, "fwd", problem)]
    return dict(
        cfg=cfg,
        q_tiles=q_t,
        k_tiles=k_t,
        fwd_schedule=fwd_schedule,
        fwd=_schedule_arrays(q_t, fwd_schedule, device),
        dq=_schedule_arrays(q_t, sched(q_t, "dq", problem), device),
        dkdv=_schedule_arrays(k_t, sched(k_t, "dkdv", problem), device),
        pre=q_default,  # delta preprocess: one program per query tile, same tiles as the dQ kernel
    )


def _common_flags(problem: JaggedProblem, cfg: dict) -> dict:
    return dict(
        HEAD_DIM=problem.head_dim,
        HEAD_DIM_V=problem.head_dim_v,
        BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_D=cfg["BLOCK_D"],
        BLOCK_DV=cfg["BLOCK_DV"],
        CAUSAL=problem.causal,
        BOTTOM_RIGHT=problem.causal_alignment == "bottom_right",
        BROADCAST_Q=problem.mode == "broadcast_q",
        INTERPRET=interpreting(),
        IEEE=problem.dtype == torch.float32,
    )


def _l_q(problem: JaggedProblem, q: torch.Tensor) -> int:
    return q.shape[0] if problem.mode == "broadcast_q" else 0


def _forward(kmod, problem, plan, q, k, v, q_off, k_off, visits):
    cfg = plan["cfg"]
    rows, h_q = problem.total_q_rows, problem.num_heads_q
    o = torch.empty(rows, h_q, problem.head_dim_v, dtype=q.dtype, device=q.device)
    lse = torch.empty(h_q, rows, dtype=torch.float32, device=q.device)
    # Rows before offsets[0] belong to no sequence; every sequence row is written by the kernel.
    if problem.mode == "broadcast_q":
        first = 0  # sequence b's rows are b * L_q .. (b + 1) * L_q - 1: all rows
    else:
        first = problem.q_starts[0] if problem.batch else rows
    o[:first].zero_()
    lse[:, :first] = float("-inf")
    fw = plan["fwd"]
    if fw["programs"] > 0 and fw["tile_seq"].numel() > 0:
        instrument = visits is not None
        kmod._fwd_kernel[(fw["programs"], h_q)](
            q, k, v, o, lse, q_off, k_off,
            fw["tile_seq"], fw["tile_block"], fw["tile_id"], fw["prog_start"],
            visits if instrument else fw["tile_id"],
            *q.stride(), *k.stride(), *v.stride(), *o.stride(), lse.stride(0),
            problem.sm_scale * math.log2(math.e), _l_q(problem, q), problem.group_size, h_q,
            INSTRUMENT=instrument,
            num_warps=cfg["num_warps"], num_stages=cfg["fwd_stages"],
            **_common_flags(problem, cfg),
        )
    return o, lse


def _backward(kmod, problem, plan, q, k, v, o, lse, do, q_off, k_off):
    cfg = plan["cfg"]
    flags = _common_flags(problem, cfg)
    h_q, h_kv = problem.num_heads_q, problem.num_heads_kv
    dev = q.device
    l_q = _l_q(problem, q)
    broadcast = problem.mode == "broadcast_q"
    qk_scale = problem.sm_scale * math.log2(math.e)

    delta = torch.empty_like(lse)
    pre = plan["pre"]
    if pre["programs"] > 0:
        kmod._bwd_preprocess_kernel[(pre["programs"], h_q)](
            o, do, delta, q_off, k_off, pre["tile_seq"], pre["tile_block"],
            *o.stride(), *do.stride(), delta.stride(0), l_q,
            HEAD_DIM_V=problem.head_dim_v, BLOCK_M=cfg["BLOCK_M"], BLOCK_DV=cfg["BLOCK_DV"],
            BROADCAST_Q=broadcast,
        )

    dk = torch.empty(k.shape, dtype=k.dtype, device=dev)
    dv = torch.empty(v.shape, dtype=v.dtype, device=dev)
    k_first = problem.k_starts[0] if problem.batch else k.shape[0]
    dk[:k_first].zero_()
    dv[:k_first].zero_()
    kv = plan["dkdv"]
    if kv["programs"] > 0 and kv["tile_seq"].numel() > 0:
        kmod._bwd_dkdv_kernel[(kv["programs"], h_kv)](
            q, k, v, do, lse, delta, dk, dv, q_off, k_off,
            kv["tile_seq"], kv["tile_block"], kv["prog_start"],
            *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride(), lse.stride(0),
            problem.sm_scale, qk_scale, l_q, problem.group_size,
            num_warps=cfg["num_warps"], num_stages=cfg["bwd_stages"],
            **flags,
        )

    if broadcast:
        partial = torch.empty(problem.total_q_rows, h_q, problem.head_dim, dtype=torch.float32, device=dev)
        dq_out = partial
    else:
        dq = torch.empty(q.shape, dtype=q.dtype, device=dev)
        q_first = problem.q_starts[0] if problem.batch else q.shape[0]
        dq[:q_first].zero_()
        dq_out = dq
    dqs = plan["dq"]
    if dqs["programs"] > 0 and dqs["tile_seq"].numel() > 0:
        kmod._bwd_dq_kernel[(dqs["programs"], h_q)](
            q, k, v, do, lse, delta, dq_out, q_off, k_off,
            dqs["tile_seq"], dqs["tile_block"], dqs["prog_start"],
            *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq_out.stride(), lse.stride(0),
            problem.sm_scale, qk_scale, l_q, problem.group_size,
            num_warps=cfg["num_warps"], num_stages=cfg["bwd_stages"],
            **flags,
        )
    if broadcast:
        dq = partial.view(problem.batch, l_q, h_q, problem.head_dim).sum(0).to(q.dtype)
    return dq, dk, dv


class _JaggedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, q_offsets, k_offsets, kmod, problem, plan, visits):
        q_off = k_offsets if q_offsets is None else q_offsets  # never read under BROADCAST_Q
        o, lse = _forward(kmod, problem, plan, q, k, v, q_off, k_offsets, visits)
        ctx.save_for_backward(q, k, v, o, lse, q_off, k_offsets)
        ctx.kmod, ctx.problem, ctx.plan = kmod, problem, plan
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, dlse):
        q, k, v, o, lse, q_off, k_off = ctx.saved_tensors
        if do is None:
            do = torch.zeros_like(o)
        dq, dk, dv = _backward(ctx.kmod, ctx.problem, ctx.plan, q, k, v, o, lse, do, q_off, k_off)
        return dq, dk, dv, None, None, None, None, None, None


def run_jagged_attention(
    kmod,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_offsets: Optional[torch.Tensor],
    k_offsets: torch.Tensor,
    *,
    causal: bool = False,
    causal_alignment: str = "top_left",
    sm_scale: Optional[float] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    scheduler: Optional[Scheduler] = None,
    instrument: Optional[dict] = None,
):
    """The contract call on kernel module ``kmod``, with an optional tile scheduler and instrumentation.

    Args: as :func:`jfa_verify.contract.validate_inputs`, plus
        scheduler: ``scheduler(tiles, kind, problem) -> list of programs`` (lists
            of tile indices); None for one tile per program, b-major.
        instrument: a dict; when given it receives ``"tiles"`` (the forward's
            query tiles), ``"schedule"`` (the forward's program lists) and
            ``"visits"`` (int32 ``[num_tiles, H_q]``, how many times the forward
            visited each tile for each head).

    Returns: ``(o, lse)``; ``o`` is differentiable w.r.t. q, k, v.

    Raises:
        InvalidInput: inputs break the contract.
        UnsupportedCase: valid inputs outside ``triton_jfa``'s capabilities.
    """
    from kernels.triton_jfa import CAPABILITIES

    problem = validate_inputs(
        q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
        sm_scale=sm_scale, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
    )
    reason = CAPABILITIES.unsupported_reason(problem)
    if reason is not None:
        raise UnsupportedCase(f"kernel 'triton_jfa' does not support this case: {reason}")
    if interpreting():
        _interpreter_index_shim()
    plan = _plan(problem, scheduler, q.device)
    visits = None
    if instrument is not None:
        visits = torch.zeros(len(plan["q_tiles"]), problem.num_heads_q, dtype=torch.int32, device=q.device)
        instrument.update(tiles=plan["q_tiles"], schedule=plan["fwd_schedule"], visits=visits)
    return _JaggedAttention.apply(q, k, v, q_offsets, k_offsets, kmod, problem, plan, visits)


def make_jagged_attention(kmod, *, scheduler: Optional[Scheduler] = None):
    """The contract callable bound to kernel module ``kmod`` (and an optional default scheduler).

    The returned function also carries ``.run(q, k, v, q_offsets, k_offsets,
    *, scheduler=..., instrument=..., **contract_kwargs)`` for scheduled or
    instrumented calls, and ``.kernels`` (``kmod``).
    """

    def jagged_attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left",
                         sm_scale=None, max_seqlen_q=None, max_seqlen_k=None):
        return run_jagged_attention(
            kmod, q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
            sm_scale=sm_scale, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, scheduler=scheduler,
        )

    def run(q, k, v, q_offsets, k_offsets, *, scheduler=scheduler, instrument=None, **kwargs):
        return run_jagged_attention(kmod, q, k, v, q_offsets, k_offsets, scheduler=scheduler,
                                    instrument=instrument, **kwargs)

    jagged_attention.run = run
    jagged_attention.kernels = kmod
    return jagged_attention
