"""The mutation-testing CI gate: every planted bug of the packaged ``triton_jfa`` catalogue is killed.

One test per mutant (so ``pytest -n 2`` spreads them over workers): the
targeted cases of :func:`jfa_verify.fuzz.mutation.targeted_cases`, then a short campaign,
must make the mutant fail, and the test names the output that killed it. The
real kernel must pass the same targeted cases, so a kill is never a false alarm.
GPU-only mutants (inputs too large for the CPU interpreter) run only on CUDA.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jfa_verify.fuzz.mutation import load_catalogue, run_mutant, targeted_cases
from jfa_verify.protocol.registry import get_kernel

CATALOGUE = load_catalogue("triton_jfa")
MUTANTS = CATALOGUE.mutants

CAMPAIGN_EXAMPLES = 10


def test_catalogue_has_at_least_25_described_mutants():
    assert len(MUTANTS) >= 25, sorted(MUTANTS)
    for name, m in MUTANTS.items():
        assert m.description.strip(), name
        assert not m.gpu_only or m.gpu_reason, f"{name}: gpu-only without a reason"
        if not m.scheduler:
            CATALOGUE.mutated_source(name)  # the edit still applies to the current source
    assert sum(not m.gpu_only for m in MUTANTS.values()) >= 25


def test_real_kernel_passes_the_targeted_cases(jfa_device):
    from jfa_verify.run.runner import run_case

    kernel = get_kernel("triton_jfa")
    for case in targeted_cases(kernel, jfa_device.type):
        result = run_case(case, kernel, jfa_device)
        assert result.status == "pass", result.explain()


# Mutants that need more than 2^31 elements take most of a GPU's memory: marked gpu_exclusive, run
# alone (not beside pytest-xdist workers sharing the card: one ran out of memory that way on the H200).
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.gpu_exclusive) if m.gpu_only else n
                                  for n, m in MUTANTS.items()])
def test_mutant_is_killed(name, jfa_device):
    mutant = MUTANTS[name]
    if mutant.gpu_only and jfa_device.type != "cuda":
        pytest.skip(f"gpu-only mutant: {mutant.gpu_reason}")
    result = run_mutant(name, device=jfa_device, max_examples=CAMPAIGN_EXAMPLES)
    assert result.killed, f"mutant {name!r} ({mutant.description}) {result.status} after {result.cases_run} case(s)"
    # killed by what it computed (or a crash, a hang), not by raising: a patch that does not compile proves nothing
    assert result.killing_status != "error", result.explanation
    assert result.outputs, result.explanation
    print(f"{name}: killed by {', '.join(result.outputs)} on "
          f"{result.killing_case.name or result.killing_case.describe()}")


def test_cli_mutants_prints_the_kill_table_and_fails_on_a_survivor(monkeypatch, capsys):
    import jfa_verify.fuzz.mutation as mutation
    from jfa_verify.cli import main

    assert main(["mutants", "--device", "cpu", "--only", "offsets_at_b", "int32_token_stride_overflow",
                 "--max-examples", "0"]) == 0
    out = capsys.readouterr().out
    assert "| offsets_at_b |" in out and "killed (targeted)" in out and "skipped (gpu-only)" in out

    survivor = mutation.MutantResult("fake", "a planted survivor", "survived")
    monkeypatch.setattr(mutation, "run_mutants", lambda *a, **k: [survivor])
    assert main(["mutants", "--device", "cpu"]) == 1
    assert "SURVIVED: fake" in capsys.readouterr().out


def test_targeted_cases_sit_at_the_device_tiles_with_block_m_unlike_block_n():
    from jfa_verify.protocol.kernel import tiles_for_shape

    kernel = get_kernel("triton_jfa")
    for device_type in ("cpu", "cuda"):
        cases = targeted_cases(kernel, device_type)
        bm, bn = tiles_for_shape(kernel, cases[0].head_dim, cases[0].dv, None, device_type).as_tuple()
        assert bm != bn  # a query-tile/key-tile mix-up changes the result
        assert cases[0].kv_lengths == (bn + 1, 0, bm + 1, 5)
        assert all(c.head_dim == cases[0].head_dim for c in cases)


def test_mutants_command_runs_mutants_in_parallel_processes(tmp_path, capsys):
    import json

    from jfa_verify.cli import main

    out = tmp_path / "m.json"
    rc = main(["mutants", "--device", "cpu", "--jobs", "2", "--only", "sched_repeats_tile", "preprocess_tile_size",
               "--json", str(out)])
    assert rc == 0, capsys.readouterr().out
    got = json.loads(out.read_text())
    assert [r["name"] for r in got] == ["sched_repeats_tile", "preprocess_tile_size"]  # input order kept
    assert all(r["status"] == "killed" and r["seconds_to_failure"] is not None for r in got)


# The subtle numerical bugs of the budgets issue, with the output that must catch each in float32 and in
# float16 (under the calibrated table). A rescale factor rounded to bf16 scales the accumulator and the
# running sum alike, so O moves only through the mixing of old and new KV tiles: in float16 LSE, which
# keeps the whole rounding, is the output that catches it (on the H200 O did not).
NUMERICAL = {
    "rescale_in_bf16": ("o", "lse"),
    "lse_log2": ("lse", "lse"),
    "final_norm_skipped_one_tile": ("o", "o"),
    "softmax_scale_off": ("o", "o"),
    "acc_not_rescaled": ("o", "o"),
    "dv_low_precision": ("dv", "dv"),
}


def numerical_case(device_type: str, dtype: str):
    """Lengths at the device's own tile boundaries, several KV tiles: head dim 16 on the interpreter
    (tiles 32/16), 64 on a GPU (tiles 64/64; head dim 160's float32 IEEE tiles do not fit shared memory
    next to a mutant's extra conversions, which made the kernel raise instead of computing)."""
    from jfa_verify.cases.case import Case
    from jfa_verify.protocol.kernel import tiles_for_shape

    d = 16 if device_type != "cuda" else 64
    bm, bn = tiles_for_shape(get_kernel("triton_jfa"), d, d, None, device_type).as_tuple()
    kv = (bn + 1, 0, bm + 1, 5) if device_type != "cuda" else (bn + 1, 0, 4 * bn + 1, 5)
    return Case(kv_lengths=kv, num_heads_q=4, num_heads_kv=2, head_dim=d, dtype=dtype, name=f"numerical/{dtype}")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", list(NUMERICAL))
def test_subtle_numerical_bug_is_caught_by_the_output_it_names(name, dtype, jfa_device):
    """float32: the rule's floors; float16: the packaged (calibrated) table. The real kernel passes the case."""
    from jfa_verify.run.runner import run_case

    case = numerical_case(jfa_device.type, dtype)
    assert run_case(case, get_kernel("triton_jfa"), jfa_device).status == "pass"
    result = run_case(case, CATALOGUE.kernel_of(name), jfa_device)
    failing = [c.name for c in result.failing]
    want = NUMERICAL[name][dtype == "float16"]
    assert result.status == "fail" and want in failing, (name, dtype, failing, result.explain())


@pytest.mark.slow
def test_rescale_in_bf16_is_caught_by_lse_in_bfloat16_over_32_kv_tiles(jfa_device):
    """bfloat16 inputs, calibrated table: the rescale computed in bf16 fails LSE once a row's
    maximum moves over enough KV tiles (32 tiles: 512 tokens on the CPU interpreter; on the
    55-63-token targeted cases it passes; not yet run on a GPU). dV
    accumulated in bf16 is not caught in bfloat16 even at 1,024 tokens (headroom 0.35 against
    0.15 for the correct kernel): it is caught in float32 and float16 above."""
    import torch

    from jfa_verify.cases.case import Case
    from jfa_verify.protocol.kernel import tiles_for_shape
    from jfa_verify.run.runner import run_case

    kernel = get_kernel("triton_jfa")
    block_n = tiles_for_shape(kernel, 16, 16, torch.bfloat16, jfa_device.type).block_n
    tokens = 32 * block_n  # 32 KV tiles: 512 tokens on the interpreter's tiles (checked there)
    case = Case(kv_lengths=(tokens,), dtype="bfloat16", num_heads_q=1, num_heads_kv=1, head_dim=16, seed=7)
    assert run_case(case, kernel, jfa_device).status == "pass"
    result = run_case(case, CATALOGUE.kernel_of("rescale_in_bf16"), jfa_device)
    assert result.status == "fail" and [c.name for c in result.failing] == ["lse"], result.explain()


def _cpu_run_only(device) -> None:
    """These tests run a mutant on the CPU (``device="cpu"``) whatever the session's device. In the GPU gate's
    process (H200, 2026-12-04) the CPU run's targeted cases held no broadcast-Q case, so a mutant raising on every
    other case came out "broken" there (cause not found); the CPU job is where they hold."""
    if device.type != "cpu":
        pytest.skip("a CPU mutant run: judged in the CPU job (--jfa-device cpu)")


def _one_host_mutant(tmp_path, name: str, description: str, statement: str) -> Path:
    """A catalogue file (the regression catalogue's targets) of one mutant that runs ``statement`` in the host code."""
    import json

    header = {k: v for k, v in json.loads((Path(__file__).parent / "regression_catalogue.json").read_text()).items()
              if k != "mutants"}
    line = '    fw = plan["fwd"]'
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(dict(header, name=name, mutants=[
        {"name": name, "description": description, "target": "host", "old": line, "new": f"{line}; {statement}"}])))
    return path


def test_a_mutant_that_hangs_is_killed_by_the_hang_and_the_run_goes_on(tmp_path):
    # regression: a mutant whose loop bound went wrong ran one interpreter case for hours and held CI
    # (no per-case limit in isolated mutant runs)
    from jfa_verify.fuzz.mutation import run_mutants

    path = _one_host_mutant(tmp_path, "host_sleeps", "the host code sleeps for ten minutes",
                            "__import__('time').sleep(600)")
    (result,) = run_mutants(["host_sleeps"], catalogue=str(path), device="cpu", stage="suite", isolate=True,
                            max_cases=3, case_timeout_s=5)
    assert result.status == "killed" and result.stage == "hang" and result.outputs == ["hang"], result
    assert result.killing_case is not None and "after 5 s" in result.explanation


def test_the_mutants_command_isolates_each_mutant_so_a_crash_is_its_verdict(tmp_path):
    # regression: `jfa-verify mutants --stage campaign` (one job) ran mutants in its own process; a mutant
    # that crashed the interpreter ("free(): invalid pointer", exit 134) ended the command: no table, no JSON
    import json
    import subprocess
    import sys

    path = _one_host_mutant(tmp_path, "host_aborts", "the host code aborts the process", "__import__('os').abort()")
    out = tmp_path / "m.json"
    proc = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "mutants", "--catalogue", str(path), "--device",
                           "cpu", "--stage", "suite", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (result,) = json.loads(out.read_text())
    assert result["status"] == "killed" and result["stage"] == "crash", result


def test_an_interrupted_mutants_command_keeps_the_verdicts_that_finished(tmp_path):
    # regression: `jfa-verify mutants --json` wrote its JSON only at the end, so a run cut by `timeout` (the H200
    # detection script's stages) lost every verdict, and its threads waited for the mutants still running
    import json
    import signal
    import subprocess
    import sys
    import time

    header = {k: v for k, v in json.loads((Path(__file__).parent / "regression_catalogue.json").read_text()).items()
              if k != "mutants"}
    line = '    fw = plan["fwd"]'
    mutants = [{"name": name, "description": name, "target": "host", "old": line, "new": f"{line}; {statement}"}
               for name, statement in (("host_aborts", "__import__('os').abort()"),
                                       ("host_sleeps", "__import__('time').sleep(600)"))]
    path = tmp_path / "two.json"
    path.write_text(json.dumps(dict(header, name="two", mutants=mutants)))
    out = tmp_path / "m.json"
    proc = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "mutants", "--catalogue", str(path), "--device",
                             "cpu", "--stage", "suite", "--jobs", "2", "--json", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert out.exists(), "no verdict written while the run goes on"
        assert [r["name"] for r in json.loads(out.read_text())] == ["host_aborts"]  # the sleeper is still running
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)  # the sleeper's worker is killed, not waited for
    finally:
        proc.kill()
    assert proc.returncode == 130, stdout[-2000:]
    assert "interrupted: 1 of 2 mutants has a verdict" in stdout, stdout[-2000:]
    (kept,) = json.loads(out.read_text())
    assert kept["name"] == "host_aborts" and kept["status"] == "killed" and kept["stage"] == "crash", kept


def test_mutants_take_the_shared_suite_only_when_their_suite_inputs_match(monkeypatch, jfa_device):
    # jfa-verify mutants builds the default suite once and hands it to every mutant process (each built its own
    # covering array before: 7 s a mutant on the CPU); a mutant whose bug changes what the suite is built from
    # (capabilities, tiles) must build its own
    from jfa_verify import Case
    from jfa_verify.checks.suites import suite_inputs
    from jfa_verify.fuzz import mutation

    cat = load_catalogue("triton_jfa")
    name = next(n for n, m in cat.mutants.items() if not m.scheduler and not m.gpu_only)
    own = Case(kv_lengths=(3, 5), head_dim=16, name="own")
    shared = Case(kv_lengths=(4,), head_dim=16, name="shared")
    built = []
    monkeypatch.setattr(mutation, "_stage_cases", lambda *a: built.append(a) or ([own], []))
    inputs = suite_inputs(cat.kernel_of(name), jfa_device.type)
    taken = run_mutant(name, catalogue=cat, device=jfa_device, stage="suite", shared_suite=(inputs, (shared,), ()))
    assert not built and taken.cases_run == 1 and (not taken.killed or taken.killing_case.name == "shared")
    other = (inputs[0], inputs[1] + 1, inputs[2])  # another SM count: another suite
    rebuilt = run_mutant(name, catalogue=cat, device=jfa_device, stage="suite", shared_suite=(other, (shared,), ()))
    assert len(built) == 1 and rebuilt.cases_run == 1 and (not rebuilt.killed or rebuilt.killing_case.name == "own")


def test_the_campaign_stage_stops_at_its_first_finding(tmp_path, monkeypatch, jfa_device):
    # regression (H200, 2026-12-02): the campaign stage ran the whole covering array and every example after the
    # first failure (which alone is its verdict); on the H200 no mutant had a verdict in 250 s
    _cpu_run_only(jfa_device)
    from jfa_verify.fuzz import campaign

    # (raises on every case but broadcast-Q ones: a kernel that raises everywhere is broken, not killed)
    path = _one_host_mutant(tmp_path, "host_raises", "the host code raises",
                            "assert problem.mode == 'broadcast_q', 'planted'")
    summaries = []
    real = campaign.run_campaign
    monkeypatch.setattr(campaign, "run_campaign", lambda *a, **k: summaries.append(real(*a, **k)) or summaries[-1])
    result = run_mutant("host_raises", catalogue=str(path), device="cpu", stage="campaign", max_examples=20)
    (summary,) = summaries
    # (the first failing case is the first row that is not broadcast-Q: which one depends on the covering array's
    # order, which grows with the contract; nothing may run after it)
    first = summary.first_failure_at
    assert first is not None and summary.statuses["pass"] == first - 1, summary.to_dict()
    assert result.status == "killed" and result.cases_run == first, result
    assert summary.cases_run == first and len(summary.failures) == 1, summary.to_dict()


def test_a_mutant_process_dead_between_cases_is_killed_by_a_crash(tmp_path):
    # regression (CPU campaign, 2026-12-02): a mutant's process died of "realloc(): invalid pointer" after a case
    # had passed (memory its out-of-bounds write corrupted, found at a later allocation); with no case file left
    # running it was listed as an error, and then as SURVIVED
    from jfa_verify.fuzz.mutation import _crash_result, _mark_judged

    cat = load_catalogue("triton_jfa")
    name = next(iter(cat.mutants))
    _mark_judged(str(tmp_path))  # (what the worker writes once a case has had its verdict)
    result = _crash_result(name, cat[name], tmp_path, "BrokenProcessPool: terminated abruptly")
    assert (result.status, result.stage, result.outputs, result.killing_case) == ("killed", "crash", ["crash"], None)
    assert "between cases" in result.explanation and "BrokenProcessPool" in result.explanation


def test_a_mutant_process_dead_before_any_verdict_is_not_judged_not_killed(tmp_path):
    # regression (2026-12-06): a worker that died before running anything (here its start-up failed: a script
    # calling run_mutants without a __main__ guard) was "killed by a crash", so a gate whose every worker failed to
    # start killed every mutant and passed
    from jfa_verify.fuzz.mutation import _crash_result

    cat = load_catalogue("triton_jfa")
    name = next(iter(cat.mutants))
    result = _crash_result(name, cat[name], tmp_path, "BrokenProcessPool: terminated abruptly")
    assert (result.status, result.killed) == ("error", False), result
    assert "before its first case" in result.reason and "BrokenProcessPool" in result.reason


def test_mutant_workers_that_cannot_start_leave_every_mutant_not_judged(tmp_path):
    # the same end to end: the fork server's workers re-run a script's main module, which here starts the mutants
    # again and so raises in every worker before any case
    script = tmp_path / "no_main_guard.py"
    script.write_text(
        "import json, sys\n"
        "from jfa_verify.fuzz.mutation import load_catalogue, run_mutants\n"
        "names = list(load_catalogue('triton_jfa').mutants)[:1]\n"
        "results = run_mutants(names, catalogue='triton_jfa', device='cpu', jobs=1, isolate=True, max_examples=0)\n"
        "print(json.dumps([[r.name, r.status] for r in results]))\n")
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    statuses = json.loads(run.stdout.strip().splitlines()[-1])
    assert [s for _, s in statuses] == ["error"], (statuses, run.stderr[-2000:])


def test_the_mutants_command_names_a_mutant_it_could_not_judge_apart_from_survivors(monkeypatch, capsys):
    from jfa_verify.cli import main
    from jfa_verify.fuzz import mutation
    from jfa_verify.fuzz.mutation import MutantResult

    a, b = list(load_catalogue("triton_jfa").mutants)[:2]
    rows = [MutantResult(a, "", "error", reason="worker failed: MemoryError"), MutantResult(b, "", "survived")]
    monkeypatch.setattr(mutation, "run_mutants", lambda *a, **k: rows)
    assert main(["mutants", "--stage", "suite", "--device", "cpu", "--only", a, b]) == 1
    out = capsys.readouterr().out
    assert f"SURVIVED: {b}\n" in out and f"NOT JUDGED (the run of the mutant failed, or its patch no longer " \
        f"applies): {a} (worker failed: MemoryError)" in out
    # the table says it as the footer does, and counts it apart from the survivors
    assert f"| {a} |  | not judged |" in out and "0/2 mutants killed (0 skipped, 1 survived, 1 not judged)" in out, out


def _shipped_catalogues() -> list[str]:
    from importlib import resources

    packaged = [p.name[:-5] for p in resources.files("jfa_verify.fuzz").joinpath("catalogues").iterdir()
                if p.name.endswith(".json")]
    blind = Path(__file__).parent / "regression_catalogue.json"
    return (sorted(packaged) + ([str(blind)] if blind.is_file() else [])
            + [str(SELECTION_TILE_MUTANTS), str(BLIND5_SURVIVORS)])


SELECTION_TILE_MUTANTS = Path(__file__).parent / "selection_tile_mutants.json"
BLIND5_SURVIVORS = Path(__file__).parent / "blind5_survivors.json"



@pytest.mark.parametrize("name", ["dq_sparse_tile_as_block", "dkdv_sparse_tile_as_block"])
def test_sparse_bugs_of_blocks_spanning_several_tiles_die_in_the_default_suites_rows(name, tmp_path,
                                                                                  interpreter_device):
    """Regression (blind set 4, read: docs/evidence/cpu-2026-12-05-blind4): a block-sparse dQ (dK/dV) that takes its
    query (KV) tile's number for the selection's block number survived the default suite, whose sparse rows all had
    blocks of the kernel's own tiles. The covering array now has rows whose blocks span several tiles (the
    selection_blocks dimension); one of them kills each. The mutants walk far outside their ranges there and take
    minutes in the interpreter before their wrong values come out (the suite stage waits: killed by dq, by dk and
    dv), so here each row runs in a case worker with a short timeout, and a row the mutant does not pass is one the
    real kernel passes well within it."""
    import time

    import torch

    from jfa_verify import Verifier, get_kernel, load_plugin, run_case
    from jfa_verify.cases.dimensions import Target, dimension
    from jfa_verify.cases.pairs import covering_array
    from jfa_verify.run.settings import RunSettings

    plugin = str(Path(__file__).with_name("selection_tile_plugin.py"))
    load_plugin(plugin)
    target = Target(get_kernel("triton_jfa"), "cpu")
    rows = [c for c in covering_array(target) if dimension("selection_blocks").classify(c, target) == {"multi_tile"}]
    assert len(rows) >= 5
    settings = RunSettings(isolate=True, timeout_s=10, plugins=(plugin,))
    with Verifier(get_kernel(f"tile-mutant-{name}"), "cpu", tmp_path, settings) as verifier:
        killer = next((r for c in rows if (r := verifier.verify(c)).status != "pass"), None)
    # (walking outside its ranges, a mutant may also end its worker: the interpreter does not bound accesses)
    assert killer is not None and killer.status in ("fail", "hang", "crash"), (name, killer and killer.explain())
    t0 = time.monotonic()
    assert run_case(killer.case, get_kernel("triton_jfa"), torch.device("cpu")).status == "pass"
    assert time.monotonic() - t0 < 10 / 2  # (a hang of the mutant is not a slow machine's)


@pytest.mark.parametrize("name, rows", [
    ("dkdv_causal_first_row_plus1", "the diagonal-offsets case"),
    ("host_fwd_aligned_ignores_v", "the misaligned_v case"),
])
def test_blind_set_5_survivors_die_on_the_suite_cases_built_for_their_class(name, rows, interpreter_device):
    """Regression (blind set 5, read: docs/evidence/cpu-2026-12-06-blind5): a dK/dV causal row range starting one
    row late survived the default suite, whose bottom-right diagonals never sat 1 past a KV tile with a query tile
    ending there (L_k - L_q = 1 mod BLOCK_N); a forward alignment check leaving V out survived because no layout
    misaligned V alone. The suite now ends with a case of sequences at every diagonal offset near the tiles and
    cases with k alone and v alone misaligned; each mutant fails there, the kernel passes."""
    import torch

    from jfa_verify import get_kernel, run_case
    from jfa_verify.checks.suites import default_suite
    from jfa_verify.fuzz.mutation import register_catalogue

    kernel = get_kernel("triton_jfa")
    prefix = "diagonal-offsets/" if name.startswith("dkdv") else "misaligned_v/"
    cases = [c for c in default_suite("cpu", kernel=kernel).cases if c.name.startswith(prefix)]
    assert cases, rows
    from jfa_verify.protocol.registry import kernel_names

    if f"blind5-{name}" not in kernel_names():  # (once per process: the other parameter registered both)
        register_catalogue(load_catalogue(str(BLIND5_SURVIVORS)), prefix="blind5-")
    mutant = get_kernel(f"blind5-{name}")
    statuses = []
    for case in cases:  # (up to the first that fails)
        statuses.append(run_case(case, mutant, torch.device("cpu")).status)
        if statuses[-1] == "fail":
            break
    assert statuses[-1] == "fail", (name, statuses)
    killer = case
    assert run_case(killer, kernel, torch.device("cpu")).status == "pass"


@pytest.mark.parametrize("catalogue", _shipped_catalogues(), ids=lambda c: Path(c).stem)
def test_every_shipped_mutant_applies_to_the_kernel_source_as_it_is(catalogue):
    # regression: sliding windows came into the dQ kernel four minutes after the blind catalogue was written, so one
    # of its mutants no longer applied; every case then failed on the patch (InvalidInput as the kernel's error) and
    # counted as a kill for a day, in CI and in the H200 kill table
    cat = load_catalogue(catalogue)
    stale = {}
    for name, mutant in cat.mutants.items():
        if not mutant.scheduler:
            try:
                cat.mutated_source(name)
            except Exception as e:  # noqa: BLE001 (the message says what to update)
                stale[name] = str(e)[:300]
    assert not stale, stale


def test_a_stale_mutant_is_not_judged_never_killed(tmp_path):
    import json

    path = _one_host_mutant(tmp_path, "host_stale", "a patch of a line the source no longer has", "pass")
    data = json.loads(path.read_text())
    data["mutants"][0]["old"] = "    a line that is not in the host code\n"
    path.write_text(json.dumps(data))
    result = run_mutant("host_stale", catalogue=str(path), device="cpu", stage="suite", max_cases=2)
    assert result.status == "error" and not result.killed and result.cases_run == 0, result
    assert result.reason.startswith("stale: ") and "update the catalogue to the source" in result.reason


def test_the_kill_table_counts_a_stale_patch_kill_as_not_judged(tmp_path):
    import json
    import subprocess
    import sys

    stale = {"name": "a", "status": "killed", "cases_run": 1, "killing_status": "error",
             "explanation": "kernel raised: InvalidInput: mutant 'a': expected 1 occurrence(s) of 'x' in k.py, "
                            "found 0; update the catalogue to the source"}
    rows = [stale, {"name": "b", "status": "killed", "cases_run": 3, "explanation": "[FAIL] o"},
            {"name": "c", "status": "survived", "cases_run": 9}]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    out = subprocess.run([sys.executable, str(Path(__file__).parents[2] / "ci" / "kill_table.py"), f"x={path}"],
                         capture_output=True, text=True, check=True).stdout
    assert "| x | 1 | 2 | 50% | 3 | 0 | 1 |" in out, out


def test_mutants_of_a_kernel_that_does_not_run_here_are_skipped_and_nothing_checked_is_exit_2(capsys):
    # a new user's trial: the gluon_jfa catalogue on a CPU listed its 10 mutants as SURVIVED (exit 1) after 42 s, and
    # a GPU-only mutant alone gave "0/0 mutants killed (1 gpu-only skipped)", exit 0
    from jfa_verify.cli import main

    gluon = load_catalogue("gluon_jfa")
    name = next(iter(gluon.mutants))
    result = run_mutant(name, catalogue=gluon, device="cpu", stage="suite")
    assert result.status == "skipped" and "gluon_jfa" in result.reason and "does not run here" in result.reason
    gpu_only = next(n for n, m in load_catalogue("triton_jfa").mutants.items() if m.gpu_only)
    for argv in (["--catalogue", "gluon_jfa", "--only", name], ["--only", gpu_only]):
        assert main(["mutants", "--stage", "suite", "--device", "cpu", *argv]) == 2, argv
        assert "nothing checked" in capsys.readouterr().err


def test_a_mutants_run_interrupted_before_any_verdict_writes_an_empty_json(tmp_path, monkeypatch, capsys, jfa_device):
    # regression (H200, 2026-12-02): a detection stage cut by `timeout` before its one mutant finished printed
    # "0 of 1 mutant(s) have a verdict, written to after-suite.json", but no file was written
    import json

    from jfa_verify import cli
    from jfa_verify.fuzz import mutation

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(mutation, "run_mutants", interrupted)
    out = tmp_path / "m.json"
    out.write_text('[{"name": "stale", "status": "killed"}]')  # an earlier run's verdicts must not stand for this one's
    catalogue = Path(__file__).parent / "regression_catalogue.json"
    name = json.loads(catalogue.read_text())["mutants"][0]["name"]
    rc = cli.main(["mutants", "--catalogue", str(catalogue), "--only", name, "--device", jfa_device.type,
                   "--json", str(out)])
    assert rc == 130
    assert json.loads(out.read_text()) == []
    assert f"0 of 1 mutant have a verdict, written to {out}" in capsys.readouterr().out


def _one_kernel_mutant(tmp_path, name: str, old: str, new: str) -> Path:
    import json

    header = {k: v for k, v in json.loads((Path(__file__).parent / "regression_catalogue.json").read_text()).items()
              if k != "mutants"}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(dict(header, name=name, mutants=[
        {"name": name, "description": name, "target": "kernels", "old": old, "new": new}])))
    return path


LOAD_OFFSET = "    return tl.load(ptr + idx).to(tl.int64)"


@pytest.mark.parametrize("stage", ["suite", "campaign"])
def test_a_mutant_whose_kernel_does_not_compile_is_broken_not_killed(tmp_path, stage, capsys):
    # issue 40 (4): a planted bug whose kernel raised on every case (a compile error) failed its first case as the
    # kernel's error, and that was a kill: a catalogue of typos scored 100% and said nothing of the suite
    from jfa_verify.fuzz.mutation import format_table

    path = _one_kernel_mutant(tmp_path, "does_not_compile", LOAD_OFFSET, LOAD_OFFSET + " + no_such_name")
    result = run_mutant("does_not_compile", catalogue=str(path), device="cpu", stage=stage, max_cases=3,
                        max_examples=2)
    assert result.status == "broken" and not result.killed and not result.killed_by_output, result
    assert "no_such_name" in result.reason, result.reason
    table = format_table([result])
    assert "broken (raised on every case" in table and "0/1 mutants killed" in table, table


def test_the_mutants_command_fails_on_a_broken_mutant(tmp_path, capsys):
    from jfa_verify.cli import main

    path = _one_kernel_mutant(tmp_path, "does_not_compile", LOAD_OFFSET, LOAD_OFFSET + " + no_such_name")
    assert main(["mutants", "--catalogue", str(path), "--device", "cpu", "--stage", "suite"]) == 1
    assert "BROKEN (the kernel raised on every case, not a kill): does_not_compile" in capsys.readouterr().out


def test_a_kernel_that_raises_on_some_valid_cases_and_computes_others_is_killed_by_the_raise(tmp_path, jfa_device):
    # the raise is then the finding: the kernel rejects an input its contract accepts
    _cpu_run_only(jfa_device)
    path = _one_host_mutant(tmp_path, "host_raises_on_empty", "the host code raises on an empty sequence",
                            "assert bool((k_off[1:] > k_off[:-1]).all())")
    result = run_mutant("host_raises_on_empty", catalogue=str(path), device="cpu", stage="targeted", max_examples=0)
    assert result.killed and result.killing_status == "error" and not result.killed_by_output, result


def test_a_first_case_runs_before_the_others_and_leaves_the_verdict_alone(jfa_device):
    # the regression gate runs first the case that killed each mutant last time (regression_kills.json): three
    # mutants killed late in the covering array were 170 s of the gate's CPU time in order. The case named runs
    # first; a name the stage does not hold changes nothing.
    from jfa_verify import Case
    from jfa_verify.checks.suites import suite_inputs

    cat = load_catalogue("triton_jfa")
    cases = tuple(Case(kv_lengths=lengths, head_dim=16, name=name)
                  for name, lengths in (("a", (5,)), ("b", (3, 6)), ("c", (7, 2))))
    shared = (suite_inputs(cat.kernel_of("softmax_scale_off"), jfa_device.type), cases, ())
    first = run_mutant("softmax_scale_off", catalogue=cat, device=jfa_device, stage="suite", shared_suite=shared,
                       first_case="c")
    assert first.killed and first.killing_case.name == first.killed_by == "c" and first.cases_run == 1, first
    absent = run_mutant("softmax_scale_off", catalogue=cat, device=jfa_device, stage="suite", shared_suite=shared,
                        first_case="not-a-case")
    assert absent.killed and absent.killing_case.name == "a" and absent.cases_run == 1, absent
    # cut by max_cases, the case named is not one of the stage's: the stage's own first case kills
    cut = run_mutant("softmax_scale_off", catalogue=cat, device=jfa_device, stage="suite", shared_suite=shared,
                     max_cases=2, first_case="c")
    assert cut.killed and cut.killing_case.name == "a", cut
