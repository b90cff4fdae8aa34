"""Calibrating the budget table: error distributions of a kernel against its allowances.

For every drawn case and output the runner's comparison keeps the kernel's
error ``e``, the SDPA error ``s`` and the three floor terms before their
constants. Under the current budget, the multiplier the floors would need for
that case to pass exactly is ``m = max(0, e - sdpa_factor * s) / floor``
(``floor`` = the current floor sum). The proposed budget scales each output's
floor constants by ``max(safety * max(m), min_multiplier)``: the largest need
seen, with a safety margin, never below a minimum (so floors never vanish when
every kernel error stayed under the SDPA term).
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Iterable, Optional

import numpy as np

from .budgets import Budget, BudgetTable
from .case import DTYPES

__all__ = ["OutputStats", "needed_multiplier", "propose_table", "calibrate"]


@dataclass
class OutputStats:
    """Samples of one (dtype, output): the multiplier each case needed and its headroom."""

    needed: list[float] = field(default_factory=list)
    headroom: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        h = np.array(self.headroom) if self.headroom else np.zeros(1)
        n = np.array(self.needed) if self.needed else np.zeros(1)
        return {
            "cases": len(self.headroom),
            "headroom_p50": float(np.quantile(h, 0.5)),
            "headroom_p99": float(np.quantile(h, 0.99)),
            "headroom_max": float(h.max()),
            "failures": int((h > 1).sum()),
            "needed_multiplier_max": float(n.max()),
        }


def needed_multiplier(comparison, budget: Budget) -> float:
    """Multiplier of ``budget``'s floor constants at which ``comparison`` passes exactly (0 if SDPA covers it)."""
    f1, f2, f3 = comparison.floors
    floor = budget.floor_ulps * f1 + budget.lowp_ulps * f2 + budget.acc_ulps * f3
    excess = comparison.kernel_error - budget.sdpa_factor * comparison.sdpa_error
    if excess <= 0:
        return 0.0
    return float("inf") if floor == 0 else excess / floor


def propose_table(current: BudgetTable, stats: dict, *, safety: float, min_multiplier: float,
                  provenance: dict) -> BudgetTable:
    """A new table: each (dtype, output) floor scaled by ``max(safety * max needed, min_multiplier)``."""
    budgets = {}
    for dt, outs in current.budgets.items():
        budgets[dt] = {}
        for out, b in outs.items():
            st = stats.get((dt, out))
            if st is None or not st.needed:
                budgets[dt][out] = b  # nothing measured: keep
                continue
            k = max(safety * max(st.needed), min_multiplier)
            budgets[dt][out] = replace(b, floor_ulps=b.floor_ulps * k, lowp_ulps=b.lowp_ulps * k,
                                       acc_ulps=b.acc_ulps * k)
    return BudgetTable(current.version + 1, provenance, budgets)


def calibrate(kernel, *, device, cases_per_dtype: int, seed: int = 0, dtypes: Iterable[str] = tuple(DTYPES),
              safety: float = 2.0, min_multiplier: float = 0.1, current: Optional[BudgetTable] = None):
    """Run ``cases_per_dtype`` drawn cases per dtype through ``kernel`` and both oracles.

    Args:
        kernel: a registered kernel. device: a torch device. seed: Hypothesis seed.
        safety: margin over the largest multiplier any case needed. min_multiplier: lower bound.
        current: the table the errors are measured against (default: the packaged one).

    Returns: ``(proposed BudgetTable, {(dtype, output): OutputStats}, errors)`` where ``errors``
    lists cases whose kernel raised (they are not calibration samples).
    """
    import torch
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from .budgets import default_table
    from .runner import run_case
    from .strategies import cases

    current = current or default_table()
    stats: dict = defaultdict(OutputStats)
    errors: list[str] = []
    for dt in dtypes:
        @hypothesis_seed(seed)
        @settings(max_examples=cases_per_dtype, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(case=cases(kernel, device_type=device.type, dtypes=[dt]))
        def sample(case):
            result = run_case(case, kernel, device)
            if result.status == "error":
                errors.append(result.explain())
                return
            for c in result.comparisons:
                if c.problem is not None:
                    continue
                budget = current.budget(case.torch_dtype, c.name)
                stats[(dt, c.name)].needed.append(needed_multiplier(c, budget))
                stats[(dt, c.name)].headroom.append(c.headroom)

        sample()
    import triton

    provenance = {
        "source": f"jfa-verify calibrate on kernel {kernel.name!r}",
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu (Triton interpreter)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cases_per_dtype": cases_per_dtype,
        "seeds": [seed],
        "safety": safety,
        "min_multiplier": min_multiplier,
        "measured_against_version": current.version,
    }
    return propose_table(current, stats, safety=safety, min_multiplier=min_multiplier,
                         provenance=provenance), dict(stats), errors
