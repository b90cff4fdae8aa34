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

from .case import Case, CaseTensors
from .compare import OUTPUTS, OutputComparison, compare_output
from .contract import JaggedProblem, key_range, validate_inputs
from .errors import (InvalidInput, JFAError, KernelConfigError, KernelProtocolError, KernelUnavailable, PluginError,
                     UnknownKernel, UnsupportedCase)
from .localize import Location, locate
from .loop import Verifier
from .protocol import Capabilities, Kernel, KernelRun, LaunchPlan, PassPlan, TileSizes, Visits
from .registry import get_kernel, kernel_names, load_plugin, register_kernel
from .runner import CaseResult, run_case

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
