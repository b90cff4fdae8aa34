"""Every registered kernel called exactly as a user calls it, against FlashAttention-2, in one run.

What is timed is what a user pays: the registered kernel's contract callable
``fn(q, k, v, q_offsets, k_offsets, causal=...)`` (``jfa_verify.get_kernel(name)(...)``; with
``max_seqlen_q``/``max_seqlen_k`` for a kernel whose call takes them, as FA2 is called), host work included
(input validation, tile planning, schedules, descriptors, allocations, any host synchronization); nothing is
built beforehand, as in training, where every step brings new offsets. ``fwd``: the forward call on inputs
that need no gradient; ``fwd+bwd``: the forward call on leaf inputs that need one, then
``torch.autograd.grad(o, (q, k, v), do)`` (the kernel's own autograd backward).

Peers, on the same inputs:

* the floor, ``FA2``: ``aten._flash_attention_forward`` (and ``aten._flash_attention_backward`` for fwd+bwd)
  called directly with ``max_seqlen`` given (no host work of its own); every ratio is FA2's time / the
  kernel's (above 1: the kernel is faster);
* the registered adapters ``torch_fa2_varlen`` and ``torch_varlen_attn`` are kernels like the others (their
  rows show what torch's own varlen entry points cost a user).

Where FA2 cannot run (the CPU, an old GPU, a torch without the op) the peer is the first of
``nested_sdpa`` (the registered kernel) and the padded-SDPA reference
(:func:`jfa_verify.oracles.padded_sdpa_attention`) that runs the case; the printed peer line and each
row's ``peer`` say which. Kernels that cannot run on the device (capabilities, a missing dependency, a
loader that fails) are listed as skipped with the reason; a case outside a kernel's capabilities
(a dtype, a head dim) is a row marked ``skipped``.

Correct first: before any timing, each kernel's O (one call) is compared with FA2's O (where the peer is not
FA2: the float64 reference, :func:`jfa_verify.oracles.reference_attention`) and the row is printed
``WRONG`` instead of ratios unless it is finite and within a loose tolerance: elementwise
``|o - ref| <= 0.02 + 0.02 |ref|`` (0.002 for float32) and ``||o - ref|| <= 0.05 ||ref||`` (the second
catches an error spread thin over a long sequence, whose O is small). Inputs are random normal (never zeros).

Times: on CUDA, call time is the median of ``triton.testing.do_bench`` (CUDA events around each call,
L2 flushed before it) of the whole call; kernel time is the GPU's busy time in the torch profiler
(``ProfilerActivity.CUDA``): the union of the device activity intervals (kernels, device copies, memset; not the
synchronizations CUPTI also records on the device's timeline, nor host<->device copies, whose interval spans the
host's staging) of
``--profile-calls`` calls, inside a range that ends with a synchronize, divided by the calls.
Host share = (call time - kernel time) / call time: the part of a call the GPU waits for the host
in back-to-back calls (negative values, from timing noise, are printed as 0; a host faster than the GPU hides
behind the queue and reads 0). "h ms" (``host_ms`` in the JSON, CUDA only) is the direct figure: the median
wall time of one call from its start to its return, the device idle before it (:func:`host_call_ms`). On the
CPU (``--device cpu``, a smoke test of the same code path on tiny batches) there is no device: call time is the
profiled range's wall time of one call and "kernel time" the ATen operators' self CPU time in it, so the host
share there is the share of Python (the Triton interpreter's included): a check of the code path, not a
measurement.

Batches: ``bench_gluon.bench_batches()`` (the Pareto, one-mega, MovieLens and uniform-32 batches, the
inputs of ``bench_schedules.bench_inputs`` cast to the dtype); on the CPU each cut to its first two
sequences of at most 24 rows. H=8 (``--heads``), self-attention, causal and not, bf16 and fp16, D=64 and
128: 32 configurations, each row printed (flushed) as it is measured. Usage, on an H200 (the default run took
376 s there, 11 kernels, Triton and flex_attention compilations included)::

    python benchmarks/bench_e2e.py --json $OUT/e2e.json

``--quick`` runs one batch and one dtype (a smoke run); ``--kernels a,b`` picks kernels (default: every
registered kernel that runs on the device). Without a CUDA device it exits 2 unless ``--device cpu``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_gluon import bench_batches  # noqa: E402
from bench_schedules import bench_inputs  # noqa: E402

DTYPE_NAMES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16",
               "fp32": "float32", "float32": "float32"}
SHORT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
FLOOR = "FA2"  # the row name of aten._flash_attention_forward/_backward called directly
CPU_SEQUENCES, CPU_MAX_LEN = 2, 24


def run_batches(device_type: str) -> dict[str, list[int]]:
    """``bench_gluon.bench_batches()`` on CUDA; on the CPU, each batch's first two sequences, at most 24 rows
    (the Triton interpreter runs a kernel's every program in Python)."""
    batches = bench_batches()
    if device_type == "cuda":
        return batches
    return {name: [min(n, CPU_MAX_LEN) for n in lengths[:CPU_SEQUENCES]] for name, lengths in batches.items()}


def close_enough(o: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> tuple[bool, str]:
    """Whether ``o`` (inputs of ``dtype``) matches ``ref`` within the loose tolerance of the module doc;
    ``(ok, why)``."""
    if o.shape != ref.shape:
        return False, f"O shape {tuple(o.shape)} != {tuple(ref.shape)}"
    o, ref = o.double(), ref.double()
    if not torch.isfinite(o).all():
        return False, "O has non-finite values"
    tol = 0.002 if dtype == torch.float32 else 0.02
    err = (o - ref).abs()
    worst = float((err - tol * ref.abs()).max()) if err.numel() else 0.0
    rel = float(torch.linalg.vector_norm(o - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30))
    if worst > tol:
        return False, f"max |O - ref| {float(err.max()):.3g} over {tol} + {tol}|ref|"
    if rel > 0.05:
        return False, f"||O - ref|| / ||ref|| = {rel:.3g} over 0.05"
    return True, f"max |O - ref| {float(err.max()):.2g}, relative {rel:.2g}"


def _first(result) -> torch.Tensor:
    return result[0] if isinstance(result, (tuple, list)) else result


def time_call(fn, rep_ms: float) -> float:
    """Median ms of ``fn()`` on CUDA: ``triton.testing.do_bench`` (warmup ``rep_ms / 4``, rep ``rep_ms``)."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=max(1.0, rep_ms / 4), rep=rep_ms, return_mode="median"))


def host_call_ms(fn, calls: int = 7) -> float:
    """Median ms that ``fn()`` keeps the host busy, on CUDA: the wall time from the call to its return, each call
    started on an idle device (a synchronize before it, none inside the timed span), so it is the host work the
    call does before its last launch (validation, planning, launches, any synchronization it makes itself), not
    the GPU's. A direct figure beside the host share, which is what the GPU waits for in back-to-back calls."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return float(sorted(times)[len(times) // 2])


def _union_us(intervals) -> float:
    total, end = 0.0, -math.inf
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _device_work(event) -> bool:
    """A device activity that is work (a kernel, memcpy, memset), not a synchronization the profiler records on
    the device's timeline (CUPTI's ``cuda_sync``: "Stream Sync", "Context Sync", "Stream Wait Event", ...),
    whose span is the GPU waiting."""
    from torch.autograd import DeviceType

    kind = str(getattr(event, "activity_type", "") or "").lower()
    name = event.name.lower()
    # host<->device copies from pageable memory span the host's staging on the device timeline: not GPU work
    copy = name.startswith("memcpy") and ("htod" in name or "dtoh" in name)
    return (event.device_type == DeviceType.CUDA and "sync" not in kind and "sync" not in name and "wait" not in name
            and not copy)


def profile_segments(segments: dict, device_type: str, calls: int) -> dict:
    """``{label: (call ms, kernel ms)}``, each per call, for ``segments = {label: fn}``, in one profiler session.

    Each label's ``calls`` calls run inside ``record_function(label)`` ending with a synchronize, so the device
    work they launched lies inside that range; kernel ms is the union of the device intervals in it (CUDA), or
    the ATen operators' self CPU time in it (CPU). Call ms is the range's wall time per call (used on the CPU).
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = device_type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    labels = {f"bench_e2e::{i}": key for i, key in enumerate(segments)}
    sync()
    with profile(activities=activities) as prof:
        for label, key in labels.items():
            with record_function(label):
                for _ in range(calls):
                    segments[key]()
                sync()
    events = list(prof.events())
    out = {}
    for label, key in labels.items():
        ranges = [e for e in events if e.name == label and e.device_type == DeviceType.CPU]
        if not ranges:
            out[key] = (math.nan, math.nan)
            continue
        r = ranges[0].time_range
        inside = [e for e in events if e is not ranges[0] and r.start <= e.time_range.start
                  and e.time_range.end <= r.end]
        if cuda:
            busy = _union_us((e.time_range.start, e.time_range.end) for e in inside if _device_work(e))
        else:
            busy = sum(e.self_cpu_time_total for e in inside
                       if e.device_type == DeviceType.CPU and e.name.startswith("aten::"))
        out[key] = ((r.end - r.start) / 1e3 / calls, busy / 1e3 / calls)
    return out


def call_hints(kernel, longest: int) -> dict:
    """``max_seqlen_q``/``max_seqlen_k`` for a kernel whose call takes them (as FA2's, the floor, is called): a
    user who wants the call with no host synchronization passes them; ``{}`` for the others."""
    import inspect

    try:
        params = inspect.signature(getattr(kernel, "impl", kernel)).parameters
    except (TypeError, ValueError):
        return {}
    return dict(max_seqlen_q=longest, max_seqlen_k=longest) if "max_seqlen_q" in params else {}


class Peer:
    """The timing peer of one configuration: the FA2 floor where it runs, else nested_sdpa, else padded SDPA."""

    def __init__(self, name, fwd, fwd_bwd, o, why=""):
        self.name, self.fwd, self.fwd_bwd, self.o, self.why = name, fwd, fwd_bwd, o, why


def choose_peer(problem, q, k, v, do, offsets, lengths, causal: bool) -> Peer:
    """The first peer that runs this configuration (see :class:`Peer`); ``why`` says why earlier ones did not."""
    why = []
    max_len, scale = max(lengths), 1 / math.sqrt(q.shape[-1])
    if q.device.type == "cuda" and hasattr(torch.ops.aten, "_flash_attention_forward"):
        fa_fwd = torch.ops.aten._flash_attention_forward
        fa_bwd = torch.ops.aten._flash_attention_backward

        def fwd():
            return fa_fwd(q, k, v, offsets, offsets, max_len, max_len, 0.0, causal, False, scale=scale)

        def fwd_bwd():
            out, lse, rng, unused = fwd()[:4]
            return fa_bwd(do, q, k, v, out, lse, offsets, offsets, max_len, max_len, 0.0, causal, rng, unused,
                          scale=scale)

        try:
            o = fwd()[0]
            fwd_bwd()
            return Peer(FLOOR, fwd, fwd_bwd, o)
        except Exception as exc:  # noqa: BLE001 - its signature and hardware needs differ between torch versions
            why.append(f"aten._flash_attention_forward: {type(exc).__name__}: {str(exc)[:120]}")
    else:
        why.append(f"aten._flash_attention_forward: not on {q.device.type}")
    try:
        from jfa_verify import get_kernel

        nested = get_kernel("nested_sdpa")
        reason = nested.unsupported_reason(problem) or nested.device_reason(q.device)
        if reason:
            raise RuntimeError(reason)
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))

        def nested_fwd():
            return nested(q, k, v, offsets, offsets, causal=causal)

        def nested_fwd_bwd():
            return torch.autograd.grad(_first(nested(qg, kg, vg, offsets, offsets, causal=causal)), (qg, kg, vg), do)

        o = _first(nested_fwd())
        nested_fwd_bwd()
        return Peer("nested_sdpa", nested_fwd, nested_fwd_bwd, o, "; ".join(why))
    except Exception as exc:  # noqa: BLE001 - e.g. torch's CPU backend refusing causal nested SDPA
        why.append(f"nested_sdpa: {type(exc).__name__}: {str(exc)[:120]}")
    from jfa_verify.oracles import padded_sdpa_attention

    o = padded_sdpa_attention(problem, q, k, v)["o"]
    return Peer("padded_sdpa", lambda: padded_sdpa_attention(problem, q, k, v),
                lambda: padded_sdpa_attention(problem, q, k, v, do), o, "; ".join(why))


def usable_kernels(names, device) -> tuple[list, dict]:
    """``([(name, Kernel)], {name: why skipped})``: the kernels asked for (None: every registered kernel), loaded,
    minus those that cannot run on ``device`` (capabilities, a missing dependency, a loader that fails)."""
    from jfa_verify import get_kernel, kernel_names

    run, skipped = [], {}
    for name in names or kernel_names():
        try:
            kernel = get_kernel(name)
            reason = kernel.device_reason(device)
            if reason is None:
                kernel.impl  # noqa: B018 - loads it: a load failure is a skip, not a row error
        except Exception as exc:  # noqa: BLE001 - an unknown name, a broken loader
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        if reason is None:
            run.append((name, kernel))
        else:
            skipped[name] = reason
    return run, skipped


def measure_config(kernels, batch, lengths, causal, dtype, d, args, device) -> list[dict]:
    """The rows of one configuration: the peer, then each kernel (checked, timed, profiled)."""
    from jfa_verify.core.contract import validate_inputs
    from jfa_verify.core.dtypes import dtype_name
    from jfa_verify.core.errors import UnsupportedCase

    offsets, q, k, v = bench_inputs(lengths, args.heads, d, device)
    q, k, v = (t.to(dtype) for t in (q, k, v))
    gen = torch.Generator(device=device).manual_seed(1)
    do = torch.randn(q.shape, dtype=dtype, device=device, generator=gen)
    problem = validate_inputs(q, k, v, offsets, offsets, causal=causal)
    base = dict(batch=batch, causal=causal, dtype=SHORT.get(dtype_name(dtype), dtype_name(dtype)), head_dim=d,
                heads=args.heads, tokens=int(sum(lengths)), sequences=len(lengths))
    peer = choose_peer(problem, q, k, v, do, offsets, lengths, causal)
    if peer.name == FLOOR:
        ref, ref_name = peer.o, FLOOR
    else:
        from jfa_verify.oracles import reference_attention

        ref, ref_name = reference_attention(problem, q, k, v)["o"], "float64 reference"
    rows = [dict(base, kernel=peer.name, peer=peer.name, role="peer", peer_why=peer.why, status="ok",
                 check="the peer", _fns={"fwd": peer.fwd, "fwd_bwd": peer.fwd_bwd})]
    longest = max(lengths)
    for name, kernel in kernels:
        row = dict(base, kernel=name, peer=peer.name, role="kernel", status="ok", _fns={})
        hints = call_hints(kernel, longest)
        rows.append(row)
        reason = kernel.unsupported_reason(problem)
        if reason:
            row.update(status="skipped", reason=reason)
            continue
        try:
            o = _first(kernel(q, k, v, offsets, offsets, causal=causal, **hints))
            ok, why = close_enough(o, ref, dtype)
        except UnsupportedCase as exc:  # refused at call time (e.g. nested SDPA on the CPU, causal)
            row.update(status="skipped", reason=str(exc)[:200])
            continue
        except Exception as exc:  # noqa: BLE001 - one kernel failing never hides the others
            row.update(status="error", reason=f"{type(exc).__name__}: {str(exc)[:200]}")
            continue
        row["check"] = f"vs {ref_name}: {why}"
        if not ok:
            row.update(status="WRONG", reason=why)
            continue
        row["_fns"]["fwd"] = lambda kernel=kernel, hints=hints: kernel(q, k, v, offsets, offsets, causal=causal,
                                                                      **hints)
        bwd_reason = kernel.capabilities.backward_reason(problem)
        if bwd_reason:
            row["bwd_reason"] = bwd_reason
            continue
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))

        def fwd_bwd(kernel=kernel, qg=qg, kg=kg, vg=vg, hints=hints):
            o = _first(kernel(qg, kg, vg, offsets, offsets, causal=causal, **hints))
            return torch.autograd.grad(o, (qg, kg, vg), do)

        try:
            fwd_bwd()
            row["_fns"]["fwd_bwd"] = fwd_bwd
        except Exception as exc:  # noqa: BLE001
            row["bwd_reason"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    segments = {}
    for i, row in enumerate(rows):
        for mode, fn in row["_fns"].items():
            try:
                if device.type == "cuda":  # (the CPU's call time is the profiled range's: no second timing)
                    # (no warm-up call: the correctness call and the first fwd+bwd call compiled everything)
                    row[f"{mode}_ms"] = time_call(fn, args.rep_ms)
                    row[f"{mode}_host_ms"] = host_call_ms(fn)
                segments[(i, mode)] = fn
            except Exception as exc:  # noqa: BLE001
                row.update(status="error", reason=f"{mode}: {type(exc).__name__}: {str(exc)[:200]}")
    if segments:
        profiled = profile_segments(segments, device.type, args.profile_calls if device.type == "cuda" else 1)
        for (i, mode), (call_ms, kernel_ms) in profiled.items():
            row = rows[i]
            if device.type != "cuda":
                row[f"{mode}_ms"] = call_ms
            row[f"{mode}_kernel_ms"] = kernel_ms
            call = row[f"{mode}_ms"]
            row[f"{mode}_host_share"] = min(1.0, max(0.0, (call - kernel_ms) / call)) if call > 0 else math.nan
    for row in rows:
        del row["_fns"]
        for mode in ("fwd", "fwd_bwd"):
            if f"{mode}_ms" in row and f"{mode}_ms" in rows[0]:
                row[f"{mode}_ratio"] = rows[0][f"{mode}_ms"] / row[f"{mode}_ms"]
    return rows


HEADER = (f"{'batch':22s} {'causal':6s} {'dtype':5s} {'D':>3s} {'kernel':20s} | {'fwd ms':>8s} {'ratio':>6s} "
          f"{'host':>5s} {'h ms':>6s} | {'f+b ms':>8s} {'ratio':>6s} {'host':>5s} {'h ms':>6s} | peer")


def line(row) -> str:
    """One printed row: batch, causal, dtype, D, kernel; fwd ms, FA2 time / kernel time, host share; the same for
    fwd+bwd; the peer. ``WRONG``, ``skipped`` and ``error`` rows print their reason instead of times."""
    kernel = row["kernel"] + (" (floor)" if row["kernel"] == FLOOR else " (peer)" if row["role"] == "peer" else "")
    head = (f"{row['batch']:22s} {'causal' if row['causal'] else 'full':6s} {row['dtype']:5s} {row['head_dim']:>3d} "
            f"{kernel:20s} | ")
    if row["status"] != "ok":
        return head + f"{row['status']}: {row.get('reason', '')}"

    def cell(mode):
        if f"{mode}_ms" not in row:
            return f"{'-':>8s} {'-':>6s} {'-':>5s} {'-':>6s}"
        ratio = row.get(f"{mode}_ratio")
        share = row.get(f"{mode}_host_share")
        host_ms = row.get(f"{mode}_host_ms")
        return (f"{row[f'{mode}_ms']:8.3f} {(format(ratio, '.2f') + 'x') if ratio is not None else '-':>6s} "
                f"{(format(share * 100, '.0f') + '%') if share is not None and share == share else '-':>5s} "
                f"{format(host_ms, '.3f') if host_ms is not None else '-':>6s}")

    tail = row["peer"] + (f" (no bwd: {row['bwd_reason'][:60]})" if "bwd_reason" in row else "")
    return head + f"{cell('fwd')} | {cell('fwd_bwd')} | {tail}"


def _csv(kind, allowed=None):
    def parse(text):
        items = [s.strip() for s in text.split(",") if s.strip()]
        bad = [s for s in items if allowed is not None and s not in allowed]
        if not items or bad:
            raise argparse.ArgumentTypeError(f"{kind} {bad or text!r}: choose from {sorted(allowed or [])}")
        return items
    return parse


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (see the module doc)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=_csv("kernel"), default=None,
                        help="comma-separated registered kernels (default: every one that runs on the device)")
    parser.add_argument("--batches", type=_csv("batch", list(bench_batches())), default=None,
                        help=f"comma-separated, of {', '.join(bench_batches())} (default: all)")
    parser.add_argument("--dtypes", type=_csv("dtype", DTYPE_NAMES), default=["bf16", "fp16"])
    parser.add_argument("--head-dims", type=_csv("head dim", None), default=["64", "128"])
    parser.add_argument("--causal", type=_csv("causal", ["false", "true", "both"]), default=["both"],
                        help="false, true or both (default)")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="one batch and one dtype (a smoke run)")
    parser.add_argument("--rep-ms", type=float, default=25.0, help="do_bench's rep per timing, ms (default 25)")
    parser.add_argument("--profile-calls", type=int, default=2, help="calls per profiled segment on CUDA (default 2)")
    parser.add_argument("--json", default=None, help="write every row here")
    args = parser.parse_args(argv)
    try:
        args.head_dims = [int(d) for d in args.head_dims]
    except ValueError:
        parser.error(f"--head-dims {args.head_dims}: give integers")
    args.causal = [False, True] if "both" in args.causal else sorted({c == "true" for c in args.causal})
    args.dtypes = list(dict.fromkeys(DTYPE_NAMES[d] for d in args.dtypes))
    if args.quick:
        args.batches = (args.batches or list(bench_batches()))[:1]
        args.dtypes = args.dtypes[:1]
    return args


def main(argv=None) -> int:
    """Run the benchmark; 0 when it ran (WRONG rows included: they are printed, not hidden), 2 without the device."""
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_e2e.py: no CUDA device (torch sees none); run it on a GPU, or pass --device cpu for the "
              "same code path on the CPU kernels and tiny batches", file=sys.stderr)
        return 2
    from jfa_verify.core.device import device_scope, select_device
    from jfa_verify.core.dtypes import to_dtype

    t0 = time.time()
    with device_scope():
        device = select_device(args.device)
        kernels, skipped = usable_kernels(args.kernels, device)
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
        print(f"{name}, torch {torch.__version__}; ratio = peer time / kernel time (above 1: faster); "
              f"host = (call - kernel time) / call; h ms = host time of one call on an idle GPU", flush=True)
        for kname, why in skipped.items():
            print(f"skipped {kname}: {why}", flush=True)
        all_batches = run_batches(device.type)
        rows, peers_said = [], set()
        print(HEADER, flush=True)
        for batch in args.batches or list(all_batches):
            for dtype_name_ in args.dtypes:
                for d in args.head_dims:
                    for causal in args.causal:
                        config = measure_config(kernels, batch, all_batches[batch], causal, to_dtype(dtype_name_),
                                                d, args, device)
                        peer = config[0]
                        if peer["kernel"] != FLOOR and peer["peer_why"] not in peers_said:
                            peers_said.add(peer["peer_why"])
                            print(f"peer {peer['kernel']} (no FA2 floor here: {peer['peer_why']})", flush=True)
                        for row in config:
                            print(line(row), flush=True)
                        rows.extend(config)
                        if device.type == "cuda":
                            torch.cuda.empty_cache()  # (a kernel's failed allocation leaves the next ones room)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(dict(device=name, torch=torch.__version__, skipped=skipped, rows=rows), fh, indent=1)
    print(f"done in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
