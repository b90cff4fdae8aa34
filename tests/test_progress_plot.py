"""The campaign's PNG: its axes count cases and findings, so their ticks are whole numbers."""

import pytest

from jfa_verify.fuzz.progress import CampaignProgress, plot_timeline


def test_the_campaign_plot_has_whole_number_ticks_on_its_count_axes(tmp_path, monkeypatch):
    """Regression (issue 43, 12): two findings and five cases gave ticks at 0.25, 0.5, ... on both axes."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    progress = CampaignProgress(1)
    progress.timeline = [(0.0, 0, 0), (1.0, 2, 1), (2.0, 5, 2)]
    progress.finding_times = [(0.5, "a", "fail"), (1.5, "b", "crash")]
    figures = []
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (figures.append(fig), real_close(fig)))
    path = plot_timeline(progress, tmp_path / "t.png")
    assert path.stat().st_size > 1000
    (fig,) = figures
    for ax in fig.axes:
        ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), (ax.get_ylabel(), ticks)


def test_a_covering_campaign_counts_its_covering_cases_and_findings_as_its_own():
    """Regression (a new user's trial): `fuzz --covering` in a fresh folder said "never drawn: cross, ...,
    causal_bottom_right, float16" and reported new_findings 0 beside four findings, all of its covering array's
    cases of exactly those classes. Covering cases count toward coverage and their findings are new; replays and
    shrink steps are neither."""
    from jfa_verify.fuzz.workers import new_findings

    progress = CampaignProgress(1)
    for phase, classes in (("covering", ["cross", "float16"]), ("generate", ["self"]), ("shrink", ["fp32"]),
                           ("reuse", ["mqa"])):
        progress.event(0, {"event": "case", "status": "pass", "phase": phase, "classes": classes, "seconds": 0.0})
    assert dict(progress.classes) == {"cross": 1, "float16": 1, "self": 1}
    assert progress.phases["covering"] == 1 and progress.phases["generate"] == 1  # (the report's "covering", "drawn")
    found = [{"source": s, "signature": {"id": i}} for s, i in (("covering", "b"), ("search", "a"), ("corpus", "c"),
                                                                  ("leftover", "d"))]
    assert new_findings(found) == ["a", "b"]
