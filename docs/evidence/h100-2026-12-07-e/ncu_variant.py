"""Run gluon_jfa's backward (a kernel-file variant or the shipped one) on one bench batch, for Nsight Compute."""
import math, sys, importlib.util
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import torch
from bench_gluon import bench_batches
from bench_schedules import bench_inputs
from jfa_verify.kernels.gluon_jfa import build, _host
from jfa_verify.scheduling.planning import PersistentScheduler

path, batch, causal, stages = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
kmod = None
if path != "shipped":
    spec = importlib.util.spec_from_file_location("variant", path)
    kmod = importlib.util.module_from_spec(spec); spec.loader.exec_module(kmod)
if stages:
    _host._dkdv_stages = lambda _d: stages
offsets, q, k, v = bench_inputs(bench_batches()[batch], 8, 128, torch.device("cuda"))
do = torch.randn_like(q)
kernel = build(kernels_module=kmod, scheduler=PersistentScheduler(backward="zigzag"))
o, lse, launch, bwd = kernel.prepare(q, k, v, offsets, offsets, do, causal=causal, sm_scale=1 / math.sqrt(128))
launch()
for _ in range(3):
    bwd()
torch.cuda.synchronize()
print("done")
