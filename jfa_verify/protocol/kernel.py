"""The kernel protocol, owned by the framework: what a kernel under test declares, and what a run returns.

A kernel is registered (:func:`jfa_verify.protocol.registry.register_kernel`) with its
:class:`Capabilities`, a ``tile_sizes(problem)`` function answering which
:class:`TileSizes` it runs for a :class:`~jfa_verify.core.contract.JaggedProblem`
(None when it has no fixed tiles), and a zero-argument loader returning its
implementation, which is either

* a **contract callable** (the simplest kernel: see the README)::

      fn(q, k, v, q_offsets, k_offsets, *, causal=False,
         causal_alignment="top_left", sm_scale=None[, window=(left, right)]) -> (o, lse)

  (``window`` is passed only for windowed cases, which only a kernel declaring a window mask gets;
  ``block_selection=`` a :class:`~jfa_verify.core.selection.BlockSelection` only for block-sparse cases, which
  only a kernel declaring their block sizes in ``Capabilities(block_sparse=...)`` gets; ``block_scales=`` a
  :class:`~jfa_verify.core.mxfp8.BlockScales` only for MXFP8 cases, which only a kernel declaring
  ``Capabilities(mxfp8=...)`` gets)

  differentiable in ``q``, ``k``, ``v`` through torch autograd; ``o`` alone when it
  declares ``Capabilities(returns_lse=False)``; or
* a **framework-aware kernel**: an object that is such a callable and also has
  ``launch(problem, q, k, v, q_offsets, k_offsets, *, instrument=False[, block_selection][, block_scales])
  -> KernelRun`` (``block_selection``: the caller's tensors, passed only for a block-sparse call; its host view is
  ``problem.block_selection``; ``block_scales``: ``problem.block_scales``, passed only for an MXFP8 call),
  taking the problem the framework validated once (no second validation or
  host synchronization), and returning, when instrumented, the
  :class:`LaunchPlan` it ran and the :class:`Visits` it recorded.

The framework judges every run against the output contract
(:func:`jfa_verify.core.contract.output_violations`) and localizes failures with
the kernel's own plan or tile sizes. Kernels depend on this module; it
depends on no kernel.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import reprlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import torch

from jfa_verify.core.contract import CAUSAL_ALIGNMENTS, MASKS, MODES, JaggedProblem, Mask
from jfa_verify.core.dtypes import DIFFERENTIABLE, DTYPES, dtype_name
from jfa_verify.core.errors import (
    InvalidInput,
    KernelConfigError,
    KernelProtocolError,
    KernelUnavailable,
    UnsupportedCase,
)
from jfa_verify.core.exits import exit_call, exits_refused
from jfa_verify.core.selection import BLOCK_SIZES, BlockSelection, check_block_size

__all__ = ["Capabilities", "GENERIC_TILES", "Kernel", "KernelRun", "LaunchPlan", "PassPlan", "TileSizes", "Visits",
           "tiles_for_shape"]

PASSES = ("fwd", "dq", "dkdv")


@dataclass(frozen=True)
class TileSizes:
    """The tiles a kernel runs: ``block_m`` query rows (O, LSE, dQ tiles), ``block_n`` key rows (dK, dV tiles)."""

    block_m: int
    block_n: int

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"TileSizes {name}={value!r} must be an int >= 1")

    def as_tuple(self) -> tuple[int, int]:
        return (self.block_m, self.block_n)


@dataclass(frozen=True)
class Capabilities:
    """What a kernel declares it supports; strategies draw inside it, the runner reports the rest as unsupported.

    Attributes:
        dtypes: input dtypes (torch dtypes).
        min_head_dim, max_head_dim: inclusive head-dim range (query/key and value).
        head_dims: an explicit list of head dims instead of the range (e.g. ``(64, 128)``); None for the range.
        non_power_of_two_head_dims: head dims such as 40 or 33 are handled.
        distinct_value_head_dim: ``D_v != D`` is handled.
        strided_inputs: non-contiguous q, k, v (any strides) are handled; False: contiguous only
            (TMA-fed kernels), and strided layouts are reported unsupported.
        modes: ``"self"``, ``"cross"``, ``"broadcast_q"``.
        causal_alignments: diagonals the causal and window masks are aligned to (``()``: no causal mode and
            no window); ignored for a problem where every sequence has ``L_q == L_k`` (both are the same mask).
        masks: masks handled, a subset of :data:`jfa_verify.core.contract.MASKS` (``"window"``: a sliding window
            ``(left, right)``), as those strings or :class:`~jfa_verify.core.masks.Mask` kinds; kept as the strings.
        symmetric_window: windows must have ``left == right >= 0`` (Meta's TLX JFA's ``window_size``).
        conventions: documented deviations from the contract the kernel declares (names of
            :data:`jfa_verify.core.conventions.CONVENTIONS`, e.g. ``"lse_plus_inf_empty_rows"``): a finding they
            explain is still reported, marked as a declared convention, and passes only when the user
            accepts it by name (``--accept``).
        hardware: what the kernel needs, in words (e.g. ``"a B200 (sm_100)"``), named in unsupported reasons.
        gqa, gqa_backward: ``H_q != H_kv`` in the forward and in the backward.
        backward: the kernel has a backward (dQ, dK, dV).
        backward_device_types: devices the backward runs on (flex_attention has none on the CPU).
        device_types: ``"cuda"`` and/or ``"cpu"``.
        min_compute_capability, max_compute_capability: CUDA ``(major, minor)`` bounds (None: any);
            an sm_90a-only kernel declares both ``(9, 0)``.
        lse_base: ``"e"`` (the contract's natural log) or ``"2"``: the kernel returns log2 LSE and the
            framework converts it (``lse * ln 2``) before judging; a declared convention, shown in reports.
        returns_lse: the kernel returns ``(o, lse)``; False: ``o`` alone (LSE is then not judged).
        deterministic: the same inputs give bit-identical outputs on every run (no atomics or races).
        instrumented: ``launch(..., instrument=True)`` returns the :class:`LaunchPlan` and :class:`Visits`.
        tf32: float32 inputs are multiplied with TF32 operands (judged by the ``float32-tf32`` budget row).
        block_sparse: the ``(block_m, block_n)`` pairs of block selections the kernel handles (each a power of
            two in [16, 256]; :class:`~jfa_verify.core.selection.BlockSelection`); ``()``: no block-sparse
            support, and cases with a selection are reported unsupported, never run.
        mxfp8: the kernel takes MXFP8 calls (float8 e4m3 inputs with ``block_scales=``, a
            :class:`~jfa_verify.core.mxfp8.BlockScales`), declared by the name of its rule for rounding ``P``
            before ``P V`` (a key of :data:`jfa_verify.core.conventions.P_QUANTIZATIONS`, e.g. ``"e4m3"``), which
            names the budget row it is judged by; None (the default): no MXFP8 path, and cases with block scales
            are reported unsupported, never run. Needs float8_e4m3fn in ``dtypes``; the contract model builds
            MXFP8 cases with the kernel's head dims, so a kernel declaring MXFP8 declares head dims that are
            multiples of 32 (``head_dims=(64, 128)``, say).
    """

    dtypes: tuple[torch.dtype, ...] = tuple(DTYPES[n] for n in DIFFERENTIABLE)
    min_head_dim: int = 16
    max_head_dim: int = 256
    head_dims: Optional[tuple[int, ...]] = None
    non_power_of_two_head_dims: bool = True
    distinct_value_head_dim: bool = True
    strided_inputs: bool = True
    modes: tuple[str, ...] = MODES
    causal_alignments: tuple[str, ...] = CAUSAL_ALIGNMENTS
    masks: tuple[str, ...] = ("none", "causal")
    symmetric_window: bool = False
    conventions: tuple[str, ...] = ()
    hardware: str = ""
    gqa: bool = True
    gqa_backward: bool = True
    backward: bool = True
    backward_device_types: tuple[str, ...] = ("cuda", "cpu")
    device_types: tuple[str, ...] = ("cuda", "cpu")
    min_compute_capability: Optional[tuple[int, int]] = None
    max_compute_capability: Optional[tuple[int, int]] = None
    lse_base: str = "e"
    returns_lse: bool = True
    deterministic: bool = True
    instrumented: bool = False
    tf32: bool = False
    block_sparse: tuple[tuple[int, int], ...] = ()
    mxfp8: Optional[str] = None

    def __post_init__(self) -> None:
        bad = [d for d in self.dtypes if d not in DTYPES.values()]
        if bad or not self.dtypes:
            # (a new user's dtypes=('float32',) was told it "must be a subset of ('float32', ...)": names, not dtypes)
            named = [d for d in bad if isinstance(d, str)]
            raise InvalidInput(f"Capabilities dtypes={self.dtypes} must be a non-empty tuple of torch dtypes among "
                               f"{tuple(DTYPES)}" + (f"; {named[0]!r} is a name: give torch.{named[0]}"
                                                      if named and named[0] in DTYPES else ""))
        if not 1 <= self.min_head_dim <= self.max_head_dim:
            raise InvalidInput(f"Capabilities min_head_dim={self.min_head_dim}, max_head_dim={self.max_head_dim}: "
                               f"need 1 <= min_head_dim <= max_head_dim")
        if not self.modes or set(self.modes) - set(MODES):
            raise InvalidInput(f"Capabilities modes={self.modes} must be a non-empty subset of {MODES}")
        if set(self.causal_alignments) - set(CAUSAL_ALIGNMENTS):
            raise InvalidInput(f"Capabilities causal_alignments={self.causal_alignments} must be a subset of "
                               f"{CAUSAL_ALIGNMENTS} (empty: no causal mode)")
        kinds, why = None, ""
        try:
            kinds = tuple(Mask.parse(m) for m in self.masks) if isinstance(self.masks, (tuple, list)) else None
        except InvalidInput as e:
            why = f" ({e})"
        if not kinds or any(k.alignment is not None for k in kinds):
            raise InvalidInput(f"Capabilities masks={self.masks} must be a non-empty subset of {MASKS}{why}")
        object.__setattr__(self, "masks", tuple(str(k) for k in kinds))
        from jfa_verify.core.conventions import CONVENTIONS, P_QUANTIZATIONS

        if self.mxfp8 is not None and self.mxfp8 not in P_QUANTIZATIONS:
            raise InvalidInput(f"Capabilities mxfp8={self.mxfp8!r} is not a P-quantization rule; pass one of "
                               f"{sorted(P_QUANTIZATIONS)} (jfa_verify.core.conventions.P_QUANTIZATIONS), or None "
                               f"for no MXFP8 path")
        if self.mxfp8 is not None and torch.float8_e4m3fn not in self.dtypes:
            raise InvalidInput(f"Capabilities mxfp8={self.mxfp8!r} needs torch.float8_e4m3fn in dtypes (MXFP8 data are "
                               f"e4m3), got dtypes={self.dtypes}; add it, or pass mxfp8=None")

        if set(self.conventions) - set(CONVENTIONS):
            raise InvalidInput(f"Capabilities conventions={self.conventions}: unknown names "
                               f"{sorted(set(self.conventions) - set(CONVENTIONS))}; known: {sorted(CONVENTIONS)}")
        if not self.device_types or set(self.device_types) - {"cuda", "cpu"}:
            raise InvalidInput(f"Capabilities device_types={self.device_types} must be a subset of ('cuda', 'cpu')")
        if self.lse_base not in ("e", "2"):
            raise InvalidInput(f"Capabilities lse_base={self.lse_base!r} must be 'e' or '2'")
        object.__setattr__(self, "block_sparse", _check_block_pairs(self.block_sparse))

    @property
    def causal(self) -> bool:
        """Some causal mode is supported."""
        return self.supports_mask(Mask(causal=True))

    @property
    def window(self) -> bool:
        """Some sliding-window mask is supported (alone or with causal)."""
        return any(self.supports_mask(m) for m in Mask.kinds() if m.windowed)

    def supports_mask(self, mask: "Mask | str") -> bool:
        """Whether the kernel takes ``mask``'s kind (no mask always; any other needs a declared alignment; the
        alignment itself is judged apart, by :attr:`causal_alignments`)."""
        mask = Mask.parse(mask)
        return mask.none or (bool(self.causal_alignments) and mask.kind in self.masks)

    def supports_head_dim(self, d: int) -> bool:
        if self.head_dims is not None:
            return d in self.head_dims
        return self.min_head_dim <= d <= self.max_head_dim and (self.non_power_of_two_head_dims or d & (d - 1) == 0)

    def unsupported_reason(self, problem: JaggedProblem) -> Optional[str]:
        """Why the forward of ``problem`` is outside these capabilities, or None."""
        if problem.dtype not in self.dtypes:
            return f"dtype={dtype_name(problem.dtype)} not in {tuple(dtype_name(d) for d in self.dtypes)}"
        for name, d in (("head_dim", problem.head_dim), ("head_dim_v", problem.head_dim_v)):
            if not self.supports_head_dim(d):
                allowed = self.head_dims if self.head_dims is not None else (
                    f"[{self.min_head_dim}, {self.max_head_dim}]"
                    + ("" if self.non_power_of_two_head_dims else ", powers of two"))
                return f"{name}={d} not in {allowed}"
        if problem.head_dim != problem.head_dim_v and not self.distinct_value_head_dim:
            return f"head_dim_v={problem.head_dim_v} differs from head_dim={problem.head_dim}"
        if problem.mode not in self.modes:
            return f"mode={problem.mode!r} not in {self.modes}"
        if not problem.inputs_contiguous and not self.strided_inputs:
            return "non-contiguous q/k/v not supported (contiguous inputs only)"
        mask = problem.mask
        if not self.supports_mask(mask):
            return f"mask={mask!r} not supported (supported: {self.masks if self.causal_alignments else ('none',)})"
        if problem.aligned and problem.causal_alignment not in self.causal_alignments:
            return (f"{mask} with causal_alignment={problem.causal_alignment!r} and L_q != L_k not supported "
                    f"(supported: {self.causal_alignments})")
        if problem.window is not None and self.symmetric_window and (
                problem.window[0] != problem.window[1] or problem.window[0] < 0):
            return f"window={problem.window} is not symmetric (supported: (w, w) with w >= 0)"
        if problem.group_size != 1 and not self.gqa:
            return f"GQA group size {problem.group_size} not supported"
        selection = problem.block_selection
        if selection is not None and selection.block_sizes not in self.block_sparse:
            return (f"block selection with (block_m, block_n)={selection.block_sizes} not supported (block_sparse="
                    f"{self.block_sparse}{': no block-sparse path' if not self.block_sparse else ''})")
        if problem.block_scales is not None and self.mxfp8 is None:
            return "MXFP8 inputs (block_scales) not supported (Capabilities.mxfp8=None: no MXFP8 path)"
        return self.device_reason(problem.device)

    def device_reason(self, device: "torch.device | str") -> Optional[str]:
        """Why no case can run on ``device`` (a ``torch.device`` or ``"cpu"``/``"cuda"``): its type is not in
        :attr:`device_types`, or a CUDA device's compute capability is outside the bounds; None when it can."""
        device = torch.device(device)
        needs = f"; the kernel needs {self.hardware}" if self.hardware else ""
        if device.type not in self.device_types:
            return f"device={device} not in {self.device_types}{needs}"
        if device.type == "cuda" and (self.min_compute_capability or self.max_compute_capability):
            cc = torch.cuda.get_device_capability(device)
            if self.min_compute_capability and cc < tuple(self.min_compute_capability):
                return f"compute capability {cc} below {self.min_compute_capability}{needs}"
            if self.max_compute_capability and cc > tuple(self.max_compute_capability):
                return f"compute capability {cc} above {self.max_compute_capability}{needs}"
        return None

    def backward_reason(self, problem: JaggedProblem) -> Optional[str]:
        """Why the backward of ``problem`` cannot run (the forward is still judged), or None."""
        if not self.backward:
            return "the kernel has no backward"
        if problem.device.type not in self.backward_device_types:
            return f"no backward on device {problem.device.type} (backward devices: {self.backward_device_types})"
        if problem.group_size != 1 and not self.gqa_backward:
            return f"GQA group size {problem.group_size} has no backward in this kernel"
        return None


def _check_block_pairs(pairs) -> tuple[tuple[int, int], ...]:
    """``Capabilities.block_sparse`` as a tuple of int pairs.

    Raises:
        InvalidInput: not a sequence of ``(block_m, block_n)`` pairs of powers of two in [16, 256].
    """
    fix = f"pass a tuple of (block_m, block_n) pairs, each one of {BLOCK_SIZES}, e.g. ((64, 64),), or () for none"
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, (tuple, list)):
        raise InvalidInput(f"Capabilities block_sparse={pairs!r} is not a tuple of pairs; {fix}")
    out = []
    for pair in pairs:
        if isinstance(pair, (str, bytes)) or not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidInput(f"Capabilities block_sparse: {pair!r} is not a (block_m, block_n) pair; {fix}")
        out.append((check_block_size("Capabilities block_sparse block_m", pair[0]),
                    check_block_size("Capabilities block_sparse block_n", pair[1])))
    return tuple(out)


@dataclass(frozen=True)
class PassPlan:
    """One pass of a persistent kernel as planned on the host.

    Attributes:
        kind: ``"fwd"``, ``"dq"`` or ``"dkdv"``.
        workloads: the pass's tiles, exactly the framework's
            :func:`jfa_verify.scheduling.schedules.workloads_forward` (fwd, dq) or ``workloads_backward``
            (dkdv) list for the problem and the kernel's tile sizes; a tile index is a position in it.
        programs: per program (persistent CTA), the tile indices it runs, in order.
        schedule: the :class:`jfa_verify.scheduling.schedules.Schedule` it came from, when a framework scheduler
            built it (its host invariants are checked too); None otherwise.
        cluster_size: CTAs per cluster the schedule was padded for.
    """

    kind: str
    workloads: tuple
    programs: tuple[tuple[int, ...], ...]
    schedule: Any = None
    cluster_size: int = 1


@dataclass(frozen=True)
class LaunchPlan:
    """What an instrumented kernel ran: its tile sizes and a :class:`PassPlan` per pass (``fwd``, ``dq``, ``dkdv``).

    A kernel that plans its launches on the device (:mod:`jfa_verify.scheduling.device_plan`) also gives, per pass,
    the launch arrays it ran (``arrays``, read back) and the ones its host planner makes for the same call
    (``reference``), each ``{"tile_seq", "tile_block", "tile_id", "prog_start"}`` int lists: the framework checks
    that they agree (a planner that disagrees with the host planner on a drawn case fails that case).
    """

    tiles: TileSizes
    passes: Mapping[str, PassPlan]
    arrays: Optional[Mapping[str, Mapping[str, list]]] = None
    reference: Optional[Mapping[str, Mapping[str, list]]] = None


@dataclass
class Visits:
    """What an instrumented kernel recorded, per pass ``kind``.

    ``counts[kind]``: int tensor ``[num_tiles, heads]``, how many times the pass ran each tile for
    each head (heads are H_q for ``fwd``/``dq``, H_kv for ``dkdv``); ``programs[kind]``: same shape,
    the program id that last ran it (-1 if none). Backward passes fill in when the backward runs.
    """

    counts: dict = field(default_factory=dict)
    programs: dict = field(default_factory=dict)


@dataclass
class KernelRun:
    """The result of one forward call: ``o`` (differentiable), ``lse`` (None when the kernel returns none),
    and for instrumented runs the :class:`LaunchPlan` and :class:`Visits`."""

    o: Any
    lse: Any = None
    plan: Optional[LaunchPlan] = None
    visits: Optional[Visits] = None

    @classmethod
    def from_result(cls, result, *, returns_lse: bool, kernel: str) -> "KernelRun":
        """Wrap what a contract callable returned, or name how it breaks the protocol.

        Raises:
            KernelProtocolError: not ``(o, lse)`` (or ``o`` alone for ``returns_lse=False``); ``(o, None)`` from a
                kernel that declares ``returns_lse``; ``(o, lse)`` with an LSE from one that declares it returns
                none (``(o, None)`` is accepted there).
        """
        if isinstance(result, KernelRun):
            return result
        if isinstance(result, torch.Tensor):
            if returns_lse:
                raise KernelProtocolError(
                    f"kernel {kernel!r} returned one tensor (o alone); the contract's kernels return (o, lse): "
                    f"return both, or declare Capabilities(returns_lse=False) if it computes no LSE")
            return cls(result, None)
        if isinstance(result, (tuple, list)):
            if len(result) == 2:
                if returns_lse and result[1] is None:
                    # (judged as o alone, LSE unchecked, and the run said nothing: a new user's trial)
                    raise KernelProtocolError(
                        f"kernel {kernel!r} returned (o, None); it declares that it returns LSE: return the LSE "
                        f"([H_q, total rows], float32, natural log), or declare Capabilities(returns_lse=False) "
                        f"if it computes none")
                if not returns_lse and result[1] is not None:
                    # (its LSE dropped unjudged, and the run said nothing: a new user's trial)
                    raise KernelProtocolError(
                        f"kernel {kernel!r} returned (o, lse) but declares Capabilities(returns_lse=False), so its "
                        f"LSE would go unjudged: declare returns_lse=True (LSE [H_q, total rows], float32, natural "
                        f"log), or return o alone")
                return cls(result[0], result[1])
            raise KernelProtocolError(f"kernel {kernel!r} returned a {type(result).__name__} of {len(result)} "
                                      f"items; the contract's kernels return (o, lse)")
        raise KernelProtocolError(f"kernel {kernel!r} returned a {type(result).__name__}; the contract's kernels "
                                  f"return (o, lse) torch tensors")

    def outputs(self):
        """``(o, lse)``, or ``o`` when there is no LSE: the contract callable's return value."""
        return self.o if self.lse is None else (self.o, self.lse)


@dataclass
class Kernel:
    """A registered kernel: name, capabilities, tile sizes and a lazily loaded implementation.

    Calling it is the contract call; :meth:`run` is how the framework runs it on a validated problem.
    """

    name: str
    description: str
    loader: Callable[[], Any]
    capabilities: Capabilities
    tile_sizes_fn: Optional[Callable[[JaggedProblem], Optional[TileSizes]]] = None
    requires: tuple[str, ...] = ()
    # ``python -m`` module that launches the smallest race-free kernel made by the same compiler lowering
    # (e.g. Triton's warp-specialization scaffold with one mbarrier hand-off) and exits 0 when its results
    # are right; the gate runs it under racecheck first (jfa_verify.checks.sanitizer). None: no control.
    sanitizer_control: Optional[str] = None
    # folders of the kernel's source files besides its loader's (tools such as compute-sanitizer name files
    # by base name alone); e.g. where planted-bug copies of its modules are written
    source_dirs: tuple[str, ...] = ()
    _impl: Any = field(default=None, repr=False)

    def tile_sizes(self, problem: JaggedProblem) -> Optional[TileSizes]:
        """The tiles this kernel runs for ``problem`` (None when it declares none). Never loads the kernel."""
        return None if self.tile_sizes_fn is None else self.tile_sizes_fn(problem)

    def missing_requirements(self) -> list[str]:
        return [m for m in self.requires if importlib.util.find_spec(m) is None]

    def device_reason(self, device: "torch.device | str") -> Optional[str]:
        """Why this kernel cannot run on ``device`` at all (:meth:`Capabilities.device_reason`, then a missing
        requirement), or None. Never loads the kernel."""
        reason = self.capabilities.device_reason(device)
        missing = self.missing_requirements() if reason is None else []
        return f"needs {', '.join(missing)} (not installed)" if missing else reason

    @property
    def impl(self):
        """The implementation; loads it (and its dependencies) on first use.

        Raises:
            KernelUnavailable: an optional dependency is not installed.
            KernelConfigError: the loader raised, or returned None or something neither callable nor with a
                ``launch`` method (a registration mistake, not a finding of the kernel).
        """
        if self._impl is None:
            missing = self.missing_requirements()
            if missing:
                raise KernelUnavailable(
                    f"kernel {self.name!r} needs {', '.join(missing)}; install it with pip install {' '.join(missing)}"
                )
            code = getattr(self.loader, "__code__", None)
            loader = (f"{code.co_filename}:{code.co_firstlineno}" if code is not None else
                      getattr(self.loader, "__qualname__", repr(self.loader)))
            try:
                with exits_refused():  # (its os._exit(0) in this process ended a command silently with exit 0)
                    impl = self.loader()
            except (KernelUnavailable, KernelConfigError):
                raise
            except SystemExit as e:  # (a silent exit 0 here was a green run that checked nothing)
                raise KernelConfigError(
                    f"kernel {self.name!r}: its load() ({loader}) called {exit_call(e)}; a loader returns the "
                    f"implementation (raise an exception, or name a dependency in register_kernel(..., requires=[...]),"
                    f" where the kernel cannot load)", self.name) from None
            except Exception as e:  # a loader that raises: no case of it can run, so no verdict is the kernel's
                raise KernelConfigError(
                    f"kernel {self.name!r}: its load() ({loader}) raised {type(e).__name__}: {e}; fix the loader, or "
                    f"name a dependency it needs in register_kernel(..., requires=[...]) so that a machine without it "
                    f"reports the kernel unavailable", self.name) from e
            if impl is None or not (callable(impl) or callable(getattr(impl, "launch", None))):
                raise KernelConfigError(
                    f"kernel {self.name!r}: its load() ({loader}) returned {reprlib.repr(impl)}, not an "
                    f"implementation; make it return the attention function (called as the contract's "
                    f"fn(q, k, v, q_offsets, k_offsets, *, causal, causal_alignment, sm_scale)) or an object with "
                    f"launch() (see jfa_verify.protocol.kernel)", self.name)
            if getattr(impl, "launch", None) is None:
                _check_call_signature(self.name, loader, impl, self.capabilities)
            self._impl = impl
        return self._impl

    def unsupported_reason(self, problem: JaggedProblem) -> Optional[str]:
        return self.capabilities.unsupported_reason(problem)

    def check_supported(self, problem: JaggedProblem) -> None:
        """Raise :class:`UnsupportedCase` when ``problem`` is outside the capabilities."""
        reason = self.unsupported_reason(problem)
        if reason is not None:
            raise UnsupportedCase(f"kernel {self.name!r} does not support this case: {reason}")

    def run(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, sm_scale: Optional[float] = None,
            instrument: bool = False, block_selection: Optional[BlockSelection] = None) -> KernelRun:
        """One forward call on a validated ``problem``; ``sm_scale`` is passed as the case gives it
        (None: the kernel's own default). LSE in base 2 is converted here when the kernel declares it.
        A block-sparse problem's selection is passed as the ``block_selection=`` keyword (to ``launch`` or the
        contract callable): ``block_selection`` when given, else the tensors the problem was validated with
        (``problem.block_selection.source``); a dense problem's calls carry no such keyword. An MXFP8 problem's
        ``problem.block_scales`` are passed as ``block_scales=`` the same way (only then).

        Raises:
            KernelProtocolError: the implementation returned something other than the protocol's result.
            Exception: whatever the kernel raises.
        """
        impl = self.impl
        launch = getattr(impl, "launch", None)
        if block_selection is None and problem.block_selection is not None:
            block_selection = problem.block_selection.source
        sparse = {} if problem.block_selection is None else {"block_selection": block_selection}
        if problem.block_scales is not None:
            sparse["block_scales"] = problem.block_scales
        if launch is not None:
            run = launch(problem, q, k, v, q_offsets, k_offsets, instrument=instrument, **sparse)
            if not isinstance(run, KernelRun):
                raise KernelProtocolError(f"kernel {self.name!r}: launch() returned {type(run).__name__}, "
                                          f"not a KernelRun")
        else:
            extra = {} if problem.window is None else {"window": problem.window}
            extra.update(sparse)
            result = impl(q, k, v, q_offsets, k_offsets, causal=problem.causal,
                          causal_alignment=problem.causal_alignment, sm_scale=sm_scale, **extra)
            run = KernelRun.from_result(result, returns_lse=self.capabilities.returns_lse, kernel=self.name)
        if self.capabilities.lse_base == "2" and isinstance(run.lse, torch.Tensor):
            run.lse = run.lse * math.log(2.0)
        return run

    def __call__(self, *args, **kwargs):
        return self.impl(*args, **kwargs)


def _check_call_signature(name: str, loader: str, fn, caps: Capabilities) -> None:
    """Refuse, at load, an attention function that cannot take the contract's call as :meth:`Kernel.run` makes it
    for a kernel of ``caps``: a new user's ``attention(q, k, v, cu_seqlens, *, causal=False)`` failed every case of
    a suite with the same TypeError, each one a finding (exit 1), where a registration mistake is exit 2. A function
    whose signature Python cannot read (a builtin, an extension) is left to its calls.

    Raises:
        KernelConfigError: the call does not bind (the message gives the call, the function's signature and why).
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    keywords = {"causal": False, "causal_alignment": "top_left", "sm_scale": None}
    keywords.update({"window": None} if caps.window else {})
    keywords.update({"block_selection": None} if caps.block_sparse else {})
    keywords.update({"block_scales": None} if caps.mxfp8 else {})
    try:
        signature.bind("q", "k", "v", "q_offsets", "k_offsets", **keywords)
    except TypeError as e:
        call = f"fn(q, k, v, q_offsets, k_offsets, *, {', '.join(keywords)})"
        raise KernelConfigError(
            f"kernel {name!r}: its load() ({loader}) returned a function of signature {signature}, which cannot take "
            f"the contract's call {call} for its capabilities ({e}); give it those parameters (a keyword it ignores "
            f"can go into **kwargs)", name) from None


# Tile-boundary lengths for kernels that declare no tiles: common FlashAttention tiles on a GPU,
# small ones on the CPU (where sequences stay short).
GENERIC_TILES = {"cuda": TileSizes(128, 64), "cpu": TileSizes(32, 16)}


def tiles_for_shape(kernel, head_dim: int, head_dim_v: Optional[int] = None, dtype: Optional[torch.dtype] = None,
                    device_type: str = "cpu") -> TileSizes:
    """The tiles ``kernel`` runs for this shape (before any lengths are drawn), or :data:`GENERIC_TILES`.

    ``kernel``: a registered :class:`Kernel`, a :class:`Capabilities` (no tiles of its own) or None.
    """
    tiles = None
    if isinstance(kernel, Kernel):
        tiles = kernel.tile_sizes(JaggedProblem.of_shape(head_dim, head_dim_v, dtype, device_type))
    return tiles or GENERIC_TILES["cuda" if device_type == "cuda" else "cpu"]
