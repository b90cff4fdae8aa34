"""Is a commit slower than the good one, beyond this run's own noise? The statistic of ``bisect --perf``.

Design: the good commit's kernel (baseline) and the tested commit's kernel (candidate) are timed
in the same run, interleaved in rounds (A B, then B A, ...: a slow drift of clocks or temperature
hits both alike). Round ``r`` gives one timing block of each (:func:`jfa_verify.checks.timing.time_block`)
and one paired log-ratio ``x_r = ln(candidate_r / baseline_r)``.

Statistic: the median of the ``x_r`` with a distribution-free confidence interval from order
statistics (the sign-test interval for a median: ``[x_(k), x_(n-k+1)]`` covers the true median
with probability ``1 - 2 P(Binomial(n, 1/2) <= k - 1)``; Conover, *Practical Nonparametric
Statistics*, 3rd ed., 1999, section 3.2). No normality is assumed, and one outlier round (a
preempted process, a clock change) cannot move it. With ``t`` the threshold (0.05 for 5%):

* **bad** when the interval's low end is above ``ln(1 + t)``: even the optimistic reading of this
  run is a slowdown beyond the threshold;
* **good** when the interval's high end is at or below ``ln(1 + t)``;
* **undecided** otherwise (the run's noise straddles the threshold): the caller times more rounds
  and, past its limit, skips the commit rather than guess.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Sequence

__all__ = ["Slowdown", "judge_slowdown", "median_interval"]


def _coverage(n: int, k: int) -> float:
    """P(x_(k) <= median <= x_(n-k+1)) for n samples of a continuous distribution."""
    below = sum(math.comb(n, i) for i in range(k)) / 2.0**n
    return 1.0 - 2.0 * below


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float, float]:
    """``(low, median, high, coverage)``: the sample median and the narrowest order-statistic interval
    ``[x_(k), x_(n-k+1)]`` whose coverage is at least ``confidence``.

    With too few values for that coverage (fewer than 6 at 0.95) the interval is ``(-inf, inf)``
    and the coverage 1.0.

    Raises:
        ValueError: no values, a non-finite value, or ``confidence`` outside (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence} must be in (0, 1)")
    xs = sorted(float(v) for v in values)
    if not xs or not all(math.isfinite(x) for x in xs):
        raise ValueError(f"values={list(values)[:8]} must be a non-empty list of finite numbers")
    n = len(xs)
    best = 0
    for k in range(1, n // 2 + 1):
        if _coverage(n, k) >= confidence:
            best = k
        else:
            break
    med = statistics.median(xs)
    if best == 0:
        return -math.inf, med, math.inf, 1.0
    return xs[best - 1], med, xs[n - best], _coverage(n, best)


@dataclass(frozen=True)
class Slowdown:
    """A slowdown judgement. ``ratio``: median candidate/baseline time ratio over the rounds; ``low``,
    ``high``: its confidence interval (``coverage`` achieved); ``threshold``: as a fraction;
    ``verdict``: ``"good"``, ``"bad"`` or ``"undecided"``; times in milliseconds."""

    rounds: int
    ratio: float
    low: float
    high: float
    coverage: float
    threshold: float
    verdict: str
    baseline_ms: float
    candidate_ms: float

    def describe(self) -> str:
        pct = lambda r: f"{(r - 1) * 100:+.1f}%" if math.isfinite(r) else ("-inf" if r < 1 else "+inf")  # noqa: E731
        return (f"median slowdown {pct(self.ratio)} ({self.coverage:.0%} interval {pct(self.low)} .. {pct(self.high)}, "
                f"{self.rounds} interleaved rounds; {self.candidate_ms:.3g} ms vs good {self.baseline_ms:.3g} ms) "
                f"against threshold {self.threshold * 100:.1f}%")

    def to_dict(self) -> dict:
        return {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in asdict(self).items()}


def judge_slowdown(baseline_ms: Sequence[float], candidate_ms: Sequence[float], threshold: float,
                   confidence: float = 0.95) -> Slowdown:
    """Judge paired, interleaved timing rounds (round ``r``: ``baseline_ms[r]``, ``candidate_ms[r]``).

    Raises:
        ValueError: lengths differ, a time is not positive and finite, or ``threshold`` is negative.
    """
    if len(baseline_ms) != len(candidate_ms) or not baseline_ms:
        raise ValueError(f"need paired rounds: {len(baseline_ms)} baseline vs {len(candidate_ms)} candidate times")
    if threshold < 0:
        raise ValueError(f"threshold={threshold} must be >= 0")
    for t in (*baseline_ms, *candidate_ms):
        if not (t > 0 and math.isfinite(t)):
            raise ValueError(f"time {t!r} ms is not a positive finite number")
    logs = [math.log(c / b) for b, c in zip(baseline_ms, candidate_ms)]
    low, med, high, coverage = median_interval(logs, confidence)
    limit = math.log1p(threshold)
    verdict = "bad" if low > limit else "good" if high <= limit else "undecided"
    return Slowdown(rounds=len(logs), ratio=math.exp(med), low=math.exp(low), high=math.exp(high), coverage=coverage,
                    threshold=threshold, verdict=verdict, baseline_ms=statistics.median(baseline_ms),
                    candidate_ms=statistics.median(candidate_ms))
