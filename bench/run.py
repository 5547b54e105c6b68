"""Runs the benchmarks in turn: `python -m bench [--quick | --smoke] [--only NAME] ...`
(what `make bench` runs), from a source checkout. Benchmarks are not part of the installed
package: they compare against transformers and write plots."""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import SIZES, setup_threads
from gptlab.cli import argtypes
from gptlab.cli.main import Parser, run_command
from gptlab.errors import UsageError
from gptlab.files.atomic import check_dir

PROG = "python -m bench"
# Every benchmark in bench/, in run order: cheap and independent first, time to quality
# and the speedrun (minutes) last.
BENCHMARKS = ("cli_startup", "train_step", "generation", "mfu", "scaling", "lab_latency",
              "lab_load", "serve_load", "time_to_quality", "speedrun")
# Left out of --quick unless asked for by name: they train models to a target loss.
SLOW = ("time_to_quality", "speedrun")
# A benchmark whose module is named otherwise: the speedrun's record is the whole commands',
# launch to exit (bench.speedrun keeps the rungs' machinery and laps 1-2's record).
MODULES = {"speedrun": "speedrun_whole"}
RESULTS = Path(__file__).resolve().parent / "results"
MAX_THREADS = 1024  # torch accepts more, then crashes at exit (a million threads: segfault)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
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
                        f"{', '.join(BENCHMARKS)}")
    p.add_argument("--out", metavar="DIR", help="where to write results "
                   "(default: bench/results)")
    p.add_argument("--text", metavar="PATH", help="tiny Shakespeare input.txt for "
                   "time_to_quality and speedrun (default: speedrun the checkout's "
                   "tests/assets copy; else gptlab's download cache, else downloaded)")
    p.add_argument("--seeds", type=argtypes.int_in(1, 100), metavar="N",
                   help="seeds per recipe for speedrun (default 3; --quick 1)")
    p.add_argument("--threads", type=argtypes.int_in(1, MAX_THREADS), default=2, metavar="N",
                   help="torch threads (default 2, the machine class results are quoted for)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench`: exit 0, or 2 with one line on stderr for bad usage (as `gptlab`)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else 2
    return run_command(run, args, PROG)


def run(args: argparse.Namespace) -> int:
    only = parse_only(args.only)
    out = Path(args.out) if args.out else RESULTS
    check_dir(out)
    if args.text is not None and not Path(args.text).is_file():
        raise UsageError(f"--text {args.text}: no such file")
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    run_all(selected(only, size), size, out, threads=args.threads, text_path=args.text,
            seeds=args.seeds, log=lambda s: print(s, flush=True))
    return 0


def parse_only(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise UsageError(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BENCHMARKS)}")
    return names


def selected(only: list[str] | None, size: str) -> list[str]:
    if only:
        return [name for name in BENCHMARKS if name in only]
    return [name for name in BENCHMARKS if not (size == "quick" and name in SLOW)]


def run_all(
    names: list[str], size: str, out_dir: Path, threads: int, text_path: str | None = None,
    log: Callable[[str], None] = print, seeds: int | None = None,
) -> dict[str, Any]:
    """Run each named benchmark at `size` ('smoke', 'quick' or 'full'), writing
    out_dir/<name>.json (and PNGs); returns {name: its result dict}."""
    setup_threads(threads)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in names:
        module_name = MODULES.get(name, name)
        module = importlib.import_module(f"bench.{module_name}")
        t0 = time.perf_counter()
        extra = {"text_path": text_path} if name in SLOW else {}
        if name == "speedrun":
            extra["seeds"] = seeds
        results[name] = module.run(SIZES[size], out_dir, log=log, **extra)
        log(f"[{name}: {time.perf_counter() - t0:.0f} s, wrote "
            f"{out_dir / (module_name + '.json')}]")
    return results
