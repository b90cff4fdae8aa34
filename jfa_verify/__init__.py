"""jfa-verify: differential testing and verification of Jagged Flash Attention kernels.

Public API (everything else is internal):

* the contract: :func:`validate_inputs`, :class:`JaggedProblem`;
* cases: :class:`Case` (frozen, JSON round-trip, deterministic tensors);
* running and judging: :func:`run_case`, :class:`CaseResult`, :func:`compare_output`;
* errors: :class:`JFAError` and its subclasses.

Hypothesis strategies live in :mod:`jfa_verify.strategies`.
"""

from .case import Case, CaseTensors
from .compare import OUTPUTS, OutputComparison, compare_output
from .contract import JaggedProblem, validate_inputs
from .errors import InvalidInput, JFAError, KernelUnavailable, UnknownKernel, UnsupportedCase
from .localize import Location, locate
from .runner import CaseResult, run_case

__all__ = [
    "Case",
    "CaseResult",
    "CaseTensors",
    "InvalidInput",
    "JFAError",
    "JaggedProblem",
    "KernelUnavailable",
    "Location",
    "OUTPUTS",
    "OutputComparison",
    "UnknownKernel",
    "UnsupportedCase",
    "compare_output",
    "locate",
    "run_case",
    "validate_inputs",
]
__version__ = "0.1.0"
