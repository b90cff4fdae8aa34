"""The persistent kernels under every schedule: outputs pass and every instrumented run meets the invariants."""

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from jfa_verify import get_kernel, run_case
from jfa_verify.kernels.triton_jfa import build
from jfa_verify.protocol.kernel import Kernel
from jfa_verify.scheduling.planning import PersistentScheduler
from jfa_verify.scheduling.schedules import SCHEDULERS
from jfa_verify.strategies import cases


def _kernel(forward: str, backward: str, num_sms: int) -> Kernel:
    scheduler = PersistentScheduler(forward, backward, num_sms=num_sms)
    return dataclasses.replace(get_kernel("triton_jfa"), name=f"triton_jfa[{forward}/{backward}/{num_sms}]",
                               loader=lambda: build(scheduler=scheduler), _impl=None)


@settings(max_examples=12)
@given(
    case=cases(max_batch=5, max_len=40, head_dims=(16, 24), dtypes=("float32", "bfloat16"),
               offsets_layouts=["contiguous"]),
    forward=st.sampled_from(sorted(SCHEDULERS)),
    backward=st.sampled_from(sorted(SCHEDULERS)),
    num_sms=st.sampled_from([1, 2, 3, 7, 64]),  # 64: more programs than tiles
)
def test_kernel_passes_and_meets_invariants_under_any_schedule(case, forward, backward, num_sms, jfa_device):
    # the strategy also draws production (uninstrumented) launches; the schedule is only seen instrumented
    case = dataclasses.replace(case, instrument=True)
    result = run_case(case, _kernel(forward, backward, num_sms), jfa_device)
    assert result.status == "pass", result.explain()
    assert result.findings_of("schedule") == []
    assert set(result.schedule_stats) == {"fwd", "dq", "dkdv"}
    assert result.schedule_stats["fwd"]["scheduler"] == forward
