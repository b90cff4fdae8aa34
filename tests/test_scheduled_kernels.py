"""The persistent kernels under every schedule: outputs pass and every instrumented run meets the invariants."""

from hypothesis import given, settings
from hypothesis import strategies as st

from jfa_verify import run_case
from jfa_verify.strategies import cases
from kernels.registry import Kernel
from kernels.schedulers import SCHEDULERS
from kernels.triton_jfa import CAPABILITIES
from kernels.triton_jfa.scheduling import HostScheduler


def _kernel(forward: str, backward: str, num_sms: int) -> Kernel:
    from kernels.triton_jfa import _kernels
    from kernels.triton_jfa._autograd import make_jagged_attention

    scheduler = HostScheduler(forward, backward, num_sms=num_sms)
    return Kernel(f"triton_jfa[{forward}/{backward}/{num_sms}]", "", lambda: make_jagged_attention(_kernels, scheduler=scheduler),
                  CAPABILITIES)


@settings(max_examples=12)
@given(
    case=cases(max_batch=5, max_len=40, head_dims=(16, 24), dtypes=("float32", "bfloat16")),
    forward=st.sampled_from(sorted(SCHEDULERS)),
    backward=st.sampled_from(sorted(SCHEDULERS)),
    num_sms=st.sampled_from([1, 2, 3, 7, 64]),  # 64: more programs than tiles
)
def test_kernel_passes_and_meets_invariants_under_any_schedule(case, forward, backward, num_sms, jfa_device):
    result = run_case(case, _kernel(forward, backward, num_sms), jfa_device)
    assert result.status == "pass", result.explain()
    assert result.schedule_violations == []
    assert set(result.schedule_stats) == {"fwd", "dq", "dkdv"}
    assert result.schedule_stats["fwd"]["scheduler"] == forward
