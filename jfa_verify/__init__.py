"""jfa-verify: differential testing and verification of Jagged Flash Attention kernels.

Public API (everything else is internal):

* the contract: :func:`validate_inputs`, :func:`validate_call` (no offsets value read), :class:`JaggedProblem`,
  :class:`CallShape`, :func:`key_range`, :class:`BlockSelection` (block-sparse calls),
  :class:`BlockScales` (MXFP8 calls);
* the kernel protocol: :class:`Capabilities`, :class:`TileSizes`, :class:`KernelRun`,
  :class:`LaunchPlan`, :class:`PassPlan`, :class:`Visits`, :class:`Kernel`;
* the registry: :func:`register_kernel`, :func:`get_kernel`, :func:`kernel_names`, :func:`load_plugin`;
* cases: :class:`Case` (frozen, JSON round-trip, deterministic tensors);
* running and judging: :func:`run_case`, :class:`CaseResult`, :func:`compare_output`, :class:`Verifier`,
  :class:`RunSettings` (a run's settings, passed whole);
* errors: :class:`JFAError` and its subclasses.

Hypothesis strategies live in :mod:`jfa_verify.strategies`, the references in
:mod:`jfa_verify.oracles`, campaigns and mutation testing in :mod:`jfa_verify.fuzz`.
"""

import importlib

# Each public name, and the module that defines it: imported on first use (PEP 562), so that ``jfa-verify`` (whose
# ``jfa_verify.cli`` imports this package first) starts without torch, and a Ctrl-C while torch loads reaches the
# command's own handling (a short line, exit 130), not a traceback from the console script.
_EXPORTS = {
    "Case": "cases.case", "CaseTensors": "cases.case",
    "OUTPUTS": "judge.compare", "OutputComparison": "judge.compare", "compare_output": "judge.compare",
    "JaggedProblem": "core.contract", "key_range": "core.contract", "validate_inputs": "core.contract",
    "CallShape": "core.contract", "validate_call": "core.contract", "BlockSelection": "core.contract",
    "BlockScales": "core.contract",
    "DeviceOutOfMemory": "core.errors", "InvalidInput": "core.errors", "JFAError": "core.errors",
    "KernelConfigError": "core.errors",
    "KernelProtocolError": "core.errors", "KernelUnavailable": "core.errors", "PluginError": "core.errors",
    "UnknownKernel": "core.errors", "UnsupportedCase": "core.errors",
    "Location": "judge.localize", "locate": "judge.localize",
    "Verifier": "run.loop",
    "Capabilities": "protocol.kernel", "Kernel": "protocol.kernel", "KernelRun": "protocol.kernel",
    "LaunchPlan": "protocol.kernel", "PassPlan": "protocol.kernel", "TileSizes": "protocol.kernel",
    "Visits": "protocol.kernel",
    "get_kernel": "protocol.registry", "kernel_names": "protocol.registry", "load_plugin": "protocol.registry",
    "register_kernel": "protocol.registry",
    "CaseResult": "run.runner", "run_case": "run.runner",
    "RunSettings": "run.settings",
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
    "BlockScales",
    "BlockSelection",
    "CallShape",
    "Capabilities",
    "Case",
    "CaseResult",
    "CaseTensors",
    "DeviceOutOfMemory",
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
    "RunSettings",
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
    "validate_call",
    "validate_inputs",
]
__version__ = "0.2.0"

assert set(_EXPORTS) == set(__all__), "every public name has its module, and only those"
