"""``--seed N`` draws the same cases whatever the example database holds (issue 43, item 8).

A new user's ``jfa-verify fuzz --seed 2`` drew other cases, and missed the finding it made in a fresh folder, in a
folder holding an earlier campaign's Hypothesis database: the database's examples were replayed inside the seeded
run, counted as draws and steering it. They are now replayed in a Hypothesis run of their own, before the draws.
"""

from jfa_verify.fuzz import run_campaign
from jfa_verify.protocol.registry import get_kernel, load_plugin
from jfa_verify.strategies import cases

DRAWN = dict(max_batch=3, max_len=24, dtypes=["float32"])
# the kernel's bug: one long sequence fails; its earlier version (JFA_TEST_EARLIER_VERSION=1) failed on two sequences
WRONG = ("B == 2 if os.environ.get('JFA_TEST_EARLIER_VERSION') == '1' else B == 1 and max(lengths, default=0) >= 9")


def _campaign(kernel, folder, database, seed):
    return run_campaign(kernel, strategy=cases(kernel, **DRAWN), max_examples=30, corpus_dir=folder,
                        database=str(database), device="cpu", seed=seed, backward=False, shrink_seconds=60,
                        round_examples=10)


def test_a_seed_draws_the_same_cases_and_finds_the_same_bug_whatever_the_database_holds(tmp_path, monkeypatch,
                                                                                         misbehaving_plugin):
    load_plugin(misbehaving_plugin("seeded", wrong=WRONG))
    kernel = get_kernel("seeded")

    fresh = _campaign(kernel, tmp_path / "fresh", tmp_path / "fresh-db", seed=2)
    assert fresh.failed and fresh.generated == 30, fresh.format(coverage=False)

    # a campaign on the kernel's earlier version (another seed, in another folder) leaves its examples (failures
    # included) in the database
    with monkeypatch.context() as env:
        env.setenv("JFA_TEST_EARLIER_VERSION", "1")
        earlier = _campaign(kernel, tmp_path / "earlier", tmp_path / "db", seed=7)
    assert earlier.failed and any(p.is_file() for p in (tmp_path / "db").rglob("*")), "the database holds nothing"
    assert {f.signature["id"] for f in earlier.failures}.isdisjoint(f.signature["id"] for f in fresh.failures)

    again = _campaign(kernel, tmp_path / "again", tmp_path / "db", seed=2)
    assert again.generated == fresh.generated
    assert again.draws == fresh.draws != ""  # the same cases drawn, in the same order
    assert [(f.source, f.signature["id"], f.case.case_id()) for f in again.failures] == \
        [(f.source, f.signature["id"], f.case.case_id()) for f in fresh.failures]  # the same finding, shrunk alike
    assert again.cases_run > fresh.cases_run  # the database's examples were replayed first (they pass now)
