"""Plugin file registering ``host-loop-nested_sdpa``: the ``nested_sdpa`` peer with a planted host slowdown.

Its call first loops over the batch in Python: each sequence attended alone, :data:`PASSES` times, each result
read back with ``.item()`` (a host round trip per sequence, the shape of a host planner that walks the
sequences), then makes the batched call whose outputs it returns. The outputs are right; only the time is
wrong, by several times the wrapped call's own (the cost grows with the batch and with the peer's own speed,
so the slowdown holds on a fast machine and a loaded one alike). The gate's performance check against
``--perf-peer nested_sdpa`` exists to catch it (``tests/test_gate.py``).
"""

import torch

from jfa_verify import register_kernel
from jfa_verify.kernels.nested_sdpa import CAPABILITIES
from jfa_verify.protocol.registry import get_kernel

PASSES = 3  # per-sequence calls in the planted loop, per sequence


def _with_host_loop(inner):
    def attention(q, k, v, q_offsets, k_offsets, **kwargs):
        qo, ko = q_offsets.tolist(), k_offsets.tolist()
        checksum = 0.0
        with torch.no_grad():
            for b in range(len(ko) - 1):  # the planted slowdown: a Python loop over the sequences
                rows, keys = slice(qo[b], qo[b + 1]), slice(ko[b], ko[b + 1])
                if rows.stop == rows.start or keys.stop == keys.start:
                    continue
                one_q = torch.tensor([0, rows.stop - rows.start], dtype=q_offsets.dtype, device=q.device)
                one_k = torch.tensor([0, keys.stop - keys.start], dtype=k_offsets.dtype, device=k.device)
                for _ in range(PASSES):
                    checksum += inner(q[rows], k[keys], v[keys], one_q, one_k, **kwargs).sum().item()
        return inner(q, k, v, q_offsets, k_offsets, **kwargs)
    return attention


@register_kernel("host-loop-nested_sdpa", capabilities=CAPABILITIES,
                 description="nested_sdpa with a planted Python loop over the sequences in its call path")
def load():
    return _with_host_loop(get_kernel("nested_sdpa").impl)
