"""float8 e4m3 inputs: forward only, O in bfloat16, judged by the "float8_e4m3fn" budget row."""

import math

import pytest
import torch

from jfa_verify import Case
from jfa_verify.core.contract import validate_inputs
from jfa_verify.core.dtypes import output_dtype
from jfa_verify.core.errors import InvalidInput, UnsupportedCase
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run.runner import run_case

FP8 = dict(num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="float8_e4m3fn")


@pytest.fixture(scope="module")
def dev(interpreter_device):
    return interpreter_device


def test_contract_accepts_fp8_and_names_its_output_dtype():
    t = Case(kv_lengths=(3, 5), **FP8).materialize("cpu")
    assert t.q.dtype == torch.float8_e4m3fn and t.do.dtype == torch.bfloat16
    assert validate_inputs(*t.call_args()).dtype == torch.float8_e4m3fn
    assert output_dtype(torch.float8_e4m3fn) == torch.bfloat16 and output_dtype(torch.float16) == torch.float16


def test_fp8_kernel_forward_passes_with_bf16_output_and_refuses_backward(dev):
    kernel = get_kernel("triton_jfa_fp8")
    case = Case(kv_lengths=(17, 0, 33, 5), causal=True, **FP8)
    result = run_case(case, kernel, dev)
    assert result.status == "pass", result.explain()
    assert [c.name for c in result.comparisons] == ["o", "lse"]  # forward only
    t = case.materialize(dev)
    o, lse = kernel(*t.call_args(), causal=True)
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32
    q = t.q.detach().clone().requires_grad_(True)
    with pytest.raises((UnsupportedCase, RuntimeError)):
        kernel(q, t.k, t.v, t.q_offsets, t.k_offsets)[0].float().sum().backward()


def test_padded_sdpa_oracle_refuses_a_backward_for_fp8():
    from jfa_verify.oracles import padded_sdpa_attention

    t = Case(kv_lengths=(3,), **FP8).materialize("cpu")
    with pytest.raises(InvalidInput, match="forward only"):
        padded_sdpa_attention(validate_inputs(*t.call_args()), t.q, t.k, t.v, do=t.do)


@pytest.mark.parametrize("name, output", [("softmax_scale_off", "lse"), ("final_norm_skipped_one_tile", "o"),
                                          ("lse_log2", "lse")])
def test_planted_forward_bugs_are_caught_in_fp8(name, output, dev):
    import dataclasses

    from jfa_verify.fuzz.mutation import load_catalogue
    from jfa_verify.kernels.triton_jfa._config import FP8_CAPABILITIES

    case = Case(kv_lengths=(17, 0, 33, 5), **FP8)
    assert run_case(case, get_kernel("triton_jfa_fp8"), dev).status == "pass"
    mutant = dataclasses.replace(load_catalogue().kernel_of(name),
                                 capabilities=FP8_CAPABILITIES)  # the same bug, fp8 inputs
    result = run_case(case, mutant, dev)
    assert result.status == "fail" and output in [c.name for c in result.failing], result.explain()


def test_fp8_probabilities_are_scaled_before_rounding_to_e4m3(dev):
    """Regression: the kernel's P = exp(s - running max) lies in (0, 1]; rounded to e4m3 directly,
    P below 2^-6 is subnormal (grid 2^-9). One key 5.25 nats above 1000 others gives those
    P = e^-5.25 = 0.00525, which rounds to 0.00586 (+11.6 %), and O (0.84 exactly) came out 0.94,
    past the first-order bound eps/2 * sum P|V| = 2^-4 * 0.84. Scaled by 2^8 before rounding,
    P keeps 3 mantissa bits (relative error <= 2^-4) and O stays within that bound."""
    kernel = get_kernel("triton_jfa_fp8")
    n, d = 1001, 16
    q = torch.zeros(1, 1, d)
    q[0, 0, 0] = 4.0
    k = torch.zeros(n, 1, d)
    k[0, 0, 0] = 5.25  # score 4 * 5.25 / sqrt(16) = 5.25 for key 0, 0 for the others
    v = torch.ones(n, 1, d)
    v[0] = 0.0
    q, k, v = (t.to(torch.float8_e4m3fn) for t in (q, k, v))
    q_offsets = torch.tensor([0, 1], dtype=torch.int32)
    k_offsets = torch.tensor([0, n], dtype=torch.int32)
    o, _ = kernel(q, k, v, q_offsets, k_offsets)
    p_rest = math.exp(-5.25)
    exact = (n - 1) * p_rest / (1.0 + (n - 1) * p_rest)
    err = (o.double() - exact).abs().max().item()
    assert err <= 2.0 ** -4 * exact, f"O error {err:.4f} above the first-order bound {2.0 ** -4 * exact:.4f}"


def test_interpreter_e4m3_rounding_into_the_next_binade(dev):
    """Regression: the Triton interpreter's float32 -> e4m3 cast halves a value that rounds up
    into the next binade (127.0 -> 64.0, not 128.0), so a correct fp8 forward gave O = 3.58
    instead of 4.87 on this case; the kernel now rounds by hand under the interpreter."""
    from jfa_verify.oracles import reference_attention

    case = Case(kv_lengths=(0, 0, 0, 3), mode="cross", q_lengths=(1, 1, 1, 2), num_heads_q=4, num_heads_kv=1,
                head_dim=64, dtype="float8_e4m3fn", offsets_dtype="int64", values="correlated", seed=4599878)
    t = case.materialize(dev)
    o, _ = get_kernel("triton_jfa_fp8")(*t.call_args())
    ref = reference_attention(case.problem(t), t.q, t.k, t.v)
    bound = 2.0 ** -4 * float(ref["o_lowp"])  # first-order: P rounded to e4m3, relative error <= 2^-4
    err = (o.double() - ref["o"]).abs().max().item()
    assert err <= bound, f"O error {err:.3f} > first-order bound {bound:.3f} (the interpreter cast gave 1.29)"


def test_float8_kernels_get_the_production_layouts_in_their_own_dtype():
    """Regression (a new user's trial): a float8-only kernel's default suite ran the covering array only, every
    MovieLens, fixed-layout and tile-edge case being bfloat16/float16/float32 and so unsupported. Their layouts now
    run in the kernel's own dtype (MXFP8 kernels: with block scales), every variant on every layout; a kernel that
    takes the usual dtypes keeps them."""
    from jfa_verify.cases.scaling import Scaling
    from jfa_verify.checks.suites import DTYPES, _layout_dtypes, default_suite
    from jfa_verify.protocol.registry import get_kernel

    assert _layout_dtypes(get_kernel("triton_jfa")) == (DTYPES, None)
    assert _layout_dtypes(get_kernel("triton_jfa_fp8")) == (("float8_e4m3fn",), None)
    assert _layout_dtypes(get_kernel("triton_jfa_mxfp8")) == (("float8_e4m3fn",), Scaling("random"))
    cases = [c for c in default_suite("cpu", kernel=get_kernel("triton_jfa_mxfp8")).cases
             if not c.name.startswith("pairs")]
    assert {c.dtype for c in cases} == {"float8_e4m3fn"} and all(c.block_scaling is not None for c in cases)
    assert any(c.name.startswith("tile-edges") and 0 in c.kv_lengths for c in cases)
    assert {(c.mode, c.causal) for c in cases if c.name.startswith("movielens-a")} == {
        ("self", False), ("self", True), ("cross", True), ("broadcast_q", False)}


def test_the_fixed_layouts_take_a_head_dim_the_kernel_declares():
    """Regression (a new user's trial): an MXFP8 fork declaring ``head_dims=(64, 128)`` had all 21 fixed-layout cases
    unsupported on the CPU, where they ran at D=32 only; they now run at the declared head dim nearest it."""
    import dataclasses

    from jfa_verify.checks.suites import default_suite
    from jfa_verify.protocol.registry import get_kernel

    mx = get_kernel("triton_jfa_mxfp8")
    fork = dataclasses.replace(mx, name="fork", capabilities=dataclasses.replace(mx.capabilities, head_dims=(64, 128)))
    suite = default_suite("cpu", kernel=fork)
    # (the production shapes keep their own head dims, 64 and 128, where the kernel declares them)
    fixed = [c for c in suite.cases
             if not c.name.startswith(("pairs", "production-")) and not c.name.endswith("mqa-odd-d")]
    assert fixed and {c.head_dim for c in fixed} == {64} and "D=64" in suite.note
    assert {c.head_dim for c in suite.cases if c.name.startswith("production-")} == {64, 128}
    assert all(fork.capabilities.unsupported_reason(c.problem(c.materialize("cpu"))) is None for c in fixed)
    # a kernel taking D=32 keeps it
    assert {c.head_dim for c in default_suite("cpu", kernel=mx).cases
            if c.name.startswith("movielens") and not c.name.endswith("mqa-odd-d")} == {32}
