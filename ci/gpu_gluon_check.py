#!/usr/bin/env python3
"""GPU check of ``gluon_jfa`` (Hopper, Gluon) against a float64 reference (timings: ``benchmarks/bench_gluon.py``).

For an H200 (CUDA, torch 2.11, Triton 3.6.0). Self-contained: the reference, the SDPA error
baseline and the configurations are written here; only the kernel is imported.

Usage::

    python ci/gpu_gluon_check.py                    # correctness grid; exit 0 iff all pass
    python ci/gpu_gluon_check.py --kernels-file F   # the grid on a candidate copy of _kernels.py
    python ci/gpu_gluon_check.py --mutant NAME      # the grid against one planted bug (catalogue gluon_jfa)
    python ci/gpu_gluon_check.py --mutants all      # every mutant in its own worker: kill table

Correctness: every configuration runs in a worker process; the parent restarts a new worker
after a crash (illegal address, ...) or a hang (``--config-timeout`` seconds without the
configuration finishing), recording that configuration as ``error`` / ``hang``, so one bad
configuration never loses the others. Results are appended as JSON lines to
``$OUT/gluon_check.jsonl`` (``--out`` folder, default ``$OUT`` or ``gpu-out``) as they come,
and a summary table is printed at the end.

Per configuration: max abs error of O, LSE (finite entries), dQ, dK, dV against the float64
reference; PASS iff each error <= ``2 * err(SDPA) + 1e-2 * max|ref|`` where err(SDPA) is torch
SDPA's error in the same dtype on padded inputs (LSE: a float32 log-sum-exp of the same
rounded inputs stands in for SDPA, which returns none), no NaN in any output, the -inf
pattern of LSE equal to the reference's, and rows without a visible key exactly O = 0. The
kernel's outputs start as NaN (``JFA_GLUON_POISON=1``) so that unwritten rows fail. A
backward that raises ``GluonUnsupported`` is reported as ``n/a`` and does not fail.

"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MOVIELENS = ROOT / "jfa_verify" / "data" / "movielens_small_user_history_lengths.txt"

# ----------------------------------------------------------------------------- configurations

_BOUNDARY = [1, 127, 128, 129, 255, 256, 257, 0, 64]
_MIXED = [17, 300, 64, 1000, 129]
_EMPTIES = [0, 5, 0, 0, 300, 0]
_ONE_TOKEN = [1] * 20 + [2, 3]
_CROSS_Q = [64, 1, 200, 0, 129, 300, 7]
_CROSS_K = [300, 129, 17, 50, 0, 128, 1]
_BQ_K = [0, 1, 100, 300, 129, 1000]


def _movielens(n: int, seed: int) -> list[int]:
    import numpy as np

    if MOVIELENS.exists():
        vals = [int(x) for x in MOVIELENS.read_text().split() if x.strip().isdigit()]
    else:  # heavy-tailed stand-in, median about 71
        vals = [int(x) for x in np.random.default_rng(1).lognormal(math.log(71), 0.9, 610).clip(20, 2698)]
    return [int(x) for x in np.random.default_rng(seed).choice(vals, n)]


def _cfg(name, dtype, d, mode, causal, hq, hkv, q_lengths, k_lengths=None, q_pad0=0, schedule=None):
    """``schedule``: None (the kernel's default: round-robin over the SMs, one head per CTA), or
    ``(kind, programs)`` with kind "deal" (round-robin) or "zigzag" (by cost, boustrophedon),
    every head of a tile in one CTA: many (tile, head) units per CTA, so the ring wraps across units."""
    return dict(name=name, dtype=dtype, d=d, mode=mode, causal=causal, hq=hq, hkv=hkv,
                q_lengths=list(q_lengths), k_lengths=list(k_lengths if k_lengths is not None else q_lengths),
                q_pad0=q_pad0, schedule=schedule)


def configurations() -> list[dict]:
    """~30 configurations: dtypes x head dims x modes x causal alignments x head layouts x length edge cases."""
    ml = _movielens(24, 0)
    c = []
    b, f = "bfloat16", "float16"
    # bf16, D = 128
    for causal in ("none", "top_left", "bottom_right"):
        c.append(_cfg(f"bf16-d128-self-{causal}-boundary", b, 128, "self", causal, 4, 4, _BOUNDARY))
    c.append(_cfg("bf16-d128-self-none-mixed", b, 128, "self", "none", 4, 4, _MIXED))
    c.append(_cfg("bf16-d128-self-top_left-gqa8/2", b, 128, "self", "top_left", 8, 2, _MIXED))
    c.append(_cfg("bf16-d128-self-none-mqa8/1", b, 128, "self", "none", 8, 1, _MIXED))
    for causal in ("none", "top_left", "bottom_right"):
        c.append(_cfg(f"bf16-d128-cross-{causal}", b, 128, "cross", causal, 4, 4, _CROSS_Q, _CROSS_K))
    for causal in ("none", "top_left", "bottom_right"):
        c.append(_cfg(f"bf16-d128-bq200-{causal}", b, 128, "broadcast", causal, 4, 2, [200] * len(_BQ_K), _BQ_K))
    c.append(_cfg("bf16-d128-self-top_left-empties", b, 128, "self", "top_left", 4, 4, _EMPTIES))
    c.append(_cfg("bf16-d128-self-none-one_token", b, 128, "self", "none", 4, 4, _ONE_TOKEN))
    c.append(_cfg("bf16-d128-self-top_left-long4097", b, 128, "self", "top_left", 2, 2, [4097]))
    c.append(_cfg("bf16-d128-self-top_left-movielens", b, 128, "self", "top_left", 4, 4, ml))
    c.append(_cfg("bf16-d128-self-none-movielens", b, 128, "self", "none", 4, 2, ml))
    c.append(_cfg("bf16-d128-self-top_left-offset0", b, 128, "self", "top_left", 4, 4, _MIXED, q_pad0=37))
    # bf16, D = 64
    c.append(_cfg("bf16-d64-self-none-boundary", b, 64, "self", "none", 4, 4, _BOUNDARY))
    c.append(_cfg("bf16-d64-self-bottom_right-boundary", b, 64, "self", "bottom_right", 4, 4, _BOUNDARY))
    c.append(_cfg("bf16-d64-cross-bottom_right-gqa8/2", b, 64, "cross", "bottom_right", 8, 2, _CROSS_Q, _CROSS_K))
    c.append(_cfg("bf16-d64-bq64-none-mqa8/1", b, 64, "broadcast", "none", 8, 1, [64] * len(_BQ_K), _BQ_K))
    c.append(_cfg("bf16-d64-self-none-long4097", b, 64, "self", "none", 2, 2, [4097]))
    c.append(_cfg("bf16-d64-self-bottom_right-movielens", b, 64, "self", "bottom_right", 4, 4, ml))
    # fp16
    c.append(_cfg("fp16-d128-self-top_left-mixed", f, 128, "self", "top_left", 4, 4, _MIXED))
    c.append(_cfg("fp16-d128-cross-bottom_right-gqa8/2", f, 128, "cross", "bottom_right", 8, 2, _CROSS_Q, _CROSS_K))
    c.append(_cfg("fp16-d128-bq200-top_left", f, 128, "broadcast", "top_left", 4, 4, [200] * len(_BQ_K), _BQ_K))
    c.append(_cfg("fp16-d128-self-none-boundary", f, 128, "self", "none", 4, 4, _BOUNDARY))
    c.append(_cfg("fp16-d64-self-top_left-boundary", f, 64, "self", "top_left", 4, 4, _BOUNDARY))
    c.append(_cfg("fp16-d64-cross-none", f, 64, "cross", "none", 4, 4, _CROSS_Q, _CROSS_K))
    c.append(_cfg("fp16-d64-bq200-bottom_right-gqa4/2", f, 64, "broadcast", "bottom_right", 4, 2,
                  [200] * len(_BQ_K), _BQ_K))
    c.append(_cfg("fp16-d64-self-none-empties", f, 64, "self", "none", 4, 4, _EMPTIES))
    # persistent schedules: many tiles and heads per CTA (phases across units, ring wrap-around)
    c.append(_cfg("bf16-d128-self-top_left-mixed-1prog", b, 128, "self", "top_left", 4, 2, _MIXED,
                  schedule=("deal", 1)))
    c.append(_cfg("bf16-d128-self-none-boundary-3prog", b, 128, "self", "none", 4, 4, _BOUNDARY,
                  schedule=("zigzag", 3)))
    c.append(_cfg("bf16-d64-cross-bottom_right-2prog", b, 64, "cross", "bottom_right", 8, 2, _CROSS_Q, _CROSS_K,
                  schedule=("deal", 2)))
    c.append(_cfg("fp16-d128-bq200-none-2prog", f, 128, "broadcast", "none", 4, 1, [200] * len(_BQ_K), _BQ_K,
                  schedule=("zigzag", 2)))
    c.append(_cfg("bf16-d128-self-top_left-movielens-zigzag", b, 128, "self", "top_left", 4, 4, _movielens(200, 1),
                  schedule=("zigzag", 132)))
    c.append(_cfg("bf16-d64-self-none-long4097-5prog", b, 64, "self", "none", 2, 1, [4097, 300, 1],
                  schedule=("deal", 5)))
    return c


# Configurations a mutant run uses (many KV blocks per unit, many units per CTA, full tiles, both ring depths).
MUTANT_CONFIGS = ("bf16-d128-self-top_left-mixed-1prog", "bf16-d128-self-none-mixed", "bf16-d128-self-top_left-long4097",
                  "bf16-d64-self-none-long4097-5prog", "bf16-d128-self-top_left-movielens-zigzag",
                  "fp16-d128-bq200-none-2prog")

# ----------------------------------------------------------------------------- imports of the kernel


def _host_module():
    from jfa_verify.kernels.gluon_jfa import _host

    return _host


class GluonUnsupported(ValueError):
    """Stand-in of the kernel's exception, for the harness self-test's fake kernel."""


def _fake_attention(kind: str):
    """Harness self-test only (``JFA_CHECK_FAKE_KERNEL``): the float64 reference rounded to the input
    dtype (``ok``), or one that hangs, crashes the process, or gets one row wrong; no backward."""
    import torch

    class Fake(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, q_off, k_off, causal, alignment, scale):
            if kind == "hang":
                time.sleep(3600)
            if kind == "crash":
                os._exit(7)
            rows = q.shape[0] * (len(k_off) - 1) if q_off is None else q.shape[0]
            case = dict(q=q, k=k, v=v, q_off=q_off, k_off=k_off, causal=causal, alignment=alignment,
                        scale=scale, rows=rows)
            ref = reference(case, grads=False)
            o = ref["o"].to(q.dtype)
            if kind == "wrong":
                o[-1] += 1
            return o, ref["lse"].float()

        @staticmethod
        def backward(ctx, do, dlse):
            raise GluonUnsupported("fake kernel: no backward")

    def attention(q, k, v, q_off, k_off, *, causal=False, causal_alignment="top_left", sm_scale=None, **_):
        return Fake.apply(q, k, v, q_off, k_off, causal, causal_alignment, sm_scale)
    return attention


def _attention(mutant: str | None):
    fake = os.environ.get("JFA_CHECK_FAKE_KERNEL")
    if fake:
        return _fake_attention(fake)
    if mutant:
        from jfa_verify.fuzz.mutation import load_catalogue

        return _host_module().make_gluon_attention(load_catalogue("gluon_jfa").module(mutant))
    candidate = os.environ.get("JFA_CHECK_KERNELS_FILE")
    if candidate:  # --kernels-file: a candidate copy of _kernels.py, checked before it replaces the shipped one
        import importlib.util

        spec = importlib.util.spec_from_file_location("gluon_candidate", candidate)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        stages = os.environ.get("JFA_CHECK_BWD_STAGES")
        if stages:
            _host_module()._bwd_stages = lambda _d: int(stages)
        return _host_module().make_gluon_attention(module)
    return _host_module().gluon_jagged_attention


def _mutant_names() -> list[str]:
    from jfa_verify.fuzz.mutation import load_catalogue

    return list(load_catalogue("gluon_jfa").mutants)


# ----------------------------------------------------------------------------- cases and reference


def build_case(cfg: dict, seed: int = 0) -> dict:
    """Random-normal packed inputs on CUDA for ``cfg`` (never zeros), plus offsets and dO."""
    import torch

    dtype = getattr(torch, cfg["dtype"])
    dev = torch.device(os.environ.get("JFA_CHECK_DEVICE", "cuda"))
    g = torch.Generator(device=dev).manual_seed(seed)
    ql, kl = cfg["q_lengths"], cfg["k_lengths"]
    pad = cfg["q_pad0"]
    hq, hkv, d = cfg["hq"], cfg["hkv"], cfg["d"]

    def offsets(lengths):
        vals = [pad]
        for n in lengths:
            vals.append(vals[-1] + n)
        return torch.tensor(vals, dtype=torch.int32, device=dev)

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=dev, dtype=torch.float32).to(dtype)

    if cfg["mode"] == "broadcast":
        q = randn(ql[0], hq, d)
        q_off = None
        rows = len(kl) * ql[0]
    else:
        q_off = offsets(ql)
        q = randn(pad + sum(ql), hq, d)
        rows = q.shape[0]
    if cfg["mode"] == "self":
        k_off = q_off
    else:
        k_off = offsets(kl)
        if cfg["mode"] == "broadcast":
            k_off = k_off - pad  # broadcast cases use no leading rows
    tk = int(k_off[-1].item())
    k, v = randn(tk, hkv, d), randn(tk, hkv, d)
    do = randn(rows, hq, d)
    return dict(q=q, k=k, v=v, q_off=q_off, k_off=k_off, do=do, rows=rows, causal=cfg["causal"] != "none",
                alignment="bottom_right" if cfg["causal"] == "bottom_right" else "top_left",
                scale=1.0 / math.sqrt(d), cfg=cfg)


def _spans(case):
    """Per sequence: (q rows slice in q, output rows slice, k rows slice, L_q, L_k)."""
    k_off = case["k_off"].tolist()
    out = []
    if case["q_off"] is None:
        lq = case["q"].shape[0]
        for b in range(len(k_off) - 1):
            out.append((slice(0, lq), slice(b * lq, (b + 1) * lq), slice(k_off[b], k_off[b + 1]), lq,
                        k_off[b + 1] - k_off[b]))
    else:
        q_off = case["q_off"].tolist()
        for b in range(len(k_off) - 1):
            out.append((slice(q_off[b], q_off[b + 1]), slice(q_off[b], q_off[b + 1]), slice(k_off[b], k_off[b + 1]),
                        q_off[b + 1] - q_off[b], k_off[b + 1] - k_off[b]))
    return out


def _visible(lq, lk, causal, alignment, device):
    import torch

    i = torch.arange(lq, device=device)[:, None]
    j = torch.arange(lk, device=device)[None, :]
    if not causal:
        return torch.ones(lq, lk, dtype=torch.bool, device=device)
    shift = 0 if alignment == "top_left" else lk - lq
    return j <= i + shift


def reference(case: dict, grads: bool = True) -> dict:
    """Float64 forward (and dQ/dK/dV of ``sum(o * do)``): per-sequence explicit softmax.

    Rows with no visible key: O = 0, LSE = -inf, zero gradients (their probabilities are 0,
    so no gradient flows). Broadcast-Q's dQ sums over the batch (autograd through the shared Q).
    """
    import torch

    q = case["q"].double().requires_grad_(grads)
    k = case["k"].double().requires_grad_(grads)
    v = case["v"].double().requires_grad_(grads)
    hq, hkv = q.shape[1], k.shape[1]
    group = hq // hkv
    rows = case["rows"]
    o = torch.zeros(rows, hq, v.shape[2], dtype=torch.float64, device=q.device)
    lse = torch.full((hq, rows), float("-inf"), dtype=torch.float64, device=q.device)
    for qs, os_, ks, lq, lk in _spans(case):
        if lq == 0 or lk == 0:
            continue  # O stays 0, LSE -inf
        qb = q[qs].transpose(0, 1)  # [H, Lq, D]
        kb = k[ks].repeat_interleave(group, dim=1).transpose(0, 1)
        vb = v[ks].repeat_interleave(group, dim=1).transpose(0, 1)
        s = torch.matmul(qb, kb.transpose(1, 2)) * case["scale"]
        vis = _visible(lq, lk, case["causal"], case["alignment"], q.device)
        s = s.masked_fill(~vis, float("-inf"))
        m = s.detach().amax(-1, keepdim=True)
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        p = torch.exp(s - m)
        den = p.sum(-1, keepdim=True)
        ob = torch.matmul(p, vb) / torch.where(den == 0, torch.ones_like(den), den)
        o[os_] = ob.transpose(0, 1)  # in-place into a tensor outside the graph: autograd tracks the copy
        with torch.no_grad():
            d0 = den[..., 0]
            lse[:, os_] = torch.where(d0 == 0, torch.full_like(d0, float("-inf")), torch.log(d0) + m[..., 0])
    out = dict(o=o.detach(), lse=lse)
    if grads:
        if o.requires_grad:
            dq, dk, dv = torch.autograd.grad((o * case["do"].double()).sum(), (q, k, v), allow_unused=True)
        else:
            dq = dk = dv = None
        out.update(dq=torch.zeros_like(q) if dq is None else dq, dk=torch.zeros_like(k) if dk is None else dk,
                   dv=torch.zeros_like(v) if dv is None else dv)
    return out


def valid_rows(case: dict):
    """Bool ``[H_q, rows]``: output rows with at least one visible key (the others must be 0 / -inf)."""
    import torch

    hq = case["q"].shape[1]
    ok = torch.zeros(hq, case["rows"], dtype=torch.bool, device=case["q"].device)
    for qs, os_, ks, lq, lk in _spans(case):
        if lq == 0 or lk == 0:
            continue
        vis = _visible(lq, lk, case["causal"], case["alignment"], ok.device).any(1)
        ok[:, os_] = vis[None, :]
    return ok


def sdpa_baseline(case: dict, grads: bool, ref: dict) -> dict:
    """Max abs errors of torch SDPA in the input dtype on padded inputs vs the reference (valid rows only),
    and of a float32 log-sum-exp of the rounded inputs (the LSE baseline)."""
    import torch
    import torch.nn.functional as F

    spans = _spans(case)
    bsz = len(spans)
    lq_max = max([s[3] for s in spans] + [1])
    lk_max = max([s[4] for s in spans] + [1])
    q, k, v, do = case["q"], case["k"], case["v"], case["do"]
    hq, hkv, d = q.shape[1], k.shape[1], q.shape[2]
    dev = q.device
    qp = torch.zeros(bsz, hq, lq_max, d, dtype=q.dtype, device=dev)
    kp = torch.zeros(bsz, hkv, lk_max, d, dtype=q.dtype, device=dev)
    vp = torch.zeros_like(kp)
    dop = torch.zeros(bsz, hq, lq_max, d, dtype=q.dtype, device=dev)
    mask = torch.ones(bsz, 1, lq_max, lk_max, dtype=torch.bool, device=dev)
    row_ok = torch.zeros(bsz, lq_max, dtype=torch.bool, device=dev)
    for b, (qs, os_, ks, lq, lk) in enumerate(spans):
        qp[b, :, :lq] = q[qs].transpose(0, 1)
        kp[b, :, :lk] = k[ks].transpose(0, 1)
        vp[b, :, :lk] = v[ks].transpose(0, 1)
        dop[b, :, :lq] = do[os_].transpose(0, 1)
        if lq and lk:
            vis = _visible(lq, lk, case["causal"], case["alignment"], dev)
            ok = vis.any(1)
            row_ok[b, :lq] = ok
            m = torch.zeros(lq_max, lk_max, dtype=torch.bool, device=dev)
            m[:lq, :lk] = vis
            m[:lq][~ok] = True  # rows with no key: any finite softmax; their dO is 0 below
            mask[b, 0] = m
    dop = dop * row_ok[:, None, :, None].to(dop.dtype)  # padded / keyless rows contribute no gradient
    qp.requires_grad_(grads)
    kp.requires_grad_(grads)
    vp.requires_grad_(grads)
    op = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask, scale=case["scale"], enable_gqa=hq != hkv)
    errs = {}
    o_ref = ref["o"]
    e = 0.0
    for b, (qs, os_, ks, lq, lk) in enumerate(spans):
        ok = row_ok[b, :lq]
        if ok.any():
            diff = (op[b, :, :lq].detach().transpose(0, 1).double() - o_ref[os_])[ok]
            e = max(e, diff.abs().max().item())
    errs["o"] = e
    # LSE baseline: float32 log-sum-exp of the rounded inputs
    e = 0.0
    group = hq // hkv
    for b, (qs, os_, ks, lq, lk) in enumerate(spans):
        if not (lq and lk):
            continue
        s = torch.matmul(q[qs].float().transpose(0, 1),
                         k[ks].float().repeat_interleave(group, 1).transpose(0, 1).transpose(1, 2)) * case["scale"]
        vis = _visible(lq, lk, case["causal"], case["alignment"], dev)
        lse32 = torch.logsumexp(s.masked_fill(~vis, float("-inf")), -1)
        ref_l = ref["lse"][:, os_]
        fin = torch.isfinite(ref_l)
        if fin.any():
            e = max(e, (lse32.double() - ref_l)[fin].abs().max().item())
    errs["lse"] = e
    if grads:
        dq, dk, dv = torch.autograd.grad(op, (qp, kp, vp), dop)
        eq = ek = ev = 0.0
        if case["q_off"] is None:
            lq = spans[0][3] if spans else 0
            dq_sum = dq[:, :, :lq].double().sum(0).transpose(0, 1)
            eq = (dq_sum - ref["dq"]).abs().max().item() if lq else 0.0
        for b, (qs, os_, ks, lq, lk) in enumerate(spans):
            if lq and case["q_off"] is not None:
                eq = max(eq, (dq[b, :, :lq].transpose(0, 1).double() - ref["dq"][qs]).abs().max().item())
            if lk:
                ek = max(ek, (dk[b, :, :lk].transpose(0, 1).double() - ref["dk"][ks]).abs().max().item())
                ev = max(ev, (dv[b, :, :lk].transpose(0, 1).double() - ref["dv"][ks]).abs().max().item())
        errs.update(dq=eq, dk=ek, dv=ev)
    return errs


def _schedule_kwargs(cfg: dict) -> dict:
    """``tiles``/``programs`` for ``cfg["schedule"]`` (b-major tiles of BLOCK_M query rows)."""
    import torch

    kind, n_prog = cfg["schedule"]
    block_m, _ = _host_module().tile_sizes(cfg["d"], getattr(torch, cfg["dtype"]))
    ql = cfg["q_lengths"]
    tiles = [(b, m) for b, n in enumerate(ql) for m in range(-(-n // block_m))]
    if kind == "deal":
        programs = [list(range(p, len(tiles), n_prog)) for p in range(n_prog)]
    else:
        costs = [cfg["k_lengths"][b] for b, _ in tiles]
        programs = _zigzag(tiles, costs, n_prog)
    return dict(tiles=tiles, programs=programs)


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _maxabs(x) -> float:
    return float(x.abs().max().item()) if x.numel() else 0.0


def check_config(cfg: dict, attention, want_grads: bool = True) -> dict:
    """Run one configuration; a record with errors, tolerances and the verdict."""
    import torch

    t0 = time.time()
    case = build_case(cfg)
    rec = dict(name=cfg["name"])
    q, k, v = (case[n].clone().requires_grad_(True) for n in ("q", "k", "v"))
    kwargs = {}
    if cfg.get("schedule"):
        kwargs = _schedule_kwargs(cfg)
        os.environ["JFA_GLUON_HEAD_GROUPS"] = "1"  # every head of a tile in one CTA (forward and backward)
    bwd_status = "n/a"
    grads = None
    try:
        o, lse = attention(q, k, v, case["q_off"], case["k_off"], causal=case["causal"],
                           causal_alignment=case["alignment"], sm_scale=case["scale"], **kwargs)
        _sync()
        if want_grads:
            try:
                dq, dk, dv = torch.autograd.grad(o, (q, k, v), case["do"])
                _sync()
                grads = dict(dq=dq, dk=dk, dv=dv)
                bwd_status = "ran"
            except Exception as exc:  # noqa: BLE001 - GluonUnsupported (no backward) is reported, not failed
                if type(exc).__name__ != "GluonUnsupported":
                    raise
                bwd_status = f"n/a ({exc})"
    finally:
        os.environ.pop("JFA_GLUON_HEAD_GROUPS", None)
    ref = reference(case, grads=grads is not None)
    base = sdpa_baseline(case, grads is not None, ref)
    ok_rows = valid_rows(case)  # [H, rows]
    o64, lse64 = o.detach().double(), lse.detach().double()
    errs, tols, problems = {}, {}, []
    # forward
    nan_o = int(torch.isnan(o64).sum().item())
    nan_lse = int(torch.isnan(lse64).sum().item())
    inf_mismatch = int((torch.isinf(lse64) != torch.isinf(ref["lse"])).sum().item())
    keyless = ~ok_rows.t()  # [rows, H]
    nonzero_keyless = int((o64[keyless] != 0).any(-1).sum().item()) if keyless.any() else 0
    errs["o"] = _maxabs(torch.nan_to_num(o64 - ref["o"], nan=float("inf")))
    fin = torch.isfinite(ref["lse"]) & torch.isfinite(lse64)
    errs["lse"] = _maxabs((lse64 - ref["lse"])[fin])
    tols["o"] = 2 * base["o"] + 1e-2 * _maxabs(ref["o"])
    tols["lse"] = 2 * base["lse"] + 1e-2 * _maxabs(ref["lse"][torch.isfinite(ref["lse"])])
    if nan_o or nan_lse:
        problems.append(f"NaN: {nan_o} in O, {nan_lse} in LSE")
    if inf_mismatch:
        problems.append(f"-inf pattern of LSE differs in {inf_mismatch} entries")
    if nonzero_keyless:
        problems.append(f"{nonzero_keyless} keyless rows with O != 0")
    if grads is not None:
        for n in ("dq", "dk", "dv"):
            g64 = grads[n].double()
            nan_g = int(torch.isnan(g64).sum().item())
            if nan_g:
                problems.append(f"NaN: {nan_g} in {n}")
            errs[n] = _maxabs(torch.nan_to_num(g64 - ref[n], nan=float("inf")))
            tols[n] = 2 * base[n] + 1e-2 * _maxabs(ref[n])
    for n in errs:
        if not errs[n] <= tols[n]:
            problems.append(f"{n}: err {errs[n]:.3g} > tol {tols[n]:.3g}")
    rec.update(status="pass" if not problems else "fail", errors=errs, tolerances=tols, sdpa_errors=base,
               backward=bwd_status, problems=problems, seconds=round(time.time() - t0, 2))
    return rec


# ----------------------------------------------------------------------------- worker / parent


def worker(args) -> int:
    """Run configurations ``args.start..`` in this process; append records; progress lines to ``args.progress``."""
    os.environ["JFA_GLUON_POISON"] = "1"
    import torch

    configs = _selected_configs(args)
    attention = _attention(args.mutant)
    with open(args.progress, "a") as prog, open(args.results, "a") as res:
        for i in range(args.start, len(configs)):
            cfg = configs[i]
            prog.write(f"BEGIN {i}\n")
            prog.flush()
            try:
                rec = check_config(cfg, attention, want_grads=not args.no_backward)
            except Exception as exc:  # noqa: BLE001 - recorded, and the worker exits if CUDA is broken
                rec = dict(name=cfg["name"], status="error", problems=[f"{type(exc).__name__}: {exc}"],
                           traceback=traceback.format_exc()[-3000:])
            rec.update(index=i, mutant=args.mutant)
            res.write(json.dumps(rec) + "\n")
            res.flush()
            prog.write(f"END {i} {rec['status']}\n")
            prog.flush()
            if rec["status"] == "error":
                try:
                    _sync()
                    torch.zeros(1, device=os.environ.get("JFA_CHECK_DEVICE", "cuda")).add_(1).item()
                except Exception:  # noqa: BLE001 - sticky CUDA error: let the parent restart a worker
                    return 3
            if rec["status"] != "pass" and args.stop_on_fail:
                return 0
    return 0


def _selected_configs(args) -> list[dict]:
    configs = configurations()
    if args.only:
        configs = [c for c in configs if c["name"] in set(args.only.split(","))]
    elif args.mutant and not args.full_grid:
        configs = [c for c in configs if c["name"] in MUTANT_CONFIGS]
    return configs


def _read_records(path: Path, mutant) -> list[dict]:
    if not path.exists():
        return []
    recs = []
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if r.get("mutant") == mutant:
            recs.append(r)
    return recs


def run_grid(args, mutant, results: Path, log: Path) -> list[dict]:
    """Run every selected configuration in workers, restarting after crashes and hangs."""
    configs = _selected_configs(argparse.Namespace(**{**vars(args), "mutant": mutant}))
    n = len(configs)
    start = 0
    recs_before = len(_read_records(results, mutant))
    while start < n:
        fd, progress = tempfile.mkstemp(prefix="gluon-progress-")
        os.close(fd)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--start", str(start),
               "--progress", progress, "--results", str(results)]
        for flag in ("no_backward", "stop_on_fail", "full_grid"):
            if getattr(args, flag):
                cmd.append("--" + flag.replace("_", "-"))
        if args.only:
            cmd += ["--only", args.only]
        if mutant:
            cmd += ["--mutant", mutant]
        with open(log, "a") as logfh:
            logfh.write(f"\n=== worker from config {start} mutant={mutant}\n")
            logfh.flush()
            proc = subprocess.Popen(cmd, stdout=logfh, stderr=subprocess.STDOUT, start_new_session=True)
            current, began = None, time.time()
            stopped = False
            while True:
                rc = proc.poll()
                lines = Path(progress).read_text().splitlines()
                if lines:
                    last = lines[-1].split()
                    if last[0] == "BEGIN" and current != int(last[1]):
                        current, began = int(last[1]), time.time()
                    elif last[0] == "END":
                        current = None
                        if args.stop_on_fail and last[2] != "pass":
                            stopped = True
                if rc is not None:
                    break
                if current is not None and time.time() - began > args.config_timeout:
                    os.killpg(proc.pid, signal.SIGKILL)  # the worker we started, in its own session
                    proc.wait()
                    rc = "hang"
                    break
                time.sleep(0.2)
        lines = Path(progress).read_text().splitlines()
        os.unlink(progress)
        begun = [int(x.split()[1]) for x in lines if x.startswith("BEGIN")]
        ended = {int(x.split()[1]): x.split()[2] for x in lines if x.startswith("END")}
        if stopped or rc == 0:
            break  # finished every configuration, or stopped at the first failure
        in_flight = [i for i in begun if i not in ended]
        if in_flight or not begun:
            cur = in_flight[-1] if in_flight else start
            cfg_name = configs[cur]["name"]
            status = "hang" if rc == "hang" else "error"
            problem = (f"no result within {args.config_timeout} s (hang or very slow); worker killed"
                       if rc == "hang" else f"worker died with exit code {rc} (crash, illegal address?); see {log.name}")
            with open(results, "a") as res:
                res.write(json.dumps(dict(name=cfg_name, status=status, problems=[problem], index=cur,
                                          mutant=mutant)) + "\n")
            if args.stop_on_fail:
                break
            start = cur + 1
        else:  # exited between configurations (after recording a sticky CUDA error)
            start = max(ended) + 1
    return _read_records(results, mutant)[recs_before:]


def print_table(recs: list[dict]) -> None:
    cols = ("o", "lse", "dq", "dk", "dv")
    print(f"{'configuration':42s} {'status':6s} " + " ".join(f"{c + ' err/tol':>17s}" for c in cols) + "  notes")
    for r in recs:
        cells = []
        for c in cols:
            e, t = r.get("errors", {}).get(c), r.get("tolerances", {}).get(c)
            cells.append(f"{e:8.2e}/{t:8.2e}" if e is not None else f"{'-':>17s}")
        notes = "; ".join(r.get("problems", []))
        if r.get("backward", "").startswith("n/a"):
            notes = (notes + "; " if notes else "") + "bwd n/a"
        print(f"{r['name']:42s} {r['status'].upper():6s} " + " ".join(cells) + "  " + notes)


def _zigzag(tiles, costs, num_sms):
    order = sorted(range(len(tiles)), key=lambda i: -costs[i])
    progs = [[] for _ in range(num_sms)]
    for r, i in enumerate(order):
        p, rnd = r % num_sms, r // num_sms
        progs[p if rnd % 2 == 0 else num_sms - 1 - p].append(i)
    return progs


# ----------------------------------------------------------------------------- main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    p.add_argument("--mutant", default=None, help="run the grid against this mutant")
    p.add_argument("--mutants", default=None, help="'all' or a comma list: kill table, one worker chain each")
    p.add_argument("--kernels-file", default=None, help="check this copy of _kernels.py instead of the shipped one")
    p.add_argument("--bwd-stages", type=int, default=None, help="with --kernels-file: the backward's ring depth")
    p.add_argument("--no-backward", action="store_true")
    p.add_argument("--only", default=None, help="comma list of configuration names")
    p.add_argument("--full-grid", action="store_true", help="mutant runs use every configuration")
    p.add_argument("--config-timeout", type=float, default=None,
                   help="seconds a configuration may take (compiles included); default 120, 45 for mutants")
    p.add_argument("--stop-on-fail", action="store_true")
    p.add_argument("--list", action="store_true", help="print the configurations and exit")
    # worker mode (internal)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--progress", default=None, help=argparse.SUPPRESS)
    p.add_argument("--results", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.list:
        for c in configurations():
            print(c["name"], "q", c["q_lengths"][:8], "k", c["k_lengths"][:8])
        return 0
    if args.kernels_file:  # read by _attention in every worker
        os.environ["JFA_CHECK_KERNELS_FILE"] = str(Path(args.kernels_file).resolve())
        if args.bwd_stages:
            os.environ["JFA_CHECK_BWD_STAGES"] = str(args.bwd_stages)
    if args.worker:
        return worker(args)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "gluon_check.jsonl"
    log = out / "gluon_check_workers.log"
    results.write_text("")  # a fresh run
    t0 = time.time()
    import torch

    if not torch.cuda.is_available() and not os.environ.get("JFA_CHECK_FAKE_KERNEL"):
        print("gpu_gluon_check.py needs a CUDA device (Hopper): nothing checked", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    print(f"torch {torch.__version__}, device {name}", flush=True)
    if args.mutants:
        names = _mutant_names() if args.mutants == "all" else args.mutants.split(",")
        args.stop_on_fail = True
        if args.config_timeout is None:
            args.config_timeout = 45
        table = []
        for name in names:
            recs = run_grid(args, name, results, log)
            bad = [r for r in recs if r["status"] != "pass"]
            verdict = "KILLED" if bad else "survived"
            how = f"{bad[0]['status']} on {bad[0]['name']}: {'; '.join(bad[0].get('problems', []))[:120]}" if bad else ""
            table.append((name, verdict, how))
            print(f"mutant {name:32s} {verdict:8s} {how}", flush=True)
        print("\nmutant kill table")
        for name, verdict, how in table:
            print(f"  {name:32s} {verdict:8s} {how}")
        print(f"killed {sum(v == 'KILLED' for _, v, _ in table)}/{len(table)} in {time.time() - t0:.0f} s")
        return 0
    if args.config_timeout is None:
        args.config_timeout = 45 if args.mutant else 120
    recs = run_grid(args, args.mutant, results, log)
    print_table(recs)
    n_pass = sum(r["status"] == "pass" for r in recs)
    print(f"\ncorrectness: {n_pass}/{len(recs)} configurations pass ({time.time() - t0:.0f} s)", flush=True)
    print(f"total {time.time() - t0:.0f} s; results in {results}")
    return 0 if recs and n_pass == len(recs) else 1


if __name__ == "__main__":
    sys.exit(main())
