"""Planted scheduler bugs are caught twice: by the host check of the schedule and by the instrumented run."""

import dataclasses

import pytest

from jfa_verify import Case, get_kernel, run_case
from jfa_verify.fuzz.mutation import CORRUPTIONS, load_catalogue
from jfa_verify.kernels.triton_jfa import build
from jfa_verify.scheduling.invariants import check_schedule
from jfa_verify.scheduling.planning import PersistentScheduler
from jfa_verify.scheduling.schedules import workloads_forward, zigzag

# The planted scheduler bugs of the packaged mutant catalogue, with the host check's violation
# kind and the instrumented run's message each must produce.
BUGS = {"sched_drops_last_tile": ("missing", "did not run exactly once"),
        "sched_repeats_tile": ("duplicate", "ran 2 times"),
        "sched_runs_empty_tile": ("empty", "an empty tile ran")}


CASE = Case(kv_lengths=(40, 0, 17, 3), dtype="float32", head_dim=16, num_heads_q=2, num_heads_kv=1)


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_planted_scheduler_bug_is_caught_by_host_check_and_instrumented_run(bug, jfa_device):
    host_kind, run_message = BUGS[bug]
    result = run_case(CASE, load_catalogue("triton_jfa").kernel_of(bug), jfa_device)
    assert result.status == "fail", result.explain()
    # the host check names the bug class ...
    assert any(f"[{host_kind}]" in v for v in result.findings_of("schedule")), result.findings_of("schedule")
    # ... and the instrumented kernel run saw it happen
    schedule = result.findings_of("schedule")
    assert any("[visit_count]" in v and run_message in v for v in schedule), schedule


def test_correct_schedule_has_no_violation_and_host_check_is_not_vacuous(jfa_device):
    kernel = dataclasses.replace(get_kernel("triton_jfa"), name="zigzag-3",
                                 loader=lambda: build(scheduler=PersistentScheduler(num_sms=3)), _impl=None)
    result = run_case(CASE, kernel, jfa_device)
    assert result.status == "pass" and result.findings_of("schedule") == [], result.explain()
    assert set(result.schedule_stats) == {"fwd", "dq", "dkdv"}
    work = workloads_forward((40, 0, 17, 3), (40, 0, 17, 3), 32)
    good = zigzag(work, 3)
    assert check_schedule(good, work) == []
    sms = [list(t) for t in good.sm_tiles]
    CORRUPTIONS["drop_last_tile_of_busiest"](sms, work)
    bad = dataclasses.replace(good, sm_tiles=tuple(map(tuple, sms)))
    assert [v.kind for v in check_schedule(bad, work)] == ["missing"]
