"""Plugin file registering planted kernels for the stress check (:mod:`jfa_verify.checks.stress`).

Plain torch, forward only: each computes the float64 reference rounded to the input dtype, and
* ``stress-exact`` (deterministic) does nothing else: it passes;
* ``stress-rare-race`` (declares itself deterministic) flips the lowest bit of one element of O on one call in
  :data:`RATE` (what a race seen rarely does: a 1-ulp change, within every budget, visible only bit for bit);
* ``stress-noisy`` (declares itself non-deterministic) adds run-to-run noise far inside the budget: it passes;
* ``stress-hang`` (deterministic) flips the lowest bit of O's first element on the call before :data:`HANG_AT`
  (so one case has failed before the hang) and never returns from its call number :data:`HANG_AT` (a deadlocked
  pipeline).
Each implementation's ``log`` (shared with its ``with_programs(n)`` copies) counts its calls (``calls``) and
records the calls it perturbed (``perturbed``) and the program caps asked for (``programs``).
"""

import torch

from jfa_verify import Capabilities, TileSizes, register_kernel, validate_inputs
from jfa_verify.checks.stress import CPU_SHAPES, UNIT_CASES
from jfa_verify.oracles import reference_attention

RATE = 20  # stress-rare-race perturbs one call in RATE
FIRST = 13  # ... the calls FIRST, FIRST + RATE, ... (counted from 0)
# stress-hang's call that never returns (counted from 0): rerun 1 of the second case, after rerun 0 of every case
HANG_AT = len(CPU_SHAPES) + UNIT_CASES + 1
SPOT = (1, 1, 40)  # ... at (sequence, head, token) of O
TILES = TileSizes(32, 16)
DETERMINISTIC = Capabilities(backward=False, dtypes=(torch.float32, torch.bfloat16))
NONDETERMINISTIC = Capabilities(backward=False, dtypes=(torch.float32, torch.bfloat16), deterministic=False)


class Log:
    """What the calls of one kernel (and of its capped copies) did."""

    def __init__(self):
        self.calls, self.perturbed, self.programs = 0, [], []


class Planted:
    """The contract callable; ``mistake(log, o, lse, q_offsets)`` makes the planted change."""

    def __init__(self, mistake, log=None):
        self.mistake, self.log = mistake, log or Log()

    def with_programs(self, n: int) -> "Planted":
        self.log.programs.append(n)
        return Planted(self.mistake, self.log)

    def __call__(self, q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale)
        ref = reference_attention(problem, q.detach(), k.detach(), v.detach())
        o, lse = ref["o"].to(q.dtype), ref["lse"].to(torch.float32)
        o, lse = self.mistake(self.log, o, lse, q_offsets)
        self.log.calls += 1
        return o, lse


def _exact(log, o, lse, q_offsets):
    return o, lse


def _rare_race(log, o, lse, q_offsets):
    if log.calls % RATE == FIRST:
        log.perturbed.append(log.calls)
        b, h, t = SPOT
        row = int(q_offsets[b]) + t
        bits = o[row, h, :1].view(torch.int16 if o.element_size() == 2 else torch.int32)
        bits ^= 1  # the lowest mantissa bit: one ulp
    return o, lse


def _noisy(log, o, lse, q_offsets):
    # an atomic reduction in a varying order: results move by far less than an ulp of O's size from run to run
    return o + (torch.rand(o.shape, device=o.device) * 1e-30).to(o.dtype), lse + 1e-7 * torch.rand_like(lse)


def _hang(log, o, lse, q_offsets):
    if log.calls == HANG_AT - 1:  # rerun 1 of the case run first in its round: a 1-ulp change, seen bit for bit
        log.perturbed.append(log.calls)
        first = o.view(-1)[:1].view(torch.int16 if o.element_size() == 2 else torch.int32)
        first ^= 1
    if log.calls == HANG_AT:
        import time

        time.sleep(3600)  # as a deadlocked kernel: the call does not come back
    return o, lse


for _name, _mistake, _caps in (("stress-exact", _exact, DETERMINISTIC), ("stress-rare-race", _rare_race, DETERMINISTIC),
                               ("stress-noisy", _noisy, NONDETERMINISTIC), ("stress-hang", _hang, DETERMINISTIC)):
    register_kernel(_name, capabilities=_caps, tile_sizes=lambda problem: TILES)(lambda _m=_mistake: Planted(_m))
