"""float8 e4m3 inputs: forward only, O in bfloat16, judged by the "float8_e4m3fn" budget row."""

import pytest
import torch

from jfa_verify import Case
from jfa_verify.contract import output_dtype, validate_inputs
from jfa_verify.device import select_device
from jfa_verify.errors import InvalidInput, UnsupportedCase
from jfa_verify.runner import run_case
from kernels import get_kernel

FP8 = dict(num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="float8_e4m3fn")


@pytest.fixture(scope="module")
def dev():
    return select_device("cpu")


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
    o, lse = kernel.fn(*t.call_args(), causal=True)
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32
    q = t.q.detach().clone().requires_grad_(True)
    with pytest.raises((UnsupportedCase, RuntimeError)):
        kernel.fn(q, t.k, t.v, t.q_offsets, t.k_offsets)[0].float().sum().backward()


def test_padded_sdpa_oracle_refuses_a_backward_for_fp8():
    from oracles import padded_sdpa_attention

    t = Case(kv_lengths=(3,), **FP8).materialize("cpu")
    with pytest.raises(InvalidInput, match="forward only"):
        padded_sdpa_attention(*t.call_args(), do=t.do)


@pytest.mark.parametrize("name, output", [("softmax_scale_off", "o"), ("final_norm_skipped_one_tile", "o"),
                                          ("lse_log2", "lse")])
def test_planted_forward_bugs_are_caught_in_fp8(name, output, dev):
    import dataclasses

    from kernels.triton_jfa import FP8_CAPABILITIES
    from tests.quality.mutants import mutant_kernel

    case = Case(kv_lengths=(17, 0, 33, 5), **FP8)
    assert run_case(case, get_kernel("triton_jfa_fp8"), dev).status == "pass"
    mutant = dataclasses.replace(mutant_kernel(name), capabilities=FP8_CAPABILITIES)  # the same bug, fp8 inputs
    result = run_case(case, mutant, dev)
    assert result.status == "fail" and output in [c.name for c in result.failing], result.explain()
