"""``jfa-verify fuzz``: a Hypothesis campaign (the work: :func:`jfa_verify.fuzz.workers.run_fuzz`)."""

from __future__ import annotations

import argparse
import sys

from jfa_verify.cli.arguments import (
    EXIT_USAGE,
    UsageError,
    kernel_options,
    new_file,
    png_file,
    positive_float,
    positive_int,
    seed_int,
    timeout_seconds,
)
from jfa_verify.core.exits import FINDINGS_IN_WORDS

HELP = ("Hypothesis campaign: adversarial cases, shrinking, deduplicated findings, worker processes on one shared "
        "database")
DESCRIPTION = ("A Hypothesis campaign against a kernel: saved findings replayed first, then new "
               "cases drawn (steered toward rarely drawn contract classes), each failure shrunk "
               "and kept as one finding per signature in --reproducers, with its replay command. "
               f"Exit status (jfa_verify/core/exits.py): 0 no finding; {FINDINGS_IN_WORDS}; 2 a bad "
               "argument, every case run outside the kernel's capabilities (nothing "
               "checked), or a case file in --reproducers that cannot be read (named, left as "
               "it is: a finding may be lost in it) beside no finding; 130 interrupted "
               "(the summary and report are written).")


def add_arguments(parser) -> None:
    kernel_options(parser)
    parser.add_argument("--max-examples", type=positive_int, default=None,
                        help="new cases to draw, over all workers (default 100, or no limit with --duration)")
    parser.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS", help="stop after this long")
    parser.add_argument("--seed", type=seed_int, default=None,
                        help="seed of worker 0 (worker w > 0: a seed hashed from both, so that campaigns with "
                             "neighbouring seeds draw apart); default: a fresh random seed, printed")
    parser.add_argument("--timeout", type=timeout_seconds, default=120.0,
                        help="seconds per case (compilation included) before it is a hang finding (default 120)")
    parser.add_argument("--forward-only", action="store_true", help="judge O and LSE only (no backward)")
    parser.add_argument("--workers", "--jobs", type=positive_int, default=None,
                        help="campaign worker processes; default: one per CPU core, as many as free memory holds (on "
                             "CUDA 8 GiB of the GPUs' a worker), at most 16 and one per case to draw, or "
                             "$JFA_VERIFY_JOBS; the banner says what was chosen")
    parser.add_argument("--gpus", type=lambda t: [g.strip() for g in t.split(",") if g.strip()], default=None,
                        metavar="0,1,...",
                        help="GPUs the workers are pinned to, round-robin (default: every visible one)")
    parser.add_argument("--database", default=None, metavar="DIR|redis[s]://[USER:PASSWORD@]HOST[:PORT][/DB]",
                        help="Hypothesis example database shared by the workers (default: REPRODUCERS/.hypothesis; "
                             "a Redis password may come from $JFA_REDIS_PASSWORD instead of the URL)")
    parser.add_argument("--read-from", action="append", default=[], metavar="DIR|redis[s]://...",
                        help="also read (never write) this database (repeatable)")
    parser.add_argument("--report", default=None, type=new_file, help="write the campaign's JSON report here")
    parser.add_argument("--png", default=None, type=png_file, help="write a PNG of cases and findings over time here")
    parser.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                        help="run cases in a case-worker process, so crashes and hangs are findings (default)")
    parser.add_argument("--shrink-seconds", type=positive_float, default=120.0,
                        help="longest time spent shrinking one failure (default 120)")
    parser.add_argument("--progress-interval", type=positive_float, default=10.0,
                        help="seconds between progress lines when the output is not a terminal (default 10)")
    parser.add_argument("--covering", action="store_true",
                        help="first run the covering array of the contract's pairs of classes (failures there are kept "
                             "as found, unshrunk); drawing is always steered toward rarely drawn classes")
    parser.add_argument("--precompile", action=argparse.BooleanOptionalAction, default=True,
                        help="before the workers start, build each distinct Triton kernel variant of the contract's "
                             "covering array once, in parallel processes as `jfa-verify run --precompile` says "
                             "(default; on a GPU its `precompile:` line says how many and how long; the CPU "
                             "interpreter compiles nothing, so there it prints no line); --no-precompile builds each "
                             "at its first launch, in the workers")
    parser.add_argument("--pack", type=positive_int, default=1, metavar="N",
                        help="run up to N drawn cases that share all but lengths and seed as one packed launch, each "
                             "judged on its own rows, the launch too; a failing pack is split until the failure stands "
                             "alone (default 1: no packing)")


def main(args, ctx) -> int:
    import secrets

    from jfa_verify.cli.output import make_console, print_campaign
    from jfa_verify.fuzz.workers import FuzzConfig, run_fuzz
    from jfa_verify.run.parallelism import choose_jobs, counted
    from jfa_verify.workflows.suite_run import check_runs_on

    console = make_console()
    device = ctx.device
    kernel = ctx.kernel()
    check_runs_on(kernel, device)  # (else every drawn case is unsupported: a whole --duration spent, then "nothing
    # checked")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    max_examples = args.max_examples if args.max_examples or args.duration else 100
    gpus = args.gpus
    if gpus is not None and device.type != "cuda":
        raise UsageError(f"--gpus {','.join(gpus)}: this campaign runs on {device.type}, where workers are not "
                         f"pinned to GPUs; drop --gpus, or add --device cuda on a machine with GPUs")
    if device.type == "cuda":
        import torch

        present = [str(i) for i in range(torch.cuda.device_count())]
        absent = [g for g in gpus or () if g.isdigit() and g not in present]  # (a UUID is CUDA's to check)
        if absent:
            raise UsageError(f"--gpus {','.join(gpus)}: no GPU {','.join(absent)} on this machine (it has "
                             f"{','.join(present)}); give indices from that list")
        gpus = present if gpus is None else gpus
    workers = choose_jobs(args.workers, device, gpus=gpus or (), work=max_examples, unit="case to draw",
                          option="--workers")
    config = FuzzConfig(kernel=kernel.name, device_type=device.type, corpus_dir=args.reproducers,
                        run=ctx.settings.replace(seed=seed), database=args.database,
                        read_from=tuple(args.read_from), max_examples=max_examples, duration_s=args.duration,
                        shrink_seconds=args.shrink_seconds, covering=args.covering, pack=args.pack,
                        precompile=args.precompile)
    from jfa_verify.fuzz.database import default_database, open_database, redacted

    # the database before the banner: a bad one is a usage error of one line (run_fuzz opens it again, for workers)
    if args.database is not None and not args.database.strip():
        # (an empty value, as from an unset shell variable, once fell back to the default without a word)
        raise UsageError(f"--database {args.database!r} is empty; give a folder or "
                         f"redis[s]://[USER:PASSWORD@]HOST[:PORT][/DB], or leave --database out for "
                         f"{default_database(args.reproducers)}")
    database = args.database or default_database(args.reproducers)
    open_database(database, tuple(args.read_from))
    limit = " and ".join(x for x in (counted(max_examples, "new case drawn", "new cases drawn") if max_examples else "",
                                     f"{args.duration:g} s" if args.duration else "") if x)
    console.print(f"jfa-verify fuzz: kernel [bold]{kernel.name}[/] on {device}, {workers}"
                  + (f" on GPU{'s' if len(gpus) > 1 else ''} {','.join(gpus)}" if gpus else "")
                  + (f", packs of up to {args.pack} cases a launch" if args.pack > 1 else "")
                  + f", up to {limit}, seed {seed} "
                  f"(repeat the draws with --seed {seed}"
                  + ("" if workers.count == 1 else f" --workers {workers.count}")
                  + f"), database {redacted(database)}")
    report = run_fuzz(config, workers=workers.count, gpus=gpus or (), console=console, live=not args.no_progress,
                      interval=args.progress_interval, report=args.report, png=args.png)
    print_campaign(report, console)
    for broken in report["unreadable_case_files"]:  # (as `findings` says it; the exit status is 2 beside no
        # finding)
        print(f"jfa-verify fuzz: error: {broken['path']} is not a readable case file ({broken['why']}); a finding may "
              f"be lost in it (not replayed, left as it is): restore it, or remove it once you have read it",
              file=sys.stderr)
    statuses = report["statuses"]
    if not report["interrupted"] and statuses and set(statuses) == {"unsupported"}:
        # Nothing was checked: a CI job must not read this as a pass (as `run` in the same case).
        print(f"jfa-verify fuzz: error: every one of the {counted(statuses['unsupported'], 'case')} run was outside "
              f"the capabilities of kernel {kernel.name!r} on {device.type} (nothing checked); `jfa-verify kernels` "
              f"lists where each kernel runs", file=sys.stderr)
        return EXIT_USAGE
    return report["exit_code"]

