"""A plugin kernel with FlashAttention-2 varlen's two known findings, in plain torch (float64 reference underneath):
it raises ``RuntimeError: CUDA error: invalid argument`` when every query sequence is empty, and returns
LSE = +inf for query rows that see no key (and declares that as the ``lse_plus_inf_empty_rows`` convention,
as the ``torch_fa2_varlen`` adapter does). Used by tests of campaigns and of the matrix on the CPU."""

import torch

from jfa_verify import Capabilities, register_kernel, validate_inputs
from jfa_verify.oracles import reference_attention


def fa2_like(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None,
             window=None):
    problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                              sm_scale=sm_scale, window=window)
    if sum(problem.q_lengths) == 0:
        raise RuntimeError("CUDA error: invalid argument")
    ref = reference_attention(problem, q.detach(), k.detach(), v.detach())
    lse = ref["lse"].float()
    lse = torch.where(torch.isneginf(lse), torch.full_like(lse, float("inf")), lse)
    return ref["o"].to(q.dtype), lse


register_kernel("fa2_like", capabilities=Capabilities(backward=False, conventions=("lse_plus_inf_empty_rows",),
                                                     masks=("none", "causal", "window", "causal+window")),
                description="test plugin: FA2 varlen's empty-batch error and +inf LSE")(lambda: fa2_like)
