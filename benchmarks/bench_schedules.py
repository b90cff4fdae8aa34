"""Forward time of ``triton_jfa`` under each tile schedule, on skewed jagged batches (CUDA only).

Prints, per batch, the median forward time of: a plain grid (one program per
tile, launch order, the hardware's own block scheduler), and persistent
launches (one program per SM) walking launch-order, zigzag and dynamic
schedules; ratios are against the plain grid and against persistent launch
order. Where torch exposes FlashAttention-2 varlen
(``torch.ops.aten._flash_attention_forward``) it is timed too, as a peer.
Inputs are random normal bf16 (never zeros); times are medians of
``triton.testing.do_bench`` of the forward launch alone, with the host plan
(validation, tiles, schedule) built once beforehand as a serving stack would
per batch; the host planning time is printed separately. Usage: ``python benchmarks/bench_schedules.py [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import torch


def batches(seed: int = 0) -> dict[str, list[int]]:
    """Skewed length distributions: Pareto tail, one mega-sequence among tiny ones, MovieLens histories."""
    from jfa_verify.core.lengths import sample_movielens_batch

    rng = np.random.Generator(np.random.PCG64(seed))
    pareto = [int(min(16384, 32 * (1 + rng.pareto(1.2)))) for _ in range(512)]
    return {
        "pareto-512": pareto,
        "one-mega-16384+255x64": [16384] + [64] * 255,
        "movielens-1024": list(sample_movielens_batch(1024, seed)),
    }


def bench_arguments(doc: str, script: str) -> argparse.Namespace:
    """``--heads``, ``--head-dim``, ``--json`` of a benchmark script; exits unless CUDA is present."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit(f"{script} needs a CUDA device")
    return args


def bench_inputs(lengths: list[int], heads: int, head_dim: int, device) -> tuple[torch.Tensor, ...]:
    """``(offsets int32 [B+1], q, k, v)``: random normal bf16 ``[T, heads, head_dim]`` (never zeros), seed 0."""
    offsets = torch.tensor([0] + list(np.cumsum(lengths)), dtype=torch.int32, device=device)
    gen = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(int(offsets[-1]), heads, head_dim, device=device, dtype=torch.bfloat16, generator=gen)
               for _ in range(3))
    return offsets, q, k, v


def workloads(heads: int, head_dim: int, device):
    """``(name, causal, lengths, offsets, q, k, v)`` per batch of :func:`batches`, non-causal then causal."""
    for causal in (False, True):
        for name, lengths in batches().items():
            yield (name, causal, lengths, *bench_inputs(lengths, heads, head_dim, device))


def time_flash_varlen(q, k, v, offsets, lengths, causal: bool, **bench) -> "float | None":
    """Median ms (``triton.testing.do_bench(**bench)``) of torch's FlashAttention-2 varlen forward
    on the same batch, the peer; None, with the reason printed, where torch lacks the op."""
    from triton.testing import do_bench

    flash = getattr(torch.ops.aten, "_flash_attention_forward", None)
    if flash is None:
        print("  (flash varlen peer skipped: torch has no aten._flash_attention_forward)")
        return None
    max_len = max(lengths)
    try:
        return do_bench(lambda: flash(q, k, v, offsets, offsets, max_len, max_len, 0.0, causal, False,
                                      scale=1 / math.sqrt(q.shape[-1])), return_mode="median", **bench)
    except Exception as e:  # the op's signature differs between torch versions
        print(f"  (flash varlen peer skipped: {type(e).__name__}: {str(e)[:120]})")
        return None


def main() -> None:
    args = bench_arguments(__doc__, "bench_schedules.py")
    from triton.testing import do_bench

    from jfa_verify.core.device import select_device

    device = select_device("cuda")
    import time

    from jfa_verify.core.contract import validate_inputs
    from jfa_verify.kernels.triton_jfa import _kernels
    from jfa_verify.kernels.triton_jfa._host import _forward, plan_launch
    from jfa_verify.scheduling.planning import GridScheduler, PersistentScheduler

    variants = {
        "grid": GridScheduler(),
        "persistent-launch-order": PersistentScheduler("launch_order", "round_robin"),
        "persistent-zigzag": PersistentScheduler("zigzag", "round_robin"),
        "persistent-dynamic": PersistentScheduler("dynamic", "dynamic"),
    }
    rows = []
    print(f"{torch.cuda.get_device_name(0)}, bf16, H={args.heads}, D={args.head_dim}, forward only; median ms")
    for name, causal, lengths, offsets, q, k, v in workloads(args.heads, args.head_dim, device):
        total = int(offsets[-1])
        times = {}
        print(f"\n{name} (T={total}, B={len(lengths)}, max={max(lengths)}), causal={causal}")
        with torch.no_grad():
            problem = validate_inputs(q, k, v, offsets, offsets, causal=causal)
            for vname, scheduler in variants.items():
                t0 = time.perf_counter()
                plan, _ = plan_launch(problem, scheduler)
                plan_ms = (time.perf_counter() - t0) * 1e3
                times[vname] = do_bench(lambda: _forward(_kernels, problem, plan, q, k, v, offsets, offsets, None),
                                        warmup=50, rep=300, return_mode="median")
                print(f"  host plan {vname}: {plan_ms:.1f} ms")
            peer = time_flash_varlen(q, k, v, offsets, lengths, causal, warmup=50, rep=300)
            if peer is not None:
                times["flash-attn-2-varlen (torch)"] = peer
        flops = 4 * args.heads * args.head_dim * sum(n * n for n in lengths) * (0.5 if causal else 1.0)
        for vname, ms in times.items():
            row = dict(batch=name, causal=causal, variant=vname, ms=ms, tflops=flops / ms / 1e9,
                       vs_grid=times["grid"] / ms, vs_persistent_launch_order=times["persistent-launch-order"] / ms)
            rows.append(row)
            print(f"  {vname:32s} {ms:8.3f} ms {row['tflops']:7.1f} TFLOP/s  speedup vs grid {row['vs_grid']:5.2f}x"
                  f"  vs persistent launch-order {row['vs_persistent_launch_order']:5.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
