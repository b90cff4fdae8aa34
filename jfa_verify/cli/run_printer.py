"""What ``jfa-verify run`` prints as it goes: the plan, the precompile step, progress, the table and coverage."""

from __future__ import annotations

import contextlib
from contextlib import contextmanager


class RunPrinter:
    """Prints the run as it goes (:class:`~jfa_verify.workflows.suite_run.RunObserver`)."""

    def __init__(self, args, device):
        from jfa_verify.cli.output import make_console
        from jfa_verify.core.device import device_label

        self.args, self.device_type, self.console = args, device.type, make_console()
        self.where = device_label(device)

    def planned(self, kernel, suite, cases, jobs) -> None:
        args = self.args
        if args.quiet:
            return
        by = "/".join(o for o, given in (("--filter", args.filter), ("--max-cases", args.max_cases)) if given)
        picked = f"{len(cases)} cases" if len(cases) == len(suite.cases) else \
            f"{len(cases)} of {len(suite.cases)} cases, by {by}"
        self.console.print(f"jfa-verify run: kernel [bold]{kernel.name}[/], suite {suite.name} ({picked}), "
                           f"{self.where}, " + (str(jobs) if args.isolate else "in-process (--no-isolate)"))
        self.console.print(f"  {suite.note_for(cases)}")

    def precompiled(self, result) -> None:
        if not self.args.quiet:
            self.console.print(f"  {result.summary()}", highlight=False)

    @contextmanager
    def verifying(self, kernel, total: int):
        from jfa_verify.cli.output import ProgressLines, counting_progress

        off = self.args.no_progress
        # a terminal gets the bar (it leaves nothing behind, so --quiet keeps it); a CI log a plain line at most every
        # 10 s (it would otherwise see nothing for minutes), but none under --quiet
        limit = getattr(self.args, "timeout", None)
        lines = ProgressLines(self.console, f"verifying {kernel.name}", total,
                              waiting=f" (a case past --timeout {limit:g} s is a hang)" if limit else "") \
            if not (off or self.args.quiet or self.console.is_terminal) else None
        bar, add = counting_progress(self.console, f"verifying {kernel.name}", total,
                                     disable=off or not self.console.is_terminal)
        with bar, lines or contextlib.nullcontext():
            yield lambda r: (add(r), lines and lines.add(r))

    def verified(self, kernel, results, coverage, pairs) -> None:
        from jfa_verify.cli.output import results_table

        failing = [r for r in results if r.failed]
        if self.args.quiet:  # the failures only (a default run printed some 344 lines, mostly coverage tables)
            if failing:
                self.console.print(results_table(failing, f"{kernel.name} on {self.where}: failing cases"),
                                   soft_wrap=False)
        else:
            self.console.print(results_table(results, f"{kernel.name} on {self.where}"), soft_wrap=False)  # centred
            print(coverage.format(device_type=self.device_type), flush=True)
            print(pairs.format(), flush=True)
            # why a case was skipped (a new user found it only in the JSON report), one line per reason
            from jfa_verify.run.runner import forward_only_lines, skipped_lines, unsupported_reasons

            for line in skipped_lines(unsupported_reasons(results)) + forward_only_lines(results):
                print(line, flush=True)
        for r in failing:
            print(r.explain(), flush=True)
