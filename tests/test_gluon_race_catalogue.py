"""The race-only planted-bug catalogue of gluon_jfa (``fuzz/catalogues/gluon_jfa_races.json``) stays applicable.

Cheap and CPU-only: every mutant's ``old`` text occurs exactly once in the current kernel source, so a change to
``kernels/gluon_jfa/_kernels.py`` that makes a mutant stale fails here, not in a GPU session. Compiling the
mutants for sm_90a (and checking their PTX differs from the kernel's) is ``ci/gluon_race_compile_check.py``: too
slow for CI.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_race_mutant_matches_the_kernel_source_exactly_once():
    from jfa_verify.fuzz.mutation import load_catalogue

    races, base = load_catalogue("gluon_jfa_races"), load_catalogue("gluon_jfa")
    assert (races.kernel, races.builder, races.targets) == (base.kernel, base.builder, base.targets)
    assert len(races.mutants) >= 8
    source = (ROOT / "kernels" / "gluon_jfa" / "_kernels.py").read_text()
    for name, mutant in races.mutants.items():
        assert mutant.target == "kernels" and not mutant.scheduler and mutant.count == 1, name
        assert source.count(mutant.old) == 1, (name, source.count(mutant.old))
        assert races.mutated_source(name) != source, name  # mutated_source raises when the count is off
    # spread over the three pipelined kernels
    assert {name.split("_")[0] for name in races.mutants} == {"fwd", "dq", "dkdv"}
