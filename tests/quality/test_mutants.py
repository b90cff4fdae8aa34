"""The mutation-testing CI gate: every planted bug in ``tests/quality/mutants.py`` is killed.

One test per mutant (so ``pytest -n 2`` spreads them over workers): the
targeted cases of :func:`fuzz.mutation.targeted_cases`, then a short campaign,
must make the mutant fail, and the test names the output that killed it. The
real kernel must pass the same targeted cases, so a kill is never a false alarm.
GPU-only mutants (inputs too large for the CPU interpreter) run only on CUDA.
"""

import pytest

from fuzz.mutation import run_mutant, targeted_cases
from tests.quality.mutants import MUTANTS

CAMPAIGN_EXAMPLES = 10


def test_catalogue_has_at_least_25_described_mutants():
    assert len(MUTANTS) >= 25, sorted(MUTANTS)
    for name, m in MUTANTS.items():
        assert m.description.strip(), name
        assert not m.gpu_only or m.gpu_reason, f"{name}: gpu-only without a reason"
        m.source()  # the edit still applies to the current source
    assert sum(not m.gpu_only for m in MUTANTS.values()) >= 25


def test_real_kernel_passes_the_targeted_cases(jfa_device):
    from jfa_verify.runner import run_case
    from kernels import get_kernel

    kernel = get_kernel("triton_jfa")
    for case in targeted_cases():
        result = run_case(case, kernel, jfa_device)
        assert result.status == "pass", result.explain()


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_is_killed(name, jfa_device):
    mutant = MUTANTS[name]
    if mutant.gpu_only and jfa_device.type != "cuda":
        pytest.skip(f"gpu-only mutant: {mutant.gpu_reason}")
    result = run_mutant(name, device=jfa_device, max_examples=CAMPAIGN_EXAMPLES)
    assert result.killed, f"mutant {name!r} ({mutant.description}) survived {result.cases_run} case(s)"
    assert result.outputs, result.explanation
    print(f"{name}: killed by {', '.join(result.outputs)} on {result.killing_case.name or result.killing_case.describe()}")


def test_cli_mutants_prints_the_kill_table_and_fails_on_a_survivor(monkeypatch, capsys):
    import fuzz.mutation as mutation
    from jfa_verify.cli import main

    assert main(["mutants", "--device", "cpu", "--only", "offsets_at_b", "int32_token_stride_overflow",
                 "--max-examples", "0"]) == 0
    out = capsys.readouterr().out
    assert "| offsets_at_b |" in out and "killed (targeted)" in out and "gpu-only (skipped)" in out

    survivor = mutation.MutantResult("fake", "a planted survivor", "survived")
    monkeypatch.setattr(mutation, "run_mutants", lambda *a, **k: [survivor])
    assert main(["mutants", "--device", "cpu"]) == 1
    assert "SURVIVED: fake" in capsys.readouterr().out
