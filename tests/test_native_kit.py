"""The kit for native kernels: one LaunchPlan builder (``device_plan.launch_plan``) and one schedule flattening
(``device_plan.flatten_programs``) that ``triton_jfa`` and ``gluon_jfa`` share, so the framework's
``check_instrumented_run`` judges both kernels' schedules alike (issue 37, 7).

The plan-building part runs here on CPU tensors (``GluonJFA.plan`` launches no kernel): the plan equals the host
planner's, and a planted wrong plan is caught. The test marked ``gpu`` runs ``gluon_jfa`` instrumented on an H200
(``python -m pytest -m gpu --jfa-device cuda tests/test_native_kit.py``).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from jfa_verify.core.contract import validate_inputs
from jfa_verify.scheduling import device_plan
from jfa_verify.scheduling.invariants import check_instrumented_run
from jfa_verify.scheduling.planning import GridScheduler, PersistentScheduler
from jfa_verify.scheduling.schedules import workloads_backward, workloads_forward

LENGTHS = (1, 127, 128, 129, 0, 300, 64, 257)


def _problem(causal=True, mode="self"):
    offsets = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32)
    total = int(offsets[-1])
    rows = 200 if mode == "broadcast_q" else total
    q = torch.randn(rows, 4, 64, dtype=torch.bfloat16)
    k = torch.randn(total, 2, 64, dtype=torch.bfloat16)
    v = torch.randn(total, 2, 64, dtype=torch.bfloat16)
    q_off = None if mode == "broadcast_q" else offsets
    problem = validate_inputs(q, k, v, q_off, offsets, causal=causal)
    return problem, q_off, offsets


def _gluon(scheduler):
    from jfa_verify.kernels.gluon_jfa import build

    return build(scheduler=scheduler)


@pytest.mark.parametrize("mode", ["self", "broadcast_q"])
@pytest.mark.parametrize("scheduler", [PersistentScheduler(backward="zigzag", num_sms=5),
                                       PersistentScheduler(num_sms=3), GridScheduler()], ids=repr)
def test_gluon_plans_its_launch_as_the_host_planner_and_it_is_judged_clean(scheduler, mode):
    problem, q_off, k_off = _problem(mode=mode)
    gluon = _gluon(scheduler)
    planned, plan = gluon.plan(problem.call_shape(), q_off, k_off, problem)
    assert planned is not None and plan is not None
    assert check_instrumented_run(plan, None) == []
    assert set(plan.arrays) == set(plan.reference) == {"fwd", "dq", "dkdv"}
    # equal, but for a grid's empty device programs past the host's (capacity, not count: no read back)
    assert all(device_plan.disagreement(plan.arrays[k], plan.reference[k]) is None for k in plan.arrays)
    # the passes are the framework's workloads at gluon's tiles, dealt as the host scheduler deals them
    fwd = workloads_forward(problem.q_lengths, problem.k_lengths, 128, causal=True)
    bwd = workloads_backward(problem.q_lengths, problem.k_lengths, 128, causal=True)
    assert plan.passes["fwd"].programs == scheduler(fwd, "fwd", problem).programs
    assert plan.passes["dkdv"].programs == scheduler(bwd, "dkdv", problem).programs
    assert plan.tiles.as_tuple() == (128, 128)
    if isinstance(scheduler, PersistentScheduler):
        assert plan.passes["dkdv"].schedule.name == scheduler.backward


def test_gluon_plan_of_an_uninstrumented_call_is_none_and_launches_from_the_device_plan():
    problem, q_off, k_off = _problem()
    planned, plan = _gluon(None).plan(problem.call_shape(), q_off, k_off)
    assert plan is None and planned.arrays("fwd").programs >= 1


def test_a_host_simulated_scheduler_gives_the_host_plan_with_dq_running_the_forward_programs():
    problem, q_off, k_off = _problem()
    scheduler = PersistentScheduler("dynamic", "dynamic", num_sms=4)
    planned, plan = _gluon(scheduler).plan(problem.call_shape(), q_off, k_off, problem)
    assert planned is None and plan.arrays is None
    assert plan.passes["dq"].programs == plan.passes["fwd"].programs and plan.passes["dq"].kind == "dq"
    assert check_instrumented_run(plan, None) == []


def _planted(plan, kind, **arrays):
    changed = {k: dict(v) for k, v in plan.arrays.items()}
    changed[kind].update(arrays)
    return dataclasses.replace(plan, arrays=changed)


def test_a_planted_device_plan_that_differs_from_the_host_planner_is_caught():
    problem, q_off, k_off = _problem()
    _, plan = _gluon(None).plan(problem.call_shape(), q_off, k_off, problem)
    ids = list(plan.arrays["dkdv"]["tile_id"])
    ids[0], ids[1] = ids[1], ids[0]
    violations = check_instrumented_run(_planted(plan, "dkdv", tile_id=ids), None)
    assert [v.kind for v in violations] == ["device_plan"] and "dkdv" in violations[0].message
    starts = list(plan.arrays["fwd"]["prog_start"])
    starts[1] += 1
    assert [v.kind for v in check_instrumented_run(_planted(plan, "fwd", prog_start=starts), None)] == ["device_plan"]


def test_a_planted_plan_that_drops_or_repeats_a_tile_is_caught_without_visits():
    problem, q_off, k_off = _problem()
    for scheduler in (PersistentScheduler(backward="zigzag", num_sms=5), GridScheduler()):
        _, plan = _gluon(scheduler).plan(problem.call_shape(), q_off, k_off, problem)
        fwd = plan.passes["fwd"]
        programs = list(fwd.programs)
        first = next(p for p, prog in enumerate(programs) if prog)
        dropped = dataclasses.replace(fwd, programs=(programs[first][1:],) + tuple(programs[first + 1:]))
        if fwd.schedule is not None:  # the schedule is what the framework's invariants read
            sm_tiles = list(fwd.schedule.sm_tiles)
            sm_tiles[first] = sm_tiles[first][1:]
            dropped = dataclasses.replace(dropped, schedule=dataclasses.replace(fwd.schedule, sm_tiles=tuple(sm_tiles)))
        broken = dataclasses.replace(plan, passes={**plan.passes, "fwd": dropped})
        violations = check_instrumented_run(broken, None, passes=("fwd",))
        assert violations, scheduler


def test_one_flattening_for_both_kernels_and_the_reference():
    order, starts = device_plan.flatten_programs([[2, 0], [], [1]], 3)
    assert (order, starts) == ([2, 0, 1], [0, 2, 2, 3])
    assert device_plan.flatten_programs([[2, 0], [], [1]], 3, drop_empty=True) == ([2, 0, 1], [0, 2, 3])
    with pytest.raises(ValueError, match="outside"):
        device_plan.flatten_programs([[3]], 3)
    # triton_jfa's host launch arrays are the reference's lists as tensors
    from jfa_verify.kernels.triton_jfa import _host

    problem, _, _ = _problem()
    arrays, plan = _host.plan_launch(problem, PersistentScheduler(num_sms=3))
    for kind in ("fwd", "dq", "dkdv"):
        want = device_plan.host_arrays(plan.passes[kind])
        assert {name: arrays[kind][name].tolist() for name in want} == want


GPU_LENGTHS = [(1, 127, 128, 129, 255, 256, 257, 0, 64), (17, 300, 64, 1000, 129), (0, 5, 0, 0, 300, 0)]


@pytest.mark.gpu
@pytest.mark.parametrize("lengths", GPU_LENGTHS, ids=lambda x: f"{len(x)}seq")
@pytest.mark.parametrize("mode", ["self", "cross", "broadcast_q"])
def test_gluon_jfa_instrumented_runs_have_their_schedules_checked(lengths, mode, jfa_device):
    from jfa_verify import Case, run_case
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.settings import RunSettings

    kernel = get_kernel("gluon_jfa")
    reason = kernel.device_reason(jfa_device)
    if reason is not None:
        pytest.skip(f"gluon_jfa does not run here: {reason}")
    extra = {"cross": dict(q_lengths=tuple(lengths[::-1]), causal_alignment="bottom_right"),
             "broadcast_q": dict(broadcast_q_len=200)}.get(mode, {})
    case = Case(kv_lengths=tuple(lengths), mode=mode, causal=True, num_heads_q=4, num_heads_kv=2, head_dim=128,
                dtype="bfloat16", name=f"gluon-instrumented-{mode}", instrument=True, **extra)
    result = run_case(case, kernel, jfa_device, RunSettings(backward=True))
    assert result.status == "pass", result.explain()
    assert not result.findings_of("schedule"), result.explain()
    # the plan was judged: the forward's zigzag and the dK/dV pass's schedule are in the report
    assert {"fwd", "dkdv"} <= set(result.schedule_stats), result.schedule_stats
    assert result.schedule_stats["fwd"]["scheduler"] == "zigzag"


class _DensePasses:
    """A toy kernel for the autograd scaffold: dense attention of one sequence in float64, its backward by hand
    (``dS = P * (dP - rowsum(dO * O))``), so the scaffold's wiring is checked against torch's own autograd."""

    def __init__(self):
        self.backward_calls = 0

    def forward(self, q, k, v, offsets):
        s = torch.einsum("ihd,jhd->hij", q, k)
        lse = torch.logsumexp(s, dim=-1)
        return torch.einsum("hij,jhd->ihd", torch.softmax(s, dim=-1), v), lse

    def backward(self, q, k, v, o, lse, do, offsets):
        self.backward_calls += 1
        p = torch.exp(torch.einsum("ihd,jhd->hij", q, k) - lse[..., None])
        dv = torch.einsum("hij,ihd->jhd", p, do)
        dp = torch.einsum("ihd,jhd->hij", do, v)
        ds = p * (dp - (do * o).sum(-1).T[..., None])
        return torch.einsum("hij,jhd->ihd", ds, k), torch.einsum("hij,ihd->jhd", ds, q), dv


def test_the_autograd_scaffold_gives_torchs_gradients_and_keeps_lse_out_of_them():
    from jfa_verify.protocol.autograd import differentiable_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(5, 2, 4, dtype=torch.float64, generator=gen).requires_grad_() for _ in range(3))
    offsets = torch.tensor([0, 5], dtype=torch.int32)
    passes = _DensePasses()
    o, lse = differentiable_attention(passes, q, k, v, offsets)
    assert o.requires_grad and not lse.requires_grad  # LSE is an output, never differentiated
    do = torch.randn(o.shape, dtype=torch.float64, generator=gen)
    got = torch.autograd.grad(o, (q, k, v), do)
    want_o, want_lse = _DensePasses().forward(q, k, v, offsets)  # the same math through torch's autograd
    want = torch.autograd.grad(want_o, (q, k, v), do)
    assert passes.backward_calls == 1
    assert torch.equal(lse, want_lse.detach())
    for name, a, b in zip(("dq", "dk", "dv"), got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, msg=name)
    # o taking no part in the loss: the backward still gets a (zero) dO and gives zero gradients
    o, lse = differentiable_attention(passes, q, k, v, offsets)
    zero = torch.autograd.grad(o.sum() * 0, (q, k, v))
    assert all(not t.any() for t in zero)


def test_the_autograd_scaffold_refuses_a_saved_tensor_changed_before_the_backward():
    from jfa_verify.protocol.autograd import differentiable_attention

    q, k, v = (torch.randn(3, 1, 4, dtype=torch.float64).requires_grad_() for _ in range(3))
    offsets = torch.tensor([0, 3], dtype=torch.int32)
    o, _ = differentiable_attention(_DensePasses(), q, k, v, offsets)
    offsets[1] = 2  # the offsets the backward would read are no longer the forward's
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        o.sum().backward()


def test_a_call_with_nothing_to_differentiate_runs_the_forward_alone(monkeypatch):
    """Issue 38: a forward-only call (no input requiring grad, or grad mode off) builds no autograd node (tens of
    microseconds of host time a call on the H100); its outputs are the forward's, grad-free. A call that needs
    gradients still gets them (the test above)."""
    from jfa_verify.protocol import autograd

    def no_node(*args):
        raise AssertionError("an autograd node for a call with nothing to differentiate")

    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(5, 2, 4, dtype=torch.float64, generator=gen) for _ in range(3))
    offsets = torch.tensor([0, 5], dtype=torch.int32)
    want = _DensePasses().forward(q, k, v, offsets)
    monkeypatch.setattr(autograd._Attention, "apply", no_node)
    for args, grad in (((q, k, v), True), ((q.detach().requires_grad_(), k, v), False)):
        with torch.set_grad_enabled(grad):
            o, lse = autograd.differentiable_attention(_DensePasses(), *args, offsets)
        assert not o.requires_grad and not lse.requires_grad
        assert torch.equal(o, want[0]) and torch.equal(lse, want[1])
