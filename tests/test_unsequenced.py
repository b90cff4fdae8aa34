"""Rows of no sequence set on the device (:mod:`jfa_verify.protocol.unsequenced`): only the rows before
``offsets[0]``, in the kernel (the interpreter on the CPU, compiled on a GPU) and on the host, and the shipped
kernels' outputs keep the contract's 0 / -inf there when their buffers start as garbage."""

from __future__ import annotations

import math

import pytest
import torch

from jfa_verify.protocol.unsequenced import Unsequenced, _as_rows, clear_unsequenced, launch_fill

SENTINEL = 7.0


def _kernel_device(jfa_device) -> torch.device:
    from jfa_verify.core.device import interpreting

    if jfa_device.type == "cuda":
        return jfa_device
    if not interpreting():
        pytest.skip("the fill kernel runs compiled on a GPU or in Triton's interpreter (TRITON_INTERPRET=1)")
    return torch.device("cpu")


def _run(parts, path: str) -> None:
    if path == "kernel":
        launch_fill([(p, *_as_rows(p)) for p in parts], block_r=16)  # several programs on a few hundred rows
    else:
        clear_unsequenced(*[Unsequenced(p.tensor, p.first.cpu() if isinstance(p.first, torch.Tensor) else p.first,
                                        p.value, p.dim) for p in parts])


@pytest.mark.parametrize("path", ["kernel", "host"])
@pytest.mark.parametrize("first", [0, 1, 37, 299, 300, 450])
@pytest.mark.parametrize("offsets_dtype", [torch.int32, torch.int64])
def test_only_the_rows_before_the_first_offset_are_set(jfa_device, path, first, offsets_dtype):
    device = _kernel_device(jfa_device) if path == "kernel" else torch.device("cpu")
    rows = 300
    o = torch.full((rows, 3, 40), SENTINEL, dtype=torch.bfloat16, device=device)
    lse = torch.full((3, rows), SENTINEL, dtype=torch.float32, device=device)
    dk = torch.full((rows, 2, 24), SENTINEL, dtype=torch.float16, device=device)
    # offsets as a column of a [B + 1, 2] tensor: the kernel reads offsets[0] through the view's pointer
    offsets = torch.tensor([[first, -1], [rows + 200, -1]], dtype=offsets_dtype, device=device)[:, 0]
    _run([Unsequenced(o, offsets), Unsequenced(lse, offsets, float("-inf"), dim=1), Unsequenced(dk, offsets)], path)
    cut = min(first, rows)  # an offset past the rows is clamped to them
    assert (o[:cut] == 0).all() and (o[cut:] == SENTINEL).all()
    assert (lse[:, :cut] == -math.inf).all() and (lse[:, cut:] == SENTINEL).all()
    assert (dk[:cut] == 0).all() and (dk[cut:] == SENTINEL).all()


def test_a_negative_first_offset_sets_nothing(jfa_device):
    device = _kernel_device(jfa_device)
    o = torch.full((50, 4), SENTINEL, device=device)
    launch_fill([(Unsequenced(o, torch.tensor([-5, 50], device=device)), *_as_rows(Unsequenced(o, None)))])
    assert (o == SENTINEL).all()


def test_host_ints_and_none_need_no_offsets_tensor():
    o = torch.full((20, 2, 8), SENTINEL)
    lse = torch.full((2, 20), SENTINEL)
    clear_unsequenced(Unsequenced(o, 5), Unsequenced(lse, None, float("-inf"), dim=1))
    assert (o[:5] == 0).all() and (o[5:] == SENTINEL).all()
    assert (lse == SENTINEL).all()  # None: broadcast-Q's output rows, every one a sequence's


def test_a_layout_the_kernel_cannot_address_is_refused_by_name():
    t = torch.zeros(4, 6, 8).transpose(1, 2)  # rows along dim 0, the rest not contiguous
    with pytest.raises(ValueError, match=r"dim=0 of shape \(4, 8, 6\)"):
        clear_unsequenced(Unsequenced(t, 2))
    with pytest.raises(ValueError, match="dim=1"):
        clear_unsequenced(Unsequenced(torch.zeros(2, 3, 4), 1, dim=1))


@pytest.mark.parametrize("hints", [False, True], ids=["checked", "max_seqlen"])
@pytest.mark.parametrize("q_offsets, k_offsets", [([3, 10, 25], [5, 12, 30]), ([3], [5])],
                         ids=["two-sequences", "empty-batch"])
def test_triton_jfa_keeps_rows_before_offsets_zero_when_buffers_start_as_garbage(jfa_device, monkeypatch, q_offsets,
                                                                                  k_offsets, hints):
    """The kernel's outputs are allocated empty; rows before ``offsets[0]`` (a view into a larger buffer; every row of
    an empty batch, whose one offset the device plan clamps to 0) must still read 0 in O, dQ, dK, dV and -inf in LSE
    when the allocator hands back NaN-filled memory, on the host-checked call and the hinted one (device plan)."""
    from jfa_verify.protocol.registry import get_kernel

    device = jfa_device
    fn = get_kernel("triton_jfa")
    torch.manual_seed(0)
    h, d = 2, 16
    q_first, k_first = q_offsets[0], k_offsets[0]
    q = torch.randn(q_offsets[-1], h, d, device=device, requires_grad=True)
    k = torch.randn(k_offsets[-1], h, d, device=device, requires_grad=True)
    v = torch.randn(k_offsets[-1], h, d, device=device, requires_grad=True)
    longest = max([b - a for a, b in zip(q_offsets, q_offsets[1:])] + [b - a for a, b in zip(k_offsets, k_offsets[1:])]
                  + [0])
    q_offsets = torch.tensor(q_offsets, dtype=torch.int32, device=device)
    k_offsets = torch.tensor(k_offsets, dtype=torch.int32, device=device)
    options = dict(max_seqlen_q=longest, max_seqlen_k=longest) if hints else {}
    empty = torch.empty

    def garbage(*args, **kwargs):
        t = empty(*args, **kwargs)
        return t.fill_(math.nan) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", garbage)
    o, lse = fn(q, k, v, q_offsets, k_offsets, causal=True, **options)
    (o.float() * 1.0).sum().backward()
    monkeypatch.setattr(torch, "empty", empty)
    assert (o[:q_first] == 0).all() and (lse[:, :q_first] == -math.inf).all()
    assert (q.grad[:q_first] == 0).all() and (k.grad[:k_first] == 0).all() and (v.grad[:k_first] == 0).all()
    for name, t in (("o", o), ("lse", lse[:, q_first:]), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
        assert not torch.isnan(t).any(), name
