"""The worker count of run, gate, fuzz and mutants when ``--jobs`` is not given (issue 39, 1): the rule on a machine
described by hand, the machine probed (cores and GPU memory monkeypatched), the headers that say what was chosen, and
``--jobs`` winning over the default and over ``$JFA_VERIFY_JOBS``."""

import json
from pathlib import Path

import pytest
import torch

from jfa_verify.cli import main
from jfa_verify.core.errors import InvalidInput
from jfa_verify.run import parallelism
from jfa_verify.run.parallelism import ENV, MAX_JOBS, Jobs, available_cores, build_jobs, choose_jobs, counted, jobs_for

GIB = 2**30
PLUGIN = str(Path(__file__).parent / "quality" / "memory_plugin.py")


@pytest.fixture
def machine(monkeypatch):
    """A machine of ``cores`` cores, ``host`` GiB of free memory and GPUs with ``gpu[i]`` GiB free; no
    ``$JFA_VERIFY_JOBS`` (a pytest-xdist session sets it to 1: tests/conftest.py)."""
    monkeypatch.delenv(ENV, raising=False)

    def make(cores: int, host: float = 64.0, gpu: tuple = ()):
        monkeypatch.setattr(parallelism.os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
        monkeypatch.setattr(parallelism, "_host_free_gib", lambda: host)
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i: (int(gpu[i] * GIB), 141 * GIB))
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)

    return make


@pytest.mark.parametrize("kwargs, count, binding", [
    (dict(cores=2, host_free_gib=23.0), 2, "2 CPU cores"),  # the CI machine: its cores
    (dict(cores=1), 1, "1 CPU core"),
    (dict(cores=64, host_free_gib=500.0, gpu_free_gib=140.0, gpu_where="cuda:0"), MAX_JOBS, f"at most {MAX_JOBS}"),
    (dict(cores=64, gpu_free_gib=30.0, gpu_where="cuda:0"), 3, "30 GiB free on cuda:0, 8 GiB a worker"),
    (dict(cores=16, host_free_gib=7.0), 3, "7 GiB of free memory, 2 GiB a worker"),
    (dict(cores=16, host_free_gib=1.0, gpu_free_gib=2.0), 1, "2 GiB free on the GPU"),  # never fewer than one
    (dict(cores=16, work=1), 1, "1 case"),  # no more workers than cases
    (dict(cores=16, work=3, unit="case to draw"), 3, "3 cases to draw"),
    (dict(cores=16, work=2, unit="mutant", option="--jobs"), 2, "2 mutants"),
])
def test_the_default_is_the_smallest_of_the_machines_bounds_and_names_it(kwargs, count, binding):
    jobs = jobs_for(**kwargs)
    assert jobs.count == count and jobs.source == "machine"
    assert jobs.reason.startswith(f"default: {binding}") and jobs.reason.endswith("N to choose"), jobs.reason
    assert str(jobs).startswith(f"{count} worker{'' if count == 1 else 's'} (default: {binding}")
    assert {"what", "jobs"} <= set(jobs.to_dict()["limits"][0]) and jobs.to_dict()["chosen_by"] == "machine"


def test_the_machine_is_probed_cores_from_the_affinity_and_free_memory_of_the_gpus_used(machine):
    machine(cores=6, host=100.0, gpu=(20.0, 60.0))
    assert available_cores() == 6
    cpu = choose_jobs(None, torch.device("cpu"))
    assert cpu.count == 6 and "6 CPU cores" in cpu.reason  # (a CPU run is not bounded by a GPU)
    gpu1 = choose_jobs(None, torch.device("cuda:1"))
    assert gpu1.count == 6 and [n for n, what in gpu1.limits if "cuda:1" in what] == [7]
    gpu0 = choose_jobs(None, torch.device("cuda"))  # (no index: the current device)
    assert gpu0.count == 2 and "20 GiB free on cuda:0" in gpu0.reason
    both = choose_jobs(None, torch.device("cuda"), gpus=("0", "1"))  # fuzz --gpus 0,1: their memory together
    assert both.count == 6 and [n for n, what in both.limits if "cuda:0, cuda:1" in what] == [10]


def test_on_the_cpu_the_default_never_exceeds_the_cores(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    jobs = choose_jobs(None, torch.device("cpu"))
    assert 1 <= jobs.count <= min(available_cores(), MAX_JOBS), jobs


def test_given_jobs_win_over_the_variable_which_wins_over_the_machine(machine, monkeypatch):
    machine(cores=8)
    monkeypatch.setenv(ENV, "3")
    assert choose_jobs(None, torch.device("cpu")) == Jobs(3, "env", f"${ENV}")
    assert choose_jobs(1, torch.device("cpu"), work=100) == Jobs(1, "given", "--jobs")  # serial when asked
    # no more workers than the work has items (a new user's --jobs 500 on 3 cases was announced as 500 workers)
    assert choose_jobs(500, torch.device("cpu"), work=3) == Jobs(3, "given", "--jobs 500, one per case: 3 cases")
    assert str(choose_jobs(5, option="--workers")) == "5 workers (--workers)"
    for bad in ("0", "two", "-1", "1.5"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(InvalidInput, match=rf"\${ENV}={bad!r}: give a worker count"):
            choose_jobs(None, torch.device("cpu"))
        assert choose_jobs(2).count == 2  # (not read when --jobs is given)


def _run(tmp_path, name, *args):
    report = tmp_path / f"{name}.json"
    rc = main(["run", "--device", "cpu", "--plugin", PLUGIN, "--kernel", "exact-ref", "--max-cases", "1",
               "--no-progress", "--report", str(report), "--reproducers", str(tmp_path / "repro"), *args])
    return rc, json.loads(report.read_text())["jobs"]


def test_run_says_the_workers_it_chose_and_an_explicit_jobs_wins(tmp_path, capsys, machine, monkeypatch):
    machine(cores=4)
    rc, jobs = _run(tmp_path, "default")
    out = capsys.readouterr().out
    assert rc == 0, out
    header = out.splitlines()[0]
    assert "CPU (Triton kernels interpreted), 1 worker (default: 1 case; --jobs N to choose)" in header, out
    assert jobs["count"] == 1 and jobs["chosen_by"] == "machine" and {"what": "4 CPU cores", "jobs": 4} in \
        jobs["limits"]
    monkeypatch.setenv(ENV, "2")
    rc, jobs = _run(tmp_path, "given", "--jobs", "1")
    out = capsys.readouterr().out
    assert rc == 0 and "CPU (Triton kernels interpreted), 1 worker (--jobs)" in out.splitlines()[0], out
    assert jobs == {"count": 1, "chosen_by": "given", "reason": "--jobs", "limits": []}


def test_gate_says_its_workers_in_the_header_and_the_json_settings(tmp_path, capsys, machine):
    machine(cores=1)
    out = [f"--json={tmp_path / 'g.json'}", f"--junit={tmp_path / 'g.xml'}", f"--markdown={tmp_path / 'g.md'}",
           f"--reproducers={tmp_path / 'repro'}"]
    rc = main(["gate", "--device", "cpu", "--plugin", PLUGIN, "--kernel", "exact-ref", "--checks", "canaries",
               "--small-cases", "1", *out])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "; 1 worker (default: 1 CPU core; --jobs N to choose)" in printed.splitlines()[0], printed
    settings = json.loads((tmp_path / "g.json").read_text())["settings"]
    assert settings["jobs"] == 1 and settings["jobs_reason"] == "default: 1 CPU core; --jobs N to choose"


def test_fuzz_and_mutants_pass_their_choice_on_and_print_it(tmp_path, capsys, machine, monkeypatch):
    import jfa_verify.cli.output as output
    import jfa_verify.fuzz.mutation as mutation
    import jfa_verify.fuzz.workers as workers

    machine(cores=3)
    seen = {}

    def fake_fuzz(config, *, workers, **kwargs):
        seen["fuzz"] = workers
        return {"unreadable_case_files": [], "statuses": {"pass": 1}, "interrupted": False, "exit_code": 0}

    monkeypatch.setattr(workers, "run_fuzz", fake_fuzz)
    monkeypatch.setattr(output, "print_campaign", lambda report, console: None)
    fuzz = ["fuzz", "--device", "cpu", "--plugin", PLUGIN, "--kernel", "exact-ref", "--seed", "1", "--no-progress",
            "--reproducers", str(tmp_path / "repro")]
    assert main([*fuzz, "--max-examples", "100"]) == 0 and seen["fuzz"] == 3
    banner = " ".join(capsys.readouterr().out.split())  # (the console wraps long lines)
    assert "3 workers (default: 3 CPU cores; --workers N to choose)" in banner, banner
    assert "(repeat the draws with --seed 1 --workers 3)" in banner, banner  # (the draws depend on the count)
    assert main([*fuzz, "--max-examples", "2"]) == 0 and seen["fuzz"] == 2  # one per case to draw
    assert main([*fuzz, "--jobs", "1"]) == 0 and seen["fuzz"] == 1  # --jobs: the same option as --workers
    assert "1 worker (--workers)" in " ".join(capsys.readouterr().out.split())

    def fake_mutants(names, **kwargs):
        seen["mutants"] = kwargs["jobs"]
        return []

    monkeypatch.setattr(mutation, "run_mutants", fake_mutants)
    name = next(iter(mutation.load_catalogue("triton_jfa").mutants))
    assert main(["mutants", "--device", "cpu", "--only", name]) == 0 and seen["mutants"] == 1
    assert "1 mutant, 1 at a time (default: 1 mutant; --jobs N to choose)" in capsys.readouterr().out
    assert main(["mutants", "--device", "cpu"]) == 0 and seen["mutants"] == 3
    assert main(["mutants", "--device", "cpu", "--no-isolate"]) == 0 and seen["mutants"] == 1
    assert "1 at a time (in this process: --no-isolate)" in capsys.readouterr().out


def test_builds_are_not_bound_by_the_gpu_memory_unless_the_user_chose_the_workers(machine):
    # issue 39: an H100 run chose 9 workers (79 GiB free, 8 GiB a worker) and built its 265 variants in 9 processes
    # on 16 cores, though a build compiles for the target alone and holds no GPU memory
    machine(16, host=100.0, gpu=(79.0,))
    chosen = choose_jobs(None, torch.device("cuda"))
    assert (chosen.count, chosen.source) == (9, "machine"), chosen
    assert build_jobs(chosen) == 16
    assert build_jobs(Jobs(3, "given", "--jobs")) == 3  # a user's --jobs bounds the builds too
    assert build_jobs(Jobs(2, "env", "$JFA_VERIFY_JOBS")) == 2
    machine(16, host=10.0, gpu=(79.0,))
    assert build_jobs(choose_jobs(None, torch.device("cuda"))) == 5  # host memory still bounds them


def test_counts_are_in_words_singular_for_one():
    """The one rule the commands count with (a campaign printed "1 cases run" and "1 worker(s)")."""
    assert [counted(n, "case") for n in (0, 1, 2)] == ["0 cases", "1 case", "2 cases"]
    assert [counted(n, "case to draw") for n in (1, 2)] == ["1 case to draw", "2 cases to draw"]
    assert [counted(n, "packed launch", "packed launches") for n in (1, 2)] == ["1 packed launch",
                                                                                "2 packed launches"]
