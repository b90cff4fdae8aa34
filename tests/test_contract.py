"""Invalid input gets a clear error naming the value and the fix."""

import pytest
import torch

from jfa_verify import InvalidInput, validate_inputs


def _inputs(T=10, H=2, D=16, Hkv=None, Dv=None, dtype=torch.float32):
    Hkv = Hkv or H
    q = torch.randn(T, H, D, dtype=dtype)
    k = torch.randn(T, Hkv, D, dtype=dtype)
    v = torch.randn(T, Hkv, Dv or D, dtype=dtype)
    off = torch.tensor([0, 4, 4, T], dtype=torch.int32)
    return q, k, v, off


def test_valid_self_attention_problem():
    q, k, v, off = _inputs()
    p = validate_inputs(q, k, v, off, off, causal=True)
    assert p.mode == "self"
    assert p.q_lengths == (4, 0, 6) and p.k_lengths == (4, 0, 6)
    assert p.max_seqlen_q == 6 and p.sm_scale == pytest.approx(0.25)


def test_broadcast_q_problem_rows():
    _, k, v, off = _inputs()
    q = torch.randn(5, 2, 16)
    p = validate_inputs(q, k, v, None, off)
    assert p.mode == "broadcast_q" and p.total_q_rows == 15
    assert p.out_starts == (0, 5, 10) and p.q_starts == (0, 0, 0)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda q, k, v, o: (q, k, v, torch.tensor([0, 5, 3, 10], dtype=torch.int32)),
         r"not non-decreasing: q_offsets\[1\]=5 > q_offsets\[2\]=3"),
        (lambda q, k, v, o: (q, k, v, torch.tensor([0, 4, 4, 9], dtype=torch.int32)),
         r"q_offsets\[-1\]=9 does not equal the token count 10"),
        (lambda q, k, v, o: (q, k, v, torch.tensor([0, 4, 9], dtype=torch.int32)),
         r"q_offsets has 3 entries but k_offsets has 4"),
        (lambda q, k, v, o: (q, k, v, o.float()), r"q_offsets.dtype=torch.float32 is not int32 or int64"),
        (lambda q, k, v, o: (q[0], k, v, o), r"q must have rank 3"),
        (lambda q, k, v, o: (q.double(), k, v, o), r"q.dtype=torch.float64 is not one of"),
        (lambda q, k, v, o: (q.half(), k, v, o), r"dtypes differ"),
        (lambda q, k, v, o: (q[:, :, :8], k, v, o), r"head-dim mismatch: q has D=8 but k has D=16"),
        (lambda q, k, v, o: (torch.randn(10, 3, 16), k, v, o), r"H_q=3 is not a multiple of H_kv=2"),
        (lambda q, k, v, o: (q, k, v[:9], o), r"k has 10 tokens but v has 9"),
        (lambda q, k, v, o: (q, k, v, torch.tensor([-1, 4, 4, 10], dtype=torch.int32)),
         r"q_offsets\[0\]=-1 is negative"),
    ],
)
def test_bad_input_names_value_and_fix(mutate, match):
    q, k, v, off = _inputs()
    q, k, v, q_off = mutate(q, k, v, off)
    with pytest.raises(InvalidInput, match=match):
        validate_inputs(q, k, v, q_off, off)


def test_offsets_batch_mismatch():
    q, k, v, off = _inputs()
    with pytest.raises(InvalidInput, match="q_offsets has 3 entries but k_offsets has 4"):
        validate_inputs(q, k, v, torch.tensor([0, 5, 10], dtype=torch.int32), off)


def test_bad_alignment_and_scale_and_hint():
    q, k, v, off = _inputs()
    with pytest.raises(InvalidInput, match="causal_alignment='diagonal'"):
        validate_inputs(q, k, v, off, off, causal_alignment="diagonal")
    with pytest.raises(InvalidInput, match="sm_scale=nan is not finite"):
        validate_inputs(q, k, v, off, off, sm_scale=float("nan"))
    with pytest.raises(InvalidInput, match="max_seqlen_q=3 is below the longest sequence"):
        validate_inputs(q, k, v, off, off, max_seqlen_q=3)


def test_offsets_may_start_above_zero():
    q, k, v, _ = _inputs()
    off = torch.tensor([2, 6, 10], dtype=torch.int64)
    p = validate_inputs(q, k, v, off, off)
    assert p.q_starts == (2, 6) and p.q_lengths == (4, 4)
