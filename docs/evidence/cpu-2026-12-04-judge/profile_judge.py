"""Where a verified case's time goes on the CPU when the kernel is cheap: ``run_case`` on N drawn cases (PACK > 1:
packs of up to PACK) with a stand-in kernel (``triton_jfa``'s capabilities and tiles, outputs from the padded SDPA
oracle through autograd), under cProfile (``NOPROF=1``: without it). Prints the runner's stages per launch and the
profile's top functions by cumulative time; writes the profile to PROFILE when given.

    python docs/evidence/cpu-2026-12-04-judge/profile_judge.py 300 1 /tmp/p1.prof
"""
import cProfile
import dataclasses
import os
import pstats
import sys
import time
from collections import Counter

import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed

from jfa_verify import register_kernel, validate_inputs
from jfa_verify.oracles import padded_sdpa_attention
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run.runner import run_case
from jfa_verify.run.settings import RunSettings
from jfa_verify.strategies import cases, packs

tj = get_kernel("triton_jfa")

class _F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, problem):
        ctx.problem = problem
        ctx.save_for_backward(q, k, v)
        r = padded_sdpa_attention(problem, q, k, v)
        ctx.mark_non_differentiable(r["lse"])
        return r["o"], r["lse"]
    @staticmethod
    def backward(ctx, do, _):
        q, k, v = ctx.saved_tensors
        with torch.enable_grad():
            r = padded_sdpa_attention(ctx.problem, q, k, v, do=do.contiguous())
        return r["dq"], r["dk"], r["dv"], None

def attend(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None, window=None,
           **kw):
    p = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                        sm_scale=sm_scale, window=window, **kw)
    return _F.apply(q, k, v, p)

caps = dataclasses.replace(tj.capabilities, instrumented=False)
register_kernel("standin", capabilities=caps, tile_sizes=tj.tile_sizes)(lambda: attend)
k = get_kernel("standin")

def draw(n, pack):
    got = []
    strat = cases(tj, device_type="cpu") if pack == 1 else packs(tj, device_type="cpu", size=pack)
    @hseed(0)
    @settings(database=None, deadline=None, max_examples=n, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(c=strat)
    def t(c):
        got.append(c)
    t()
    return got[:n]

n, pack = int(sys.argv[1]), int(sys.argv[2])
cs = draw(n, pack)
st = RunSettings(backward=True)
spent, statuses = Counter(), Counter()
prof = cProfile.Profile() if not os.environ.get('NOPROF') else None
t0 = time.perf_counter()
prof and prof.enable()
for c in cs:
    r = run_case(c, k, "cpu", st)
    statuses[r.status] += 1
    for key, s in r.seconds.items():
        spent[key] += s
prof and prof.disable()
total = time.perf_counter() - t0
print(f"{len(cs)} launches ({sum(len(c.split()) for c in cs)} cases) in {total:.2f}s; statuses {dict(statuses)}")
print({k: f"{1000*v/len(cs):.2f} ms ({100*v/total:.0f}%)" for k, v in spent.items()})
if prof and len(sys.argv) > 3:
    prof.dump_stats(sys.argv[3])
prof and pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
