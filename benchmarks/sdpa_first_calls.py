"""What the padded SDPA oracle pays for a shape it has not run before, per SDPA backend (CUDA only).

On an H100 a worker's low-precision MovieLens case spent 0.7 s in the oracle the first time and 0.02 s when run again
with the same shapes (``benchmarks/profile_case.py``): a cost per new shape, not per process. For each backend
(torch's default choice, then each one forced), this times forward + backward of a boolean-masked
``scaled_dot_product_attention`` in bfloat16 (as the oracle calls it: ``[n, H, L, D]``, random normal values) on
shapes never run before in this process, then on the same shapes again, and prints the default's kernels (torch
profiler) so the backend it picked shows.

    python benchmarks/sdpa_first_calls.py [--shapes 5] [--dtype bfloat16]

Exit 0, or 2 without CUDA.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", type=int, default=5, help="new shapes timed per backend")
    p.add_argument("--dtype", default="bfloat16")
    args = p.parse_args(argv)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        print("sdpa_first_calls.py needs a CUDA device", file=sys.stderr)
        return 2
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    shape_counter = iter(range(10_000))

    def new_shape():  # (n, L) never used before: lengths like a MovieLens group's, all distinct
        i = next(shape_counter)
        return 2 + i % 7, 70 + 13 * i

    def call(n: int, length: int, backend) -> float:
        q, k, v = (torch.randn(n, 8, length, 128, device="cuda", dtype=dtype, generator=gen).requires_grad_()
                   for _ in range(3))
        lengths = torch.randint(1, length + 1, (n,), device="cuda", generator=gen)
        mask = torch.arange(length, device="cuda")[None, :] < lengths[:, None]
        mask = (mask[:, :, None] & mask[:, None, :])[:, None]
        mask[..., 0] = True
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with sdpa_kernel([backend]) if backend is not None else contextlib.nullcontext():
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        o.backward(torch.randn_like(o))
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    backends = [("default", None), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)]
    call(*new_shape(), None)  # the process's first call (context, cuBLAS, lazy modules) counted for nobody
    for name, backend in backends:
        shapes = [new_shape() for _ in range(args.shapes)]
        try:
            first = [call(n, length, backend) for n, length in shapes]
            again = [call(n, length, backend) for n, length in shapes]
        except RuntimeError as e:
            print(f"{name:10s} not available: {str(e).splitlines()[0][:120]}")
            continue
        print(f"{name:10s} new shapes: {' '.join(f'{t * 1e3:7.1f}' for t in first)} ms; the same again: "
              f"{' '.join(f'{t * 1e3:7.1f}' for t in again)} ms")
    from torch.profiler import ProfilerActivity, profile

    n, length = new_shape()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call(n, length, None)
    names = sorted({e.key for e in prof.key_averages() if e.device_type.name == "CUDA"})
    print("default's kernels:", "; ".join(name[:70] for name in names[:12]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
