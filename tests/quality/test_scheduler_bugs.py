"""Planted scheduler bugs are caught twice: by the host check of the schedule and by the instrumented run."""

import dataclasses

import pytest

from jfa_verify import Case, run_case
from jfa_verify.invariants import check_schedule
from kernels.registry import Kernel
from kernels.schedulers import zigzag
from kernels.triton_jfa import CAPABILITIES
from kernels.triton_jfa.scheduling import HostScheduler, PlannedPass


def _drop_last(schedule, workloads):
    sms = [list(t) for t in schedule.sm_tiles]
    longest = max(range(len(sms)), key=lambda i: len(sms[i]))
    sms[longest].pop()
    return sms


def _duplicate(schedule, workloads):
    sms = [list(t) for t in schedule.sm_tiles]
    first = next(t for tiles in sms for t in tiles)
    sms[-1].append(first)
    return sms


def _unpruned_empty(schedule, workloads):
    sms = [list(t) for t in schedule.sm_tiles]
    sms[0].append(next(t for t in workloads if t.rows == 0))
    return sms


BUGS = {"dropped_last_tile": (_drop_last, "missing", "did not run exactly once"),
        "duplicated_tile": (_duplicate, "duplicate", "ran 2 times"),
        "unpruned_empty_tile": (_unpruned_empty, "empty", "an empty tile ran")}


class BuggyScheduler(HostScheduler):
    """Zigzag for every pass, with one planted corruption of the schedule it hands the kernel."""

    def __init__(self, corrupt):
        super().__init__("zigzag", "zigzag", num_sms=3)
        self.corrupt = corrupt

    def __call__(self, tiles, kind, problem):
        planned = super().__call__(tiles, kind, problem)
        broken = dataclasses.replace(planned.schedule, sm_tiles=tuple(map(tuple, self.corrupt(planned.schedule, planned.workloads))))
        return PlannedPass(kind, planned.workloads, broken, planned.cluster_size)


CASE = Case(kv_lengths=(40, 0, 17, 3), dtype="float32", head_dim=16, num_heads_q=2, num_heads_kv=1)


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_planted_scheduler_bug_is_caught_by_host_check_and_instrumented_run(bug, jfa_device):
    from kernels.triton_jfa import _kernels
    from kernels.triton_jfa._autograd import make_jagged_attention

    corrupt, host_kind, run_message = BUGS[bug]
    scheduler = BuggyScheduler(corrupt)
    kernel = Kernel(f"buggy-{bug}", bug, lambda: make_jagged_attention(_kernels, scheduler=scheduler), CAPABILITIES)
    result = run_case(CASE, kernel, jfa_device)
    assert result.status == "fail", result.explain()
    # the host check names the bug class ...
    assert any(f"[{host_kind}]" in v for v in result.schedule_violations), result.schedule_violations
    # ... and the instrumented kernel run saw it happen
    assert any("[visit_count]" in v and run_message in v for v in result.schedule_violations), result.schedule_violations


def test_correct_schedule_has_no_violation_and_host_check_is_not_vacuous(jfa_device):
    from kernels.schedulers import workloads_forward
    from kernels.triton_jfa import _kernels
    from kernels.triton_jfa._autograd import make_jagged_attention

    kernel = Kernel("zigzag", "", lambda: make_jagged_attention(_kernels, scheduler=HostScheduler(num_sms=3)), CAPABILITIES)
    result = run_case(CASE, kernel, jfa_device)
    assert result.status == "pass" and result.schedule_violations == [], result.explain()
    assert set(result.schedule_stats) == {"fwd", "dq", "dkdv"}
    work = workloads_forward((40, 0, 17, 3), (40, 0, 17, 3), 32)
    good = zigzag(work, 3)
    assert check_schedule(good, work) == []
    bad = dataclasses.replace(good, sm_tiles=tuple(map(tuple, _drop_last(good, work))))
    assert [v.kind for v in check_schedule(bad, work)] == ["missing"]
