"""Cases: eager validation, JSON round trip, and the same bits on any machine."""

import hashlib

import pytest
import torch

from jfa_verify import Case, InvalidInput


def _digest(t) -> str:
    h = hashlib.sha256()
    for x in (t.q, t.k, t.v, t.do, t.q_offsets, t.k_offsets):
        x = x.view(torch.int16) if x.dtype == torch.bfloat16 else x
        h.update(x.contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


GOLDEN = Case(kv_lengths=(3, 0, 5), mode="cross", q_lengths=(2, 4, 1), dtype="bfloat16", head_dim=16, seed=7,
              offsets_start=2)


def test_materialize_gives_golden_bits():
    # Recorded once; the counter hash's integer arithmetic and round-to-nearest casts make it machine-independent.
    assert _digest(GOLDEN.materialize()) == "32550e6f7528c10d2f13474aebf0c74516e1e6ecd7b5ab8c74c67e12733bd07d"
    assert GOLDEN.case_id() == "50f4b1e5ba6f"


def test_case_files_from_before_the_counter_generator_keep_their_bits_and_ids():
    # Recorded with NumPy's PCG64 stream in the first case-file format, which has no generator field.
    old = Case(kv_lengths=(3, 0, 5), mode="cross", q_lengths=(2, 4, 1), dtype="bfloat16", head_dim=16, seed=7,
               offsets_start=2, generator="pcg64")
    assert _digest(old.materialize()) == "7e3453e350932f4365e7e8b5bd4605fc8a7e9d512f881f3e4067eff664ecb262"
    assert old.case_id() == "5b3c6313bf73"


def test_materialize_shapes_and_offsets():
    t = GOLDEN.materialize()
    assert t.q.shape == (2 + 7, 2, 16) and t.k.shape == (2 + 8, 2, 16)
    assert t.q_offsets.tolist() == [2, 4, 8, 9] and t.k_offsets.tolist() == [2, 5, 5, 10]
    assert t.q_offsets.dtype == torch.int32 and t.q.dtype == torch.bfloat16
    b = Case(kv_lengths=(4, 1), mode="broadcast_q", broadcast_q_len=3, offsets_dtype="int64").materialize()
    assert b.q_offsets is None and b.q.shape[0] == 3 and b.do.shape[0] == 6 and b.k_offsets.dtype == torch.int64


def test_self_attention_shares_offsets_tensor():
    t = Case(kv_lengths=(4, 5)).materialize()
    assert t.q_offsets is t.k_offsets


def test_json_round_trip_and_name_not_in_identity():
    c = Case(kv_lengths=(1, 2), mode="cross", q_lengths=(3, 0), causal=True, causal_alignment="bottom_right", name="x")
    back = Case.from_json(c.to_json())
    assert back == c and back.name == "x"
    assert Case(kv_lengths=(1, 2), name="a").case_id() == Case(kv_lengths=(1, 2), name="b").case_id()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(kv_lengths=(3, -1)), r"kv_lengths=\(3, -1\) has a negative length"),
        (dict(kv_lengths=(3,), mode="cross"), r"mode='cross' needs q_lengths"),
        (dict(kv_lengths=(3,), mode="broadcast_q"), r"needs broadcast_q_len"),
        (dict(kv_lengths=(3,), num_heads_q=3, num_heads_kv=2), r"num_heads_q=3 is not a multiple of num_heads_kv=2"),
        (dict(kv_lengths=(3,), dtype="float64"), r"dtype='float64' is not one of"),
        (dict(kv_lengths=(3,), q_lengths=(1,)), r"only for mode='cross'"),
        (dict(kv_lengths=(3,), values="uniform"), r"values='uniform'"),
    ],
)
def test_invalid_case_rejected_eagerly(kwargs, match):
    with pytest.raises(InvalidInput, match=match):
        Case(**kwargs)


def test_unknown_field_in_json():
    with pytest.raises(InvalidInput, match=r"unknown case fields \['lenghts'\]"):
        Case.from_dict({"kv_lengths": [1], "lenghts": [2]})


def test_value_distributions_differ():
    base = Case(kv_lengths=(8,), dtype="float32", head_dim=16)
    big = Case(kv_lengths=(8,), dtype="float32", head_dim=16, values="large_logits").materialize()
    assert big.q.abs().max() > 4 * base.materialize().q.abs().max() / 2
    corr = Case(kv_lengths=(64,), dtype="float32", head_dim=16, values="correlated").materialize()
    s = torch.linalg.svdvals(corr.k[:, 0, :].double())
    assert s[4] < 0.2 * s[0]  # low-rank structure dominates


def test_a_distinct_query_start_is_for_cross_attention_and_round_trips():
    from jfa_verify.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="q_offsets_start=2 is only for mode='cross'"):
        Case(kv_lengths=(3,), q_offsets_start=2)
    with pytest.raises(InvalidInput, match="q_offsets_start=-1 must be >= 0"):
        Case(kv_lengths=(3,), mode="cross", q_lengths=(2,), q_offsets_start=-1)
    base = Case(kv_lengths=(3, 4), mode="cross", q_lengths=(2, 5), offsets_start=3)
    moved = Case(kv_lengths=(3, 4), mode="cross", q_lengths=(2, 5), offsets_start=3, q_offsets_start=8)
    assert "q_offsets_start" not in base.to_dict()  # older case files and their ids are unchanged
    assert Case.from_json(moved.to_json()) == moved and moved.case_id() != base.case_id()
    t = moved.materialize("cpu")
    assert t.q_offsets.tolist() == [8, 10, 15] and t.k_offsets.tolist() == [3, 6, 10] and t.q.shape[0] == 15


@pytest.mark.parametrize("head_dim, head_dim_v", [(32, 33), (40, 24), (64, 64), (17, 16)])
def test_padded_to_16_layout_has_strides_divisible_by_16_and_the_same_values(head_dim, head_dim_v):
    # the layout's promise: every token and head stride a multiple of 16 (whatever D and D_v), unit stride
    # along D, NaN in the padding, and the values of the contiguous layout (the same bits)
    case = Case(kv_lengths=(3, 5), num_heads_q=4, num_heads_kv=2, head_dim=head_dim, head_dim_v=head_dim_v,
                dtype="bfloat16", seed=2)
    dense = case.materialize()
    padded = Case(**{**case.to_dict(), "layout": "padded_to_16"}).materialize()
    for name in ("q", "k", "v", "do"):
        a, b = getattr(dense, name), getattr(padded, name)
        assert b.stride(2) == 1 and b.stride(1) % 16 == 0 and b.stride(0) % 16 == 0, (name, b.stride())
        assert b.stride(1) > b.shape[2] and not b.is_contiguous(), (name, b.stride())
        assert torch.equal(a, b), name
        gap = torch.as_strided(b, (b.shape[0], b.shape[1], b.stride(1) - b.shape[2]), b.stride(),
                               b.storage_offset() + b.shape[2])  # the columns past D of every row and head
        assert torch.isnan(gap.float()).all(), name


def test_offsets_layouts_are_contiguous_or_strided_and_old_slip_names_replay_as_contiguous():
    # regression: OFFSETS_LAYOUTS held the tensor layouts' names ("mixed", "head_dim_strided"), so campaigns
    # drew offsets layouts that mean nothing (laid out contiguous) and recorded them in case files
    from hypothesis import given, settings

    from jfa_verify.cases.case import OFFSETS_LAYOUTS
    from jfa_verify.strategies import offsets_configs

    assert OFFSETS_LAYOUTS == ("contiguous", "strided")
    drawn = set()

    @settings(max_examples=60, database=None)
    @given(offsets_configs())
    def draw(config):
        drawn.add(config[2])

    draw()
    assert drawn <= set(OFFSETS_LAYOUTS)
    old = Case(kv_lengths=(3, 5), offsets_layout="mixed", seed=1).materialize()
    new = Case(kv_lengths=(3, 5), seed=1).materialize()
    assert torch.equal(old.k_offsets, new.k_offsets) and old.k_offsets.is_contiguous()
    with pytest.raises(InvalidInput, match="offsets_layout='diagonal'"):
        Case(kv_lengths=(3,), offsets_layout="diagonal")


def test_the_one_line_summary_names_a_given_scale_and_non_default_layout_and_values():
    # regression (new-user trial): a kernel ignoring sm_scale failed on a case whose header did not say that
    # sm_scale was 0.051: the only case with a scale given looked like every other
    line = Case(kv_lengths=(3, 4), sm_scale=0.0512, layout="padded_to_16", values="tiny").describe()
    assert line.endswith("D=32 sm_scale=0.0512 layout=padded_to_16 values=tiny"), line
    assert Case(kv_lengths=(3, 4)).describe().endswith("D=32")


def test_describe_names_rows_before_the_first_sequence_and_the_offsets_dtype():
    """Regression (new-user trial): a finding's header hid ``q_offsets_start=8``, the very trigger of nested SDPA's
    storage-offset bug, so a trivial-looking case seemed to fail for no reason."""
    plain = Case(kv_lengths=(3,), mode="cross", q_lengths=(3,))
    assert "offsets" not in plain.describe()
    shifted = Case(kv_lengths=(3,), mode="cross", q_lengths=(3,), offsets_start=2, q_offsets_start=8,
                   offsets_dtype="int64")
    assert shifted.describe().endswith("offsets_start=2 q_offsets_start=8 offsets_dtype=int64")


def test_describe_names_strided_offsets():
    """Regression (2026-12-08): a case with strided offsets (outside the contract: a kernel that rejects them passes)
    read like any other, so a wrong kernel's "pass" on it looked like a missed bug."""
    strided = Case(kv_lengths=(3, 4), offsets_layout="strided", offsets_start=1)
    assert strided.describe().endswith("D=32 offsets_start=1 offsets_layout=strided"), strided.describe()
