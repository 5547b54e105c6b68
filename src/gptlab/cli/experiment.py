"""`gptlab experiment NAME`: train a small grid of models and measure them, in one command
(gptlab.experiments): context (positions past the training length), heads (pruning
heads), phase (the induction-head phase change)."""

from __future__ import annotations

import argparse

from gptlab.cli import argtypes

EXPERIMENTS = {
    "context": "one small model per positional encoding (learned, sinusoidal, RoPE, ALiBi, "
               "none) trained at 64 tokens, scored at 1x-8x that length in non-overlapping "
               "and sliding windows; RoPE also with linear / NTK / YaRN / dynamic NTK scaling "
               "and with a short Position Interpolation fine-tune",
    "heads": "a small model trained with two seeds, its heads scored by Michel et al.'s "
             "importance (the gradient of the loss by a gate on each head), pruned least "
             "important first in steps of 10% and re-evaluated, and each removed alone",
    "phase": "attention-only models of 1 and 2 layers (two seeds) trained on repeated "
             "random segments and on text, their heads' induction and previous-token "
             "scores and the in-context-learning score recorded as they train: the "
             "induction-head phase change",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "experiment",
        help="train a small grid of models and measure them (context, heads, phase)",
        description=(
            "Run an experiment end to end into --out: its models are ordinary run "
            "directories under OUT/runs (loadable, resumable, listed by the lab), trained "
            "once and reused by a later run of the same experiment; then results.json, "
            "report.md and figures, and the table printed. Experiments: "
            + "; ".join(f"{name}: {what}" for name, what in EXPERIMENTS.items()) + "."
        ),
        examples=["gptlab experiment context --out runs/context",
                  "gptlab experiment context --out /tmp/context-quick --quick",
                  "gptlab experiment heads --out runs/heads",
                  "gptlab experiment phase --out runs/phase"],
    )
    p.add_argument("name", choices=sorted(EXPERIMENTS), metavar="NAME",
                   help=f"one of: {', '.join(EXPERIMENTS)}")
    p.add_argument("--out", metavar="DIR", help="the experiment's folder (default runs/NAME)")
    p.add_argument("--data", metavar="DATA_DIR",
                   help="a directory from `gptlab prepare` (default: the embedded "
                        "Shakespeare, char-level, prepared into OUT/data)")
    p.add_argument("--quick", action="store_true",
                   help="tiny models and few steps: seconds, for tests (same code paths)")
    p.add_argument("--steps", type=argtypes.int_in(1), metavar="N",
                   help="training steps of each model (default: the size's)")
    p.add_argument("--seed", type=argtypes.int_in(0, 2**63 - 1), default=1337, metavar="S",
                   help="the seed of every run's weights and batches (default 1337; heads and "
                        "phase train a second seed, S+1, beside it)")
    p.add_argument("--progress", action="store_true", help="progress bars while training")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = args.out or f"runs/{args.name}"
    if args.name in ("heads", "phase"):
        # start-up time: torch loads here, so that `--help` and usage errors never wait for it
        import importlib

        module = importlib.import_module(f"gptlab.experiments.{args.name}")
        results = getattr(module, f"run_{args.name}")(
            out, data=args.data, quick=args.quick, seed=args.seed, steps=args.steps,
            progress=args.progress)
        print(f"\n{module.summary(results, out)}")
        return 0
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.experiments import context, report

    results = context.run_context(out, data=args.data, quick=args.quick, seed=args.seed,
                                  steps=args.steps, progress=args.progress)
    for mode in context.MODES:
        header, rows = context.table(results, mode)
        print(f"\nloss (nats/token), {mode} windows; trained at {results['trained_length']}:")
        print(report.text_table(header, rows))
    header, rows = context.by_position_table(results)
    print(f"\nby position, non-overlapping windows of {results['lengths'][-1]}:")
    print(report.text_table(header, rows))
    print(f"\n{report.timing_line(results['timing'], results['machine'])}")
    print(f"wrote {out}/results.json, {out}/report.md, {out}/{context.FIGURE_LENGTHS}, "
          f"{out}/{context.FIGURE_POSITIONS}")
    return 0
