"""sha256 of gluon_jfa's O, LSE, dQ, dK, dV on bench_gluon's batches (causal and not), for a bitwise A/B of two trees.
Run from a tree's root: python3 <this file> > hashes.json"""
import hashlib, json, math, sys
from pathlib import Path
sys.path.insert(0, str(Path.cwd())); sys.path.insert(0, str(Path.cwd() / "benchmarks"))
import torch
from bench_gluon import bench_batches
from bench_schedules import bench_inputs
from jfa_verify.kernels.gluon_jfa import build
from jfa_verify.scheduling.planning import PersistentScheduler

out = {}
kernel = build(scheduler=PersistentScheduler(backward="zigzag"))
for name, lengths in bench_batches().items():
    offsets, q, k, v = bench_inputs(lengths, 8, 128, torch.device("cuda"))
    do = torch.randn(q.shape, dtype=q.dtype, device=q.device, generator=torch.Generator(device=q.device).manual_seed(1))
    for causal in (False, True):
        o, lse, launch, bwd = kernel.prepare(q, k, v, offsets, offsets, do, causal=causal, sm_scale=1 / math.sqrt(128))
        launch()
        ts = [o, lse] + list(bwd())
        torch.cuda.synchronize()
        out[f"{name}/{causal}"] = [hashlib.sha256(t.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:16]
                                   + ("/nan" if torch.isnan(t.float()).any() else "") for t in ts]
print(json.dumps(out, indent=1))
