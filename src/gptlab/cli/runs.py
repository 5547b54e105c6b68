"""`gptlab runs`: the table of the runs under a folder, or their loss curves in one figure
(see gptlab.training.runs)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gptlab.errors import UsageError
from gptlab.files import kinds
from gptlab.files.authorship import FIGURE
from gptlab.files.kinds import CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE
from gptlab.plots.training import compare_runs
from gptlab.training.rundir import read_metrics
from gptlab.training.runs import SORT_KEYS, format_table, is_model_dir, list_runs

DEFAULT_DIR = "runs"  # gptlab lab's --runs default, and gptlab demo's


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "runs",
        help="list the training runs under a folder, or overlay their loss curves",
        description=(
            "A table of the training runs under DIR (default: runs), up to three folders "
            "down: model shape and parameters, steps done / planned, status (running, with "
            "the trainer's PID; interrupted; finished), the best estimated val loss, the "
            "whole-val loss, tokens/s (median of the logged steps) and when its files last "
            "changed. Read from the files alone (no torch). --plot A B ... draws those "
            "runs' loss curves in one figure instead."
        ),
        examples=["gptlab runs experiments --sort best-val",
                  "gptlab runs --json",
                  "gptlab runs --plot demo sc --out compare.svg"],
    )
    p.add_argument("dir", nargs="?", default=DEFAULT_DIR, metavar="DIR",
                   help="the folder to list (default: runs)")
    p.add_argument("--sort", choices=list(SORT_KEYS), default="name",
                   help="order of the rows (default: name); runs without the value last")
    p.add_argument("--reverse", action="store_true", help="the other way round")
    p.add_argument("--json", action="store_true", help="one JSON list instead of the table")
    p.add_argument("--plot", nargs="+", metavar="RUN",
                   help="overlay these runs' loss curves (names as listed, relative to DIR, "
                        "or paths to run directories)")
    p.add_argument("--out", default="loss-compare.png", metavar="FILE",
                   help="with --plot: the figure to write, .png or .svg "
                        "(default: loss-compare.png)")
    p.add_argument("--force", action="store_true",
                   help="with --plot: replace FILE, if it is a figure gptlab drew")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    if args.plot is None:
        if not root.is_dir():
            raise UsageError(f"{root} is not a folder")
        runs = list_runs(root, args.sort, args.reverse)
        if args.json:
            print(json.dumps([r.to_dict() for r in runs], indent=1))
        elif not runs:
            print(f"no training runs under {root}/")
        else:
            print(format_table(runs))
        return 0
    if args.json:
        raise UsageError("--json lists the runs and --plot draws them: give one")
    named = [(name, _find(root, name)) for name in args.plot]
    out = kinds.claim_file(args.out, FIGURE, force=args.force,
                           sources=tuple(path for _, path in named))
    compare_runs([(name, read_metrics(path)) for name, path in named]).save(out)
    print(f"wrote {out}: {', '.join(name for name, _ in named)}")
    return 0


def _find(root: Path, name: str) -> Path:
    for path in (root / name, Path(name)):
        if path.is_dir() and is_model_dir(path):
            return path
    raise UsageError(f"no run {name!r} in {root}/ or as a path (a run directory holds "
                     f"{CONFIG_FILE}, {WEIGHTS_FILE}, {TOKENIZER_FILE})")
