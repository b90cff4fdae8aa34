"""GPU check of the 2^31-element case: the correct kernel must pass, the int32-overflow mutant must not.

The command behind ``docs/mutation.md``'s GPU-only row (2026-11-29). The GPU gate (``ci/gpu_run.sh``)
runs the same two checks as tests marked ``gpu_exclusive`` (``test_mutant_is_killed`` and
``test_overflow_case_on_gpu``), not this script.

Usage (CUDA machine, from the repository root): ``python ci/gpu_overflow.py [OUT_DIR]``.

The case (:func:`jfa_verify.fuzz.mutation.gpu_only_cases`: 257 sequences of 4096 tokens, H_q=16,
H_kv=1, D=128, bf16) has a Q of 2,155,872,256 elements, so a token x stride product in
int32 wraps. Forward only (O and LSE): the float64 reference of the backward would need
about twice the GPU memory. The tensors are materialized once (a minute of host time) and
shared by both runs. Writes ``overflow.json`` (status, seconds, explanation per kernel) to
OUT_DIR (default ``$OUT`` or ``gpu-out``); exits 0 when the kernel passes and the mutant fails or errors.
"""

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    from jfa_verify.core.device import select_device
    from jfa_verify.fuzz.mutation import gpu_only_cases, load_catalogue
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.runner import run_case
    from jfa_verify.run.settings import RunSettings

    out = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "gpu-out"))
    out.mkdir(parents=True, exist_ok=True)
    dev = select_device("cuda")
    case = gpu_only_cases()[0]
    t = time.time()
    tensors = case.materialize(dev)
    print(f"materialized {tensors.q.numel():,} Q elements ({tensors.q.numel() / 2**31:.3f} x 2^31) "
          f"in {time.time() - t:.0f} s", flush=True)
    results = {}
    kernels = (("triton_jfa", get_kernel("triton_jfa")),
               ("mutant int32_token_stride_overflow", load_catalogue().kernel_of("int32_token_stride_overflow")))
    for label, kernel in kernels:
        t = time.time()
        r = run_case(case, kernel, dev, RunSettings(backward=False), instrument=False, tensors=tensors)  # same tensors
        results[label] = {"status": r.status, "seconds": time.time() - t, "explain": r.explain()[:3000]}
        print(f"== {label}: {r.status} in {time.time() - t:.0f} s\n{r.explain()[:1500]}", flush=True)
        (out / "overflow.json").write_text(json.dumps(results, indent=1))
    ok = results["triton_jfa"]["status"] == "pass" and results[kernels[1][0]]["status"] in ("fail", "error")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
