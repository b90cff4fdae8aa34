"""``gluon_jfa`` against torch's FlashAttention-2 varlen on an H200, forward and backward, in one run (CUDA only).

Batches: the Pareto, one-mega and MovieLens batches of ``bench_schedules.py`` and 32 sequences of
uniform lengths in [1024, 3072] (seed 0); bf16, H=8, D=128, causal and not, random normal inputs
(never zeros). Times are medians of ``triton.testing.do_bench``; TFLOP/s count visible (i, j)
pairs only: forward ``4 * pairs * D * H``, backward 2.5 times that (five products of the forward's
size; gluon_jfa's deterministic backward runs seven, so its own arithmetic is 1.4 times what the
rate credits).

What is timed:

* forward, ours: the kernel launch alone, plan (validation, the framework's tiles and zigzag programs planned
  as the public call plans them, descriptors) built once beforehand by ``GluonJFA.prepare``; FA2:
  ``aten._flash_attention_forward``. ``benchmarks/bench_e2e.py`` times the public call instead.
* backward, ours: ``prepare``'s backward launch (delta, the dK/dV and dQ kernels) with the plan built
  once; ``+plan`` (``--with-planning``) adds the host work of ``prepare`` for every call (validation, both
  passes' plans, outputs, TMA descriptors); FA2: ``aten._flash_attention_backward`` (its own preprocessing
  included).

Variants (``--variant NAME:key=value,...``, repeatable; default one variant ``registered``: the shipped
kernels with the dK/dV zigzag the registered kernel uses) try a kernel
file and host settings side by side in the same run: ``kernels=PATH`` (a copy of ``_kernels.py``),
``head_groups=N`` (forces ``JFA_GLUON_HEAD_GROUPS``; 1 folds every head into one CTA), ``bwd_stages=N``
(both backward kernels' rings), ``dkdv_stages=N`` (the dK/dV kernel's alone),
``dkdv=round_robin|zigzag`` (the framework's schedulers over the dK/dV tiles; unset: the host's default),
``dq_block_n=N`` (keys per step of the dQ kernel). Each variant's O, dQ, dK, dV are compared with the
first variant's (``agree``: the largest absolute difference), so a faster variant that computes
something else shows.
Ratios printed are FA2 time / ours (above 1: ours faster). Usage::

    python benchmarks/bench_gluon.py [--json OUT] [--variant v1:head_groups=8,dkdv=zigzag ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from bench_schedules import batches, bench_inputs


def bench_batches() -> dict[str, list[int]]:
    """The issue's four batches: ``bench_schedules.batches()`` plus ``uniform-32`` (lengths in [1024, 3072])."""
    out = dict(batches())
    out["uniform-32"] = [int(x) for x in np.random.default_rng(0).integers(1024, 3073, 32)]
    return out


def parse_variant(spec: str) -> dict:
    """``NAME:key=value,...`` -> ``{"name": NAME, ...}``; raises ValueError naming a bad key or value."""
    name, _, rest = spec.partition(":")
    out = {"name": name, "kernels": None, "head_groups": None, "bwd_stages": None, "dkdv_stages": None, "dkdv": None,
           "dq_block_n": None}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        if key not in out or key == "name":
            raise ValueError(f"--variant {spec!r}: unknown key {key!r}; use kernels, head_groups, bwd_stages, "
                             "dkdv_stages, dkdv, dq_block_n")
        out[key] = value
    if out["dkdv"] not in (None, "round_robin", "zigzag"):
        raise ValueError(f"--variant {spec!r}: dkdv={out['dkdv']!r}; use round_robin or zigzag")
    for key in ("head_groups", "bwd_stages", "dkdv_stages", "dq_block_n"):
        if out[key] is not None and not (out[key].isdigit() and int(out[key]) > 0):
            raise ValueError(f"--variant {spec!r}: {key}={out[key]!r}; give a positive integer")
    if out["kernels"] is not None and not Path(out["kernels"]).is_file():
        raise ValueError(f"--variant {spec!r}: kernels={out['kernels']!r} is not a file; give a copy of _kernels.py")
    return out


def _load_kernels(path):
    from jfa_verify.kernels.gluon_jfa import _kernels

    if not path:
        return _kernels
    spec = importlib.util.spec_from_file_location(f"gluon_variant_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _time(fn, **kw):
    from triton.testing import do_bench

    return do_bench(fn, return_mode="median", **kw)


def run(variants, args) -> list[dict]:
    from jfa_verify.kernels.gluon_jfa import _host as host
    from jfa_verify.kernels.gluon_jfa import build
    from jfa_verify.scheduling.planning import PersistentScheduler

    dev = torch.device("cuda")
    h, d = args.heads, args.head_dim
    shipped_stages, shipped_dkdv_stages, shipped_dq_tiles = host._bwd_stages, host._dkdv_stages, host.BWD_DQ_TILES
    rows = []
    for name, lengths in bench_batches().items():
        offsets, q, k, v = bench_inputs(lengths, h, d, dev)
        do = torch.randn_like(q)
        scale = 1 / math.sqrt(d)
        for causal in (False, True):
            pairs = sum(n * (n + 1) // 2 if causal else n * n for n in lengths)
            flops = 4 * pairs * d * h
            row = dict(batch=name, causal=causal, tokens=int(offsets[-1]), sequences=len(lengths), variants={})
            max_len = max(lengths)
            try:
                fa2_out = torch.ops.aten._flash_attention_forward(q, k, v, offsets, offsets, max_len, max_len, 0.0,
                                                                  causal, False, scale=scale)
                row["fa2_fwd_ms"] = _time(lambda: torch.ops.aten._flash_attention_forward(
                    q, k, v, offsets, offsets, max_len, max_len, 0.0, causal, False, scale=scale))
                out, lse, rng, unused = fa2_out[0], fa2_out[1], fa2_out[2], fa2_out[3]
                row["fa2_bwd_ms"] = _time(lambda: torch.ops.aten._flash_attention_backward(
                    do, q, k, v, out, lse, offsets, offsets, max_len, max_len, 0.0, causal, rng, unused,
                    scale=scale))
            except Exception as exc:  # noqa: BLE001 - the peer's signature differs between torch versions
                row["fa2_error"] = f"{type(exc).__name__}: {exc}"[:300]
            first = None
            for var in variants:
                res = row["variants"][var["name"]] = {}
                kmod = _load_kernels(var["kernels"])
                if var["head_groups"]:
                    os.environ[host.HEAD_GROUPS_ENV] = var["head_groups"]
                else:
                    os.environ.pop(host.HEAD_GROUPS_ENV, None)
                host._bwd_stages = (lambda _d, n=int(var["bwd_stages"]): n) if var["bwd_stages"] else shipped_stages
                host._dkdv_stages = (lambda _d, n=int(var["dkdv_stages"]): n) if var["dkdv_stages"] \
                    else shipped_dkdv_stages
                host.BWD_DQ_TILES = (shipped_dq_tiles[0], int(var["dq_block_n"])) if var["dq_block_n"] \
                    else shipped_dq_tiles
                # dkdv unset: the registered kernel's zigzag
                kernel = build(kernels_module=kmod, scheduler=PersistentScheduler(backward=var["dkdv"] or "zigzag"))
                prep = dict(causal=causal, sm_scale=scale)
                try:
                    o, lse_ours, launch, bwd = kernel.prepare(q, k, v, offsets, offsets, do, **prep)
                    launch()
                    res["fwd_ms"] = _time(launch)
                    res["bwd_ms"] = _time(bwd)
                    outs = [o.float()] + [t.float() for t in bwd()]
                    if first is None:
                        first = outs
                    else:
                        res["agree"] = max(float((a - b).abs().max()) for a, b in zip(outs, first))
                    if args.with_planning:  # both passes' host work (validation, plans, descriptors) + the backward
                        res["bwd_plan_ms"] = _time(lambda: kernel.prepare(q, k, v, offsets, offsets, do, **prep)[3]())
                except Exception as exc:  # noqa: BLE001 - one variant failing never hides the others
                    res["error"] = f"{type(exc).__name__}: {exc}"[:300]
                for key in ("fwd", "bwd"):
                    if f"{key}_ms" in res:
                        res[f"{key}_tflops"] = flops * (2.5 if key == "bwd" else 1) / res[f"{key}_ms"] / 1e9
                        if f"fa2_{key}_ms" in row:
                            res[f"{key}_ratio"] = row[f"fa2_{key}_ms"] / res[f"{key}_ms"]
            os.environ.pop(host.HEAD_GROUPS_ENV, None)
            host._bwd_stages, host._dkdv_stages, host.BWD_DQ_TILES = shipped_stages, shipped_dkdv_stages, \
                shipped_dq_tiles
            for key in ("fwd", "bwd"):
                if f"fa2_{key}_ms" in row:
                    row[f"fa2_{key}_tflops"] = flops * (2.5 if key == "bwd" else 1) / row[f"fa2_{key}_ms"] / 1e9
            rows.append(row)
            print(line(row), flush=True)
    return rows


def line(row) -> str:
    """One printed row: FA2's TFLOP/s, then per variant ours and the ratio FA2 time / ours."""
    def num(x, fmt):
        return format(x, fmt) if x is not None else "-"
    head = (f"{row['batch']:22s} {'causal' if row['causal'] else 'full  '} | FA2 fwd "
            f"{num(row.get('fa2_fwd_tflops'), '5.0f')} bwd {num(row.get('fa2_bwd_tflops'), '5.0f')}")
    cells = []
    for name, r in row["variants"].items():
        if "error" in r:
            cells.append(f"{name}: ERROR {r['error'][:80]}")
            continue
        plan = f" (+plan {row['fa2_bwd_ms'] / r['bwd_plan_ms']:.2f}x)" if "bwd_plan_ms" in r and "fa2_bwd_ms" in row \
            else ""
        cells.append(f"{name}: fwd {num(r.get('fwd_tflops'), '5.0f')} {num(r.get('fwd_ratio'), '.2f')}x"
                     f" bwd {num(r.get('bwd_tflops'), '5.0f')} {num(r.get('bwd_ratio'), '.2f')}x{plan}"
                     + (f" agree {r['agree']:.1e}" if "agree" in r else ""))
    return head + " | " + " | ".join(cells)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME:key=value,... with keys kernels=PATH, head_groups=N, bwd_stages=N, "
                             "dkdv=round_robin|zigzag, dq_block_n=N (repeatable; the module doc says more)")
    parser.add_argument("--with-planning", action="store_true", help="also time the backward with host planning")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    try:
        # default: the configuration the framework runs (its registered scheduler deals dK/dV tiles by zigzag)
        variants = [parse_variant(s) for s in args.variant] or [parse_variant("registered:dkdv=zigzag")]
        names = [v["name"] for v in variants]
        if len(set(names)) < len(names) or "" in names:
            raise ValueError(f"--variant names {names}: give each variant its own non-empty name")
    except ValueError as exc:
        parser.error(str(exc))
    if not torch.cuda.is_available():
        print("bench_gluon.py needs a CUDA device (Hopper)", file=sys.stderr)
        return 2
    t0 = time.time()
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}; TFLOP/s, then FA2 time / ours", flush=True)
    rows = run(variants, args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(variants=variants, rows=rows), fh, indent=1)
    print(f"done in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
