"""Stress reruns: long, pipeline-filling cases rerun many times under timing perturbation.

A race in a warp-specialized kernel (a shared-memory stage handed back before the MMA reading it has completed, a
missing wait, the wrong phase on a later lap of the ring) shows only when the pipeline wraps its ring many times and
the timing of the warps shifts. Short cases never wrap the ring; three reruns rarely shift the timing. This check:

* builds cases from the kernel's own tile sizes (:func:`stress_cases`) so that every query tile streams many KV tiles
  and every KV tile many query tiles (:func:`pipeline_laps`: at least ``laps`` laps of a ring of ``stages`` stages),
  causal and not, GQA, D = 64 and 128; and cases of many short sequences, so that every persistent program runs
  many work units back to back (:func:`program_laps`: at least ``laps`` units a program). The long cases give a
  program one or two units, so the hand-over from one unit to the next (the epilogue's staging buffer rewritten
  while the previous tile's store may still read it, the last stage of a unit released to the producer loading the
  next unit) happens once a program at most; the short ones make it happen ``laps`` times;
* reruns each case ``reruns`` times (default :data:`DEFAULT_RERUNS`: 200 on CUDA, a few on the CPU interpreter),
  interleaving the cases round by round (:func:`plan_rounds`);
* perturbs the timing of each round by one named mode (:data:`MODES`): ``plain`` (none), ``noise`` (copies and
  matmuls queued on a second CUDA stream, running beside the kernel: :class:`NoiseKernel`), ``fewer_sms`` (persistent
  grids capped to fewer programs, where the kernel's implementation offers ``with_programs(n)``) and
  ``launch_order`` (the cases of the round in another order). A mode the device or the kernel rules out is reported
  skipped with the reason;
* compares every rerun bit for bit with rerun 0 for a kernel that declares itself deterministic
  (:attr:`~jfa_verify.protocol.kernel.Capabilities.deterministic`), and judges rerun 0 (and any rerun that differs)
  against the references with the runner's judge (:func:`jfa_verify.run.runner.judge_outputs`); a kernel that declares
  itself non-deterministic has every rerun judged instead.

The first differing rerun is reported with its mode, the output, and the element's (sequence, head, token, tile)
(:func:`jfa_verify.judge.localize.locate`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch

from jfa_verify.cases.case import Case
from jfa_verify.checks.determinism import RerunDifference, first_difference, rerun_difference, rerun_result
from jfa_verify.core.contract import JaggedProblem, key_range
from jfa_verify.core.errors import DeviceOutOfMemory, InvalidInput, KernelUnavailable, UnsupportedCase
from jfa_verify.core.exits import declare_exit
from jfa_verify.core.watchdog import watchdog
from jfa_verify.oracles import padded_sdpa_attention, reference_attention
from jfa_verify.protocol.kernel import Kernel, TileSizes, tiles_for_shape
from jfa_verify.run.runner import call_kernel, judge_outputs
from jfa_verify.run.settings import RunSettings

__all__ = ["DEFAULT_RERUNS", "MAX_LAPS", "MODES", "STRESS_KEY", "UNIT_CASES", "NoiseKernel", "Round", "RerunDifference",
           "StressOptions", "StressReport", "StressVerdict", "mode_reasons", "pipeline_laps", "plan_rounds",
           "program_laps", "run_stress", "runs_persistent", "stress_cases", "stress_length", "unit_lengths",
           "unsupported_shapes"]

MODES = ("plain", "noise", "fewer_sms", "launch_order")
# The key of a stress finding's case file: {"reruns": N, "modes": [...], "seed": S, "first_difference": {...}, ...}
STRESS_KEY = "stress"
DEFAULT_RERUNS = {"cuda": 200, "cpu": 3}
DEFAULT_LAPS = {"cuda": 8, "cpu": 1}
# The deepest shared-memory ring assumed (the protocol does not expose a kernel's stage count): triton_jfa runs up
# to 3 forward stages, gluon_jfa triple-buffers K/V; 4 leaves room for a deeper production kernel.
PIPELINE_STAGES = 4
MAX_RERUNS = 1_000_000
MAX_LAPS = 1_000  # (the cases' lengths grow with it: 99,999,999,999 laps asked for more memory than exists)
# (query heads, KV heads, head dim, causal) of the stress cases: causal and not, GQA, D = 64 and 128
SHAPES = ((4, 4, 128, False), (4, 4, 128, True), (8, 2, 64, False), (8, 2, 64, True))
CPU_SHAPES = ((2, 2, 128, False), (2, 2, 128, True), (4, 2, 64, False), (4, 2, 64, True))
# The first shapes inside the capabilities that also get a case of many short sequences (the persistent loop's laps)
UNIT_CASES = 2
# Copies and matmuls of the noise kernel, queued per rerun on the side stream
NOISE_BYTES = 256 << 20
NOISE_MATMUL = 4096
NOISE_ITERATIONS = 8


@dataclass(frozen=True)
class StressOptions:
    """What a stress run does. ``reruns``: runs per case (None: :data:`DEFAULT_RERUNS` of the device); ``modes``:
    the perturbation modes asked for (a subset of :data:`MODES`); ``laps``: ring laps every case makes at least
    (None: :data:`DEFAULT_LAPS` of the device); ``stages``: the ring's assumed depth; ``seed``: the cases' inputs and
    the launch orders; ``backward``: judge dQ, dK, dV too where the kernel has a backward; ``timeout_s``: seconds one
    rerun of one case may take (the call, Triton's compiling in the first, and the judging) before it is a hang: the
    case's verdict becomes ``hang``, its case file (with a corpus) is marked so, and the process ends with the hang
    exit status (:func:`run_stress`); None: no limit.

    Raises:
        InvalidInput: reruns < 2 or above :data:`MAX_RERUNS`, an unknown or empty mode list, laps or stages < 1,
            timeout_s <= 0.
    """

    reruns: Optional[int] = None
    modes: tuple[str, ...] = MODES
    laps: Optional[int] = None
    stages: int = PIPELINE_STAGES
    seed: int = 0
    backward: bool = True
    timeout_s: Optional[float] = None

    def __post_init__(self) -> None:
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise InvalidInput(f"timeout_s={self.timeout_s} must be > 0 seconds (None: no limit), e.g. 600")
        if self.reruns is not None and not 2 <= self.reruns <= MAX_RERUNS:
            raise InvalidInput(f"reruns={self.reruns} must be in [2, {MAX_RERUNS}] (one run has nothing to compare "
                               f"with); e.g. 200, or 10000 to hunt a rare race")
        unknown = sorted(set(self.modes) - set(MODES))
        if unknown or not self.modes:
            raise InvalidInput(f"modes={list(self.modes)}: {'unknown ' + str(unknown) if unknown else 'none given'}; "
                               f"choose from {MODES}")
        for name in ("laps", "stages"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= MAX_LAPS:
                raise InvalidInput(f"{name}={value} must be in [1, {MAX_LAPS}]")

    def reruns_on(self, device: torch.device) -> int:
        return self.reruns if self.reruns is not None else DEFAULT_RERUNS["cuda" if device.type == "cuda" else "cpu"]

    def laps_on(self, device: torch.device) -> int:
        return self.laps if self.laps is not None else DEFAULT_LAPS["cuda" if device.type == "cuda" else "cpu"]


# ----------------------------------------------------------------------------- cases


def stress_length(tiles: TileSizes, laps: int, stages: int = PIPELINE_STAGES) -> int:
    """Tokens a sequence needs so that one query tile streams ``laps * stages`` KV tiles and one KV tile streams as
    many query tiles: ``max(block_m, block_n) * stages * laps`` (an int)."""
    return max(tiles.block_m, tiles.block_n) * stages * laps


def pipeline_laps(case: Case, tiles: TileSizes, stages: int = PIPELINE_STAGES) -> float:
    """Ring laps of the shortest pipeline loop ``case`` makes (a float; 0 for a case with no score): per sequence,
    the most KV tiles one query tile streams (forward, dQ) and the most query tiles one KV tile streams (dK, dV),
    the smaller of the two, divided by ``stages``; the minimum over sequences with rows and keys. The visible keys
    are the contract's (:func:`~jfa_verify.core.contract.key_range`)."""
    if case.mode == "broadcast_q":
        raise InvalidInput("pipeline_laps: broadcast-Q cases are not stress cases; give a self or cross case")
    q_lengths = case.q_lengths if case.q_lengths is not None else case.kv_lengths
    laps = []
    for lq, lk in zip(q_lengths, case.kv_lengths):
        if lq == 0 or lk == 0:
            continue
        per_kv_tile = [0] * math.ceil(lk / tiles.block_n)
        most_kv = 0
        for t in range(math.ceil(lq / tiles.block_m)):
            first, last = t * tiles.block_m, min(lq, (t + 1) * tiles.block_m) - 1
            lo = key_range(first, lq, lk, case.causal, case.causal_alignment, case.window)[0]
            hi = key_range(last, lq, lk, case.causal, case.causal_alignment, case.window)[1]
            if hi <= lo:
                continue
            span = range(lo // tiles.block_n, math.ceil(hi / tiles.block_n))
            most_kv = max(most_kv, len(span))
            for j in span:
                per_kv_tile[j] += 1
        laps.append(min(most_kv, max(per_kv_tile)) / stages)
    return min(laps) if laps else 0.0


def program_laps(case: Case, tiles: TileSizes, programs: int) -> float:
    """Work units each of ``programs`` persistent programs runs, on average, in the pass with the fewest (a float):
    the forward's and dQ's units are query tiles, dK/dV's are KV tiles (``ceil(length / block)`` per sequence, the
    visible keys aside), the smaller total divided by ``programs``.

    Raises:
        InvalidInput: ``programs`` < 1.
    """
    if programs < 1:
        raise InvalidInput(f"programs={programs} must be >= 1")
    q_lengths = case.q_lengths if case.q_lengths is not None else case.kv_lengths
    q_units = sum(math.ceil(n / tiles.block_m) for n in q_lengths)
    kv_units = sum(math.ceil(n / tiles.block_n) for n in case.kv_lengths)
    return min(q_units, kv_units) / programs


def unit_lengths(tiles: TileSizes, laps: int, programs: int) -> tuple[int, ...]:
    """Self-attention lengths for :func:`program_laps` >= ``laps`` over ``programs`` programs: the pattern ``block``,
    ``2 * block - 1``, ``block // 2 + 1``, ``3 * block + 1`` (``block``: the larger tile side; 1, 2, 1 and 4 tiles a
    side: full, ragged and one-tile-longer units) repeated as often as needed."""
    block = max(tiles.block_m, tiles.block_n)
    pattern = (block, 2 * block - 1, block // 2 + 1, 3 * block + 1)
    # each repeat gives at least 8 units on the larger side's tiles, at least as many on the smaller side's
    return pattern * math.ceil(laps * programs / 8)


def _dtype_for(kernel: Kernel) -> str:
    names = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        if dtype in kernel.capabilities.dtypes:
            return names[dtype]
    raise InvalidInput(f"kernel {kernel.name!r} declares none of bfloat16, float16, float32 "
                       f"(dtypes={kernel.capabilities.dtypes}): the stress check has no dtype to run it in")


def _shape_reasons(kernel: Kernel, device: torch.device, dtype: str):
    """``((heads_q, heads_kv, head_dim, causal), reason)`` for each stress shape of ``device``; ``reason`` is None for
    a shape inside the kernel's capabilities."""
    for heads_q, heads_kv, head_dim, causal in (SHAPES if device.type == "cuda" else CPU_SHAPES):
        shape = JaggedProblem.of_shape(head_dim, None, getattr(torch, dtype), device, num_heads_q=heads_q,
                                       num_heads_kv=heads_kv, causal=causal)
        yield (heads_q, heads_kv, head_dim, causal), kernel.unsupported_reason(shape)


def unsupported_shapes(kernel: Kernel, device: "torch.device | str") -> dict[str, str]:
    """``{shape: reason}`` for the stress shapes of ``device`` that ``kernel`` declares unsupported (what a stress
    run that found no case to run names), e.g. ``{"H=8/8 D=128 causal": "needs a CUDA device"}``."""
    device = torch.device(device)
    return {f"H={hq}/{hkv} D={d} {'causal' if c else 'full'}": why
            for (hq, hkv, d, c), why in _shape_reasons(kernel, device, _dtype_for(kernel)) if why is not None}


def stress_cases(kernel: Kernel, device: "torch.device | str", *, laps: int, stages: int = PIPELINE_STAGES,
                 seed: int = 0, programs: Optional[int] = None) -> list[Case]:
    """The stress cases for ``kernel`` on ``device``: one per shape of :data:`SHAPES` (:data:`CPU_SHAPES` on the
    CPU) inside the kernel's capabilities, each of three self-attention sequences sized from the kernel's tiles for
    that shape (:func:`stress_length`): ``L``, ``L + block_n - 1`` (a ragged last KV tile) and ``L // 2 + 1``
    (half as many laps, a ragged last query tile), in the kernel's preferred dtype (bfloat16 first); then, for the
    first :data:`UNIT_CASES` of those shapes (D = 128, causal and not), one case of many short sequences
    (:func:`unit_lengths`) giving each of ``programs`` persistent programs (None: the device's SMs) ``laps`` work
    units or more.

    Raises:
        InvalidInput: ``laps``, ``stages`` or ``programs`` < 1, or a kernel with no float dtype.
    """
    if not 1 <= laps <= MAX_LAPS or not 1 <= stages <= MAX_LAPS or (programs is not None and programs < 1):
        raise InvalidInput(f"laps={laps}, stages={stages} must be in [1, {MAX_LAPS}] and programs={programs} >= 1")
    device = torch.device(device)
    dtype = _dtype_for(kernel)
    if programs is None:
        from jfa_verify.scheduling.planning import default_num_sms

        programs = default_num_sms(device)
    cases, unit_cases = [], []
    for (heads_q, heads_kv, head_dim, causal), reason in _shape_reasons(kernel, device, dtype):
        if reason is not None:
            continue
        tiles = tiles_for_shape(kernel, head_dim, dtype=getattr(torch, dtype), device_type=device.type)
        n = stress_length(tiles, 2 * laps, stages)  # the half-length sequence still makes `laps` laps
        lengths = (n, n + tiles.block_n - 1, n // 2 + 1)
        name = (f"stress-{'causal' if causal else 'full'}-h{heads_q}x{heads_kv}-d{head_dim}-"
                f"{'-'.join(map(str, lengths))}")
        cases.append(Case(kv_lengths=lengths, num_heads_q=heads_q, num_heads_kv=heads_kv, head_dim=head_dim,
                          dtype=dtype, causal=causal, seed=seed, instrument=False, name=name))
        if len(unit_cases) < UNIT_CASES:
            units = unit_lengths(tiles, laps, programs)
            unit_cases.append(Case(
                kv_lengths=units, num_heads_q=heads_q, num_heads_kv=heads_kv, head_dim=head_dim, dtype=dtype,
                causal=causal, seed=seed, instrument=False,
                name=(f"stress-units-{'causal' if causal else 'full'}-h{heads_q}x{heads_kv}-d{head_dim}-"
                      f"{len(units)}seqs-{programs}programs")))
    return cases + unit_cases


# ----------------------------------------------------------------------------- perturbation


@dataclass(frozen=True)
class Round:
    """One rerun of every case: ``index`` (the rerun index), its perturbation ``mode``, the ``order`` the cases run
    in (indices into the case list) and, for ``fewer_sms``, the ``programs`` the persistent grid is capped to."""

    index: int
    mode: str
    order: tuple[int, ...]
    programs: Optional[int] = None


def program_caps(sm_count: int) -> tuple[int, ...]:
    """The program counts ``fewer_sms`` cycles through for a device of ``sm_count`` SMs: about a half, a third and a
    seventh of them (at least 1, distinct, largest first)."""
    return tuple(sorted({max(1, sm_count // d) for d in (2, 3, 7)}, reverse=True))


def plan_rounds(reruns: int, n_cases: int, modes: Sequence[str], *, seed: int = 0,
                sm_count: Optional[int] = None) -> list[Round]:
    """The rounds of a stress run: rerun 0 is ``plain`` in the cases' order (the bit-comparison baseline); reruns
    1.. cycle through ``modes`` (the available ones), the perturbed ones first and ``plain`` (when asked for) last. A
    ``launch_order`` round
    runs the cases in a seeded permutation that differs from the list's order (when there are two or more); a
    ``fewer_sms`` round caps the programs at the next of :func:`program_caps` of ``sm_count``.

    Raises:
        InvalidInput: ``reruns < 1``, ``n_cases < 0``, an unknown mode, or ``fewer_sms`` without ``sm_count``.
    """
    if reruns < 1 or n_cases < 0:
        raise InvalidInput(f"reruns={reruns} must be >= 1 and n_cases={n_cases} >= 0")
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise InvalidInput(f"modes {unknown} unknown; choose from {MODES}")
    if "fewer_sms" in modes and not sm_count:
        raise InvalidInput(f"mode fewer_sms needs sm_count (the device's SMs), got {sm_count!r}")
    # the perturbed modes first (rerun 0 is already plain), plain last
    cycle = [m for m in modes if m != "plain"] + [m for m in modes if m == "plain"] or ["plain"]
    caps = program_caps(sm_count) if sm_count else ()
    identity = tuple(range(n_cases))
    rounds, capped = [Round(0, "plain", identity)], 0
    for i in range(1, reruns):
        mode = cycle[(i - 1) % len(cycle)]
        order, programs = identity, None
        if mode == "launch_order" and n_cases > 1:
            perm = list(identity)
            random.Random(seed * 1_000_003 + i).shuffle(perm)
            order = tuple(perm) if tuple(perm) != identity else identity[::-1]
        if mode == "fewer_sms":
            programs, capped = caps[capped % len(caps)], capped + 1
        rounds.append(Round(i, mode, order, programs))
    return rounds


def mode_reasons(kernel: Kernel, device: torch.device, modes: Sequence[str], n_cases: int) -> dict[str, str]:
    """Why each mode of ``modes`` cannot run here (mode -> reason); the modes absent from the result run.
    ``fewer_sms`` loads the kernel to ask its implementation for ``with_programs``."""
    reasons = {}
    if "noise" in modes and device.type != "cuda":
        reasons["noise"] = (f"needs a CUDA device (the noise kernel runs on a second CUDA stream beside the kernel); "
                            f"this run is on {device.type}")
    if "launch_order" in modes and n_cases < 2:
        reasons["launch_order"] = f"{n_cases} case(s) inside the kernel's capabilities: no other order to launch"
    if "fewer_sms" in modes:
        impl = kernel.impl
        if not callable(getattr(impl, "with_programs", None)):
            reasons["fewer_sms"] = (f"the kernel protocol gives a caller no way to cap a kernel's persistent programs, "
                                    f"and {kernel.name}'s implementation ({type(impl).__name__}) offers no "
                                    f"with_programs(n) to do it")
        elif not runs_persistent(kernel):
            reasons["fewer_sms"] = f"{kernel.name} runs no persistent grid (with_programs(n) returned None)"
    return reasons


def runs_persistent(kernel: Kernel) -> bool:
    """Whether ``kernel`` says it runs a persistent grid: its implementation offers ``with_programs(n)`` and that
    gives a capped copy (None: one tile per program). A kernel that offers no ``with_programs`` is not known to."""
    with_programs = getattr(kernel.impl, "with_programs", None)
    return callable(with_programs) and with_programs(1) is not None


class NoiseKernel:
    """A bandwidth- and SM-hungry load on a second CUDA stream, queued before each rerun so that it runs beside
    the kernel under test: :data:`NOISE_ITERATIONS` times a copy of :data:`NOISE_BYTES` bytes and a
    :data:`NOISE_MATMUL`-square bfloat16 matmul. A context manager (the buffers live inside it).

    Raises:
        InvalidInput: ``device`` is not a CUDA device.
    """

    def __init__(self, device: torch.device, *, nbytes: int = NOISE_BYTES, size: int = NOISE_MATMUL,
                 iterations: int = NOISE_ITERATIONS):
        if device.type != "cuda":
            raise InvalidInput(f"NoiseKernel needs a CUDA device, got device={device}")
        self.device, self.nbytes, self.size, self.iterations = device, nbytes, size, iterations
        self.stream = None

    def __enter__(self) -> "NoiseKernel":
        """Make the side stream and the buffers.

        Raises:
            DeviceOutOfMemory: the device had no memory left for them (other processes hold it; seen on an H100
                shared by eight jfa-verify processes, 2026-12-06, where it surfaced as an internal error).
        """
        try:
            self.stream = torch.cuda.Stream(self.device)  # PyTorch's pool streams do not synchronize with stream 0
            with torch.cuda.stream(self.stream):
                self.src = torch.empty(self.nbytes, dtype=torch.uint8, device=self.device).fill_(1)
                self.dst = torch.empty_like(self.src)
                self.a = torch.randn(self.size, self.size, dtype=torch.bfloat16, device=self.device)
                self.c = torch.empty_like(self.a)
        except RuntimeError as e:  # (torch.OutOfMemoryError, or AcceleratorError when the context cannot start)
            self.stream = self.src = self.dst = self.a = self.c = None
            if "out of memory" not in str(e).lower():
                raise
            raise DeviceOutOfMemory(
                f"the stress check's noise kernel could not get its {self.nbytes / 2**20:.0f} MiB and side stream on "
                f"{self.device}: {str(e).splitlines()[0]}. Other processes hold the device's memory: run fewer at "
                f"once, or leave the noise mode out (--modes plain fewer_sms launch_order)") from e
        return self

    def burst(self) -> None:
        """Queue one burst on the side stream (returns at once; the work runs beside what follows)."""
        with torch.cuda.stream(self.stream):
            for _ in range(self.iterations):
                self.dst.copy_(self.src)
                torch.matmul(self.a, self.a, out=self.c)

    def settle(self) -> None:
        """Wait for the queued bursts (between reruns, so that the queue never grows)."""
        self.stream.synchronize()

    def __exit__(self, *exc) -> None:
        if self.stream is not None:
            self.settle()
        self.stream = self.src = self.dst = self.a = self.c = None


# ----------------------------------------------------------------------------- verdicts


@dataclass
class StressVerdict:
    """One case's stress verdict. ``status``: pass, fail, error, unsupported, or interrupted (a stop ended its reruns
    before any failed: no verdict); ``reruns``: the reruns made;
    ``first_difference`` and ``differing_reruns``: the bit comparison (deterministic kernels);
    ``failures``: reruns whose judged outputs failed (``"rerun i (mode): ..."``); ``message``: an error or why
    unsupported."""

    case: Case
    kernel: str
    deterministic: bool
    laps: float
    units: Optional[float] = 0.0  # work units a persistent program runs (program_laps on the device's SMs);
    # None for a kernel that runs no persistent grid (runs_persistent)
    status: str = "pass"
    reruns: int = 0
    first_difference: Optional[RerunDifference] = None
    differing_reruns: int = 0
    failures: list[str] = field(default_factory=list)
    first_failing_rerun: Optional[int] = None
    message: str = ""
    reproducer: Optional[str] = None  # its case file, kept when it failed (run_stress with a corpus)
    reruns_by_mode: dict = field(default_factory=dict)  # mode -> reruns made (rerun 0, the plain baseline, included)
    differing_by_mode: dict = field(default_factory=dict)  # mode -> reruns that differed bit-wise from rerun 0

    def by_mode(self) -> str:
        """Which modes' reruns differed, of how many (``"launch_order 1 of 1, plain 0 of 3"``; plain's baseline not
        counted), and, when no plain rerun besides the baseline ran, that the mode is not told apart from plain
        nondeterminism (a new user's nondeterministic kernel read as "fails under launch_order")."""
        plain = self.reruns_by_mode.get("plain", 0) - 1
        parts = [f"{m} {self.differing_by_mode.get(m, 0)} of {n - (m == 'plain')}"
                 for m, n in self.reruns_by_mode.items() if n - (m == "plain") > 0]
        text = "by mode: " + ", ".join(parts)
        if plain < 1 and self.differing_reruns:
            text += ("; no plain rerun ran besides the baseline, so this does not tell the modes from plain "
                     "nondeterminism (more --reruns with plain among --modes, or `jfa-verify gate --checks "
                     "determinism`, reruns without perturbation)")
        return text

    def result(self, plugins: tuple[str, ...] = ()):
        """This verdict as a :class:`~jfa_verify.run.runner.CaseResult` (what its case file keeps): the first bit
        difference (kind ``determinism``) and the failing reruns (kind ``rerun``) as findings."""
        differences = () if self.first_difference is None else (
            f"{self.first_difference.describe()}; {self.differing_reruns} of {self.reruns} rerun(s) differ "
            f"({self.by_mode()})",)
        result = rerun_result(self.case, self.kernel, self.status, differences=differences, failures=self.failures,
                              message=self.message, plugins=plugins)
        result.reproducer = self.reproducer
        return result

    def record(self, planned: int, options: "StressOptions") -> dict:
        """What a case file keeps under :data:`STRESS_KEY`: the reruns planned, the modes asked for, the seed, and
        what differed or failed."""
        return {"reruns": planned, "reruns_run": self.reruns, "modes": list(options.modes), "seed": options.seed,
                "backward": options.backward, "laps": options.laps, "stages": options.stages,
                "deterministic": self.deterministic, "differing_reruns": self.differing_reruns,
                "first_failing_rerun": self.first_failing_rerun, "failures": self.failures[:10],
                "first_difference": None if self.first_difference is None else self.first_difference.to_dict()}

    def describe(self) -> str:
        head = (f"{self.case.name}: {self.status}, {self.reruns} rerun(s), {self.laps:g} ring laps"
                + ("" if self.units is None else f", {self.units:.3g} units a program"))
        lines = [head]
        if self.first_difference is not None:
            lines.append(f"  {self.differing_reruns} rerun(s) differ bit-wise ({self.by_mode()}); first: "
                         f"{self.first_difference.describe()}")
        lines += [f"  {f}" for f in self.failures[:3]]
        if self.message:
            lines.append(f"  {self.message}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"case": self.case.to_dict(), "name": self.case.name, "status": self.status, "reruns": self.reruns,
                "laps": self.laps, "units_per_program": self.units, "deterministic": self.deterministic,
                "differing_reruns": self.differing_reruns, "reruns_by_mode": dict(self.reruns_by_mode),
                "differing_by_mode": dict(self.differing_by_mode),
                "first_difference": (None if self.first_difference is None
                                     else dataclasses.asdict(self.first_difference)),
                "first_failing_rerun": self.first_failing_rerun, "failures": self.failures, "message": self.message}


@dataclass
class StressReport:
    """A stress run of one kernel: the verdict per case, the reruns each mode ran (``modes_run``) and the modes
    skipped with their reasons (``modes_skipped``)."""

    kernel: str
    device: str
    reruns: int
    verdicts: list[StressVerdict] = field(default_factory=list)
    modes_run: dict[str, int] = field(default_factory=dict)
    modes_skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    interrupted: bool = False

    @property
    def status(self) -> str:
        """``hang`` > ``error`` > ``fail`` > ``interrupted`` (a stop cut reruns short, nothing failed) > ``pass``;
        ``skip`` when no case was inside the kernel's capabilities."""
        statuses = {v.status for v in self.verdicts}
        for s in ("hang", "error", "fail", "interrupted"):
            if s in statuses:
                return s
        return "pass" if "pass" in statuses else "skip"

    def mode_lines(self) -> list[str]:
        return ([f"mode {m}: {n} rerun(s)" for m, n in self.modes_run.items()]
                + [f"mode {m}: skipped: {why}" for m, why in self.modes_skipped.items()])

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "device": self.device, "status": self.status, "reruns": self.reruns,
                "seconds": self.seconds, "interrupted": self.interrupted, "modes_run": self.modes_run,
                "modes_skipped": self.modes_skipped,
                "cases": [v.to_dict() for v in self.verdicts]}


# ----------------------------------------------------------------------------- the run


@dataclass
class _State:
    verdict: StressVerdict
    problem: JaggedProblem = None
    tensors: object = None
    tiles: Optional[TileSizes] = None
    backward: bool = False
    ref: dict = None
    sdpa: dict = None
    first: Optional[dict] = None
    done: bool = False


def _prepare(case: Case, kernel: Kernel, device: torch.device, options: StressOptions) -> _State:
    tiles = tiles_for_shape(kernel, case.head_dim, case.head_dim_v, case.torch_dtype, device.type)
    from jfa_verify.scheduling.planning import default_num_sms

    state = _State(StressVerdict(case, kernel.name, kernel.capabilities.deterministic,
                                 pipeline_laps(case, tiles, options.stages),
                                 program_laps(case, tiles, default_num_sms(device))))
    state.tensors = case.materialize(device)
    state.problem = case.problem(state.tensors)
    reason = kernel.unsupported_reason(state.problem)
    if reason is not None:
        state.verdict.status, state.verdict.message, state.done = "unsupported", reason, True
        return state
    state.tiles = kernel.tile_sizes(state.problem)
    state.backward = options.backward and kernel.capabilities.backward_reason(state.problem) is None
    t = state.tensors
    do = t.do if state.backward else None
    state.ref = reference_attention(state.problem, t.q, t.k, t.v, do=do)
    state.sdpa = padded_sdpa_attention(state.problem, t.q, t.k, t.v, do=do)
    return state


def _rerun(state: _State, kernel: Kernel, rnd: Round, settings: RunSettings) -> None:
    """One rerun of one case: call, bit comparison with rerun 0 (deterministic kernels), judging."""
    v = state.verdict
    try:
        got = call_kernel(kernel, state.problem, state.tensors, v.case, backward=state.backward).outputs
        got = {n: t.detach().clone() for n, t in got.items() if isinstance(t, torch.Tensor)}
    except Exception as e:  # the kernel under test may fail in any way
        # a kernel that refuses the case at its first call declares it unsupported, as `run` reads it; a refusal
        # after a rerun ran is the kernel's error
        refused = v.reruns == 0 and isinstance(e, (KernelUnavailable, UnsupportedCase))
        v.status, state.done = ("unsupported" if refused else "error"), True
        v.message = (f"kernel {kernel.name!r}: {type(e).__name__}: {e}" if refused
                     else f"rerun {rnd.index} (mode {rnd.mode}): {type(e).__name__}: {e}")
        return
    v.reruns += 1
    v.reruns_by_mode[rnd.mode] = v.reruns_by_mode.get(rnd.mode, 0) + 1
    judge = not v.deterministic or state.first is None
    if v.deterministic and state.first is not None:
        differs = False
        for name, before in state.first.items():
            index = first_difference(before, got[name])
            if index is None:
                continue
            differs = True
            if v.first_difference is None:
                v.first_difference = _difference(state, rnd, name, index, before, got[name])
            break
        if differs:
            v.differing_reruns += 1
            v.differing_by_mode[rnd.mode] = v.differing_by_mode.get(rnd.mode, 0) + 1
            v.status = "fail"
            judge = v.differing_reruns == 1  # the first differing rerun is judged too (is it also wrong?)
    if state.first is None:
        state.first = got
    if judge:
        result = judge_outputs(v.case, kernel, state.problem, got, state.ref, state.sdpa, settings, tiles=state.tiles)
        if result.status != "pass":
            v.status = "fail"
            lines = [line.strip() for line in result.explain().splitlines()[1:] if line.strip()]
            v.failures.append(f"rerun {rnd.index} (mode {rnd.mode}): " + "; ".join(lines[:4]))
            if v.first_failing_rerun is None:
                v.first_failing_rerun = rnd.index


def _hung(report: "StressReport", state: _State, rnd: Round, options: StressOptions, path, on_stop,
          t0: float) -> None:
    """The watchdog's end of a stress run: the hung case's verdict, its file, the caller's report, a line naming
    the case, then the process's end (a hung kernel holds the thread that called it)."""
    from jfa_verify.run.corpus import TIMEOUT_EXIT_CODE, mark_hang

    v = state.verdict
    v.status = "hang"
    v.message = (f"rerun {rnd.index} (mode {rnd.mode}) had no result after {options.timeout_s:g} s (--timeout); "
                 "the process ended")
    report.seconds = time.perf_counter() - t0
    try:
        if path is not None:
            v.reproducer = str(path)
            mark_hang(path, v.message)
        on_stop(report)
    finally:
        where = f"; its case file: {path}" if path is not None else ""
        print(f"[HANG] stress case {v.case.name}: {v.message}{where}. Exit {TIMEOUT_EXIT_CODE}.", file=sys.stderr,
              flush=True)
        os._exit(declare_exit(TIMEOUT_EXIT_CODE))


def _difference(state: _State, rnd: Round, name: str, index: tuple, before: torch.Tensor,
                after: torch.Tensor) -> RerunDifference:
    return rerun_difference(state.problem, state.tiles, rnd.index, rnd.mode, name, index, before, after)


def run_stress(kernel: Kernel, device: "torch.device | str", options: StressOptions = StressOptions(), *,
               cases: Optional[Sequence[Case]] = None, settings: Optional[RunSettings] = None,
               log: Callable[[str], None] = lambda line: None, corpus=None,
               on_stop: Callable[[StressReport], None] = lambda report: None) -> StressReport:
    """Rerun the stress cases (``cases``, default :func:`stress_cases`) through ``kernel`` on ``device`` under the
    perturbation modes of ``options`` and return the :class:`StressReport` (findings are verdicts, never raised).

    ``settings``: the run's budgets and accepted conventions (None: the defaults). ``log``: a progress line per
    hundred rounds and per case that fails. A case stops rerunning at its first kernel exception (``error``).
    ``corpus``: a :class:`~jfa_verify.run.corpus.Corpus` (the gate's reproducers): each case's file is written before
    the reruns start (so a crash of this process leaves it ``running``) and kept for a failing verdict, with
    :data:`STRESS_KEY` saying how it was rerun and what differed (``verdict.reproducer``); a pass leaves none.

    A rerun still running after ``options.timeout_s`` is a hang, and a hung kernel cannot be interrupted from Python:
    its verdict becomes ``hang``, its case file (with ``corpus``) is marked ``hang`` (the other cases' files are kept
    when they failed before it and removed otherwise, as on a stop), ``on_stop(report)`` is called
    (the caller writes what it keeps, e.g. the JSON report), a ``[HANG]`` line names the case, the rerun and its
    mode on stderr, and the process ends with exit status :data:`~jfa_verify.run.corpus.TIMEOUT_EXIT_CODE`. On
    Ctrl-C (KeyboardInterrupt) ``report.interrupted`` is set, ``on_stop(report)`` is called with the verdicts so
    far, and the interrupt propagates.

    Raises:
        InvalidInput: bad options (:class:`StressOptions`), a case that is not valid.
    """
    device = torch.device(device)
    settings = settings or RunSettings()
    t0 = time.perf_counter()
    reruns = options.reruns_on(device)
    cases = list(cases) if cases is not None else stress_cases(kernel, device, laps=options.laps_on(device),
                                                               stages=options.stages, seed=options.seed)
    report = StressReport(kernel.name, str(device), reruns)
    states = [_prepare(c, kernel, device, options) for c in cases]
    report.verdicts = [s.verdict for s in states]
    live = [s for s in states if not s.done]
    if not live:
        report.seconds = time.perf_counter() - t0
        return report
    report.modes_skipped = mode_reasons(kernel, device, options.modes, len(live))
    if not runs_persistent(kernel):  # (units a program means nothing without persistent programs)
        for v in report.verdicts:
            v.units = None
    modes = [m for m in options.modes if m not in report.modes_skipped]
    sm_count = None
    if "fewer_sms" in modes:
        from jfa_verify.scheduling.planning import default_num_sms

        sm_count = default_num_sms(device)
    with contextlib.ExitStack() as files:
        paths = {}
        if corpus is not None:
            for state in live:
                paths[id(state)] = files.enter_context(corpus.guard(
                    state.verdict.case, kernel.name, str(device), None, settings.plugins,
                    {STRESS_KEY: {"reruns": reruns, "modes": list(options.modes), "seed": options.seed}}))
        def settle(cut_short: "list[_State]", keep_failures: bool) -> None:
            """The files of cases an end cut short: a failure found before it is its verdict (kept); a case with
            no verdict leaves no file (a ``running`` file would be offered for replay as if its process died)."""
            for state in cut_short:
                if id(state) not in paths:
                    continue
                if keep_failures and state.verdict.status in ("fail", "error"):
                    _keep(corpus, paths[id(state)], state.verdict, reruns, options, settings)
                else:
                    corpus.discard(paths[id(state)])

        def hung(state: _State, rnd: Round) -> None:
            settle([s for s in live if s is not state], keep_failures=True)
            _hung(report, state, rnd, options, paths.get(id(state)), on_stop, t0)

        try:
            _run_rounds(kernel, device, options, settings, report, live, reruns, modes, sm_count, log, hung)
        except BaseException as e:  # Ctrl-C, or the framework's own failure
            stopped = isinstance(e, KeyboardInterrupt)
            settle(live, keep_failures=stopped)
            if stopped:  # the reruns so far are the caller's to keep
                report.interrupted, report.seconds = True, time.perf_counter() - t0
                for state in live:  # (a case the stop cut short has no verdict: "pass, 0 rerun(s)" said it passed)
                    if state.verdict.status == "pass":
                        state.verdict.status = "interrupted"
                        state.verdict.message = (f"interrupted after {state.verdict.reruns} of {reruns} rerun(s): "
                                                 "no verdict (a failure found before the stop would be its verdict)")
                on_stop(report)
            raise
        for state in live:
            if id(state) in paths:
                _keep(corpus, paths[id(state)], state.verdict, reruns, options, settings)
    enough = 1 + sum(m != "plain" for m in modes)
    for mode in modes:  # (too few reruns for every mode: the report names the ones none reached)
        if mode not in report.modes_run:
            report.modes_skipped[mode] = (f"no rerun left for it: {reruns} rerun(s) (rerun 0 plain, then the modes "
                                          f"in turn) ran out first; --reruns {enough} reaches every mode")
    report.seconds = time.perf_counter() - t0
    return report


def _keep(corpus, path, v: StressVerdict, reruns: int, options: StressOptions, settings: RunSettings) -> None:
    """Record ``v`` in its case file ``path``: kept with how it was rerun when it failed, removed when it passed."""
    result = v.result(settings.plugins)
    if result.failed:
        result.reproducer = str(path)  # (the replay command its file's verdict holds)
    saved = corpus.record(path, result)
    if saved:
        corpus.update(saved, **{STRESS_KEY: v.record(reruns, options)})
    v.reproducer = str(saved) if saved else None


def _run_rounds(kernel: Kernel, device: torch.device, options: StressOptions, settings: RunSettings,
                report: StressReport, live: list, reruns: int, modes: list, sm_count: Optional[int], log,
                on_hang: Callable[["_State", Round], None]) -> None:
    """:func:`run_stress`'s rounds over the ``live`` cases (verdicts in their states, modes counted in ``report``)."""
    capped: dict[int, Kernel] = {}
    noise = NoiseKernel(device) if "noise" in modes else None
    with contextlib.ExitStack() as entered:  # (left only if entered: a failed start has nothing to settle)
        if noise is not None:
            entered.enter_context(noise)
        for rnd in plan_rounds(reruns, len(live), modes, seed=options.seed, sm_count=sm_count):
            report.modes_run[rnd.mode] = report.modes_run.get(rnd.mode, 0) + 1
            runner = kernel
            if rnd.programs is not None:
                if rnd.programs not in capped:
                    capped[rnd.programs] = dataclasses.replace(kernel, _impl=kernel.impl.with_programs(rnd.programs))
                runner = capped[rnd.programs]
            for i in rnd.order:
                state = live[i]
                if state.done:
                    continue
                if rnd.mode == "noise":
                    noise.burst()
                failed = state.verdict.status
                with watchdog(options.timeout_s, lambda: on_hang(state, rnd)):
                    _rerun(state, runner, rnd, settings)
                if noise is not None and rnd.mode == "noise":
                    noise.settle()
                if state.verdict.status != failed:
                    log(f"  {state.verdict.case.name}: {state.verdict.status} at rerun {rnd.index} (mode {rnd.mode})")
            if rnd.index and rnd.index % 100 == 0:
                log(f"  {rnd.index} of {reruns} reruns done")
