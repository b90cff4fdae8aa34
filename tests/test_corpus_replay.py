"""The checked-in corpus as regression tests: every case file in tests/corpus/ must pass on --jfa-kernel.

Each file is a reproducer a campaign wrote (against a planted-bug kernel, recorded
under ``found_by``), re-targeted at ``triton_jfa``; file names say the symptom.
Add one with ``jfa-verify replay FILE`` checks, then copy it here.
"""

from pathlib import Path

import pytest

from jfa_verify.corpus import read_case_file
from jfa_verify import run_case

CORPUS = Path(__file__).with_name("corpus")
FILES = sorted(CORPUS.glob("*.json"))


def test_corpus_is_not_empty():
    assert len(FILES) >= 2


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_corpus_case_passes(path, jfa_kernel, jfa_device):
    case, payload = read_case_file(path)
    assert payload["kernel"] == "triton_jfa" and "found_by" in payload
    result = run_case(case, jfa_kernel, jfa_device)
    assert not result.failed, result.explain()


def test_jfa_corpus_fixture_keeps_failures_only(jfa_corpus, jfa_kernel, jfa_device):
    case, _ = read_case_file(FILES[0])
    with jfa_corpus.guard(case, jfa_kernel.name, str(jfa_device)) as path:
        assert path.is_file()  # written before the kernel runs
        kept = jfa_corpus.record(path, run_case(case, jfa_kernel, jfa_device, backward=False))
    assert kept is None and not path.exists()
