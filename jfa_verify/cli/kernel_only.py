"""The kernel under test alone, for tools that watch every GPU launch of a process (compute-sanitizer).

``python -m jfa_verify.cli.kernel_only --kernel NAME [--device cuda] [--plugin FILE.py] [--filter TEXT]
[--max-cases N]`` runs cases of the default suite through the kernel's forward and backward and nothing
else: no padded SDPA oracle, no float64 reference, no comparison. The gate's sanitizer check runs this
under ``compute-sanitizer``, because a full ``jfa-verify run`` launches the oracle's kernels too and the
tool cannot tell whose launch a hazard is in: on the H200 every racecheck hazard of the first
``triton_jfa`` gate was in cuDNN's SDPA kernels (``cudnn_generated_fort_native_sdpa_sm90_flash_*``),
which the padded oracle runs, and was blamed on ``triton_jfa``.

Exit status: 0 every case ran (or was outside the kernel's capabilities), 1 the kernel raised on some
case (printed), 2 bad arguments, no such kernel or plugin, a ``load()`` that returns no implementation,
or no case matched.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the kernel alone on the chosen cases; returns the exit status (see the module's docstring).

    Raises:
        SystemExit: (status 2) a bad argument, as ``jfa-verify``'s own.
    """
    from jfa_verify.cli.arguments import positive_int

    parser = argparse.ArgumentParser(prog="python -m jfa_verify.cli.kernel_only",
                                     description="the kernel under test alone, for compute-sanitizer")
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None)
    parser.add_argument("--plugin", action="append", default=[])
    parser.add_argument("--filter", default="", help="only cases whose name contains this text")
    parser.add_argument("--max-cases", type=positive_int, default=2)
    parser.add_argument("--forward-only", action="store_true")
    args = parser.parse_args(argv)

    from jfa_verify.core.device import device_scope

    with device_scope():  # a caller in the same process keeps its own device and TRITON_INTERPRET
        return _run(args)


def _run(args) -> int:
    import torch

    from jfa_verify.checks.suites import get_suite
    from jfa_verify.core.device import select_device
    from jfa_verify.core.errors import JFAError, KernelConfigError, KernelUnavailable, UnsupportedCase
    from jfa_verify.protocol.registry import get_kernel, load_plugins
    from jfa_verify.run.runner import call_kernel

    try:
        device = select_device(args.device)
        load_plugins(args.plugin)
        kernel = get_kernel(args.kernel)
    except JFAError as e:
        print(f"kernel_only: error: {e}", file=sys.stderr)
        return 2
    cases = get_suite("default", device.type, 0, kernel=kernel).matching(args.filter)
    cases = cases[: args.max_cases]
    if not cases:
        print(f"kernel_only: error: no case of the default suite matches --filter {args.filter!r}", file=sys.stderr)
        return 2
    raised = 0
    for case in cases:
        tensors = case.materialize(device)
        problem = case.problem(tensors)
        reason = kernel.unsupported_reason(problem)
        if reason is not None:
            print(f"{case.name}: unsupported ({reason})", flush=True)
            continue
        backward = not args.forward_only and kernel.capabilities.backward_reason(problem) is None
        try:
            call_kernel(kernel, problem, tensors, case, backward=backward)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except (KernelUnavailable, UnsupportedCase) as e:
            print(f"{case.name}: unsupported ({e})", flush=True)
            continue
        except KernelConfigError as e:  # the registration is wrong (load() returned nothing): no case can run
            print(f"kernel_only: error: {e}", file=sys.stderr)
            return 2
        except Exception as e:  # the kernel under test may fail in any way; the tool's report says more
            raised += 1
            print(f"{case.name}: kernel raised {type(e).__name__}: {e}", flush=True)
            continue
        print(f"{case.name}: ran ({'forward and backward' if backward else 'forward'})", flush=True)
    return 1 if raised else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
