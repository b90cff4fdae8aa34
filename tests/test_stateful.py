"""Related calls in sequence: a Hypothesis stateful test finds host state kept between calls, and the
shortest sequence that shows it replays from its call file."""


import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st

from jfa_verify import Case
from jfa_verify.checks.calls import read_call_file
from jfa_verify.checks.stateful import call_sequence_machine, moved_tokens, same_maxima
from jfa_verify.protocol.kernel import Kernel
from jfa_verify.protocol.registry import add_kernel, get_kernel
from jfa_verify.run.runner import run_case

SMALL = st.builds(Case, kv_lengths=st.lists(st.integers(1, 9), min_size=2, max_size=3).map(tuple),
                  dtype=st.just("float32"), head_dim=st.just(16), num_heads_q=st.just(1), num_heads_kv=st.just(1))
STEPS = settings(max_examples=6, stateful_step_count=3, deadline=None, database=None)


def test_related_calls_keep_shapes_or_maxima():
    case = Case(kv_lengths=(5, 9, 2), mode="cross", q_lengths=(4, 1, 3))
    moved = moved_tokens(case, 0, 2, 3)
    assert moved.kv_lengths == (2, 9, 5) and sum(moved.q_lengths) == sum(case.q_lengths)
    same = same_maxima(case, 17, [1, 0])
    assert same.kv_lengths == (9, 2, 5) and same.offsets_start == 17 and max(same.q_lengths) == 4


def test_real_kernel_passes_sequences_of_related_calls(jfa_kernel, jfa_device, tmp_path):
    machine = call_sequence_machine(jfa_kernel, jfa_device, corpus=tmp_path, case_strategy=SMALL)
    machine.TestCase.settings = STEPS
    machine.TestCase().runTest()
    assert not list(tmp_path.glob("*.calls.json"))


def _stale_plan_kernel():
    """``triton_jfa`` behind a host cache keyed on the tensors' shapes: a second call with the same shapes
    and other lengths runs on the first call's offsets and plan (a planted host-state bug: metadata
    built for one set of lengths and used with another)."""
    base = get_kernel("triton_jfa")

    class Cached:
        def __init__(self):
            self.plans = {}

        def launch(self, problem, q, k, v, q_off, k_off, *, instrument=False):
            kept = (problem, None if q_off is None else q_off.clone(), k_off.clone())
            problem, q_off, k_off = self.plans.setdefault((q.shape, k.shape), kept)
            return base.impl.launch(problem, q, k, v, q_off, k_off, instrument=instrument)

    return add_kernel(Kernel("planted-stale-plan", "planted host cache", Cached, base.capabilities,
                             base.tile_sizes_fn))


def test_host_state_between_calls_is_found_and_replays_as_the_sequence(jfa_device, tmp_path):
    kernel = _stale_plan_kernel()
    machine = call_sequence_machine(kernel, jfa_device, corpus=tmp_path, case_strategy=SMALL)
    # no shrinking in CI (each step runs the kernel); the failing sequence is written all the same
    machine.TestCase.settings = settings(STEPS, max_examples=15, phases=[Phase.explicit, Phase.generate])
    with pytest.raises(AssertionError, match="the sequence: jfa-verify replay"):
        machine.TestCase().runTest()
    relation, payload = read_call_file(tmp_path / "sequence-planted-stale-plan.calls.json")
    calls = relation.cases()
    assert len(calls) >= 2 and payload["status"] == "fail"
    # each call alone passes on a fresh kernel object: only the sequence shows the bug
    assert all(run_case(c, _stale_plan_kernel(), jfa_device).status == "pass" for c in calls)
    assert relation.check(_stale_plan_kernel(), jfa_device) is not None  # the sequence replays
    assert relation.check(get_kernel("triton_jfa"), jfa_device) is None
