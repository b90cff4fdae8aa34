"""How many Triton variants ``triton_jfa`` builds per 1,000 drawn cases, counted on the CPU without compiling.

Each drawn case (``jfa_verify.strategies.cases``, the campaign's strategy, with the GPU's tile sizes) runs its
forward and backward through the kernel's host code on CPU tensors while a driver that knows only the target
(sm_90) stands in for the GPU and Triton's ``jit_cache_hook`` records each launch's cache key instead of building
it (:func:`jfa_verify.run.precompile.trace_variants`). Prints the distinct variants per kernel and, for each kernel,
the launch arguments whose specialization differs between its variants (what still multiplies them). ``--suite``
counts the default suite's cases instead (what a cold ``jfa-verify run --device cuda`` compiles before its relation
checks). Usage::

    python benchmarks/bench_variants.py [--cases 1000] [--seed 0] [--suite] [--json OUT]

Must run without ``TRITON_INTERPRET`` (the interpreter has no cache key); exits 2 if it is set. About a minute
per 1,000 cases on one core.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import sys


def draw_cases(n: int, seed: int) -> list:
    """``n`` cases of the campaign's strategy for ``triton_jfa`` with the GPU's tile sizes, fixed by ``seed``."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.strategies import cases

    drawn: list = []
    kernel = get_kernel("triton_jfa")

    @hypothesis_seed(seed)
    @settings(database=None, deadline=None, max_examples=n, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=cases(kernel, device_type="cuda"))
    def collect(case):
        drawn.append(case)

    collect()
    return drawn[:n]


def suite_cases(seed: int) -> list:
    """The default suite's cases for ``triton_jfa`` on CUDA (its GPU sizes), fixed by ``seed``."""
    from jfa_verify.checks.suites import default_suite
    from jfa_verify.protocol.registry import get_kernel

    return list(default_suite("cuda", seed, kernel=get_kernel("triton_jfa")).cases)


def _parameter_names() -> dict:
    """``{kernel function name: its parameter names in order}`` (a cache key names constexprs by position)."""
    from jfa_verify.kernels.triton_jfa import _kernels as K

    return {fn.fn.__name__: [p.name for p in fn.params]
            for fn in (K._fwd_kernel, K._bwd_preprocess_kernel, K._bwd_dkdv_kernel, K._bwd_dq_kernel)}


def gpu_variants(cases: list, arch: int = 90) -> tuple[list, list]:
    """``(variants, untraced)``: the Triton variants ``triton_jfa`` launches for ``cases`` on an sm_``arch`` GPU (its
    tile sizes), traced on the CPU with a target-only driver (:func:`jfa_verify.run.precompile.trace_variants`)."""
    import torch
    from triton.runtime.driver import driver

    import jfa_verify.kernels.triton_jfa._config as tj
    from jfa_verify.core.target_driver import TargetOnlyDriver
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.precompile import trace_variants

    cpu_tiles = tj.tile_sizes
    tj.tile_sizes = lambda p: cpu_tiles(dataclasses.replace(p, device=torch.device("cuda")))  # the GPU's tiles
    previous = driver._active
    driver.set_active(TargetOnlyDriver(arch))
    try:
        return trace_variants(get_kernel("triton_jfa"), cases, torch.device("cpu"))
    finally:
        driver.set_active(previous)
        tj.tile_sizes = cpu_tiles


def count_variants(cases: list, arch: int = 90) -> dict:
    """``{"cases", "variants", "by_kernel": {name: n}, "varying": {name: {argument: distinct values}}}``."""
    variants, untraced = gpu_variants(cases, arch)
    by_kernel = collections.Counter(v.name for v in variants)
    varying: dict = {}
    names = _parameter_names()
    for name in by_kernel:
        datas = [json.loads(v.data) for v in variants if v.name == name]
        values = collections.defaultdict(set)
        for d in datas:
            for k, val in zip(d["attrs_keys"], d["attrs_vals"]):
                values[f"attr{k}"].add(json.dumps(val))
            for k, val in zip(d["constant_keys"], d["constant_vals"]):
                index = k[0] if isinstance(k, list) and len(k) == 1 else None
                label = names[name][index] if name in names and index is not None else f"const{k}"
                values[label].add(json.dumps(val))
            for k, val in d["signature"].items():
                if val != "constexpr":  # (its value is among the constants)
                    values[k].add(json.dumps(val))
            for k in ("num_warps", "num_stages"):
                values[k].add(json.dumps(d["options"][k]))
        varying[name] = {k: len(v) for k, v in sorted(values.items()) if len(v) > 1}
    return {"cases": len(cases), "untraced": len(untraced), "variants": len(variants), "by_kernel": dict(by_kernel),
            "varying": varying, "floors": floors(variants)}


def floors(variants: list) -> dict:
    """Distinct variants if Triton specialized no argument at all (its alignment and value attributes dropped: what
    ``do_not_specialize`` could still remove), and if the offsets came in one integer type (a host change)."""
    plain, one_offsets = set(), set()
    for v in variants:
        d = json.loads(v.data)
        sig = dict(d["signature"])
        base = (v.name, json.dumps(d["constant_vals"]), d["options"]["num_warps"], d["options"]["num_stages"])
        plain.add((*base, json.dumps(sig, sort_keys=True)))
        for name in ("Q_OFF", "K_OFF"):
            if name in sig:
                sig[name] = "*i32"
        one_offsets.add((*base, json.dumps(sig, sort_keys=True)))
    return {"no_argument_specialization": len(plain), "one_offsets_type": len(one_offsets)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--suite", action="store_true", help="the default suite's cases, not --cases drawn ones")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET"):
        print("unset TRITON_INTERPRET: the interpreter has no cache key", file=sys.stderr)
        return 2
    from jfa_verify.core.device import choose_for_compiling

    choose_for_compiling("cpu")  # host code on CPU tensors up to each launch, which the recording hook stops
    out = count_variants(suite_cases(args.seed) if args.suite else draw_cases(args.cases, args.seed))
    per = 1000 * out["variants"] / max(out["cases"], 1)
    what = "default suite" if args.suite else "drawn"
    print(f"{out['cases']} {what} cases (seed {args.seed}, sm_90 tiles; {out['untraced']} not traced): "
          f"{out['variants']} variants ({per:.0f} per 1,000 cases)")
    f = out["floors"]
    print(f"  with no argument specialized at all: {f['no_argument_specialization']}; with the offsets in one integer "
          f"type as well (a host change): {f['one_offsets_type']}")
    for name, n in out["by_kernel"].items():
        print(f"  {name:24s} {n:5d}   varying: {out['varying'][name]}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
