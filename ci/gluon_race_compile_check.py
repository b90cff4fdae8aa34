"""Compile every mutant of a gluon_jfa catalogue for sm_90a on this CPU and compare its PTX with the unmutated
kernel's: a planted race that compiles to the same PTX is no bug. Not a CI test (minutes of compiling).

Usage: ``env -u TRITON_INTERPRET python ci/gluon_race_compile_check.py [--catalogue gluon_jfa_races]
[--head-dim 128] [--no-causal] [NAME ...]``. Prints one line per mutant (the kernels whose PTX changed) and
exits 1 when a mutant fails to load, fails to compile, or changes no kernel's PTX.

Besides the PTX text, the sequence of synchronization and async operations (mbarrier init/wait/arrive, wgmma
issue/wait, proxy fences, bulk copies and their waits, bar.sync) is compared and its diff printed: that is where
a planted race must show. PTX is compared without its debug lines (``.file``, ``.loc``, ``@"..."`` debug
sections): a mutant is imported from another file, so those differ even for an unchanged kernel. A control (the
unmutated source with a comment added, imported the same way) must compare equal, or the comparison is not
trusted.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import re
import sys
import time

KERNELS = ("_fwd_kernel", "_bwd_delta_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel")


def normalized(ptx: str) -> str:
    """PTX without debug information, comments and blank lines."""
    if "\t.section\t.debug" in ptx:
        ptx = ptx[:ptx.index("\t.section\t.debug")]
    keep = []
    for line in ptx.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".file", ".loc", "$L__func", "$L__tmp")):
            continue
        keep.append(re.sub(r"\s+", " ", s))
    return "\n".join(keep)


SYNC_OPS = re.compile(r"\b(?:mbarrier\.|wgmma\.|fence\.proxy\.async|cp\.async\.bulk|bar\.sync|setmaxnreg"
                      r"|st\.shared|stmatrix)")


def sync_ops(ptx: str) -> list:
    """The PTX's synchronization and async operations in program order, one token each, registers elided but
    immediates kept (an mbarrier's count, an expect_tx byte count, a constant parity, a wait_group depth); runs of
    one token (a product's wgmma issues, a tile's shared stores) collapse to one: what a pipeline race changes."""
    out = []
    for line in ptx.splitlines():
        s = line.strip()
        m = SYNC_OPS.search(s)
        if not m:
            continue
        tok = s[m.start():].rstrip(";")
        for prefix in ("wgmma.mma_async", "st.shared", "stmatrix", "cp.async.bulk.tensor"):
            if tok.startswith(prefix):
                tok = prefix
        tok = re.sub(r"%\w+", "%", re.sub(r"\s+", " ", tok))
        if not (out and out[-1] == tok):
            out.append(tok)
    return out


def compile_ptx(kernels_module, head_dim: int, causal: bool) -> dict:
    """``{kernel name: normalized PTX}`` of the forward and backward kernels, compiled for sm_90a."""
    import torch

    from jfa_verify.kernels.gluon_jfa import codegen

    seen: list = []
    original = codegen.ptx_facts

    def capture(ptx):
        seen.append(ptx)
        return original(ptx)

    codegen.ptx_facts = capture
    try:
        codegen.compile_for_sm90(head_dim, torch.bfloat16, causal, kernels_module=kernels_module)
    finally:
        codegen.ptx_facts = original
    out = {}
    for ptx in seen:
        name = re.search(r"\.entry\s+(\w+)", ptx).group(1)
        out[name] = normalized(ptx)
    return out


def control_module(catalogue):
    """The unmutated kernels imported from a copy in the catalogue's folder, as a mutant is."""
    from jfa_verify.fuzz.mutation import Mutant

    origin = importlib.util.find_spec(catalogue.targets["kernels"]).origin
    first = open(origin).read().splitlines(keepends=True)[0]
    catalogue.mutants["__control__"] = Mutant("__control__", "control", "kernels", first,
                                              first + "# control: no change\n")
    try:
        return catalogue.module("__control__")
    finally:
        del catalogue.mutants["__control__"]


def main(argv=None) -> int:
    if os.environ.get("TRITON_INTERPRET", "0").lower() not in ("", "0", "false", "off", "no"):
        print("unset TRITON_INTERPRET first", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalogue", default="gluon_jfa_races")
    parser.add_argument("--head-dim", type=int, default=128, choices=(64, 128))
    parser.add_argument("--no-causal", action="store_true")
    parser.add_argument("--json", default=None, help="write the results here too")
    parser.add_argument("--diff", type=int, default=0, help="print up to this many changed PTX lines a mutant")
    parser.add_argument("--sync-lines", type=int, default=12, help="lines of each sync-op diff to print")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    from jfa_verify.fuzz.mutation import load_catalogue

    cat = load_catalogue(args.catalogue)
    causal = not args.no_causal
    t0 = time.time()
    base = compile_ptx(None, args.head_dim, causal)
    control = compile_ptx(control_module(cat), args.head_dim, causal)
    same = sorted(k for k in base if control.get(k) == base[k])
    print(f"baseline and control compiled ({time.time() - t0:.0f} s); control PTX equal to baseline for {same}",
          flush=True)
    if len(same) != len(base):
        print("the control differs from the baseline: the comparison is not trusted", file=sys.stderr)
        return 1
    results, bad = {}, 0
    for name in args.names or list(cat.mutants):
        t1 = time.time()
        try:
            cat.mutated_source(name)
            ptx = compile_ptx(cat.module(name), args.head_dim, causal)
        except Exception as e:  # noqa: BLE001 - reported per mutant
            results[name] = {"loads_and_compiles": False, "error": f"{type(e).__name__}: {e}"[:400]}
            bad += 1
            print(f"{name}: FAILED {results[name]['error']}", flush=True)
            continue
        changed = [k for k in KERNELS if k in base and ptx.get(k) != base[k]]
        sync_diff = {k: [x for x in difflib.unified_diff(sync_ops(base[k]), sync_ops(ptx[k]), lineterm="", n=1)][2:]
                     for k in changed}
        results[name] = {"loads_and_compiles": True, "ptx_differs": bool(changed), "kernels_changed": changed,
                         "sync_ops_differ": [k for k in changed if sync_diff[k]], "sync_op_diff": sync_diff,
                         "seconds": round(time.time() - t1, 1)}
        bad += not changed
        print(f"{name}: compiles for sm_90a; PTX differs: {'yes' if changed else 'NO'} {changed}; sync/async "
              f"op sequence differs: {results[name]['sync_ops_differ'] or 'no'} ({time.time() - t1:.0f} s)", flush=True)
        for k in changed:
            print("\n".join(f"    {k}: {x}" for x in sync_diff[k][:args.sync_lines]))
        for k in changed if args.diff else ():
            lines = list(difflib.unified_diff(base[k].splitlines(), ptx[k].splitlines(), lineterm="", n=0))
            print("\n".join("    " + x for x in lines[2:2 + args.diff]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"catalogue": args.catalogue, "head_dim": args.head_dim, "causal": causal,
                       "mutants": results}, fh, indent=1)
    print(f"{len(results) - bad}/{len(results)} mutants load, compile and change the PTX")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
