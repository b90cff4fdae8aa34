"""The one run loop: cases through a kernel with write-ahead reproducers (``run``, ``fuzz``, ``gate`` and
``bisect`` all verify through :class:`Verifier`)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Optional

import torch

from .case import Case
from .corpus import Corpus
from .protocol import Kernel
from .runner import CaseResult, run_case

__all__ = ["Verifier"]


class Verifier:
    """Verifies cases one by one against one kernel on one device.

    Every case's reproducer file is written before the kernel runs (a crash,
    hang or kill leaves it behind), removed when the case passes and rewritten
    with the verdict when it fails (:class:`~jfa_verify.corpus.Corpus`).

    Args:
        kernel: the registered kernel under test.
        device: where the cases run.
        corpus: the reproducer folder (a :class:`Corpus` or a path).
        backward: judge the gradients too.
        timeout_s: seconds a case may run before it is recorded as a hang (None: no watchdog).
        plugins: the plugin files the kernel came from (named in replay commands and case files).
        budgets: the budget table (None: the packaged one).
    """

    def __init__(self, kernel: Kernel, device: torch.device, corpus: "Corpus | str | Path", *, backward: bool = True,
                 timeout_s: Optional[float] = None, plugins: Iterable[str] = (), budgets=None):
        self.kernel, self.device = kernel, torch.device(device)
        self.corpus = corpus if isinstance(corpus, Corpus) else Corpus(corpus)
        self.backward, self.timeout_s, self.budgets = backward, timeout_s, budgets
        self.plugins = tuple(str(p) for p in plugins)

    def verify(self, case: Case) -> CaseResult:
        """Run one case; its reproducer stays in the corpus only if it failed."""
        with self.corpus.guard(case, self.kernel.name, str(self.device), self.timeout_s, self.plugins) as path:
            result = run_case(case, self.kernel, self.device, backward=self.backward, budgets=self.budgets,
                              plugins=self.plugins)
            saved = self.corpus.record(path, result)
            result.reproducer = str(saved) if saved else None
        return result

    def verify_all(self, cases: Iterable[Case], on_result: Optional[Callable[[CaseResult], None]] = None
                   ) -> list[CaseResult]:
        """Run every case in order; ``on_result(result)`` after each (progress, printing)."""
        results = []
        for case in cases:
            result = self.verify(case)
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results
