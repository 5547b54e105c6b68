"""`gptlab bench`: the speed benchmarks in the source checkout's bench/ folder.

Benchmarks are not part of the installed package (they compare against transformers and
write plots), so this command finds bench/ beside the package's source tree."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from gptlab.cli import argtypes
from gptlab.errors import UsageError
from gptlab.files.atomic import check_dir

# Every benchmark in bench/, in run order: cheap and independent first, time to quality
# and the speedrun (minutes) last. bench/run.py reads this list too.
NAMES = ("train_step", "generation", "mfu", "scaling", "lab_latency", "time_to_quality",
         "speedrun")
MAX_THREADS = 1024  # torch accepts more, then crashes at exit (a million threads: segfault)


def repo_root() -> Path:
    # src/gptlab/commands/bench.py -> the checkout holding src/ and bench/
    return Path(__file__).resolve().parents[3]


def load_runner():
    root = repo_root()
    if not (root / "bench" / "run.py").is_file():
        raise UsageError(f"gptlab bench needs the source checkout's bench/ folder, not found "
                         f"at {root / 'bench'}; run it from a git clone installed with "
                         f"`pip install -e .`")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module("bench.run")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench", help="run the speed benchmarks (ratios against peers, medians)",
        description=(
            "Run the benchmarks in bench/: training-step throughput and generation against "
            "Hugging Face transformers, MFU, scaling with context length, time to "
            "val loss 1.88 against nanoGPT's recipe, and the speedrun (time to a whole-val "
            "loss of 1.88 and 1.70 over seeds, against nanoGPT's recipe). Each prints "
            "medians over interleaved runs and the ratio against a peer measured in the "
            "same run, and writes OUT/<name>.json (and PNG plots)."),
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="fewer repetitions and smaller sizes (about 2 minutes); leaves out "
                           "time_to_quality unless --only names it")
    size.add_argument("--smoke", action="store_true",
                      help="tiny sizes: checks every benchmark runs end to end (seconds); "
                           "the numbers mean nothing")
    p.add_argument("--only", action="append", metavar="NAME",
                   help=f"run only this benchmark (repeatable, or comma-separated): "
                        f"{', '.join(NAMES)}")
    p.add_argument("--out", metavar="DIR", help="where to write results "
                   "(default: bench/results in the checkout)")
    p.add_argument("--text", metavar="PATH", help="tiny Shakespeare input.txt for "
                   "time_to_quality and speedrun (default: speedrun the checkout's "
                   "tests/assets copy; else gptlab's download cache, else downloaded)")
    p.add_argument("--seeds", type=argtypes.int_in(1, 100), metavar="N",
                   help="seeds per recipe for speedrun (default 3; --quick 1)")
    p.add_argument("--threads", type=argtypes.int_in(1, MAX_THREADS), default=2, metavar="N",
                   help="torch threads (default 2, the machine class results are quoted for)")
    p.set_defaults(func=run)


def parse_only(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise UsageError(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(NAMES)}")
    return names


def run(args: argparse.Namespace) -> int:
    only = parse_only(args.only)
    out = Path(args.out) if args.out else repo_root() / "bench" / "results"
    check_dir(out)
    if args.text is not None and not Path(args.text).is_file():
        raise UsageError(f"--text {args.text}: no such file")
    runner = load_runner()
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    names = runner.selected(only, size)
    runner.run_all(names, size, out, threads=args.threads, text_path=args.text,
                   seeds=args.seeds, log=lambda s: print(s, flush=True))
    return 0
