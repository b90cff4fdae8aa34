"""Host side of ``triton_jfa``: tiles, schedules, launches and the autograd Function.

Every Triton object is reached through the kernel module ``kmod`` given to
:func:`make_jagged_attention`, so a mutated copy of ``_kernels.py`` (a planted
bug) runs behind the very same wrapper.

Tiles and schedules:

* ``query_tiles(problem, block_m)``: ``[(b, m), ...]`` b-major, one per query
  block (the forward and dQ work items; a tile whose rows see no key still
  runs and writes ``o = 0``, ``lse = -inf``), plus one *empty* tile ``(b, 0)``
  for a sequence with no query row. The list is exactly
  :func:`kernels.schedulers.workloads_forward`'s order, so tile indices agree.
* ``key_tiles(problem, block_n)``: the same over KV blocks (the dK/dV work
  items), matching :func:`kernels.schedulers.workloads_backward`.
* A *schedule* is a list of programs, each a list of tile indices into one of
  those lists; program ``p`` runs its tiles in order. The default gives one
  non-empty tile per program in b-major order (empty tiles pruned). A
  *scheduler* is a callable ``scheduler(tiles, kind, problem)`` with ``kind``
  in ``("fwd", "dq", "dkdv")`` returning a schedule, or an object whose
  ``.programs`` is one (kept, for invariant checks, in ``instrument["plans"]``).
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import torch

from jfa_verify.contract import FORWARD_ONLY_DTYPES, JaggedProblem, output_dtype, validate_inputs
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


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tiles(lengths: Sequence[int], block: int) -> list[tuple[int, int]]:
    return [(b, blk) for b, n in enumerate(lengths) for blk in range(max(1, _cdiv(n, block)))]


def query_tiles(problem: JaggedProblem, block_m: int) -> list[tuple[int, int]]:
    """``(sequence, query block)`` per query block, b-major; ``(b, 0)`` (empty) when ``L_q == 0``."""
    return _tiles(problem.q_lengths, block_m)


def key_tiles(problem: JaggedProblem, block_n: int) -> list[tuple[int, int]]:
    """``(sequence, KV block)`` per KV block, b-major; ``(b, 0)`` (empty) when ``L_k == 0``."""
    return _tiles(problem.k_lengths, block_n)


def tile_is_empty(tile: tuple[int, int], kind: str, problem: JaggedProblem) -> bool:
    """True for the placeholder tile of a sequence with no rows on the tiled side."""
    lengths = problem.k_lengths if kind == "dkdv" else problem.q_lengths
    return lengths[tile[0]] == 0


def default_schedule(tiles: list, kind: str, problem: JaggedProblem) -> list[list[int]]:
    """One non-empty tile per program, in the tiles' (b-major) order (a non-persistent grid)."""
    return [[i] for i, t in enumerate(tiles) if not tile_is_empty(t, kind, problem)]


def launch_config(problem: JaggedProblem, *, tf32: bool = False) -> dict:
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
        IEEE=problem.dtype == torch.float32 and not tf32,
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


def _plan(problem: JaggedProblem, scheduler: Optional[Scheduler], device, *, tf32: bool = False) -> dict:
    cfg = launch_config(problem, tf32=tf32)
    sched = scheduler or default_schedule
    tiles = {"fwd": query_tiles(problem, cfg["BLOCK_M"]), "dkdv": key_tiles(problem, cfg["BLOCK_N"])}
    tiles["dq"] = tiles["fwd"]
    plan = dict(cfg=cfg, tiles=tiles, plans={}, programs={})
    for kind in ("fwd", "dq", "dkdv"):
        result = sched(tiles[kind], kind, problem)
        programs = getattr(result, "programs", result)
        plan["plans"][kind] = result
        plan["programs"][kind] = [list(prog) for prog in programs]
        plan[kind] = _schedule_arrays(tiles[kind], plan["programs"][kind], device)
    # delta preprocess: one program per non-empty query tile, the same tiles as the dQ kernel
    plan["pre"] = _schedule_arrays(tiles["fwd"], default_schedule(tiles["fwd"], "fwd", problem), device)
    return plan


def _aligned(problem: JaggedProblem, *tensors: torch.Tensor) -> bool:
    """The kernels' ``ALIGNED`` flag: head dims and every token/head stride of ``tensors``
    (``[rows, heads, dim]``) multiples of 16 elements, every head-dim stride 1.

    The strides and head dims are not specialized (one compiled variant for all values),
    so this one flag tells the compiler what it needs for 16-byte pipelined loads.
    """
    if problem.head_dim % 16 or problem.head_dim_v % 16:
        return False
    return all(t.stride(2) == 1 and t.stride(0) % 16 == 0 and t.stride(1) % 16 == 0 for t in tensors)


def _common_flags(problem: JaggedProblem, cfg: dict) -> dict:
    return dict(
        HEAD_DIM=problem.head_dim,
        HEAD_DIM_V=problem.head_dim_v,
        BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_D=cfg["BLOCK_D"],
        BLOCK_DV=cfg["BLOCK_DV"],
        CAUSAL=problem.causal,
        # Alignment matters only under CAUSAL; one non-causal variant instead of two to compile.
        BOTTOM_RIGHT=problem.causal and problem.causal_alignment == "bottom_right",
        BROADCAST_Q=problem.mode == "broadcast_q",
        INTERPRET=interpreting(),
        IEEE=cfg["IEEE"],
    )


def _l_q(problem: JaggedProblem, q: torch.Tensor) -> int:
    return q.shape[0] if problem.mode == "broadcast_q" else 0


def _probe(instr, kind, fallback):
    """``(VISITS, PROGS, INSTRUMENT)`` launch arguments for pass ``kind``."""
    if instr is None:
        return fallback, fallback, False
    return instr["visits"][kind], instr["programs"][kind], True


def _forward(kmod, problem, plan, q, k, v, q_off, k_off, instr):
    cfg = plan["cfg"]
    rows, h_q = problem.total_q_rows, problem.num_heads_q
    o = torch.empty(rows, h_q, problem.head_dim_v, dtype=output_dtype(q.dtype), device=q.device)
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
        visits, progs, instrument = _probe(instr, "fwd", fw["tile_id"])
        kmod._fwd_kernel[(fw["programs"], h_q)](
            q, k, v, o, lse, q_off, k_off,
            fw["tile_seq"], fw["tile_block"], fw["tile_id"], fw["prog_start"], visits, progs,
            *q.stride(), *k.stride(), *v.stride(), *o.stride(), lse.stride(0),
            problem.sm_scale * math.log2(math.e), _l_q(problem, q), problem.group_size, h_q,
            INSTRUMENT=instrument, ALIGNED=_aligned(problem, q, k, v, o),
            num_warps=cfg["num_warps"], num_stages=cfg["fwd_stages"],
            **_common_flags(problem, cfg),
        )
    return o, lse


def _backward(kmod, problem, plan, q, k, v, o, lse, do, q_off, k_off, instr):
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
            BROADCAST_Q=broadcast, ALIGNED=_aligned(problem, o, do),
        )

    dk = torch.empty(k.shape, dtype=k.dtype, device=dev)
    dv = torch.empty(v.shape, dtype=v.dtype, device=dev)
    k_first = problem.k_starts[0] if problem.batch else k.shape[0]
    dk[:k_first].zero_()
    dv[:k_first].zero_()
    kv = plan["dkdv"]
    if kv["programs"] > 0 and kv["tile_seq"].numel() > 0:
        visits, progs, instrument = _probe(instr, "dkdv", kv["tile_id"])
        kmod._bwd_dkdv_kernel[(kv["programs"], h_kv)](
            q, k, v, do, lse, delta, dk, dv, q_off, k_off,
            kv["tile_seq"], kv["tile_block"], kv["tile_id"], kv["prog_start"], visits, progs,
            *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride(), lse.stride(0),
            problem.sm_scale, qk_scale, l_q, problem.group_size, h_kv, INSTRUMENT=instrument,
            ALIGNED=_aligned(problem, q, k, v, do, dk, dv),
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
        visits, progs, instrument = _probe(instr, "dq", dqs["tile_id"])
        kmod._bwd_dq_kernel[(dqs["programs"], h_q)](
            q, k, v, do, lse, delta, dq_out, q_off, k_off,
            dqs["tile_seq"], dqs["tile_block"], dqs["tile_id"], dqs["prog_start"], visits, progs,
            *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq_out.stride(), lse.stride(0),
            problem.sm_scale, qk_scale, l_q, problem.group_size, h_q, INSTRUMENT=instrument,
            ALIGNED=_aligned(problem, q, k, v, do, dq_out),
            num_warps=cfg["num_warps"], num_stages=cfg["bwd_stages"],
            **flags,
        )
    if broadcast:
        dq = partial.view(problem.batch, l_q, h_q, problem.head_dim).sum(0).to(q.dtype)
    return dq, dk, dv


class _JaggedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, q_offsets, k_offsets, kmod, problem, plan, instr):
        q_off = k_offsets if q_offsets is None else q_offsets  # never read under BROADCAST_Q
        o, lse = _forward(kmod, problem, plan, q, k, v, q_off, k_offsets, instr)
        ctx.save_for_backward(q, k, v, o, lse, q_off, k_offsets)
        ctx.kmod, ctx.problem, ctx.plan, ctx.instr = kmod, problem, plan, instr
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, dlse):
        q, k, v, o, lse, q_off, k_off = ctx.saved_tensors
        if ctx.problem.dtype in FORWARD_ONLY_DTYPES:
            raise UnsupportedCase(f"dtype={ctx.problem.dtype} is forward only in triton_jfa: no backward")
        if do is None:
            do = torch.zeros_like(o)
        dq, dk, dv = _backward(ctx.kmod, ctx.problem, ctx.plan, q, k, v, o, lse, do, q_off, k_off, ctx.instr)
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
    tf32: bool = False,
):
    """The contract call on kernel module ``kmod``, with an optional tile scheduler and instrumentation.

    Args: as :func:`jfa_verify.contract.validate_inputs`, plus
        scheduler: ``scheduler(tiles, kind, problem) -> list of programs`` (lists
            of tile indices); None for one tile per program, b-major.
        instrument: a dict; when given it receives, per pass ``kind`` in
            ``("fwd", "dq", "dkdv")``: ``"tiles"[kind]`` (the ``(b, block)``
            list), ``"plans"[kind]`` (what the scheduler returned),
            ``"schedule"`` (the forward's program lists), ``"visits"[kind]``
            (int32 ``[num_tiles, heads]``: how many times the pass ran each
            tile for each head; heads are H_kv for dK/dV) and
            ``"programs"[kind]`` (the program id that last ran it, -1 if none).
            The backward entries fill in when the backward runs.
        tf32: float32 inputs run their matmuls with TF32 operands (10-bit
            mantissa) instead of IEEE float32; no effect on other dtypes or
            under the interpreter (which computes in float32).

    Returns: ``(o, lse)``; ``o`` is differentiable w.r.t. q, k, v.

    Raises:
        InvalidInput: inputs break the contract.
        UnsupportedCase: valid inputs outside ``triton_jfa``'s capabilities.
    """
    from kernels.triton_jfa import KERNEL_CAPABILITIES

    problem = validate_inputs(
        q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
        sm_scale=sm_scale, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
    )
    reason = KERNEL_CAPABILITIES.unsupported_reason(problem)
    if reason is not None:
        raise UnsupportedCase(f"kernel 'triton_jfa' does not support this case: {reason}")
    plan = _plan(problem, scheduler, q.device, tf32=tf32)
    instr = None
    if instrument is not None:
        heads = {"fwd": problem.num_heads_q, "dq": problem.num_heads_q, "dkdv": problem.num_heads_kv}

        def counters(fill):
            return {kind: torch.full((len(plan["tiles"][kind]), h), fill, dtype=torch.int32, device=q.device)
                    for kind, h in heads.items()}

        instr = dict(tiles=plan["tiles"], plans=plan["plans"], schedule=plan["programs"]["fwd"],
                     visits=counters(0), programs=counters(-1))
        instrument.update(instr)
    return _JaggedAttention.apply(q, k, v, q_offsets, k_offsets, kmod, problem, plan, instr)


def make_jagged_attention(kmod, *, scheduler: Optional[Scheduler] = None, tf32: bool = False):
    """The contract callable bound to kernel module ``kmod`` (an optional default scheduler; TF32 matmuls
    for float32 inputs when ``tf32``).

    The returned function also carries ``.run(q, k, v, q_offsets, k_offsets,
    *, scheduler=..., instrument=..., **contract_kwargs)`` for scheduled or
    instrumented calls, and ``.kernels`` (``kmod``).
    """

    def jagged_attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left",
                         sm_scale=None, max_seqlen_q=None, max_seqlen_k=None):
        return run_jagged_attention(
            kmod, q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
            sm_scale=sm_scale, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, scheduler=scheduler,
            tf32=tf32,
        )

    def run(q, k, v, q_offsets, k_offsets, *, scheduler=scheduler, instrument=None, **kwargs):
        return run_jagged_attention(kmod, q, k, v, q_offsets, k_offsets, scheduler=scheduler,
                                    instrument=instrument, tf32=tf32, **kwargs)

    jagged_attention.run = run
    jagged_attention.kernels = kmod
    return jagged_attention
