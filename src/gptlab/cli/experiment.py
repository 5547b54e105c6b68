"""`gptlab experiment NAME`: train a small grid of models and measure them, in one command
(gptlab.experiments). Each experiment is an Experiment (gptlab.experiments.contract, listed
in gptlab.experiments.catalog), which gives `run(out, data=, quick=, seed=, steps=,
progress=) -> results`, the `tables(results)` and `notes(results)` it prints and the
figures it draws."""

from __future__ import annotations

import argparse
from pathlib import Path

from gptlab.cli import argtypes
from gptlab.errors import UsageError

EXPERIMENTS = {
    "context": "small models (three seeds) per positional encoding (learned, sinusoidal, "
               "RoPE, ALiBi, none) trained at 64 tokens, scored at 1x-8x that length in "
               "non-overlapping and sliding windows; RoPE also with linear / NTK / YaRN / "
               "dynamic NTK scaling and with a short Position Interpolation fine-tune",
    "norm": "Pre-LN against Post-LN, with and without warm-up, at two depths and two "
            "learning rates: final loss, divergence, and each layer's gradient norm at step 0 "
            "and during training (Xiong et al. 2020)",
    "scale": "attention with and without the 1/sqrt(d_k) factor at head dimensions 8, 32 "
             "and 128 (width 128): loss, attention entropy per head, the share of saturated "
             "softmax rows, and the gradient norm reaching the query and key weights",
    "heads": "a small model trained with three seeds, its heads scored by Michel et al.'s "
             "importance (the gradient of the loss by a gate on each head), pruned least "
             "important first in steps of 10% and re-evaluated, and each removed alone",
    "phase": "attention-only models of 1 and 2 layers (three seeds) trained on repeated "
             "random segments and on text, their heads' induction and previous-token "
             "scores and the in-context-learning score recorded as they train: the "
             "induction-head phase change",
    "memory": "a trained model's FFN units read as key-value memories (Geva et al. 2021) "
              "over held-out text: trigger patterns, the activation drop, value agreement "
              "and composition per layer (--model, default the shipped one); and small "
              "models (three seeds) trained on invented facts, traced as ROME (Meng et al. "
              "2022): the recall MLP and attention restore at each layer and position",
    "brackets": "small models (three seeds) trained on Dyck-2 brackets, their heads scored "
                "for attention to the matching bracket against rules that need no stack "
                "and for uniform attention (counting), the best-matching and most uniform "
                "heads ablated; the shipped model's previous-token heads",
    "recurrence": "a transformer (three seeds, runs) against an LSTM of its size on the same "
                  "text: the gradient of a position's loss by the embedding k back; "
                  "associative recall (MQAR) at 64-256 tokens and two widths; the price: "
                  "forward+backward time and saved memory against n, decoding with and "
                  "without the KV cache, beside the FLOPs per token",
    "features": "a trained model's FFN read through sparse dictionaries (an autoencoder of "
                "its output and a transcoder, TopK, SAELens' layout) against its neurons: "
                "L0, explained variance, CE loss recovered, dead features, the neurons "
                "needed for the same variance, the pattern rule (--model, default the "
                "shipped one)",
}

# The experiments whose models train on data they generate: a --data would be ignored, so
# it is refused (phase generates its segments task but trains on --data's text too; memory
# reads --data's validation split).
GENERATE_THEIR_DATA = {"brackets": "it trains on Dyck-2 brackets it generates"}
# The experiments that read a trained model (--model) rather than train their own.
READ_A_MODEL = ("memory", "features")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "experiment",
        help=f"train a small grid of models and measure them ({', '.join(EXPERIMENTS)})",
        description=(
            "Run an experiment end to end into --out: its models are ordinary run "
            "directories under OUT/runs (loadable, resumable, listed by the lab), trained "
            "once and reused by a later run of the same experiment; then results.json, "
            "report.md and figures, and the table printed. Experiments: "
            + "; ".join(f"{name}: {what}" for name, what in EXPERIMENTS.items()) + "."
        ),
        examples=["gptlab experiment context --out runs/context",
                  "gptlab experiment norm --out /tmp/norm-quick --quick",
                  "gptlab experiment heads --data runs/demo-data --out runs/heads"],
    )
    p.add_argument("name", choices=sorted(EXPERIMENTS), metavar="NAME",
                   help=f"one of: {', '.join(EXPERIMENTS)}")
    p.add_argument("--out", metavar="DIR", help="the experiment's folder (default runs/NAME)")
    p.add_argument("--data", metavar="DATA_DIR",
                   help="a directory from `gptlab prepare` (default: the embedded "
                        "Shakespeare, char-level, prepared into OUT/data); "
                        + "; ".join(f"refused by {name}: {why}"
                                    for name, why in GENERATE_THEIR_DATA.items()))
    p.add_argument("--quick", action="store_true",
                   help="tiny models and few steps: seconds, for tests (same code paths)")
    p.add_argument("--steps", type=argtypes.int_in(1), metavar="N",
                   help="training steps of each model (default: the size's)")
    p.add_argument("--seed", type=argtypes.int_in(0, 2**63 - 1), default=1337, metavar="S",
                   help="the seed of every run's weights and batches (default 1337). The "
                        "default size trains seeds S, S+1, S+2 of each model (recurrence's "
                        "associative-recall models and features' dictionaries: S only); "
                        "--quick trains tiny models a few steps, seed S alone for context, "
                        "norm, scale and features, S and S+1 for the others: too few steps "
                        "to learn, "
                        "so a claim that reads a model it trained comes out undecided. memory's "
                        "Geva claims and features' run over slices of text, recurrence's "
                        "recall and timing claims over lengths and repeats, not seeds")
    p.add_argument("--threads", type=argtypes.int_in(1), default=1, metavar="N",
                   help="torch threads the models train and are measured at (default 1: the "
                        "same seed gives the same numbers, and the same verdicts, whatever "
                        "the machine's load; another count moves them, docs/experiments.md "
                        "says how much). Recorded in results.json; a folder made at another "
                        "count is refused without --force")
    p.add_argument("--model", metavar="MODEL",
                   help="memory and features only: the model to read, a run or model "
                        "directory or a shipped model's name (default: shakespeare)")
    p.add_argument("--progress", action="store_true", help="progress bars while training")
    p.add_argument("--force", action="store_true",
                   help="train again in an --out that holds this experiment's results for "
                        "other flags (--quick, --steps, --seed, --data, --threads), replacing "
                        "them")
    p.set_defaults(func=run, on_interrupt=interrupted_note)


def interrupted_note(args: argparse.Namespace, exc: KeyboardInterrupt) -> str | None:
    """What an interrupted experiment keeps, and how it goes on (gptlab.cli.main.run_command
    says it after "interrupted"); nothing where it stopped before its folder was made."""
    from gptlab.files import kinds  # start-up time: torch-free, as here

    out = args.out or f"runs/{args.name}"
    if kinds.kind_of(out) != kinds.EXPERIMENT:
        return None
    return (f"the runs it finished are kept in {out}/runs, an interrupted one at its last "
            f"checkpoint: run the same command again to resume the experiment")


def run(args: argparse.Namespace) -> int:
    if args.data is not None and args.name in GENERATE_THEIR_DATA:
        raise UsageError(f"--data is not for `gptlab experiment {args.name}`: "
                         f"{GENERATE_THEIR_DATA[args.name]}")
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    import torch

    # One count whatever the load: a reduction split over another number of threads sums in
    # another order, and a few hundred steps carry the difference into the verdicts (a
    # brackets run moved from "held" to "held weakly"; docs/experiments.md has the
    # measurement). Restored after: main() may be called in a process that goes on (the
    # tests).
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads)


def _run(args: argparse.Namespace) -> int:
    # loaded on use, as torch is in run(): `--help` and usage errors never wait for them
    from gptlab.experiments import catalog, report
    from gptlab.experiments.grid import experiment_folder

    experiment = catalog.experiment(args.name)
    out = args.out or f"runs/{args.name}"
    # what its results depend on: another configuration's are replaced only with --force
    configuration = {"quick": args.quick, "steps": args.steps, "seed": args.seed,
                     "data": None if args.data is None else str(Path(args.data).absolute()),
                     "threads": args.threads}
    extra = {}
    if args.model is not None:
        if args.name not in READ_A_MODEL:
            raise UsageError("--model is for `gptlab experiment memory` and `features` only "
                             "(the others train their models)")
        extra["model"] = configuration["model"] = args.model
    experiment_folder(out, args.name, configuration, force=args.force)
    results = experiment.run(out, data=args.data, quick=args.quick, seed=args.seed,
                             steps=args.steps, progress=args.progress, **extra)
    report.print_tables(results, out, experiment.tables(results), experiment.figures,
                        experiment.notes(results))
    return 0
