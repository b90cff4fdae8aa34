"""Plugin file registering planted-bug kernels for the gate's memory and determinism checks.

Each is a plain-torch kernel that computes the right answer (the float64 reference rounded to the
input dtype, forward only) and then makes exactly one mistake of the kind the gate's extra checks
exist for; the correct one (``exact-ref``) passes every check.
"""

import torch

from jfa_verify import Capabilities, register_kernel, validate_inputs
from jfa_verify.oracles import reference_attention

FORWARD_ONLY = Capabilities(backward=False)


def _exact(q, k, v, q_offsets, k_offsets, causal, causal_alignment, sm_scale):
    problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                              sm_scale=sm_scale)
    ref = reference_attention(problem, q.detach(), k.detach(), v.detach())
    return ref["o"], ref["lse"]


def _kernel(mistake):
    def attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
        o64, lse64 = _exact(q, k, v, q_offsets, k_offsets, causal, causal_alignment, sm_scale)
        o = torch.empty(o64.shape, dtype=q.dtype, device=q.device)
        o.copy_(o64)
        lse = torch.empty(lse64.shape, dtype=torch.float32, device=q.device)
        lse.copy_(lse64)
        return mistake(o, lse)
    return attention


def _writes_past_the_end(o, lse):
    # a tile store whose mask lets one element past the last row through
    o.view(-1).as_strided((o.numel() + 1,), (1,))[o.numel()] = 0.0
    return o, lse


def _perturbs(o, lse):
    # an atomic reduction in a varying order: results move by a few ulps from run to run, within budget
    noise = torch.rand(o.shape, dtype=torch.float32, device=o.device) * 1e-30
    return o + noise.to(o.dtype), lse + 1e-7 * torch.rand_like(lse)


def _reads_uninitialized(o, lse):
    # a running max seeded from a fresh buffer: fmax ignores NaN, so the usual NaN poison hides it
    seed = torch.empty_like(lse)
    return o, torch.fmax(seed, lse) if lse.numel() else lse


def _wrong_everywhere(o, lse):
    # a plain wrong result (a scale applied twice), whatever memory holds: the suite's finding, no memory check's
    return o * 1.5, lse


for _name, _mistake in (("exact-ref", lambda o, lse: (o, lse)), ("writes-past-the-end", _writes_past_the_end),
                        ("nondeterministic", _perturbs), ("reads-uninitialized", _reads_uninitialized),
                        ("wrong-everywhere", _wrong_everywhere)):
    register_kernel(_name, capabilities=FORWARD_ONLY)(lambda _m=_mistake: _kernel(_m))
