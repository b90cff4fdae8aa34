"""Code generation of ``gluon_jfa`` for Hopper (sm_90a), checked on a machine without a GPU.

Gluon kernels do not run under ``TRITON_INTERPRET``, and this machine has no GPU: what can be
checked here is what the compiler emits. ``kernels/gluon_jfa/codegen.py`` compiles the forward
for sm_90a with a target-only stand-in driver; the PTX must show the Hopper pipeline the kernel
is written for (TMA bulk tensor copies with mbarrier completion, wgmma, warp specialization with
register reallocation) and no fallback to synchronous vector loads of the Q/K/V tiles.

The project's pytest plugin may set ``TRITON_INTERPRET=1`` in this process, so each compile runs
in a subprocess with that variable removed.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = """
import json, torch
from jfa_verify.fuzz.mutation import load_catalogue
from jfa_verify.kernels.gluon_jfa.codegen import compile_for_sm90
catalogue = load_catalogue("gluon_jfa")
out = {{}}
for d in (64, 128):
    for causal in (False, True):
        for kernel, f in compile_for_sm90(d, torch.bfloat16, causal).items():
            out[f"{{kernel}}-d{{d}}-{{'causal' if causal else 'full'}}"] = f
if {mutants}:
    for name in catalogue.mutants:
        out["mutant-" + name] = compile_for_sm90(128, torch.bfloat16, True, kernels_module=catalogue.module(name))
print("FACTS" + json.dumps(out))
"""


def _compile(mutants: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", _SCRIPT.format(mutants=mutants)], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("FACTS"))
    return json.loads(line[len("FACTS"):])


@pytest.fixture(scope="module")
def facts():
    return _compile(mutants=True)


VARIANTS = ["d64-full", "d64-causal", "d128-full", "d128-causal"]


def _check_pipeline(f):
    assert f["target"] == "sm_90a"
    assert f["wgmma"] > 0, f
    assert f["bulk_tensor_copies"] > 0, f  # TMA loads (and the forward's full-tile TMA store)
    assert f["mbarrier"] > 0, f
    assert f["setmaxnreg"] > 0 and "24" in f["setmaxnreg_values"], f  # the load warp gives registers back
    assert f["num_warps"] == 12, f  # 8 consumer warps + a producer warp group
    # no synchronous tile loads (16-byte vectors or 16-bit elements), no cp.async fallback
    assert f["tile_loads"] == 0 and f["cp_async_ca_cg"] == 0, f["global_loads"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_forward_uses_the_hopper_pipeline(facts, variant):
    f = facts["_fwd_kernel-" + variant]
    _check_pipeline(f)
    assert f["fence_proxy_async"] > 0, f  # before the TMA store of O staged in shared memory
    # only 32-bit scalar loads (offsets, schedule) reach ld.global
    assert set(f["global_loads"]) <= {".b32", ".b64"}, f["global_loads"]
    assert sum(f["global_loads"].values()) < 32, f["global_loads"]


@pytest.mark.parametrize("kernel", ["_bwd_dkdv_kernel", "_bwd_dq_kernel"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_backward_uses_the_hopper_pipeline(facts, kernel, variant):
    f = facts[f"{kernel}-{variant}"]
    _check_pipeline(f)
    # besides scalars, only float32 LSE/delta rows (.b32 / .v2.b32) are read with ld.global
    assert set(f["global_loads"]) <= {".b32", ".b64", ".v2.b32"}, f["global_loads"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_backward_delta_pass_reads_o_and_do_once_with_vector_loads(facts, variant):
    f = facts[f"_bwd_delta_kernel-{variant}"]
    assert f["target"] == "sm_90a" and f["wgmma"] == 0 and f["bulk_tensor_copies"] == 0, f
    # O and dO tiles in 16-byte vectors (8 bf16), no float32 copies made first; besides them only the float32 LSE
    # rows it rescales for the dK/dV and dQ kernels
    assert f["global_loads"].get(".v4.b32") and set(f["global_loads"]) <= {".v4.b32", ".b32"}, f["global_loads"]


def test_heads_are_a_grid_axis_unless_a_test_folds_them(monkeypatch):
    import torch

    from jfa_verify.kernels.gluon_jfa import _host
    from jfa_verify.protocol.kernel import PassPlan
    from jfa_verify.scheduling.planning import PersistentScheduler
    from jfa_verify.scheduling.schedules import workloads_forward

    monkeypatch.delenv(_host.HEAD_GROUPS_ENV, raising=False)
    tiles = workloads_forward([300, 17, 1000], [300, 17, 1000], 128)
    plan = PersistentScheduler(forward="round_robin", num_sms=4)(tiles, "fwd", None)
    assert isinstance(plan, PassPlan)
    arrays = _host._schedule(plan, "cpu", 8)
    # one head per CTA even where programs x heads is far past the 4 "SMs": a heavy tile never runs 8 heads
    assert arrays["grid"] == (4, 8) and arrays["heads_per_cta"] == 1
    assert arrays["prog_start"].tolist() == [0, 3, 6, 9, 12]  # 12 tiles dealt round-robin over 4 programs
    assert arrays["tile_seq"].dtype == torch.int32 and arrays["tile_seq"].tolist() == [t.sequence for i in range(4)
                                                                                         for t in tiles[i::4]]
    monkeypatch.setenv(_host.HEAD_GROUPS_ENV, "1")
    assert _host._schedule(plan, "cpu", 8)["grid"] == (4, 1)
    monkeypatch.setenv(_host.HEAD_GROUPS_ENV, "3")  # not a divisor of 8: every head in one CTA
    assert _host._schedule(plan, "cpu", 8)["heads_per_cta"] == 8


class _Recorder:
    """A kernels module whose kernels record their launches (grid, arguments) instead of running."""

    def __init__(self):
        self.launches = []

    def __getattr__(self, name):
        if not name.startswith("_") or name.startswith("__"):
            raise AttributeError(name)
        recorder = self

        class Launch:
            def __getitem__(self, grid):
                return lambda *args, **kw: recorder.launches.append((name, grid, args, kw))
        return Launch()


def test_the_registered_kernel_plans_dkdv_by_the_hooks_zigzag_in_the_backward_only(monkeypatch):
    # the adapter's wiring on CPU tensors (kernels recorded, not run): the forward launches the framework's zigzag
    # query programs planned on the device; the dK/dV tiles (workloads_backward's, dealt by the "dkdv" hook's
    # zigzag) are planned when the backward runs, not by a forward alone, and reach the dK/dV launch; direct calls
    # deal dK/dV tiles round-robin
    import types

    import torch

    from jfa_verify.core.contract import validate_inputs
    from jfa_verify.kernels.gluon_jfa import _host, build
    from jfa_verify.scheduling import device_plan
    from jfa_verify.scheduling.planning import PersistentScheduler
    from jfa_verify.scheduling.schedules import workloads_backward, zigzag

    monkeypatch.delenv(_host.HEAD_GROUPS_ENV, raising=False)
    registered = build()
    assert isinstance(registered.scheduler, PersistentScheduler)
    assert (registered.scheduler.forward, registered.scheduler.backward) == ("zigzag", "zigzag")
    host = types.SimpleNamespace(
        check_launchable=lambda *args: _host.check_launchable(*args, require_cuda=False), describe=_host.describe,
        attention=_host.attention, tile_sizes=_host.tile_sizes, BWD_DKDV_TILES=_host.BWD_DKDV_TILES,
        POISON_ENV=_host.POISON_ENV)
    kmod = _Recorder()
    lengths = [700, 0, 129, 300]
    adapter = type(registered)(kmod, host, PersistentScheduler(backward="zigzag", num_sms=4))
    calls = []  # the passes planned, True for dK/dV
    planned = device_plan.DeviceLaunchPlan.arrays
    monkeypatch.setattr(device_plan.DeviceLaunchPlan, "arrays",
                        lambda self, kind, **kw: calls.append(kind == "dkdv") or planned(self, kind, **kw))
    off = torch.tensor([0, 700, 700, 829, 1129], dtype=torch.int32)
    q, k, v = (torch.randn(1129, 4, 64).to(torch.bfloat16).requires_grad_() for _ in range(3))
    problem = validate_inputs(q, k, v, off, off, causal=True)
    o, lse = adapter.launch(problem, q, k, v, off, off).outputs()
    assert [name for name, *_ in kmod.launches] == ["_fwd_kernel"] and True not in calls  # forward alone: no dK/dV
    o.float().sum().backward()
    assert [name for name, *_ in kmod.launches] == ["_fwd_kernel", "_bwd_delta_kernel", "_bwd_dkdv_kernel",
                                                     "_bwd_dq_kernel"] and True in calls
    _, grid, args, _ = kmod.launches[2]
    workloads = workloads_backward(lengths, lengths, 128, causal=True)
    want = [t for tiles in zigzag(workloads, 4).sm_tiles for t in tiles]
    tile_seq, tile_block, prog_start = args[10:13]
    used = prog_start.tolist()[-1]
    assert list(zip(tile_seq[:used].tolist(), tile_block[:used].tolist())) == [(t.sequence, t.block) for t in want]
    assert grid == (4, 4) and prog_start.tolist()[-1] == len(want)


def test_prepare_plans_once_and_its_launches_only_launch(monkeypatch):
    # the benchmarks' path (GluonJFA.prepare): validation and planning happen in prepare; forward() and
    # backward() launch the kernels again and again with no planning, on the registered kernel's device plan
    import types

    import torch

    from jfa_verify.kernels.gluon_jfa import _host, build
    from jfa_verify.scheduling import device_plan
    from jfa_verify.scheduling.planning import PersistentScheduler

    monkeypatch.delenv(_host.HEAD_GROUPS_ENV, raising=False)
    host = types.SimpleNamespace(
        check_launchable=lambda *args: _host.check_launchable(*args, require_cuda=False), describe=_host.describe,
        prepare=_host.prepare, tile_sizes=_host.tile_sizes, BWD_DKDV_TILES=_host.BWD_DKDV_TILES,
        POISON_ENV=_host.POISON_ENV)
    kmod = _Recorder()
    adapter = type(build())(kmod, host, PersistentScheduler(backward="zigzag", num_sms=4))
    planned = []
    arrays = device_plan.DeviceLaunchPlan.arrays
    monkeypatch.setattr(device_plan.DeviceLaunchPlan, "arrays",
                        lambda self, kind, **kw: planned.append(kind) or arrays(self, kind, **kw))
    off = torch.tensor([0, 300, 300, 429], dtype=torch.int32)
    q, k, v, do = (torch.randn(429, 2, 64).to(torch.bfloat16) for _ in range(4))
    o, lse, forward, backward = adapter.prepare(q, k, v, off, off, do, causal=True)
    assert sorted(set(planned)) == ["dkdv", "dq", "fwd"] and kmod.launches == []  # planned, nothing launched
    before = len(planned)
    forward()
    forward()
    dq, dk, dv = backward()
    assert [name for name, *_ in kmod.launches] == ["_fwd_kernel", "_fwd_kernel", "_bwd_delta_kernel",
                                                     "_bwd_dkdv_kernel", "_bwd_dq_kernel"]
    assert len(planned) == before  # the launches planned nothing
    assert o.shape == q.shape and lse.shape == (2, 429) and dq.shape == q.shape and dk.shape == k.shape
    with pytest.raises(_host.GluonUnsupported, match="head dims"):
        odd = torch.randn(429, 2, 96).to(torch.bfloat16)
        adapter.prepare(odd, odd, odd, off, off, odd)


def test_every_mutant_matches_the_source_and_compiles(facts):
    from jfa_verify.fuzz.mutation import load_catalogue

    catalogue = load_catalogue("gluon_jfa")
    base = facts["_fwd_kernel-d128-causal"]
    assert len(catalogue.mutants) >= 6
    for name in catalogue.mutants:
        assert catalogue.mutated_source(name) != (ROOT / "kernels" / "gluon_jfa" / "_kernels.py").read_text()
        for kernel, f in facts["mutant-" + name].items():
            if kernel != "_bwd_delta_kernel":  # the delta pre-pass is a plain vector-load kernel
                assert f["wgmma"] > 0 and f["bulk_tensor_copies"] > 0, (name, kernel, f)
    fence = facts["mutant-missing_fence_before_tma_store"]["_fwd_kernel"]["fence_proxy_async"]
    assert fence < base["fence_proxy_async"]


def test_host_module_imports_without_gpu_and_reports_tile_sizes():
    import torch

    from jfa_verify.kernels.gluon_jfa import _host

    assert _host.tile_sizes(64, torch.bfloat16) == (128, 128)
    assert _host.tile_sizes(128, torch.float16) == (128, 128)
    for bad in ((96, torch.bfloat16), (128, torch.float32)):
        with pytest.raises(_host.GluonUnsupported):
            _host.tile_sizes(*bad)
    assert issubclass(_host.GluonUnsupported, ValueError)


def test_host_refuses_unsupported_inputs_clearly():
    import torch

    from jfa_verify.core.contract import validate_inputs
    from jfa_verify.kernels.gluon_jfa import _host

    def launchable(q, k, v, off):
        _host.check_launchable(validate_inputs(q, k, v, off, off).call_shape(), q, k, v, require_cuda=False)

    off = torch.tensor([0, 5, 9], dtype=torch.int32)
    q = torch.randn(9, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(_host.GluonUnsupported, match="CUDA"):
        _host.gluon_jagged_attention(q, q, q, off, off)  # the registered kernel, called directly
    wide = torch.randn(9, 2, 128, dtype=torch.bfloat16)[..., :64]
    with pytest.raises(_host.GluonUnsupported, match="k is not"):
        launchable(q, wide, q, off)
    with pytest.raises(_host.GluonUnsupported, match="head dims"):
        odd = torch.randn(9, 2, 96, dtype=torch.bfloat16)
        launchable(odd, odd, odd, off)
    with pytest.raises(ValueError, match="multiple of H_kv"):
        launchable(torch.randn(9, 3, 64, dtype=torch.bfloat16), q, q, off)


def test_registered_with_honest_capabilities_and_unsupported_off_hopper():
    """On this CPU machine every case is unsupported (CUDA sm_90 only), with the reason; never a pass."""
    import torch

    from jfa_verify import Case, get_kernel, run_case

    kernel = get_kernel("gluon_jfa")
    caps = kernel.capabilities
    assert caps.device_types == ("cuda",) and caps.min_compute_capability == caps.max_compute_capability == (9, 0)
    assert caps.head_dims == (64, 128) and not caps.strided_inputs and set(caps.dtypes) == {torch.bfloat16,
                                                                                            torch.float16}
    result = run_case(Case(kv_lengths=(5, 9), head_dim=64), kernel, "cpu")
    assert result.status == "unsupported" and "device=cpu" in result.message
    strided = Case(kv_lengths=(5, 9), head_dim=64, layout="strided").materialize("cpu")
    assert "non-contiguous" in caps.unsupported_reason(Case(kv_lengths=(5, 9), head_dim=64, layout="strided")
                                                        .problem(strided))


_CONTROL_SCRIPT = """
import json, torch
from triton.runtime.driver import driver
from jfa_verify.kernels.gluon_jfa import sanitizer_control
from jfa_verify.core.target_driver import TargetOnlyDriver
driver.set_active(TargetOnlyDriver(90))
compiled = sanitizer_control.control_kernel().warmup(
    torch.zeros(8, dtype=torch.int32), torch.zeros(5, dtype=torch.int32), num_warps=8, grid=(4,))
print("FACTS" + json.dumps({"ptx": compiled.asm["ptx"], "shared": compiled.metadata.shared,
                            "num_warps": compiled.metadata.num_warps}))
"""


def test_the_sanitizer_control_is_the_warp_specialization_scaffold_alone():
    # the gate judges gluon_jfa's racecheck reports against this control: it must carry the same lowering
    # (named barrier 1, setmaxnreg for a 24-register worker) and one mbarrier hand-off, nothing else shared.
    # Compiled in a subprocess without TRITON_INTERPRET, as _compile does: in this process the kernel may
    # have been defined under the interpreter by an earlier test (CI saw "block_argument has no attribute
    # get_element_ty" when one had).
    from jfa_verify.kernels.gluon_jfa import sanitizer_control
    from jfa_verify.protocol.registry import get_kernel

    assert get_kernel("gluon_jfa").sanitizer_control == sanitizer_control.__name__
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", _CONTROL_SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    compiled = json.loads(next(x for x in run.stdout.splitlines() if x.startswith("FACTS"))[len("FACTS"):])
    ptx = compiled["ptx"]
    assert re.search(r"barrier\.sync\s+1;", ptx), ptx[:2000]
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx)
    assert compiled["shared"] <= 64  # the lowering's captures and state bytes only
    assert [len(re.findall(rf"mbarrier\.{op}", ptx)) for op in ("init", "arrive", "try_wait")] == [1, 1, 1]
    assert "wgmma" not in ptx and "cp.async.bulk" not in ptx
    assert compiled["num_warps"] == 12  # 8 default warps + the worker's warp group (with padding)


def test_a_gluon_mutant_is_judged_under_racecheck_with_the_kernels_control_and_sources():
    # a planted-bug copy keeps gluon_jfa's sanitizer control, and the copies of its modules lie where the
    # gate finds them by the base name racecheck prints: its scaffold errors are set aside as gluon_jfa's,
    # its own races judged (a review found every surviving mutant "killed" by the scaffold's errors)
    from jfa_verify.checks import sanitizer
    from jfa_verify.fuzz.mutation import load_catalogue
    from jfa_verify.protocol.registry import get_kernel

    catalogue = load_catalogue("gluon_jfa")
    kernel_mutant = next(n for n, m in catalogue.mutants.items() if m.target == "kernels" and not m.scheduler)
    mutant = catalogue.kernel_of(kernel_mutant)
    assert mutant.sanitizer_control == get_kernel("gluon_jfa").sanitizer_control
    module = catalogue.module(kernel_mutant)
    dirs = sanitizer.source_dirs(mutant.loader) + [Path(d) for d in mutant.source_dirs]
    path = Path(module.__file__)
    assert sanitizer.kernel_sites(path.name, dirs) == [path.resolve()]
    assert len(sanitizer.scaffold_lines(path, "_fwd_kernel")) == 2  # its def line and warp_specialize call
    shipped = (ROOT / "kernels" / "gluon_jfa" / "_kernels.py").resolve()
    assert sanitizer.kernel_sites("_kernels.py", dirs) == [shipped]
    # found from the mutant's own implementation too, without any folder declared
    files = sanitizer.implementation_files(mutant.impl)
    assert path.resolve() in files and sanitizer.kernel_sites(path.name, [], files) == [path.resolve()]
