"""A stand-in for Meta's TLX JFA in plain torch: the op's API and conventions, for CPU tests of the adapter.

Written here from the facts the issue lists (not from the kernel's code): ``tlx_jagged_flash_attention(
query=, key=, value=, query_offset=, key_offset=, max_seq_len_q=, max_seq_len_kv=, output_offset=None,
sm_scale=None, window_size=None, broadcast_q=False, cpu_query_offset=None, cpu_key_offset=None)`` returns
``(o, M)`` with ``M`` the LSE in **log2**, float32 ``[H, rows]``; int32 offsets, contiguous ``[T, H, D]``
inputs, head dim <= 128 with ``D == D_v``, 2-byte dtypes (asserted, as the kernel does); no causal mode;
a symmetric window ``|i - j| <= window_size``; GQA in the forward only (the backward asserts one group);
broadcast-Q takes ``query [L_q, H, D]`` with ``query_offset=[0, L_q]`` and writes sequence ``b``'s rows
of ``O [B * L_q, H, D]`` from ``output_offset[b]``; rows past ``max_seq_len_*`` are silently left unwritten
(truncation); with CPU offsets the host schedule uses them (as the load balancer does), so wrong CPU
copies give wrong rows; the backward requires a contiguous dO.

``PLANTED_BUG`` (a tests' knob): ``"natural_m"`` returns M in natural log, ``"window_off_by_one"`` uses
``|i - j| < w``. A test copies this file into a fake checkout (``tlx_jfa/src/...``) and edits the knob.
"""

import math

import torch

PLANTED_BUG = None


class _BackwardChecks(torch.autograd.Function):
    """Identity forward; the backward asserts what the kernel's backward asserts."""

    @staticmethod
    def forward(ctx, o, group):
        ctx.group = group
        return o.view_as(o)

    @staticmethod
    def backward(ctx, do):
        assert ctx.group == 1, "TLX JFA backward supports one query group only"
        assert do.is_contiguous(), "TLX JFA backward needs a contiguous dO"
        return do, None


def _attend(q, k, v, scale, window):
    """One sequence: ``q [Lq, H, D]``, ``k``/``v`` ``[Lk, H, D]`` -> ``(o [Lq, H, D] fp32, lse2 [H, Lq])``."""
    lq, lk = q.shape[0], k.shape[0]
    s = torch.einsum("ihd,jhd->hij", q.float(), k.float()) * scale
    i = torch.arange(lq)[:, None]
    j = torch.arange(lk)[None, :]
    mask = torch.ones(lq, lk, dtype=torch.bool)
    if window is not None:
        mask = (i - j).abs() < window if PLANTED_BUG == "window_off_by_one" else (i - j).abs() <= window
    has = mask.any(-1)  # [Lq]
    s = torch.where(mask & has[:, None], s, torch.zeros_like(s)).masked_fill(~mask & has[:, None], float("-inf"))
    lse = torch.logsumexp(s, -1)  # [H, Lq]
    p = torch.exp(s - lse[..., None]) * mask
    o = torch.einsum("hij,jhd->ihd", p, v.float()) * has[:, None, None]
    lse = torch.where(has, lse, torch.full_like(lse, float("-inf")))
    return o, lse if PLANTED_BUG == "natural_m" else lse / math.log(2.0)


def tlx_jagged_flash_attention(query, key, value, query_offset, key_offset, max_seq_len_q, max_seq_len_kv,
                               output_offset=None, sm_scale=None, window_size=None, broadcast_q=False,
                               cpu_query_offset=None, cpu_key_offset=None, use_on_device_tma=False):
    for name, t in (("query", query), ("key", key), ("value", value)):
        assert t.is_contiguous(), f"{name} must be contiguous"
        assert t.dtype in (torch.bfloat16, torch.float16), f"{name}: 2-byte dtypes only"
    for name, t in (("query_offset", query_offset), ("key_offset", key_offset), ("output_offset", output_offset)):
        assert t is None or t.dtype == torch.int32, f"{name} must be int32"
    d = query.shape[-1]
    assert d <= 128 and value.shape[-1] == d, "head dim <= 128 and D == D_v"
    h_q, h_kv = query.shape[1], key.shape[1]
    group = h_q // h_kv
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(d)
    q_off = (cpu_query_offset if cpu_query_offset is not None else query_offset).tolist()
    k_off = (cpu_key_offset if cpu_key_offset is not None else key_offset).tolist()
    batch = len(k_off) - 1
    if broadcast_q:
        assert q_off == [0, query.shape[0]], "broadcast_q: query_offset must be [0, L_q]"
        out_starts = output_offset.tolist()[:-1]
        rows = batch * query.shape[0]
    else:
        out_starts = q_off[:-1]
        rows = query.shape[0]
    o = torch.empty(rows, h_q, value.shape[-1], dtype=query.dtype)  # rows it does not write stay garbage
    m = torch.empty(h_q, rows, dtype=torch.float32)
    pieces = []
    for b in range(batch):
        q0, q1 = (0, query.shape[0]) if broadcast_q else (q_off[b], q_off[b + 1])
        q1 = min(q1, q0 + max_seq_len_q)
        k0, k1 = k_off[b], min(k_off[b + 1], k_off[b] + max_seq_len_kv)
        kb = key[k0:k1].repeat_interleave(group, dim=1)
        vb = value[k0:k1].repeat_interleave(group, dim=1)
        ob, mb = _attend(query[q0:q1], kb, vb, scale, window_size)
        pieces.append((out_starts[b], ob, mb))
    # assemble differentiably: scatter each sequence's rows into O
    index, values = [], []
    for start, ob, mb in pieces:
        index.append(torch.arange(start, start + ob.shape[0]))
        values.append(ob)
        m[:, start:start + ob.shape[0]] = mb.detach()
    if values:
        idx = torch.cat(index)
        o = o.index_put((idx,), torch.cat(values).to(query.dtype))
    return _BackwardChecks.apply(o, group), m
