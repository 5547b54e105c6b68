"""Commands on a busy machine: their wall time beside N busy processes, for two checkouts.

A user's machine is often busy (a training, a browser, a test suite). Two costs that only
show there: `gptlab sample` timed its decoding kernels on every call (a probe taken under
load is not cached, so the next call probed again), and `gptlab params` imported torch to
read a config. Each command runs as a fresh process (as a user types it), with an empty
probe cache (GPTLAB_CACHE, a new folder per call: a machine that never cached a quiet
probe), while BUSY processes spin (`python -c 'while 1: pass'`); the checkouts' commands
are timed in interleaved turns, so the load hits both alike. The claim is the ratio of
medians, after / before, per command.

    python -m bench.under_load --before /tmp/main-src [--busy 4] [--reps 5]
                               [--out bench/results]

--before is another checkout's src/ folder (`git archive main src | tar -x -C /tmp/main`
gives /tmp/main/src); without it only this checkout is timed. Writes OUT/under_load.json.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gptlab
from bench.common import interleaved, median, table, write_result

THIS = Path(gptlab.__file__).resolve().parents[1]  # this checkout's src/
COMMANDS = {
    "sample shakespeare --max-new-tokens 1": ["sample", "shakespeare", "--max-new-tokens", "1",
                                              "--seed", "0"],
    "params gpt2": ["params", "gpt2"],
}
SPIN = "while 1: pass"


@contextlib.contextmanager
def busy(n: int) -> Iterator[list[subprocess.Popen]]:
    """n processes that spin on a core each, for the block (stopped, each by its own id)."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]
    try:
        yield spinners
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()


def _process(src: Path, argv: list[str], cache_root: Path) -> Callable[[], None]:
    env = {**os.environ, "PYTHONPATH": str(src)}

    def call() -> None:
        cache = tempfile.mkdtemp(dir=cache_root)  # never a cached probe
        subprocess.run([sys.executable, "-m", "gptlab", *argv], check=True,
                       env={**env, "GPTLAB_CACHE": cache},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return call


def run(before: Path | None, busy_n: int, reps: int, out_dir: Path | None,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    checkouts = {"after": THIS, **({"before": before} if before is not None else {})}
    with tempfile.TemporaryDirectory() as root:
        contenders = {f"{which}: {name}": _process(src, argv, Path(root))
                      for name, argv in COMMANDS.items() for which, src in checkouts.items()}
        with busy(busy_n):
            time.sleep(5)  # the spinners take their cores before the first call
            times = interleaved(contenders, reps=reps, warmup=1)
            load = os.getloadavg()[0]
    medians = {name: median(ts) for name, ts in times.items()}
    log(f"{busy_n} busy processes (load average {load:.1f} at the end), fresh processes "
        f"and an empty probe cache per call, median of {reps} interleaved runs")
    log(table(["command", "median s", "min s", "max s"],
              [[name, medians[name], min(ts), max(ts)] for name, ts in times.items()]))
    ratios = {}
    if before is not None:
        for name in COMMANDS:
            ratios[name] = medians[f"after: {name}"] / medians[f"before: {name}"]
            log(f"{name}: after / before {ratios[name]:.3f}")
    data = {"busy": busy_n, "reps": reps, "load_average_end": load,
            "checkouts": {k: str(v) for k, v in checkouts.items()},
            "commands": {name: "gptlab " + " ".join(argv) for name, argv in COMMANDS.items()},
            "median_s": medians, "times_s": times, "ratio_after_over_before": ratios}
    if out_dir is not None:
        write_result(out_dir, "under_load", data)
    return data


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.under_load",
                                description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, help="another checkout's src/ folder to compare")
    p.add_argument("--busy", type=int, default=4, help="busy processes (default 4)")
    p.add_argument("--reps", type=int, default=5, help="timed runs of each (default 5)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    if args.before is not None and not (args.before / "gptlab" / "__init__.py").is_file():
        p.error(f"--before {args.before}: not a src/ folder holding gptlab")
    run(args.before, args.busy, args.reps, args.out)


if __name__ == "__main__":
    main()
