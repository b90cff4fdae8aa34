"""Compile gluon_jfa's three kernels for sm_90a on a CPU-only machine, for the two default-suite cases that
compute-sanitizer racecheck flagged on an H200, and show the SASS at the reported offsets.

Cases: the first two ``layout-7-3-19-5-11`` cases of ``get_suite("default", "cuda", 0, kernel=gluon_jfa)``
(``self-causal/bfloat16`` and ``broadcast_q/bfloat16``). The host code runs exactly as ``GluonJFA.launch``
and the autograd backward would (``from_problem`` -> zigzag forward programs on 132 SMs ->
``_host._forward`` / ``_host._backward``), but each ``kmod.<kernel>[grid](...)`` launch compiles with
``JITFunction.warmup`` under ``TargetOnlyDriver(90)`` instead (same specialization: constexprs,
``==1`` / divisible-by-16 integer arguments, 16-byte aligned pointers).

For every compiled kernel it writes ``<out>/<case>/<kernel>.{ttgir,llir,ptx,cubin,sass}`` (SASS from the
wheel's ``nvdisasm -c -g -hex``: offsets + source lines) and prints the instructions around the offsets of
the racecheck report plus every named-barrier instruction (``BAR.*``) with its neighbourhood.

It also compiles a control kernel (``control_kernel``: a minimal ``gl.warp_specialize`` that allocates no
shared memory) and prints its shared-memory instructions: the same five lowering accesses appear there.

Usage (no GPU, no TRITON_INTERPRET; well under a minute on 2 cores)::

    cd /work/main && python docs/evidence/gluon-racecheck-2026-12-01/triage_sass.py [--out /tmp/gluon-racecheck]

On an H200 (follow-up, not run here): ``compute-sanitizer --tool racecheck python
docs/evidence/gluon-racecheck-2026-12-01/triage_sass.py --launch-control`` launches the control kernel once.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import types

# offsets of the racecheck report, per case (index into the two cases) and kernel
REPORTED = {
    0: {"_fwd_kernel": [0xf0, 0x11d0, 0xb170, 0x1f0, 0x1200],
        "_bwd_dkdv_kernel": [0x220, 0x10f0, 0x120, 0x10c0, 0x6ac0],
        "_bwd_dq_kernel": [0xf0, 0x1170, 0x3cd0, 0x1f0, 0x11a0]},
    1: {"_fwd_kernel": [0xf0, 0x1150, 0x9eb0, 0x1f0, 0x1180],
        "_bwd_dkdv_kernel": [0x120, 0x1080, 0x4f70, 0x220, 0x10b0],
        "_bwd_dq_kernel": [0xf0, 0x1130, 0x3960, 0x1f0, 0x1160]},
}


def nvidia_bin(tool: str) -> str:
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", tool)


class _CompileOnly:
    """``kmod.<name>[grid](*args, **kw)`` compiles (warmup) and keeps the CompiledKernel."""

    def __init__(self, kernel, name, found, grids):
        self.kernel, self.name, self.found, self.grids = kernel, name, found, grids

    def __getitem__(self, grid):
        def compile_only(*args, **kwargs):
            self.grids[self.name] = grid
            self.found[self.name] = self.kernel.warmup(*args, grid=grid, **kwargs)
        return compile_only


def control_kernel():
    """A minimal warp-specialized Gluon kernel that allocates no shared memory: two values loaded from global
    memory are passed to a default partition (8 warps) and a 1-warp worker, each storing one int to global."""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def _ctl_default(out, a, b):
        gl.store(out + 0, a + b)

    @gluon.jit
    def _ctl_worker(out, a, b):
        gl.store(out + 1, a * b)

    @gluon.jit
    def ws_control(out, inp, num_warps: gl.constexpr):
        a = gl.load(inp)
        b = gl.load(inp + 1)
        gl.warp_specialize([(_ctl_default, (out, a, b)), (_ctl_worker, (out, a, b))], [1], [24])

    return ws_control


def compile_control():
    import torch
    from triton.runtime.driver import driver

    from jfa_verify.target_driver import TargetOnlyDriver

    kernel = control_kernel()
    out, inp = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    previous = driver._active
    driver.set_active(TargetOnlyDriver(90))
    try:
        return kernel.warmup(out, inp, num_warps=8, grid=(40,))
    finally:
        driver.set_active(previous)


def cases():
    from jfa_verify.registry import get_kernel
    from jfa_verify.suites import get_suite

    suite = get_suite("default", "cuda", 0, kernel=get_kernel("gluon_jfa"))
    return [c for c in suite.cases if "layout-7-3-19-5-11" in c.name][:2]


def compile_case(case) -> tuple[dict, dict]:
    """``({kernel name: CompiledKernel}, {kernel name: grid})`` for one case, compiled as the host launches it."""
    from triton.runtime.driver import driver

    from jfa_verify.contract import validate_inputs
    from jfa_verify.planning import PersistentScheduler
    from jfa_verify.schedules import workloads_forward
    from jfa_verify.target_driver import TargetOnlyDriver
    from kernels.gluon_jfa import _host, _kernels

    t = case.materialize("cpu")
    q, k, v, q_off, k_off = t.call_args()
    problem = validate_inputs(q, k, v, q_off, k_off, **case.contract_kwargs())
    launch_problem = _host.from_problem(problem, q, k, v, require_cuda=False)
    block_m, _ = _host.tile_sizes(problem.head_dim, problem.dtype)
    workloads = workloads_forward(problem.q_lengths, problem.k_lengths, block_m, causal=problem.causal,
                                  causal_alignment=problem.causal_alignment)
    planned = PersistentScheduler(num_sms=132)(workloads, "fwd", problem)  # H200: 132 SMs
    tiles = [(w.sequence, w.block) for w in workloads]
    programs = [list(p) for p in planned.programs]
    found, grids = {}, {}
    names = ("_fwd_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel")
    kmod = types.SimpleNamespace(**{n: _CompileOnly(getattr(_kernels, n), n, found, grids) for n in names})
    previous = driver._active
    driver.set_active(TargetOnlyDriver(90))
    try:
        o, lse = _host._forward(kmod, launch_problem, q, k, v, q_off, k_off, tiles, programs, 132)
        _host._backward(kmod, launch_problem, q, k, v, o, lse, t.do.to(q.dtype), q_off, k_off, tiles, programs, 132)
    finally:
        driver.set_active(previous)
    return found, grids


def disassemble(cubin_path: str) -> str:
    run = subprocess.run([nvidia_bin("nvdisasm"), "-c", "-g", "-hex", cubin_path], capture_output=True, text=True,
                         check=False)
    if run.returncode:
        raise RuntimeError(run.stderr)
    return run.stdout


INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")


def sass_lines(sass: str) -> list[tuple[int, str, str]]:
    """``[(offset, instruction text, last source-line comment before it)]`` from ``nvdisasm -c -g``."""
    out, src = [], ""
    for line in sass.splitlines():
        m = re.search(r"//## File \"([^\"]*)\", line (\d+)", line)
        if m:
            src = f"{os.path.basename(m.group(1))}:{m.group(2)}"
            continue
        m = INSN.search(line)
        if m:
            out.append((int(m.group(1), 16), m.group(2).strip(), src))
    return out


def ws_smem_map(llir: str, ptx: str) -> dict:
    """Shared-memory bytes the ``ttg.warp_specialize`` lowering uses, read off the LLIR (offsets from
    ``@global_smem``), plus the user mbarriers (``mbarrier.init`` targets) and the barrier forms in the PTX."""
    off = r"@global_smem, i32 (\d+)\)"
    state = sorted({int(x) for x in re.findall(r"store i8 \d+, ptr addrspace\(3\) getelementptr \(i8, ptr addrspace\(3\) "
                                               + off, llir)})
    # captures: the default warps' stores between the state bytes and the first `barrier.sync 1` of the region
    captures = []
    m = re.search(r"store i8 \d+, ptr addrspace\(3\) getelementptr[^\n]*\n((?:.*\n)*?).*barrier\.cta\.sync\.all", llir)
    if m:
        for line in m.group(1).splitlines():
            c = re.match(r"\s*store (?!i8 )[^,]+, ptr addrspace\(3\) (?:getelementptr \(i8, ptr addrspace\(3\) "
                         r"@global_smem, i32 (\d+)\)|@global_smem),", line)
            if c:
                captures.append(int(c.group(1) or 0))
    captures = sorted(set(captures))
    mbarriers = sorted({int(x) for x in re.findall(r"mbarrier\.init[^\n]*?" + off, llir)})
    return {
        "warp_state_bytes": [hex(x) for x in state],
        "capture_words": [hex(x) for x in captures],
        "user_mbarriers": [hex(x) for x in mbarriers],
        "llvm_barrier_cta_sync_all_1": llir.count("@llvm.nvvm.barrier.cta.sync.all(i32 1)"),
        "ptx_barriers": {k: len(re.findall(k.replace(".", r"\.") + r"\s", ptx))
                         for k in ("barrier.sync", "bar.sync", "bar.arrive", "barrier.arrive", "bar.warp.sync")},
    }


def classify(text: str, smem: dict, default_warps: int = 8) -> str:
    """What a shared-memory instruction of the report touches, by its immediate offset."""
    if not re.match(r"(LDS|STS)", text):
        return "not a shared-memory access"
    m = re.search(r"\[[^\]]*?\+(0x[0-9a-f]+)\]", text)
    imm = int(m.group(1), 16) if m else 0
    state = [int(x, 16) for x in smem["warp_state_bytes"]]
    caps = [int(x, 16) for x in smem["capture_words"]]
    if state and (imm == state[0] or imm == state[0] - default_warps):
        kind = "read" if text.startswith("LDS") else "write"
        return f"warp_specialize lowering: per-warp partition-state byte {kind} (state bytes {hex(state[0])}..)"
    if caps and caps[0] <= imm <= caps[-1]:
        kind = "read (worker prologue)" if text.startswith("LDS") else "write (default warps)"
        return f"warp_specialize lowering: explicit-capture {kind} ({hex(caps[0])}..{hex(caps[-1] + 3)})"
    return f"other shared memory at {hex(imm)} (user buffer or scratch)"


def excerpt(insns, offset: int, before: int = 6, after: int = 4) -> str:
    idx = next((i for i, (o, _, _) in enumerate(insns) if o == offset), None)
    if idx is None:
        return f"  (no instruction at {offset:#x})"
    rows = []
    for o, text, src in insns[max(0, idx - before): idx + after + 1]:
        mark = ">>" if o == offset else "  "
        rows.append(f"{mark} {o:#07x}  {text:<70s} {src}")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/gluon-racecheck")
    parser.add_argument("--case", type=int, choices=(0, 1), default=None, help="only this case (default both)")
    parser.add_argument("--launch-control", action="store_true",
                        help="on an sm_90 GPU: launch the control kernel once and exit (run this under "
                             "`compute-sanitizer --tool racecheck` to see whether the lowering alone is reported)")
    args = parser.parse_args(argv)
    if args.launch_control:
        import torch

        kernel = control_kernel()
        out = torch.zeros(4, dtype=torch.int32, device="cuda")
        inp = torch.arange(1, 5, dtype=torch.int32, device="cuda")
        kernel[(40,)](out, inp, num_warps=8)
        torch.cuda.synchronize()
        print("control kernel ran:", out.tolist(), "(expected [3, 2, 0, 0])")
        return 0
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET", file=sys.stderr)
        return 2
    sys.path.insert(0, os.getcwd())
    # a fresh cache: compile from this checkout's source, not a cached kernel of another worktree
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(args.out, "triton-cache"))
    # control: the same lowering in a kernel with no shared-memory allocation of its own
    ck = compile_control()
    cdir = os.path.join(args.out, "control")
    os.makedirs(cdir, exist_ok=True)
    with open(os.path.join(cdir, "ws_control.cubin"), "wb") as fh:
        fh.write(ck.asm["cubin"])
    for key in ("ttgir", "llir", "ptx"):
        with open(os.path.join(cdir, f"ws_control.{key}"), "w") as fh:
            fh.write(ck.asm[key])
    sass = disassemble(os.path.join(cdir, "ws_control.cubin"))
    with open(os.path.join(cdir, "ws_control.sass"), "w") as fh:
        fh.write(sass)
    smem = ws_smem_map(ck.asm["llir"], ck.asm["ptx"])
    print(f"=== control kernel (no shared memory of its own): shared {ck.metadata.shared} B, "
          f"num_warps {ck.metadata.num_warps}, {smem}")
    for o, t, _ in sass_lines(sass):
        if re.match(r"(@!?U?P\w+ )?(LDS|STS|BAR|EXIT|BRX|USETMAXREG)", t):
            extra = f"   <- {classify(t, smem)}" if re.match(r"(LDS|STS)", t) else ""
            print(f"     {o:#07x}  {t}{extra}")
    for ci, case in enumerate(cases()):
        if args.case is not None and ci != args.case:
            continue
        found, grids = compile_case(case)
        cdir = os.path.join(args.out, f"case{ci}")
        os.makedirs(cdir, exist_ok=True)
        print(f"=== case {ci}: {case.name}")
        for name, ck in found.items():
            base = os.path.join(cdir, name)
            for key in ("ttgir", "llir", "ptx"):
                with open(f"{base}.{key}", "w") as fh:
                    fh.write(ck.asm[key])
            with open(f"{base}.cubin", "wb") as fh:
                fh.write(ck.asm["cubin"])
            sass = disassemble(f"{base}.cubin")
            with open(f"{base}.sass", "w") as fh:
                fh.write(sass)
            insns = sass_lines(sass)
            md = ck.metadata
            print(f"--- {name}: grid {grids[name]}, num_warps {md.num_warps}, shared {md.shared} B, "
                  f"{len(insns)} instructions, last at {insns[-1][0]:#x}")
            print(f"    warp_specialize lowering in shared memory: {ws_smem_map(ck.asm['llir'], ck.asm['ptx'])}")
            lds_sts = sorted({t for _, t, _ in insns if re.match(r"(LDS|STS)", t)
                              and re.search(r"0x[0-9a-f]+\]", t)
                              and int(re.search(r"(0x[0-9a-f]+)\]", t).group(1), 16) >= md.shared - 0x200})
            print(f"    shared accesses with an immediate in the last 512 B of the allocation: {lds_sts}")
            smem = ws_smem_map(ck.asm["llir"], ck.asm["ptx"])
            at = {o: t for o, t, _ in insns}
            for off in REPORTED[ci][name]:
                print(f"  [reported {off:#x}] {classify(at.get(off, ''), smem)}")
                print(excerpt(insns, off))
            bars = [(o, t, s) for o, t, s in insns if re.match(r"(@!?U?P\w+ )?BAR\.", t)]
            print(f"  named/CTA barriers ({len(bars)}):")
            for o, t, s in bars:
                print(f"     {o:#07x}  {t:<50s} {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
