"""``jfa-verify findings``: a reproducer folder's deduplicated findings (:mod:`jfa_verify.fuzz.findings`)."""

from __future__ import annotations

import sys
from pathlib import Path

from jfa_verify.cli.arguments import EXIT_OK, EXIT_USAGE, Once, UsageError, plugin_option, progress_option
from jfa_verify.core.exits import FINDINGS_IN_WORDS
from jfa_verify.core.paths import DEFAULT_REPRODUCERS

HELP = "list the findings in a reproducer folder (one per signature), each with its replay command"
DESCRIPTION = ("List the findings in a reproducer folder, one per signature, each with its id and the command "
               "that replays it, and name every case file that cannot be read, with the reason. Exit status, as "
               "for the command that recorded them (jfa_verify/core/exits.py: a finding is not a usage error): 0 "
               f"no finding listed; {FINDINGS_IN_WORDS}; 2 no such folder, a bad argument, or "
               "a case file that cannot be read (a finding may be lost in it) beside no finding, or a case "
               "file still marked running (its process died mid-case: killed, or taken down by the kernel; no "
               "verdict yet) beside no finding. Files of earlier findings whose cases now pass are kept in the "
               "folder's now-passing/ subfolder, which is not listed. No jfa-reproducers/ in the current folder (the "
               "default, when no folder is given) is no finding, 0: a run whose cases all passed leaves none.")


def add_arguments(parser) -> None:
    parser.add_argument("folder", nargs="?", default=None, help="the folder (default jfa-reproducers)")
    parser.add_argument("--reproducers", default=None, metavar="FOLDER", help="the folder, as run and fuzz name it")
    parser.add_argument("--kernel", default=None, action=Once, fix="give one --kernel (list each kernel's findings "
                        "in a command of its own, or leave --kernel out for every kernel's)",
                        help="only this kernel's findings")
    plugin_option(parser, help="a file that registers kernels (repeatable): --kernel may then name one of its kernels "
                               "that has no findings in the folder")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table (a list of rows; a case "
                        "file that cannot be read is a row of status \"unreadable\" with the reason)")
    progress_option(parser)


def main(args, ctx) -> int:
    """List a reproducer folder's findings; the exit status is the one their verdicts give (see the help)."""
    import json

    from jfa_verify.core.exits import exit_code_for
    from jfa_verify.fuzz.findings import list_findings, unreadable_case_files
    from jfa_verify.run.corpus import RUNNING
    from jfa_verify.run.parallelism import counted

    if args.folder and args.reproducers and Path(args.folder).resolve() != Path(args.reproducers).resolve():
        raise UsageError(f"two folders given: {args.folder!r} and --reproducers {args.reproducers!r}; give one")
    root = args.folder or args.reproducers or DEFAULT_REPRODUCERS
    if not Path(root).exists() and Path(root) == Path(DEFAULT_REPRODUCERS):
        # A run whose every case passed leaves no default folder (nothing written unasked): `jfa-verify run &&
        # jfa-verify findings` in CI exited 2, a usage error, exactly when everything passed (a new user's trial). A
        # folder named by --reproducers is kept, empty; a missing named one is a typo.
        print("[]" if args.json else f"no findings: no {root}/ here (a run, fuzz or gate whose cases all passed "
                                     f"leaves none)")
        return EXIT_OK
    if not Path(root).is_dir():
        raise UsageError(f"{root!r} is not a folder; give the folder that `run`, `fuzz` or `gate` wrote its "
                         f"reproducers into")
    rows = list_findings(root, args.kernel)
    if args.kernel and not rows:
        from jfa_verify.protocol.registry import kernel_names, load_plugins

        here = sorted({r["kernel"] for r in list_findings(root) if r["kernel"]})
        load_plugins(args.plugin)  # (a plugin kernel with nothing in the folder is known only by its file)
        if args.kernel not in here and args.kernel not in kernel_names():  # a typo reads as "no findings", 0
            raise UsageError(f"--kernel {args.kernel!r}: no kernel of that name is registered or has files in "
                             f"{root!r} (kernels with findings there: {', '.join(here) or 'none'}); a kernel a "
                             f"plugin file registers: give the file with --plugin FILE.py")
    broken = unreadable_case_files(root)
    if args.json:
        # an unreadable file is a row too, status "unreadable" (a finding may be lost in it: a JSON reader saw exit
        # 2 and no row saying why, the file named on stderr only; a new user's trial)
        print(json.dumps(rows + [{"id": None, "kernel": None, "status": "unreadable", "error_kind": why,
                                  "outputs": [], "classes": [], "examples": 0, "case": None, "path": str(path),
                                  "replay": None, "found_by": "-"} for path, why in broken], indent=2))
    elif rows:  # (no table for no rows: the line below says so)
        from rich.table import Table

        table = Table(title=f"findings in {root}")
        apart = _told_apart_by(rows)
        for col in ("id", "kernel", "status", "kind", "lead output", "examples", "case") + (("told apart by",)
                                                                                         if any(apart) else ()):
            table.add_column(col)
        for r, why in zip(rows, apart):
            table.add_row(r["id"], r["kernel"] or "-", r["status"], r["error_kind"], "/".join(r["outputs"]) or "-",
                          str(r["examples"]), r["case"], *((why or "-",) if any(apart) else ()))
        from jfa_verify.cli.output import make_console

        make_console().print(table)
        for r in rows:  # plain lines, never wrapped: each is pasted as it is
            print(f"{r['id']} replay: {r['replay']}")
    code = int(exit_code_for(r["status"] for r in rows))
    if not rows and not args.json:  # (with an unreadable file, "no findings" is more than anyone can say)
        print(f"no findings in {root}" if not broken else
              f"no readable findings in {root}; {counted(len(broken), 'case file', 'case files')} could not be read "
              f"(below)")
    for path, why in broken:
        print(f"jfa-verify findings: error: {path} is not a readable case file ({why}); a finding may be lost in "
              f"it: restore it, or remove it once you have read it", file=sys.stderr)
    # A case left running has no verdict: its process was killed, or the kernel took it down (a crash or a hang
    # of an in-process run). Listing only such rows once exited 0, which a CI step reads as "nothing found".
    running = [r for r in rows if r["status"] == RUNNING]
    if running:
        print(f"jfa-verify findings: {counted(len(running), 'case')} left running by a process that died mid-case, "
              f"not judged yet: the next `fuzz` on {root} replays them first, or replay one with its line above",
              file=sys.stderr)
    # (beside a finding, the finding's own status says more: a CI step read a confirmed wrong output beside a
    # truncated file as a configuration error, exit 2; a new user's trial)
    unjudged = (broken or running) and code == EXIT_OK
    return EXIT_USAGE if unjudged else code


def _told_apart_by(rows: list, shown: int = 4) -> list[str]:
    """For each row, the input classes that set it apart from the other rows of its failure
    (:func:`~jfa_verify.fuzz.findings.failure_groups`, the rule a campaign counts its failures by): what made two
    findings of one look (a shrunk case's classes) where a table showed two identical rows (a new user's trial,
    2026-12-07); "" for a row like no other."""
    from jfa_verify.fuzz.findings import failure_groups

    apart = [""] * len(rows)
    for members in failure_groups(rows):
        if len(members) < 2:
            continue
        common = set.intersection(*(set(rows[i]["classes"]) for i in members))
        for i in members:
            own = sorted(set(rows[i]["classes"]) - common)
            apart[i] = ", ".join(own[:shown]) + (f" (+{len(own) - shown})" if len(own) > shown else "") or "-"
    return apart
