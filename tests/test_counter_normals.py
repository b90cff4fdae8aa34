"""The counter-based value generator: one function of (seed, role, index), the same bits from NumPy on the
host and from torch on any device, and case files made before it replaying with the stream they were made
with."""

import itertools
import re
from statistics import NormalDist

import numpy as np
import pytest
import torch

from jfa_verify.cases.case import Case
from jfa_verify.cases.counter_normals import _chunk_np, _chunk_torch, _table, counter_normals, stream_key
from jfa_verify.core.errors import InvalidInput


@pytest.mark.parametrize("seed,role,shape", [(0, "q", (5, 3, 7)), (2**63 - 1, "do", (70_001,)),
                                             (12345, "k.basis", (4, 128)), (9, "v", (0, 4, 8))])
def test_numpy_and_torch_give_the_same_bits(seed, role, shape):
    # 70_001 elements span two NumPy passes; the torch path is what a GPU runs
    a = counter_normals(seed, role, shape, "cpu")
    b = counter_normals(seed, role, shape, "cpu", use_numpy=False)
    assert a.dtype == b.dtype == torch.float32 and a.shape == b.shape == shape
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float8_e4m3fn])
@pytest.mark.parametrize("scale", [None, 8.0, 2.0**-10])
def test_rounding_pass_by_pass_is_rounding_the_float32_tensor(dtype, scale):
    # the 2**31-element cases are rounded to their dtype pass by pass on a GPU (a whole float32 copy ran the H200 out
    # of memory): the same bits as scaling and rounding the float32 values at once, from both implementations
    f = counter_normals(3, "k", (300_000,), "cpu")
    want = (f if scale is None else f * scale).to(dtype).view(torch.uint8)
    for use_numpy in (True, False):
        got = counter_normals(3, "k", (300_000,), "cpu", dtype=dtype, scale=scale, use_numpy=use_numpy)
        assert got.dtype == dtype and torch.equal(got.view(torch.uint8), want)


def test_indices_past_two_to_the_32_are_a_different_stream_and_agree():
    k1, k2 = stream_key(3, "q")
    high = _chunk_np(2**32 + 100, 1000, k1, k2)
    assert np.array_equal(high, _chunk_torch(2**32 + 100, 1000, k1, k2, torch.device("cpu")).numpy())
    # without the high word the hash would repeat every 2**32 elements
    assert not np.array_equal(high, _chunk_np(100, 1000, k1, k2))


def test_values_are_standard_normal_and_streams_independent():
    q = counter_normals(1, "q", (1_000_000,)).double()
    k = counter_normals(1, "k", (1_000_000,)).double()
    q2 = counter_normals(2, "q", (1_000_000,)).double()
    for x in (q, k, q2):
        assert abs(x.mean().item()) < 0.005 and abs(x.std().item() - 1) < 0.005
        # tails as a normal's: P(|x| > 3) = 0.0027
        assert 0.0022 < (x.abs() > 3).double().mean().item() < 0.0032
    for a, b in ((q, k), (q, q2)):
        assert abs(torch.corrcoef(torch.stack([a, b]))[0, 1].item()) < 0.005
        assert (a == b).double().mean().item() < 0.001
    # a prefix of a longer draw is the shorter draw (the value of an element depends on its index only)
    assert torch.equal(counter_normals(1, "q", (1000,)), q[:1000].float())


def test_shipped_quantile_table_is_the_normal_quantiles():
    t, slope = _table()
    n = t.size + 1
    expect = np.array([NormalDist().inv_cdf((j + 0.5) / n) for j in range(0, n, 997)]
                      + [NormalDist().inv_cdf((n - 0.5) / n)])
    got = np.append(t[::997], t[-1] + slope[-1])
    assert np.allclose(got, expect, rtol=2**-23, atol=0)
    assert np.all(slope > 0) and t[0] == -(t[-1] + slope[-1])


def test_case_files_without_a_generator_replay_with_pcg64_and_keep_their_ids():
    old = {"kv_lengths": [5, 0, 3], "num_heads_q": 2, "num_heads_kv": 1, "head_dim": 8, "dtype": "float32", "seed": 4}
    case = Case.from_dict(old)
    assert case.generator == "pcg64" and case.to_dict().get("generator") is None
    assert case.case_id() == Case.from_dict({**old, "generator": "pcg64"}).case_id()
    rng = np.random.Generator(np.random.PCG64(4))
    q = rng.standard_normal((8, 2, 8), dtype=np.float32)
    assert np.array_equal(case.materialize().q.numpy(), q)


def test_new_cases_use_the_counter_generator_and_say_so_in_their_files():
    case = Case(kv_lengths=(5, 3), head_dim=8, dtype="float32", seed=4)
    assert case.generator == "counter"
    d = case.to_dict()
    assert d["generator"] == "counter" and Case.from_dict(d) == case
    assert torch.equal(case.materialize().q, counter_normals(4, "q", (8, 2, 8)))
    assert case.case_id() != Case.from_dict({k: v for k, v in d.items() if k != "generator"}).case_id()
    assert "generator=pcg64" in Case.from_dict({"kv_lengths": [2]}).describe()
    assert "generator" not in case.describe()


def test_an_unknown_generator_is_refused_by_name():
    with pytest.raises(InvalidInput, match="generator='philox' is not one of"):
        Case(kv_lengths=(2,), generator="philox")
    # regression (new-user trial): null or a number said only "is not a string", without the choices
    for bad in (None, 1):
        with pytest.raises(InvalidInput,
                           match=re.escape(f"generator={bad!r} is not a string; give one of ('counter', 'pcg64')")):
            Case.from_dict({"kv_lengths": [2], "generator": bad})


@pytest.mark.parametrize("values", ["normal", "large_logits", "correlated", "near_ties", "tiny"])
def test_value_distributions_keep_their_shape_under_the_counter_generator(values):
    case = Case(kv_lengths=(200, 300), num_heads_q=2, num_heads_kv=1, head_dim=16, dtype="float32", values=values,
                seed=7)
    t = case.materialize()
    q, k = t.q.double(), t.k.double()
    assert torch.isfinite(q).all() and torch.isfinite(k).all()
    spread = {"normal": 1.0, "large_logits": 8.0, "tiny": 2.0**-10}
    if values in spread:
        assert abs(q.std().item() / spread[values] - 1) < 0.05
    elif values == "near_ties":
        # keys of one head differ from their shared key by about 2**-12
        assert (k - k.mean(0, keepdim=True)).abs().max().item() < 2.0**-12 * 5
    else:
        # rank-4 structure: the top 4 singular values of a head's [T, D] block carry most of its energy
        s = torch.linalg.svdvals(q[:, 0, :] - q[:, 0, :].mean(0))
        assert (s[:4] ** 2).sum() / (s**2).sum() > 0.9


def _bytes(case: Case, device: str) -> list[torch.Tensor]:
    t = case.materialize(device)
    return [x.cpu().contiguous().view(torch.uint8) for x in (t.q, t.k, t.v, t.do)]


@pytest.mark.gpu
def test_a_gpu_materializes_the_cpu_bits(jfa_device):
    """Every distribution, dtype and layout: the values computed on the GPU are the CPU's, bit for bit."""
    if jfa_device.type != "cuda":
        pytest.skip("needs --jfa-device cuda")
    grid = itertools.product(["normal", "large_logits", "correlated", "near_ties", "tiny"],
                             ["bfloat16", "float16", "float32", "float8_e4m3fn"], ["contiguous", "mixed"])
    for values, dtype, layout in grid:
        case = Case(kv_lengths=(37, 0, 129), mode="cross", q_lengths=(5, 3, 64), num_heads_q=4, num_heads_kv=2,
                    head_dim=64, head_dim_v=32, dtype=dtype, values=values, layout=layout, offsets_start=3, seed=99)
        for cpu, gpu in zip(_bytes(case, "cpu"), _bytes(case, str(jfa_device))):
            assert torch.equal(cpu, gpu), (values, dtype, layout)
    # a draw spanning several GPU passes (2**26 elements each) and many host passes
    n = 3 * 2**26 + 12345
    assert torch.equal(counter_normals(5, "q", (n,), "cpu"), counter_normals(5, "q", (n,), jfa_device).cpu())
