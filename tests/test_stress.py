"""The stress check (:mod:`jfa_verify.checks.stress`): case sizing, the rerun loop and its bit comparison, the
perturbation schedule, planted kernels caught or passed, and its wiring into ``gate`` and ``jfa-verify stress``."""

import json
from pathlib import Path

import pytest

from jfa_verify.cases.case import Case
from jfa_verify.checks.stress import (
    CPU_SHAPES,
    MODES,
    UNIT_CASES,
    StressOptions,
    mode_reasons,
    pipeline_laps,
    plan_rounds,
    program_caps,
    program_laps,
    run_stress,
    stress_cases,
    stress_length,
    unsupported_shapes,
)
from jfa_verify.cli import main
from jfa_verify.core.errors import InvalidInput
from jfa_verify.protocol.kernel import Capabilities, Kernel, TileSizes
from jfa_verify.protocol.registry import get_kernel, load_plugin
from jfa_verify.scheduling.planning import default_num_sms

N_CPU_CASES = len(CPU_SHAPES) + UNIT_CASES  # the stress cases of a kernel with every shape, on the CPU

PLUGIN = str(Path(__file__).parent / "quality" / "stress_plugin.py")
# a short ragged case the planted kernels run fast: the planted element (sequence 1, head 1, token 40) lies in it
SMALL = Case(kv_lengths=(30, 70, 20), num_heads_q=2, num_heads_kv=2, head_dim=16, dtype="bfloat16", name="small")


def _planted(name: str):
    load_plugin(PLUGIN)
    kernel = get_kernel(name)
    return kernel, kernel.impl.log


def _tiled(tiles: TileSizes) -> Kernel:
    return Kernel(f"tiles-{tiles.block_m}x{tiles.block_n}", "", lambda: None, Capabilities(), lambda p: tiles)


# -- case sizing --------------------------------------------------------------------------------------------------


def test_pipeline_laps_counts_tiles_per_loop_on_a_hand_checked_case():
    tiles = TileSizes(4, 4)
    full, causal = Case(kv_lengths=(16,)), Case(kv_lengths=(16,), causal=True)
    # 16 keys in tiles of 4: each query tile streams 4 KV tiles, each KV tile is streamed by 4 query tiles
    assert pipeline_laps(full, tiles, stages=1) == 4 and pipeline_laps(full, tiles, stages=2) == 2
    # causal: the last query tile sees all 4 KV tiles, the first KV tile is seen by all 4 query tiles
    assert pipeline_laps(causal, tiles, stages=1) == 4
    # the shortest sequence decides; empty sequences have no loop
    assert pipeline_laps(Case(kv_lengths=(16, 4, 0)), tiles, stages=1) == 1


@pytest.mark.parametrize("tiles", [TileSizes(32, 16), TileSizes(64, 64), TileSizes(128, 64), TileSizes(64, 32)])
@pytest.mark.parametrize("laps", [1, 3])
def test_stress_cases_make_many_laps_for_the_kernels_tiles(tiles, laps):
    all_cases = stress_cases(_tiled(tiles), "cpu", laps=laps, stages=4)
    cases = [c for c in all_cases if not c.name.startswith("stress-units-")]
    assert [(c.num_heads_q, c.num_heads_kv, c.head_dim, c.causal) for c in cases] == list(CPU_SHAPES)
    assert {c.causal for c in cases} == {True, False} and {c.head_dim for c in cases} == {64, 128}
    assert any(c.num_heads_q != c.num_heads_kv for c in cases)  # GQA
    for case in cases:
        assert pipeline_laps(case, tiles, stages=4) >= laps, case
        assert max(case.kv_lengths) >= stress_length(tiles, laps, 4)
        assert len(set(case.kv_lengths)) == len(case.kv_lengths)  # ragged, not one length repeated
    # the measure is no constant: the suite's short cases make less than one lap
    assert pipeline_laps(SMALL, tiles, stages=4) < 1


@pytest.mark.parametrize("tiles", [TileSizes(32, 16), TileSizes(64, 64), TileSizes(128, 64)])
@pytest.mark.parametrize("laps, programs", [(1, 4), (8, 132), (3, 7)])
def test_stress_cases_give_every_persistent_program_many_units(tiles, laps, programs):
    """Regression (H200 race kill table, 2026-12-06): the long stress cases give a persistent program one or two
    work units, so the hand-over between units (the epilogue's staging buffer, the last stage of a unit) ran once a
    program; two gluon_jfa race mutants of that hand-over passed 200 reruns. The short-sequence cases make it run
    ``laps`` times a program, causal and not."""
    cases = stress_cases(_tiled(tiles), "cpu", laps=laps, programs=programs)
    units = [c for c in cases if c.name.startswith("stress-units-")]
    assert [(c.head_dim, c.causal) for c in units] == [(128, False), (128, True)]
    for case in units:
        assert program_laps(case, tiles, programs) >= laps, case.name
        assert pipeline_laps(case, tiles, stages=4) < 1  # short units, not long loops
        assert {n % tiles.block_n for n in case.kv_lengths} != {0}  # ragged last tiles among them
    # the measure is no constant: a long case gives a program of 132 fewer units than laps=8 asks
    long_case = next(c for c in cases if c not in units)
    assert program_laps(long_case, tiles, 132) < 8
    assert program_laps(Case(kv_lengths=(tiles.block_m, 1)), tiles, 2) == 1.0
    with pytest.raises(InvalidInput, match="programs=0"):
        program_laps(units[0], tiles, 0)
    with pytest.raises(InvalidInput, match="programs=0"):
        stress_cases(_tiled(tiles), "cpu", laps=1, programs=0)


def test_stress_cases_skip_shapes_outside_the_capabilities():
    no_gqa = Kernel("no-gqa", "", lambda: None, Capabilities(gqa=False, gqa_backward=False),
                    lambda p: TileSizes(32, 16))
    cases = stress_cases(no_gqa, "cpu", laps=1)
    assert cases and all(c.num_heads_q == c.num_heads_kv for c in cases)
    # the shapes left out are named with the kernel's reason (what `stress` prints when none is left)
    skipped = unsupported_shapes(no_gqa, "cpu")
    assert len(skipped) == len(CPU_SHAPES) - len({(c.num_heads_q, c.head_dim, c.causal) for c in cases})
    assert skipped and all("H=4/2" in shape and "gqa" in why.lower() for shape, why in skipped.items()), skipped


def test_a_kernel_refusing_a_case_at_its_first_call_makes_it_unsupported_not_an_error(capsys):
    """Regression (a new user's trial, 2026-12-06): a kernel raising UnsupportedCase when called was an ``error``
    finding (exit 1) in ``stress`` where ``run`` calls the case unsupported; a refusal after a rerun ran stays an
    error. With no case left, ``stress`` names each shape and the reason it was left out, and exits 2."""
    from jfa_verify.core.errors import UnsupportedCase

    calls = []

    def refuse_from(n):
        def impl(q, *args, **kwargs):
            calls.append(1)
            if len(calls) > n:
                raise UnsupportedCase("head dim 16 is not built")
            return q.clone(), torch.zeros(q.shape[1], q.shape[0])
        return impl

    import torch

    for first_ok, status in ((0, "unsupported"), (1, "error")):
        calls.clear()
        kernel = Kernel("refuses", "", lambda n=first_ok: refuse_from(n), Capabilities(backward=False),
                        lambda p: TileSizes(32, 16))
        report = run_stress(kernel, "cpu", StressOptions(reruns=2), cases=[SMALL])
        (v,) = report.verdicts
        assert v.status == status and "head dim 16 is not built" in v.message, v.describe()
        # a kernel with no persistent grid has no units a program to report (a trial, 2026-12-06)
        assert v.units is None and "units a program" not in v.describe() and v.to_dict()["units_per_program"] is None
        assert report.status == ("skip" if status == "unsupported" else "error")
    assert main(["stress", "--kernel", "gluon_jfa", "--device", "cpu", "--reruns", "2"]) == 2
    out = capsys.readouterr().out
    assert out.count("device=cpu not in ('cuda',)") == len(CPU_SHAPES) and "nothing checked" in out, out


# -- the perturbation schedule ------------------------------------------------------------------------------------


def test_plan_rounds_starts_plain_and_cycles_every_mode():
    rounds = plan_rounds(13, 3, MODES, seed=5, sm_count=132)
    assert [r.index for r in rounds] == list(range(13))
    assert rounds[0].mode == "plain" and rounds[0].order == (0, 1, 2) and rounds[0].programs is None
    assert rounds[1].mode != "plain" and rounds[4].mode == "plain"  # perturbed modes first after the baseline
    counts = {m: sum(r.mode == m for r in rounds[1:]) for m in MODES}
    assert counts == {m: 3 for m in MODES}  # 12 perturbed reruns, 4 modes, evenly
    for r in rounds:
        assert sorted(r.order) == [0, 1, 2]
        assert (r.order != (0, 1, 2)) == (r.mode == "launch_order")
        assert (r.programs is not None) == (r.mode == "fewer_sms")
    assert [r.programs for r in rounds if r.mode == "fewer_sms"] == list(program_caps(132))
    assert all(0 < p < 132 for p in program_caps(132)) and program_caps(1) == (1,)
    assert plan_rounds(13, 3, MODES, seed=5, sm_count=132) == rounds  # seeded: the same plan again
    assert plan_rounds(13, 3, MODES, seed=6, sm_count=132) != rounds


def test_plan_rounds_refuses_what_it_cannot_plan():
    with pytest.raises(InvalidInput, match="fewer_sms needs sm_count"):
        plan_rounds(4, 2, ("fewer_sms",))
    with pytest.raises(InvalidInput, match="unknown"):
        plan_rounds(4, 2, ("jitter",))
    with pytest.raises(InvalidInput, match="reruns=1 must be in"):
        StressOptions(reruns=1)
    with pytest.raises(InvalidInput, match="choose from"):
        StressOptions(modes=("plain", "jitter"))


def test_modes_the_cpu_or_the_kernel_rule_out_are_named_with_the_reason():
    plain = Kernel("plain-fn", "", lambda: (lambda *a, **k: None), Capabilities())
    reasons = mode_reasons(plain, __import__("torch").device("cpu"), MODES, n_cases=1)
    assert set(reasons) == {"noise", "fewer_sms", "launch_order"}
    assert "needs a CUDA device" in reasons["noise"]
    assert "no with_programs(n)" in reasons["fewer_sms"] and "no other order" in reasons["launch_order"]


# -- planted kernels ----------------------------------------------------------------------------------------------


def test_a_rare_race_is_caught_at_the_rerun_it_happened_and_localized():
    kernel, log = _planted("stress-rare-race")
    from tests.quality.stress_plugin import RATE, SPOT, TILES

    report = run_stress(kernel, "cpu", StressOptions(reruns=2 * RATE, modes=("plain", "launch_order")), cases=[SMALL])
    (verdict,) = report.verdicts
    assert log.perturbed and verdict.status == "fail"
    first = verdict.first_difference
    assert first.rerun == log.perturbed[0] > 0  # one case: call i is rerun i
    assert verdict.differing_reruns == len(log.perturbed)
    b, h, t = SPOT
    assert first.output == "o" and f"sequence {b}, head {h}, token {t}, M-tile {t // TILES.block_m}" in first.where
    assert not verdict.failures  # a 1-ulp change is inside the budget: only the bit comparison sees it
    assert f"rerun {first.rerun} (mode {first.mode})" in verdict.describe() and "differs bit-wise" in verdict.describe()
    # which modes' reruns differed, of how many (one case: launch_order has nothing to reorder, every rerun is plain)
    assert verdict.reruns_by_mode == {"plain": 2 * RATE} and verdict.differing_by_mode == {"plain": len(log.perturbed)}
    assert f"by mode: plain {len(log.perturbed)} of {2 * RATE - 1}" in verdict.describe()
    assert "no plain rerun ran besides the baseline" not in verdict.describe()


def test_a_difference_with_no_plain_rerun_says_the_mode_is_not_singled_out():
    # regression (a new user's trial): `stress --reruns 2` on a randomly nondeterministic kernel reported every
    # difference as "rerun 1 (mode launch_order)", as if the order had caused it: rerun 1 is the first mode's
    # (here every rerun is fewer_sms's, and the race is the planted kernel's own, whatever the programs)
    kernel, _ = _planted("stress-rare-race")
    from tests.quality.stress_plugin import RATE

    report = run_stress(kernel, "cpu", StressOptions(reruns=RATE + 1, modes=("fewer_sms",)), cases=[SMALL])
    (verdict,) = report.verdicts
    assert verdict.status == "fail" and verdict.differing_by_mode == {"fewer_sms": 1}, verdict.describe()
    assert "no plain rerun ran besides the baseline, so this does not tell the modes from plain nondeterminism" \
        in verdict.describe()
    assert verdict.to_dict()["differing_by_mode"] == verdict.differing_by_mode


def test_a_correct_deterministic_kernel_passes_every_mode_it_can_run():
    kernel, log = _planted("stress-exact")
    cases = [SMALL, Case(kv_lengths=(9, 33), num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="float32",
                         causal=True, name="gqa")]
    report = run_stress(kernel, "cpu", StressOptions(reruns=7), cases=cases)
    assert report.status == "pass", [v.describe() for v in report.verdicts]
    assert all(v.reruns == 7 and v.first_difference is None for v in report.verdicts)
    assert report.modes_run == {"plain": 3, "fewer_sms": 2, "launch_order": 2}
    assert set(report.modes_skipped) == {"noise"}
    # (mode_reasons asks once for one program first: does the kernel run a persistent grid at all?)
    assert set(log.programs) == set(program_caps(default_num_sms(__import__("torch").device("cpu"))))
    assert log.calls == 7 * len(cases)
    assert all(v.units is not None and "units a program" in v.describe() for v in report.verdicts)


def test_a_nondeterministic_kernel_within_its_budget_passes_and_beyond_it_fails():
    kernel, _ = _planted("stress-noisy")
    report = run_stress(kernel, "cpu", StressOptions(reruns=4, modes=("plain",)), cases=[SMALL])
    assert report.status == "pass" and report.verdicts[0].first_difference is None  # never bit-compared

    planted = type(kernel.impl)

    def drifts(log, o, lse, q_offsets):  # every third call moves one LSE far outside its budget
        if log.calls % 3 == 2:
            lse = lse.clone()
            lse[0, 5] += 0.5
        return o, lse

    loud = Kernel("loud", "", lambda: planted(drifts), kernel.capabilities, kernel.tile_sizes_fn)
    report = run_stress(loud, "cpu", StressOptions(reruns=4, modes=("plain",)), cases=[SMALL])
    (verdict,) = report.verdicts
    assert verdict.status == "fail" and verdict.first_failing_rerun == 2
    assert verdict.failures[0].startswith("rerun 2 (mode plain):") and "lse" in verdict.failures[0]


# -- wiring: gate --checks stress and jfa-verify stress ------------------------------------------------------------


def _gate(tmp_path, kernel, *args):
    out = [f"--json={tmp_path / 'g.json'}", f"--junit={tmp_path / 'g.xml'}", f"--markdown={tmp_path / 'g.md'}",
           f"--reproducers={tmp_path / 'repro'}"]
    rc = main(["gate", "--device", "cpu", "--plugin", PLUGIN, "--kernel", kernel, *out, "--checks", "stress", *args])
    results = json.loads((tmp_path / "g.json").read_text())["results"]
    return rc, {r["check"]: r for r in results}


def test_gate_stress_reports_a_rare_race_as_a_finding(tmp_path, capsys):
    rc, results = _gate(tmp_path, "stress-rare-race", "--stress-reruns", "4")  # call 13 is in rerun 2
    stress = results["stress"]
    assert rc == 1 and stress["status"] == "fail", capsys.readouterr().out
    assert "differs bit-wise from rerun 0" in stress["findings"][0]["summary"]
    assert "head 1, token 40" in stress["findings"][0]["summary"]
    assert any("mode noise: skipped: needs a CUDA device" in d for d in stress["details"])


def test_gate_stress_passes_a_correct_kernel(tmp_path, capsys):
    rc, results = _gate(tmp_path, "stress-exact", "--stress-reruns", "2")
    assert rc == 0 and results["stress"]["status"] == "pass" and results["stress"]["cases"] == N_CPU_CASES
    assert "2 reruns per case" in results["stress"]["details"][0]
    # the report's settings say it too (they held the determinism reruns only; a trial, 2026-12-06)
    assert json.loads((tmp_path / "g.json").read_text())["settings"]["stress_reruns"] == 2


def test_stress_command_writes_its_report_and_exits_by_the_verdict(tmp_path, capsys):
    report = tmp_path / "stress.json"
    rc = main(["stress", "--device", "cpu", "--plugin", PLUGIN, "--kernel", "stress-exact", "--reruns", "2",
               "--modes", "plain", "launch_order", "--json", str(report)])
    out = capsys.readouterr().out
    assert rc == 0, out
    payload = json.loads(report.read_text())
    assert payload["status"] == "pass" and payload["modes_run"] == {"plain": 1, "launch_order": 1}
    assert len(payload["cases"]) == N_CPU_CASES and "stress: pass" in out
    assert payload["exit_code"] == 0  # the command's status in its report, as run's (a trial found none)
    # a mode asked for that the reruns never reached is named, with the count that reaches it (it was in neither
    # list: a trial, 2026-12-06)
    assert main(["stress", "--device", "cpu", "--plugin", PLUGIN, "--kernel", "stress-exact", "--reruns", "2",
                 "--modes", "plain", "launch_order", "fewer_sms", "--json", str(report)]) == 0
    payload = json.loads(report.read_text())
    assert payload["modes_run"] == {"plain": 1, "launch_order": 1}, payload["modes_run"]
    assert "--reruns 3 reaches every mode" in payload["modes_skipped"]["fewer_sms"]
    assert "mode fewer_sms: skipped: no rerun left for it" in capsys.readouterr().out
    # every mode asked for skipped (noise needs CUDA): the plain reruns made instead are no pass of what was asked
    # known before any rerun: a usage error at once (it ran every case, then refused: a trial, 2026-12-07)
    report.unlink()
    assert main(["stress", "--device", "cpu", "--plugin", PLUGIN, "--kernel", "stress-exact", "--reruns", "2",
                 "--modes", "noise", "--json", str(report)]) == 2
    captured = capsys.readouterr()
    assert "none of the modes asked for can run here: noise: needs a CUDA device" in captured.err, captured
    assert "jfa-verify stress on cpu" not in captured.out and not report.exists()
    assert main(["stress", "--device", "cpu", "--reruns", "1"]) == 2  # a usage error, not a finding


def _hanging(tmp_path, *args):
    """Run ``args`` as a jfa-verify command in a process of its own (a hang ends it) with the stress-hang kernel."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "jfa_verify.cli", *args, "--device", "cpu", "--plugin", PLUGIN,
                           "--kernel", "stress-hang"], capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_stress_command_names_a_hung_rerun_writes_its_report_and_exits_3(tmp_path):
    from tests.quality.stress_plugin import HANG_AT

    report = tmp_path / "stress.json"
    # (a limit well above an honest rerun's, about 1 s here: on a loaded GPU host one took over 3 s and was called hung)
    done = _hanging(tmp_path, "stress", "--reruns", "3", "--modes", "plain", "--timeout", "12", "--json", str(report))
    assert done.returncode == 3, done.stdout + done.stderr
    payload = json.loads(report.read_text())
    hung = [c for c in payload["cases"] if c["status"] == "hang"]
    assert payload["status"] == "hang" and len(hung) == 1 and payload["exit_code"] == 3, payload
    # call HANG_AT is rerun 1 of the case HANG_AT - N_CPU_CASES (rerun 0 runs every case first)
    assert hung[0]["name"] == payload["cases"][HANG_AT - N_CPU_CASES]["name"]
    assert "rerun 1 (mode plain) had no result after 12 s" in hung[0]["message"]
    assert f"[HANG] stress case {hung[0]['name']}" in done.stderr
    # the case rerun just before the hang had differed at its rerun 1: its verdict survives the hang
    assert [c["status"] for c in payload["cases"]].count("fail") == 1, payload


def test_an_interrupted_stress_command_prints_and_writes_the_reruns_so_far(tmp_path):
    """Regression (a new user's trial): Ctrl-C on ``jfa-verify stress`` exited 130 with nothing but "interrupted":
    no verdicts, no --json."""
    import signal
    import subprocess
    import sys
    import time

    report = tmp_path / "stress.json"
    proc = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "stress", "--device", "cpu", "--plugin", PLUGIN,
                             "--kernel", "stress-exact", "--reruns", "100000", "--modes", "plain", "--json",
                             str(report)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    line = proc.stdout.readline()  # the header: the run has begun
    assert line.startswith("jfa-verify stress on cpu"), line
    time.sleep(8)  # (the references of the six cases take a second or two; the reruns then go on for hours)
    proc.send_signal(signal.SIGINT)
    out = line + proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out
    payload = json.loads(report.read_text())
    assert payload["interrupted"] is True and len(payload["cases"]) == N_CPU_CASES, payload
    assert payload["exit_code"] == 130
    assert "stress: interrupted after" in out and sum(c["reruns"] for c in payload["cases"]) >= 1, out
    # cut short, no case passed (a second trial's report read "pass, 0 rerun(s)" for every case after a stop)
    assert payload["status"] == "interrupted" and {c["status"] for c in payload["cases"]} == {"interrupted"}, payload
    assert "interrupted after" in payload["cases"][0]["message"] and ": pass," not in out, out


def test_a_stop_after_a_stress_case_failed_keeps_that_cases_file(tmp_path):
    """Regression (a new user's trial, 2026-12-06): Ctrl-C on ``jfa-verify stress`` after a case had been seen to
    fail discarded every case file, that one's too: the finding lived only in the terminal. It is kept, with how it
    was rerun; the cases the stop cut short leave none."""
    import signal
    import subprocess
    import sys

    from jfa_verify.run.corpus import read_case_file

    repro = tmp_path / "repro"
    proc = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "stress", "--device", "cpu", "--plugin", PLUGIN,
                             "--kernel", "stress-rare-race", "--reruns", "100000", "--modes", "plain",
                             "--reproducers", str(repro)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=tmp_path)
    lines = []
    for line in proc.stdout:  # the first failure is logged as it happens (call FIRST of the rare race)
        lines.append(line)
        if ": fail at rerun" in line:
            break
    proc.send_signal(signal.SIGINT)
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out
    (kept,) = repro.glob("*.json")
    case, payload = read_case_file(kept)
    assert payload["status"] == "fail" and payload["stress"]["first_difference"]["output"] == "o", payload
    assert case.name in out


def test_gate_stress_marks_the_hung_case_file_and_exits_3(tmp_path):
    from jfa_verify.run.corpus import read_case_file

    repro = tmp_path / "repro"
    done = _hanging(tmp_path, "gate", "--checks", "stress", "--stress-reruns", "2", "--timeout", "12",
                    f"--reproducers={repro}")
    assert done.returncode == 3, done.stdout + done.stderr
    files = sorted(repro.glob("*.json"))
    statuses = [read_case_file(f)[1]["status"] for f in files]
    # the hung case's file says hang; the case that failed just before the hang keeps its finding; the others, whose
    # reruns the hang cut short, leave no file (a "running" one would be offered for replay as a killed process's
    # case: a trial, 2026-12-06)
    assert sorted(statuses) == ["fail", "hang"], statuses
    assert "its case file: " in done.stderr


def test_triton_jfa_caps_its_persistent_programs_for_fewer_sms(jfa_device):
    import dataclasses

    import torch

    base = get_kernel("triton_jfa")
    capped = dataclasses.replace(base, _impl=base.impl.with_programs(2))
    case = Case(kv_lengths=(70, 40), head_dim=16, dtype="float32")
    t = case.materialize(jfa_device)
    problem = case.problem(t)
    runs = [k.run(problem, t.q, t.k, t.v, t.q_offsets, t.k_offsets, instrument=True) for k in (base, capped)]
    assert [len(r.plan.passes["fwd"].programs) for r in runs] == [default_num_sms(jfa_device), 2]
    assert torch.equal(runs[0].o, runs[1].o)  # the same tiles, dealt to fewer programs
    assert get_kernel("triton_jfa_grid").impl.with_programs(2) is None  # one tile per program: nothing to cap
    with pytest.raises(InvalidInput, match="num_programs=0"):
        base.impl.with_programs(0)


def test_a_noise_kernel_the_full_device_cannot_start_is_a_clear_error_not_an_internal_one(monkeypatch):
    """Regression (an H100 shared by eight jfa-verify processes, 2026-12-06): the noise kernel's side stream hit
    "CUDA error: out of memory", and leaving the rounds then called settle() on the stream never made:
    ``AttributeError: 'NoneType' object has no attribute 'synchronize'``, exit 70 as a jfa-verify bug. The start
    raises DeviceOutOfMemory naming the fix, and a NoiseKernel never started leaves without error."""
    import torch

    from jfa_verify.checks.stress import NoiseKernel
    from jfa_verify.core.errors import DeviceOutOfMemory

    def full(*args, **kwargs):
        raise torch.AcceleratorError("CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation' ...")

    monkeypatch.setattr(torch.cuda, "Stream", full)
    noise = NoiseKernel(torch.device("cuda"))
    noise.__exit__(None, None, None)  # never entered: nothing to settle
    with pytest.raises(DeviceOutOfMemory, match=r"--modes plain fewer_sms launch_order") as raised:
        with noise:
            pass
    assert "CUDA error: out of memory" in str(raised.value) and "Search for" not in str(raised.value)
    monkeypatch.setattr(torch.cuda, "Stream", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no driver")))
    with pytest.raises(RuntimeError, match="no driver"):  # not an out-of-memory: raised as it came
        NoiseKernel(torch.device("cuda")).__enter__()


@pytest.mark.gpu
def test_triton_jfa_passes_stress_in_every_mode_on_gpu(jfa_device):
    """Every mode runs on a GPU (noise on a second stream, fewer programs, other orders) and a correct kernel
    passes; 20 reruns keep it short (the gate's default is 200)."""
    import torch

    from jfa_verify.checks.stress import NoiseKernel

    if jfa_device.type != "cuda":
        pytest.skip("the noise kernel needs a CUDA stream")
    with NoiseKernel(jfa_device) as noise:  # queues and drains without error
        noise.burst()
        noise.settle()
    report = run_stress(get_kernel("triton_jfa"), jfa_device, StressOptions(reruns=20))
    assert report.status == "pass", "\n".join(v.describe() for v in report.verdicts)
    assert set(report.modes_run) == set(MODES) and not report.modes_skipped, report.mode_lines()
    units = [v for v in report.verdicts if v.case.name.startswith("stress-units-")]
    assert all(v.laps >= 8 for v in report.verdicts if v not in units) and len(report.verdicts) == 6
    assert len(units) == 2 and all(v.units >= 8 for v in units)  # the persistent loop's hand-overs, 8 a program
    assert {v.case.head_dim for v in report.verdicts} == {64, 128}
    torch.cuda.synchronize(jfa_device)


def test_gluon_jfa_caps_its_persistent_ctas_for_fewer_sms():
    # (the adapter alone, pure Python: gluon_jfa's kernels run on a Hopper GPU only)
    import types

    from jfa_verify.kernels.gluon_jfa._adapter import GluonJFA
    from jfa_verify.scheduling.planning import GridScheduler, PersistentScheduler

    kernel = GluonJFA(types.SimpleNamespace(__name__="kernels"), None, PersistentScheduler(backward="zigzag"))
    capped = kernel.with_programs(5)
    assert (capped.scheduler.num_sms, capped.scheduler.forward, capped.scheduler.backward) == (5, "zigzag", "zigzag")
    assert kernel.scheduler.num_sms is None  # the kernel itself is left as it was
    assert GluonJFA(kernel.kernels, None, GridScheduler()).with_programs(5) is None
    with pytest.raises(InvalidInput, match="num_programs=0"):
        kernel.with_programs(0)


def test_a_stress_finding_of_the_gate_is_a_case_file_listed_by_findings(tmp_path, capsys):
    # regression (new-user trial): the stress check's findings had no case file ("reproducer": null), so `findings`
    # did not list them, and their replay command ran the case once
    from tests.quality.stress_plugin import FIRST

    rc, results = _gate(tmp_path, "stress-rare-race", "--stress-reruns", "4")  # FIRST: in rerun FIRST // N_CPU_CASES
    (finding,) = results["stress"]["findings"]
    assert rc == 1 and finding["reproducer"] and f"jfa-verify replay {finding['reproducer']}" in finding["replay"]
    payload = json.loads(Path(finding["reproducer"]).read_text())
    assert payload["status"] == "fail" and payload["stress"]["reruns"] == 4
    first = payload["stress"]["first_difference"]
    assert first["rerun"] == FIRST // N_CPU_CASES and first["output"] == "o"
    capsys.readouterr()
    assert main(["findings", str(tmp_path / "repro")]) == 1 and finding["reproducer"] in capsys.readouterr().out
    assert len(list((tmp_path / "repro").glob("*.json"))) == 1  # the passing stress cases leave no file


def test_a_stress_finding_replays_by_rerunning_and_says_when_it_reruns_fewer(tmp_path, capsys):
    from jfa_verify.checks.rerun_replay import replay_reruns
    from jfa_verify.run.corpus import Corpus, read_case_file
    from jfa_verify.run.settings import RunSettings
    from tests.quality.stress_plugin import FIRST, RATE

    kernel, log = _planted("stress-rare-race")
    report = run_stress(kernel, "cpu", StressOptions(reruns=FIRST + 1, modes=("plain",)), cases=[SMALL],
                        settings=RunSettings(plugins=(PLUGIN,)), corpus=Corpus(tmp_path / "repro"))
    (verdict,) = report.verdicts
    assert verdict.status == "fail" and verdict.reproducer, verdict.describe()
    case, payload = read_case_file(verdict.reproducer)
    assert payload["stress"]["first_difference"]["rerun"] == FIRST and payload["stress"]["reruns"] == FIRST + 1
    # the same kernel object: its next perturbed call is its RATE-th from now
    replay = replay_reruns(case, payload, kernel, "cpu", RunSettings(), reruns=RATE)
    assert replay.status == "fail" and "the runs differ bit-wise" in replay.lines[0], replay.lines
    assert f"rerun {RATE - 1} (mode plain): o differs bit-wise" in "\n".join(replay.lines)
    # fewer reruns than recorded: said, with where it first showed
    assert main(["replay", verdict.reproducer, "--plugin", PLUGIN, "--reruns", "2"]) == 0
    out = capsys.readouterr().out
    assert f"replaying 2 of the {FIRST + 1} recorded reruns (it first showed at rerun {FIRST})" in out
    # (a trial, 2026-12-06: 2 reruns cannot reach rerun FIRST, and the one case alone has no launch order to vary;
    # both said, and a pass is not called a fix)
    assert f"2 reruns end at rerun 1, before rerun {FIRST} where it first showed" in out
    assert "replayed alone: the stress run's other cases" in out and "this pass does not say it is fixed" in out
    assert "[PASS] 2 reruns" in out and "agree bit for bit" in out
    # one rerun compares with nothing: refused by the argument's own check, which says 2 (it said "> 0" for 0 and then
    # refused 1 as well; a trial, 2026-12-06)
    assert main(["replay", verdict.reproducer, "--plugin", PLUGIN, "--reruns", "1"]) == 2
    assert "--reruns: 1 must be >= 2" in capsys.readouterr().err


def test_a_rerun_difference_shows_the_element_that_moved_most_not_a_signed_zero():
    """Regression (a new user's trial): a nondeterminism finding showed "at sequence 0, head 0, token 0: 0.0 then
    -0.0", the first differing element and the least informative one; it now shows the element that moved most."""
    import torch

    from jfa_verify import Case
    from jfa_verify.checks.determinism import first_difference, rerun_difference
    from jfa_verify.protocol.kernel import TileSizes

    case = Case(kv_lengths=(5, 7), num_heads_q=2, num_heads_kv=2, head_dim=16, dtype="float32")
    t = case.materialize("cpu")
    problem = case.problem(t)
    before = torch.zeros(12, 2, 16)
    after = before.clone()
    after[0, 0, 0] = -0.0
    after[9, 1, 3] = 1e-3
    index = first_difference(before, after)
    assert index == (0, 0, 0)
    tiles = TileSizes(32, 16)
    diff = rerun_difference(problem, tiles, 1, "plain", "o", index, before, after)
    # (both elements differ in their bits: the signed zero counts, as the finding's "bit-wise" says)
    assert diff.index == (9, 1, 3) and diff.after == pytest.approx(1e-3) and diff.moved == 2
    assert "sequence 1" in diff.where and "(2 element(s) moved, max |diff| 0.001)" in diff.describe()
    zeros_only = before.clone()
    zeros_only[0, 0, 0] = -0.0  # a difference in the bits only: the first differing element is what there is
    signed = rerun_difference(problem, tiles, 1, "plain", "o", (0, 0, 0), before, zeros_only)
    assert signed.index == (0, 0, 0) and signed.moved == 1
    # regression (a new user's trial): this read "0 element(s) moved, max |diff| 0"
    assert signed.describe().endswith("(1 element(s) differ in their bits only: signed zeros or NaN payloads)")


def test_the_stress_command_keeps_a_differing_cases_file_and_prints_its_replay(tmp_path, capsys):
    # regression (noticed in a trial): `jfa-verify stress` found a race and wrote no case file, so there was nothing
    # to replay or list; the gate's stress check kept one
    from tests.quality.stress_plugin import FIRST

    repro = tmp_path / "repro"
    rc = main(["stress", "--device", "cpu", "--plugin", PLUGIN, "--kernel", "stress-rare-race", "--reruns", "4",
               "--reproducers", str(repro)])
    out = capsys.readouterr().out
    (kept,) = repro.glob("*.json")  # the passing cases leave none
    assert rc == 1 and f"kept {kept}" in out and f"replay: jfa-verify replay {kept}" in out, out
    payload = json.loads(kept.read_text())
    assert payload["status"] == "fail" and payload["stress"]["first_difference"]["rerun"] == FIRST // N_CPU_CASES
    capsys.readouterr()
    assert main(["findings", str(repro)]) == 1 and str(kept) in capsys.readouterr().out


def test_a_timeout_or_laps_too_large_to_run_is_a_usage_error(tmp_path, capsys):
    """Regression (a new user's trial, 2026-12-06): ``--timeout 1e12`` passed the argument check, then overflowed
    the OS's clock in a worker's wait (internal error, exit 70, a case file left running); ``stress --laps
    99999999999`` ran out of memory building its cases (exit 70). Both are refused with the bound, exit 2."""
    for argv in (["run", "--device", "cpu", "--timeout", "1e12", "--reproducers", str(tmp_path / "r")],
                 ["stress", "--device", "cpu", "--timeout", "1e12"]):
        assert main(argv) == 2
        assert "must be at most 604800" in capsys.readouterr().err
    assert main(["stress", "--device", "cpu", "--laps", "99999999999"]) == 2
    assert "laps=99999999999 must be in [1, 1000]" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # nothing ran, nothing written
