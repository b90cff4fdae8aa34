"""Plugin kernels for the packing tests, in plain torch (the float64 reference underneath, rounded to the input
dtype; forward only): ``pack_exact`` is right; ``pack_long_rows`` is wrong on every sequence of more than 20 keys
(a bug one part of a pack can hold and the others not); ``pack_wide_batch`` is wrong on its last sequence when the
batch holds more than 6 sequences (a bug of the composition: no drawn case of at most 5 sequences has it);
``pack_detached`` declares a backward but returns O detached from q, k, v (every output right, the launch wrong as
a whole: no gradient reaches the inputs)."""

from jfa_verify import Capabilities, register_kernel, validate_inputs
from jfa_verify.oracles import reference_attention


def _attention(bug):
    def attend(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None,
               window=None):
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale, window=window)
        ref = reference_attention(problem, q.detach(), k.detach(), v.detach())
        o = ref["o"].clone()
        for b in bug(problem):
            rows = slice(problem.out_starts[b], problem.out_starts[b] + problem.q_lengths[b])
            o[rows] += 0.25
        return o.to(q.dtype), ref["lse"].float()
    return attend


CAPS = Capabilities(backward=False, masks=("none", "causal", "window", "causal+window"))
for name, bug in {
    "pack_exact": lambda p: [],
    "pack_long_rows": lambda p: [b for b in range(p.batch) if p.k_lengths[b] > 20],
    "pack_wide_batch": lambda p: [p.batch - 1] if p.batch > 6 and p.q_lengths[-1] else [],
}.items():
    register_kernel(name, capabilities=CAPS, description=f"test plugin ({name})")(lambda bug=bug: _attention(bug))


def _detached(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None, window=None):
    o, lse = _attention(lambda p: [])(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                      sm_scale=sm_scale, window=window)
    return o.detach(), lse


register_kernel("pack_detached", capabilities=Capabilities(masks=CAPS.masks),
                description="test plugin (pack_detached)")(lambda: _detached)
