"""``jfa-verify mutants``: a planted-bug catalogue's kill table (the work: :mod:`jfa_verify.fuzz.mutation`)."""

from __future__ import annotations

import argparse
import sys

from jfa_verify.cli.arguments import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    device_option,
    new_file,
    nonneg_int,
    plugin_option,
    positive_int,
    progress_option,
    seed_int,
)

HELP = "mutation testing: the CI profile against each planted-bug kernel"
DESCRIPTION = ("Mutation testing: each planted bug of a catalogue (a one-line change of the "
               "kernel's source, or a corrupted scheduler) runs in its own process through the stage's "
               "cases up to its first failure: killed, survived, skipped (its kernel does not run on this "
               "device, or it needs a GPU), not judged (the run of it failed, or its patch no longer "
               "applies) or broken (its kernel raised on every case: a raise everywhere is not a kill). "
               "Exit status: 0 every mutant run was killed; 1 a mutant survived, was not judged or is "
               "broken; 2 a bad argument, or nothing checked (every mutant skipped); 130 interrupted (the "
               "verdicts that finished are kept in --json).")


def add_arguments(parser) -> None:
    parser.add_argument("--catalogue", default="triton_jfa", help="packaged catalogue name or a catalogue JSON file")
    parser.add_argument("--only", nargs="+", action="extend", default=[], metavar="NAME", help="only these mutants")
    parser.add_argument("--max-examples", type=nonneg_int, default=10,
                        help="campaign examples for a mutant the targeted cases miss")
    device_option(parser)
    plugin_option(parser, help="import a file that registers the catalogue's kernel (repeatable); the mutated module "
                               "must be another one, importable by the catalogue's target name")
    parser.add_argument("--seed", type=seed_int, default=0,
                        help="seed of the suite's values and of each mutant's campaign (default: %(default)s)")
    parser.add_argument("--json", default=None, type=new_file, help="also write the results here")
    parser.add_argument("--jobs", type=positive_int, default=None,
                        help="mutants run at once, each in its own process; default: one per CPU core, as many as "
                             "free memory holds (on CUDA 8 GiB of the GPU's a mutant), at most 16 and one per "
                             "mutant, or $JFA_VERIFY_JOBS (one with --no-isolate); printed")
    parser.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                        help="each mutant in its own process (default), so one that aborts or segfaults is killed by "
                             "its crash; --no-isolate runs them in this process (a crash ends the command)")
    parser.add_argument("--stage", choices=("targeted", "suite", "campaign"), default="targeted",
                        help="targeted: fixed targeted cases, then a short campaign; suite: the default suite and its "
                             "relation checks (what `jfa-verify run` catches); campaign: --max-examples drawn cases "
                             "alone")
    progress_option(parser)


def main(args, ctx) -> int:
    """Run the CI profile against each planted-bug mutant; exit 1 if any (non-gpu-only) mutant survives."""
    from jfa_verify.core.exits import ExitCode
    from jfa_verify.fuzz.mutation import format_table, load_catalogue, run_mutants
    from jfa_verify.run.parallelism import Jobs, choose_jobs, counted
    from jfa_verify.run.report import write_json

    if args.stage == "campaign" and args.max_examples == 0:
        raise UsageError("--max-examples 0 with --stage campaign checks nothing (every mutant would 'survive'): "
                         "give at least 1, or --stage suite / targeted")
    from jfa_verify.protocol.registry import load_plugins

    dev = ctx.device  # (first: a plugin's Triton kernels are decorated for the device when imported)
    load_plugins(args.plugin)  # (the catalogue's kernel may be a plugin's)
    catalogue = load_catalogue(args.catalogue)
    only = list(dict.fromkeys(args.only))  # (`--only X X` ran X twice and counted it twice)
    for name in only:
        catalogue[name]  # unknown names fail before any work
    done = []

    def keep(result) -> None:  # each verdict as it comes: an interrupted run keeps what finished
        done.append(result)
        print(f"  {result.name}: {result.status}" + (f" ({result.stage})" if result.stage else ""), flush=True)
        if args.json:
            write_json(args.json, [r.to_dict() for r in done])

    budget = {"targeted": f"targeted cases, then up to {args.max_examples} campaign examples per survivor",
              "suite": "the default suite and its relation checks, up to each mutant's first failure",
              "campaign": f"up to {args.max_examples} campaign examples per mutant"}[args.stage]
    total = len(only) if only else len(catalogue.mutants)
    jobs = choose_jobs(args.jobs, dev, work=total, unit="mutant") if args.isolate else \
        Jobs(1, "given", "in this process: --no-isolate")  # (run_mutants runs them one by one then)
    # before the first verdict, which can take minutes: a new user saw nothing at all until then
    print(f"mutation testing of catalogue {catalogue.name} on {dev}, stage {args.stage} ({budget}): "
          f"{counted(total, 'mutant')}, {jobs.count} at a time ({jobs.reason})", flush=True)
    try:
        results = run_mutants(only or None, catalogue=args.catalogue, device=dev, max_examples=args.max_examples,
                              seed=args.seed, jobs=jobs.count, stage=args.stage, isolate=args.isolate, on_result=keep,
                              plugins=args.plugin)
    except KeyboardInterrupt:
        if args.json:  # also when none finished: the JSON says so rather than being absent (or a stale earlier run's)
            write_json(args.json, [r.to_dict() for r in done])
        print(f"interrupted: {len(done)} of {counted(total, 'mutant')} "
              f"{'has' if len(done) == 1 else 'have'} a verdict"
              + (f", written to {args.json}" if args.json else ""), flush=True)
        if done:
            print(format_table(done))
        return int(ExitCode.INTERRUPTED)
    print(format_table(results))
    if args.json:
        write_json(args.json, [r.to_dict() for r in results])  # in catalogue order
    if results and all(r.status == "skipped" for r in results):  # a CI step must not read this as all killed
        print(f"jfa-verify mutants: error: nothing checked: every mutant was skipped on {dev} "
              f"({results[0].reason}); run them where their kernel runs (`jfa-verify kernels`)", file=sys.stderr)
        return EXIT_USAGE
    survivors = [r.name for r in results if r.status == "survived"]
    unjudged = [f"{r.name} ({r.reason})" for r in results if r.status == "error"]
    if survivors:
        print(f"SURVIVED: {', '.join(survivors)}")
    if unjudged:
        print(f"NOT JUDGED (the run of the mutant failed, or its patch no longer applies): {'; '.join(unjudged)}")
    broken = [r.name for r in results if r.status == "broken"]
    if broken:  # a patch that does not compile proves nothing of the suite: fix the catalogue
        print(f"BROKEN (the kernel raised on every case, not a kill): {', '.join(broken)}")
    return EXIT_FAIL if survivors or unjudged or broken else EXIT_OK
