"""``jfa-verify schedule``: per-SM load of the tile schedulers (:mod:`jfa_verify.scheduling.schedule_report`)."""

from __future__ import annotations

from jfa_verify.cli.arguments import EXIT_OK, UsageError, lengths_list, png_file, positive_int, seed_int

HELP = "per-SM load of launch-order, round-robin, zigzag and dynamic schedules"
DESCRIPTION = ("Print the per-SM load of the launch-order, round-robin, zigzag and dynamic tile schedules for one "
               "batch of lengths (given with --lengths, or drawn from MovieLens or a Pareto law), against the "
               "list-scheduling bound. Exit status: 0 printed; 2 a bad argument.")


def add_arguments(parser) -> None:
    parser.add_argument("--distribution", choices=("movielens", "pareto"), default=None,
                        help="sequence lengths drawn from MovieLens or a Pareto law (default: movielens)")
    parser.add_argument("--lengths", type=lengths_list,
                        help="comma-separated lengths instead of a distribution (then no --batch nor --distribution)")
    parser.add_argument("--batch", type=positive_int, default=None, help="sequences drawn in the batch (default: 256)")
    parser.add_argument("--num-sms", type=positive_int, default=132,
                        help="persistent programs, one per SM (default: %(default)s, an H200)")
    parser.add_argument("--block-m", type=positive_int, default=64, help="query rows per tile (default: %(default)s)")
    parser.add_argument("--causal", action="store_true",
                        help="causal (top-left): a tile's load is the key tiles its rows see")
    parser.add_argument("--seed", type=seed_int, default=0, help="seed of the drawn lengths (default: %(default)s)")
    parser.add_argument("--png", type=png_file, help="write a per-SM load plot here")


def main(args, ctx) -> int:
    from rich.table import Table

    from jfa_verify.core.lengths import sample_movielens_batch
    from jfa_verify.scheduling.schedule_report import compare_schedulers, plot_per_sm_load

    if args.lengths and (args.batch or args.distribution):  # (a new user's --batch 7 was ignored without a word)
        given = " and ".join(f"--{n}" for n in ("batch", "distribution") if getattr(args, n))
        raise UsageError(f"--lengths gives the batch itself; {given} would be ignored: drop {given}, or --lengths")
    batch = args.batch or 256
    if args.lengths:
        lengths = args.lengths
    elif args.distribution in (None, "movielens"):
        lengths = sample_movielens_batch(batch, args.seed)
    else:
        import numpy as np

        rng = np.random.Generator(np.random.PCG64(args.seed))
        lengths = tuple(int(min(8192, 16 * (1 + rng.pareto(1.2)))) for _ in range(batch))
    rows = compare_schedulers(lengths, lengths, num_sms=args.num_sms, block_m=args.block_m, causal=args.causal)
    from jfa_verify.cli.output import make_console

    console = make_console()
    table = Table(title=f"per-SM load (visible KV positions), {len(lengths)} sequences, {args.num_sms} SMs, "
                        f"BLOCK_M={args.block_m}")
    for col in ("scheduler", "tiles", "max load", "mean load", "imbalance (max/mean)", "list-scheduling bound",
                "within bound"):
        table.add_column(col)
    for r in rows:
        bound = f"{r['bound']:.0f}" if r["bounded"] else "-"
        within = ("yes" if r["within_bound"] else "NO") if r["bounded"] else "-"
        table.add_row(r["name"], str(r["num_tiles"]), f"{r['max_load']:.0f}", f"{r['mean_load']:.1f}",
                      f"{r['imbalance']:.3f}", bound, within)
    console.print(table, soft_wrap=False)
    if args.png:
        plot_per_sm_load(rows, args.png)
        console.print(f"wrote {args.png}")
    return EXIT_OK
