"""How long `gptlab --help` takes, against `import torch` measured in the same run.

The CLI builds its parser from light modules only and imports torch inside each command's
run(), so help and usage errors should cost a bare interpreter plus argparse, not torch's
import. Each contender is a fresh process (`python -m gptlab --help`, `python -c "import
torch"`, and `python -c pass` for the interpreter alone), timed wall-clock, in interleaved
turns; the ratio of medians is the claim (target: at most 0.35).

    python -m bench.cli_startup [--reps 15] [--out bench/results]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gptlab
from bench.common import SIZES, Size, interleaved, median, table, write_result

TARGET = 0.35  # gptlab --help at most this fraction of `import torch`
# The gptlab the benchmark runs, also in the child processes (a checkout's src/ first).
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(Path(gptlab.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
COMMANDS = {
    "gptlab --help": [sys.executable, "-m", "gptlab", "--help"],
    "import torch": [sys.executable, "-c", "import torch"],
    "python": [sys.executable, "-c", "pass"],
}


def _process(argv: list[str]) -> Callable[[], None]:
    def call() -> None:
        subprocess.run(argv, env=ENV, stdout=subprocess.DEVNULL, check=True)

    return call


def run(size: Size, out_dir: Path, log: Callable[[str], None] = print,
        reps: int | None = None) -> dict[str, Any]:
    reps = reps or (2 if size.smoke else max(size.reps, 10))
    times = interleaved({name: _process(argv) for name, argv in COMMANDS.items()},
                        reps=reps, warmup=1)
    medians = {name: median(ts) for name, ts in times.items()}
    ratio = medians["gptlab --help"] / medians["import torch"]
    log(f"start-up, fresh processes, median of {reps} interleaved runs")
    log(table(["command", "median s", "min s", "max s"],
              [[name, medians[name], min(ts), max(ts)] for name, ts in times.items()]))
    log(f"gptlab --help / import torch: {ratio:.3f} (target <= {TARGET})")
    data = {"reps": reps, "target_ratio": TARGET, "ratio_help_vs_import_torch": ratio,
            "within_target": ratio <= TARGET,
            "commands": {name: " ".join(argv[1:]) for name, argv in COMMANDS.items()},
            "median_s": medians, "times_s": times}
    write_result(out_dir, "cli_startup", {"size": size.name, **data})
    return data


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cli_startup", description=__doc__)
    parser.add_argument("--reps", type=int, default=15, help="timed runs of each (default 15)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    run(SIZES["full"], args.out, reps=args.reps)


if __name__ == "__main__":
    main()
