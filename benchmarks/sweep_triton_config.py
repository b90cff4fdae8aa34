"""triton_jfa's launch options swept on the GPU, each called as a user calls the kernel, against FA2, in one run.

Issue 38 asks ``triton_jfa``'s forward+backward for at least 0.8x FA2 on every row of ``bench_e2e.py``; after the
planner moved to the GPU its kernels, not its host work, are the gap. This script measures which tile sizes,
warp counts and pipeline depths close it before any of them becomes the kernel's default: for each configuration
it replaces :func:`kernels.triton_jfa._config.launch_config`'s answer (tile sizes, ``num_warps``, stages) in the
call path, then measures every configuration of ``bench_e2e.py`` with that module's own code (the same public
call, the same correctness check of O against FA2 before timing, the same ``do_bench`` medians). A
configuration the compiler refuses (shared memory, registers) prints its error in its rows.

The tiles change with the configuration everywhere the call uses them (the planner's workloads, the zigzag and
round-robin programs and the kernels' ``BLOCK_M``/``BLOCK_N``), because the call reads them from the launch
configuration; the framework's ``tile_sizes`` (used to localize findings) is not patched: this script times, it
does not judge.

Usage, on an H200 (``--configs`` picks some of :data:`CONFIGS`; default: all)::

    python benchmarks/sweep_triton_config.py --json $OUT/sweep.json

Without a CUDA device it exits 2 unless ``--device cpu`` (a smoke run of the code path on the interpreter).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_e2e import DTYPE_NAMES, FLOOR, HEADER, line, measure_config, run_batches, usable_kernels  # noqa: E402

# name: overrides of launch_config's answer (None: the kernel's own). BLOCK_M: query rows of a forward/dQ tile,
# BLOCK_N: key rows of a KV tile (dK/dV tile); stages: software-pipeline depth of each pass.
CONFIGS = {
    "current": None,
    "m64n64w8": dict(BLOCK_M=64, BLOCK_N=64, num_warps=8),  # the kernel's own at D=128 before 2026-12-06
    "m128n64w8": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, fwd_stages=3, bwd_stages=1),
    "m128n128w8": dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, fwd_stages=2, bwd_stages=1),
    "m64n128w8": dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, fwd_stages=2, bwd_stages=1),
    "m64n64w8s4": dict(BLOCK_M=64, BLOCK_N=64, num_warps=8, fwd_stages=4, bwd_stages=3),
}


def patched_launch_config(overrides):
    """A ``launch_config`` that answers the kernel's own configuration with ``overrides`` applied (tiles
    included), to install in the call path (:func:`install`)."""
    from jfa_verify.kernels.triton_jfa import _config
    from jfa_verify.protocol.kernel import TileSizes

    original = _config.launch_config

    def launch_config(problem, *, tf32: bool = False) -> dict:
        cfg = original(problem, tf32=tf32)
        if overrides and problem.device.type == "cuda" and getattr(problem, "block_selection", None) is None:
            cfg.update(overrides)
            cfg["tiles"] = TileSizes(cfg["BLOCK_M"], cfg["BLOCK_N"])
        return cfg

    return launch_config


def install(overrides) -> None:
    """Make every call of ``triton_jfa`` from now on use ``overrides`` (None: the kernel's own configuration,
    ``_config.launch_config``, which only ``_host``'s name for it is ever replaced by)."""
    from jfa_verify.kernels.triton_jfa import _config, _host

    _host.launch_config = _config.launch_config if overrides is None else patched_launch_config(overrides)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated, of {', '.join(CONFIGS)} (default: all)")
    parser.add_argument("--batches", default=None, help="comma-separated batches of bench_e2e.py (default: all)")
    parser.add_argument("--causal", choices=("false", "true", "both"), default="both")
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--rep-ms", type=float, default=25.0)
    parser.add_argument("--profile-calls", type=int, default=1)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in args.configs if c not in CONFIGS]
    if bad or not args.configs:
        parser.error(f"--configs {bad or args.configs}: choose from {', '.join(CONFIGS)}")
    args.causal = [False, True] if args.causal == "both" else [args.causal == "true"]
    return args


def main(argv=None) -> int:
    """Run the sweep; 0 when it ran (WRONG and error rows are printed), 2 without the device."""
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("sweep_triton_config.py: no CUDA device; run it on a GPU, or pass --device cpu", file=sys.stderr)
        return 2
    from jfa_verify.core.device import device_scope, select_device
    from jfa_verify.core.dtypes import to_dtype

    t0 = time.time()
    rows = []
    with device_scope():
        device = select_device(args.device)
        kernels, skipped = usable_kernels(["triton_jfa"], device)
        if skipped:
            print(f"triton_jfa cannot run here: {skipped['triton_jfa']}", file=sys.stderr)
            return 2
        batches = run_batches(device.type)
        dtype = to_dtype(DTYPE_NAMES[args.dtype])
        for config in args.configs:
            install(CONFIGS[config])
            print(f"== {config}: {CONFIGS[config] or 'the kernel own launch_config'}", flush=True)
            print(HEADER, flush=True)
            for batch in (args.batches.split(",") if args.batches else list(batches)):
                for causal in args.causal:
                    try:
                        measured = measure_config(kernels, batch, batches[batch], causal, dtype, args.head_dim,
                                                  args, device)
                    except Exception as exc:  # noqa: BLE001 - one refused configuration never hides the others
                        print(f"{batch} causal={causal}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                        continue
                    for row in measured:
                        row["config"] = config
                        if row["kernel"] != FLOOR or config == args.configs[0]:
                            print(line(row), flush=True)
                    rows.extend(measured)
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
        install(None)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(configs={k: CONFIGS[k] for k in args.configs}, rows=rows), fh, indent=1)
    print(f"done in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
