"""The speedrun presets' training step in two checkouts of gptlab, side by side: whether a
change to the code (a refactor that must not change what is computed) costs time.

Each launch is the real command, `gptlab train --preset NAME` for a few dozen steps, run
from one checkout's sources; its per-step times are read from the run's metrics.jsonl
(tokens per step over the logged tokens/s), the first steps left out as warm-up. The
checkouts take turns, A B B A A B ..., so a neighbour's load, and whatever the launch before
leaves behind, hits both alike; the figure is the ratio of their medians. Precisions are
given (float32 throughout), so no timing probe runs and both sides compute the same thing.

    git worktree add /tmp/before <ref>
    python -m bench.step_between --before /tmp/before --text tests/assets/tinyshakespeare/input.txt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import THREADS, write_result
from bench.first_step import prepare_data
from gptlab.model.config import GPTConfig
from gptlab.training.config import recipe

PRESETS = ("shakespeare-char-cpu-speedrun-2", "shakespeare-char-cpu-speedrun-188")
FIXED = ("--dtype", "float32", "--attention-dtype", "float32", "--muon-dtype", "float32",
         "--no-eval-at-start", "--no-whole-val", "--eval-interval", "1000", "--log-interval",
         "1", "--no-progress")
HERE = Path(__file__).resolve().parents[1]


def step_ms(checkout: Path, preset: str, data_dir: Path, out_dir: Path, steps: int,
            warmup: int) -> list[float]:
    """Milliseconds of each step after `warmup` of one `gptlab train` launch from
    checkout's sources."""
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS),
           "PYTHONPATH": str(checkout / "src")}
    cmd = [sys.executable, "-m", "gptlab", "train", "--preset", preset, "--data",
           str(data_dir), "--out", str(out_dir), "--max-iters", str(steps), "--force", *FIXED]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, text=True)
    cfg, model = recipe(preset), GPTConfig.from_preset(preset)
    tokens = cfg.batch_size * cfg.gradient_accumulation_steps * model.block_size
    records = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    return [1e3 * tokens / r["tokens_per_s"] for r in records
            if r.get("kind") == "train" and r["step"] > warmup]


def compare(before: Path, after: Path, text: str, rounds: int, steps: int,
            warmup: int, log=print) -> dict[str, Any]:
    out: dict[str, Any] = {"before": str(before), "after": str(after), "rounds": rounds,
                           "steps": steps, "warmup": warmup, "threads": THREADS,
                           "load_at_start": os.getloadavg()[0], "presets": {}}
    with tempfile.TemporaryDirectory() as tmp:
        data = prepare_data(text, Path(tmp) / "data")
        for preset in PRESETS:
            times: dict[str, list[float]] = {"before": [], "after": []}
            # one launch's median per round and side: a launch's steps share its machine
            # state, so the spread between launches is the figure's noise
            launches: dict[str, list[float]] = {"before": [], "after": []}
            for r in range(rounds):
                # ABBA: the second launch of a pair ran 3-8% slower whichever code it had
                # (a quiet 2-core VM), so each side goes first in every other round
                pair = (("before", before), ("after", after))
                for side, checkout in pair if r % 2 == 0 else pair[::-1]:
                    ms = step_ms(checkout, preset, data, Path(tmp) / "run", steps, warmup)
                    times[side] += ms
                    launches[side].append(statistics.median(ms))
                log(f"{preset} round {r + 1}: before {launches['before'][-1]:.1f} ms, "
                    f"after {launches['after'][-1]:.1f} ms")
            medians = {side: statistics.median(v) for side, v in times.items()}
            out["presets"][preset] = {**{f"{s}_ms": m for s, m in medians.items()},
                                      "after_over_before": medians["after"] / medians["before"],
                                      "launch_medians_ms": launches}
    out["load_at_end"] = os.getloadavg()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, type=Path, help="the other checkout's root")
    p.add_argument("--after", type=Path, default=HERE, help="default: this checkout")
    p.add_argument("--text", required=True, type=Path, help="the corpus (tiny Shakespeare)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--out", type=Path, default=HERE / "bench" / "results")
    args = p.parse_args(argv)
    data = compare(args.before.resolve(), args.after.resolve(), args.text.read_text(),
                   args.rounds, args.steps, args.warmup)
    for preset, d in data["presets"].items():
        spread = {s: f"{min(v):.1f}-{max(v):.1f}" for s, v in d["launch_medians_ms"].items()}
        print(f"{preset}: before {d['before_ms']:.1f} ms/step, after {d['after_ms']:.1f} "
              f"({d['after_over_before']:.3f}x); launches before {spread['before']}, "
              f"after {spread['after']} ms")
    write_result(args.out, "step_between", data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
