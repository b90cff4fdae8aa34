"""jfa-verify: differential testing and verification of Jagged Flash Attention kernels.

Public API (everything else is internal):

* the contract: :func:`validate_inputs`, :class:`JaggedProblem`, :func:`key_range`;
* the kernel protocol: :class:`Capabilities`, :class:`TileSizes`, :class:`KernelRun`,
  :class:`LaunchPlan`, :class:`PassPlan`, :class:`Visits`, :class:`Kernel`;
* the registry: :func:`register_kernel`, :func:`get_kernel`, :func:`kernel_names`, :func:`load_plugin`;
* cases: :class:`Case` (frozen, JSON round-trip, deterministic tensors);
* running and judging: :func:`run_case`, :class:`CaseResult`, :func:`compare_output`, :class:`Verifier`;
* errors: :class:`JFAError` and its subclasses.

Hypothesis strategies live in :mod:`jfa_verify.strategies`, the references in
:mod:`jfa_verify.oracles`, campaigns and mutation testing in :mod:`jfa_verify.fuzz`.
"""

import importlib

# Each public name, and the module that defines it: imported on first use (PEP 562), so that ``jfa-verify`` (whose
# ``jfa_verify.cli`` imports this package first) starts without torch, and a Ctrl-C while torch loads reaches the
# command's own handling (a short line, exit 130), not a traceback from the console script.
_EXPORTS = {
    "Case": "case", "CaseTensors": "case",
    "OUTPUTS": "compare", "OutputComparison": "compare", "compare_output": "compare",
    "JaggedProblem": "contract", "key_range": "contract", "validate_inputs": "contract",
    "InvalidInput": "errors", "JFAError": "errors", "KernelConfigError": "errors", "KernelProtocolError": "errors",
    "KernelUnavailable": "errors", "PluginError": "errors", "UnknownKernel": "errors", "UnsupportedCase": "errors",
    "Location": "localize", "locate": "localize",
    "Verifier": "loop",
    "Capabilities": "protocol", "Kernel": "protocol", "KernelRun": "protocol", "LaunchPlan": "protocol",
    "PassPlan": "protocol", "TileSizes": "protocol", "Visits": "protocol",
    "get_kernel": "registry", "kernel_names": "registry", "load_plugin": "registry", "register_kernel": "registry",
    "CaseResult": "runner", "run_case": "runner",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Capabilities",
    "Case",
    "CaseResult",
    "CaseTensors",
    "InvalidInput",
    "JFAError",
    "JaggedProblem",
    "Kernel",
    "KernelConfigError",
    "KernelProtocolError",
    "KernelRun",
    "KernelUnavailable",
    "LaunchPlan",
    "Location",
    "OUTPUTS",
    "OutputComparison",
    "PassPlan",
    "PluginError",
    "TileSizes",
    "UnknownKernel",
    "UnsupportedCase",
    "Verifier",
    "Visits",
    "compare_output",
    "get_kernel",
    "kernel_names",
    "key_range",
    "load_plugin",
    "locate",
    "register_kernel",
    "run_case",
    "validate_inputs",
]
__version__ = "0.2.0"

assert set(_EXPORTS) == set(__all__), "every public name has its module, and only those"
