"""Benchmark: the CPU speedrun as a user runs it (issue 41). Each contender is a whole
command, `gptlab train --preset NAME --data DATA --out RUN --seed S`, launched in a fresh
process and timed from its launch to its exit: imports, probes read from their cache, the
model's build, every step, every look at the val loss, the checkpoints, the end. Then
`gptlab eval RUN --data DATA` scores the saved weights on the whole val split (untimed):
a candidate met its target if that loss is <= the target its recipe stops at
(`stop_at_val`: 1.70 for shakespeare-char-cpu-speedrun-2, 1.88 for -188).

The peer is nanoGPT's CPU recipe (`shakespeare-char-cpu`, 2000 steps, evaluated every 250
as nanoGPT does) as the same whole command in the same run, with `--no-whole-val`
(nanoGPT scores no whole split at its end; gptlab eval scores it afterwards all the same).
Seeds 1337.. interleaved (peer and candidates A B C, then C B A, ...); medians over
seeds; each candidate's median wall time as a ratio of the peer's. The probes' 'auto'
dtypes are decided once before anything is timed (bench.speedrun.decide_precision), so
every launch finds them cached (as a user's second launch does).

    python -m bench --only speedrun [--seeds 3] [--text tests/assets/tinyshakespeare/input.txt]

writes bench/results/speedrun_whole.json (every seed's wall time, the eval loss, the step
it stopped at and the command's own lines) and speedrun_whole.md (the record's rows).
`--smoke` runs the same plumbing on a tiny shape and a repetitive text (seconds; the
numbers mean nothing).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Size, table, write_result
from bench.first_step import child_env, prepare_data
from bench.speedrun import DEFAULT_TEXT, FIRST_SEED, REFERENCE, decide_precision, model_for
from bench.time_to_quality import encode, tiny_shakespeare
from gptlab.files.atomic import atomic_write_text
from gptlab.training.config import recipe

# The speedrun's record holders, each stopping at its own target (its recipe's stop_at_val).
CANDIDATES = ("shakespeare-char-cpu-speedrun-2", "shakespeare-char-cpu-speedrun-188")
PEER_FLAGS = ("--no-whole-val",)
# The smoke run: a tiny shape, a short budget and loose targets.
SMOKE_SHAPE = ("--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "16",
               "--batch-size", "4", "--max-iters", "40")
SMOKE_TARGETS = {"shakespeare-char-cpu-speedrun-2": 2.6, "shakespeare-char-cpu-speedrun-188": 2.8}
TIMEOUT_S = 1800


def target_of(name: str, smoke: bool) -> float | None:
    return SMOKE_TARGETS.get(name) if smoke else recipe(name).speed.stop_at_val


def command(name: str, data_dir: Path, run_dir: Path, seed: int, peer: bool,
            smoke: bool) -> list[str]:
    cmd = [sys.executable, "-m", "gptlab", "train", "--preset", name, "--data", str(data_dir),
           "--out", str(run_dir), "--seed", str(seed), "--no-progress", "--force"]
    if peer:
        cmd += PEER_FLAGS
    if smoke:
        cmd += SMOKE_SHAPE
        if not peer:
            cmd += ["--stop-at-val", str(SMOKE_TARGETS[name])]
    return cmd


def launch(name: str, data_dir: Path, run_dir: Path, seed: int, peer: bool, smoke: bool
           ) -> dict[str, Any]:
    """One whole command, timed from launch to exit, then its weights scored by gptlab
    eval on the whole val split (not timed here)."""
    cmd = command(name, data_dir, run_dir, seed, peer, smoke)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=child_env(None),
                          timeout=TIMEOUT_S)
    wall_s = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:])} exited {done.returncode}: "
                           f"{done.stderr.strip()[-500:]}")
    t0 = time.perf_counter()
    scored = subprocess.run([sys.executable, "-m", "gptlab", "eval", str(run_dir), "--data",
                             str(data_dir), "--json"], capture_output=True, text=True,
                            env=child_env(None), timeout=TIMEOUT_S)
    eval_s = time.perf_counter() - t0
    if scored.returncode != 0:
        raise RuntimeError(f"gptlab eval {run_dir} exited {scored.returncode}: "
                           f"{scored.stderr.strip()[-500:]}")
    loss = json.loads(scored.stdout)["loss"]
    target = None if peer else target_of(name, smoke)
    state_step = _last_step(run_dir)
    return {"seed": seed, "wall_s": wall_s, "eval_loss": loss, "eval_s": eval_s,
            "target": target, "met": target is not None and loss <= target,
            "step": state_step, "stdout": done.stdout.splitlines(),
            "stderr_tail": done.stderr.splitlines()[-8:]}


def _last_step(run_dir: Path) -> int | None:
    steps = [json.loads(line).get("step") for line in
             (run_dir / "metrics.jsonl").read_text().splitlines() if line.endswith("}")]
    steps = [s for s in steps if isinstance(s, int)]
    return max(steps) if steps else None


def summarize(runs: dict[str, list[dict[str, Any]]], peer: str) -> dict[str, dict[str, Any]]:
    """Per contender: the median wall time, its ratio to the peer's, how many seeds met
    the target (by gptlab eval's loss), the median eval loss and step."""
    peer_s = statistics.median(r["wall_s"] for r in runs[peer])
    out = {}
    for name, seeds in runs.items():
        median_s = statistics.median(r["wall_s"] for r in seeds)
        out[name] = {
            "median_wall_s": median_s, "ratio_vs_peer": median_s / peer_s,
            "seeds_met": sum(r["met"] for r in seeds), "target": seeds[0]["target"],
            "median_eval_loss": statistics.median(r["eval_loss"] for r in seeds),
            "median_step": statistics.median(r["step"] or 0 for r in seeds),
            "wall_s": [r["wall_s"] for r in seeds]}
    return out


def record_rows(data: dict[str, Any]) -> str:
    """BENCHMARKS.md's whole-command record rows: date | machine | command | seeds | target
    | met | median wall | x nanoGPT | per seed."""
    date, machine = data["time_utc"][:10], data["machine"]["cpu"]
    head = ("| date | machine | `gptlab train --preset` | seeds | target (gptlab eval) | met "
            "| median wall | x nanoGPT | wall per seed |\n|" + " --- |" * 9)
    rows = []
    for name, s in data["summary"].items():
        target = "-" if s["target"] is None else f"<= {s['target']}"
        met = "-" if s["target"] is None else f"{s['seeds_met']}/{data['seeds']}"
        per_seed = " / ".join(f"{t:.1f}" for t in s["wall_s"])
        rows.append(f"| {date} | {machine}, {data['machine']['torch_threads']} threads | "
                    f"`{name}` | {data['seeds']} | {target} (median "
                    f"{s['median_eval_loss']:.4f}) | {met} | {s['median_wall_s']:.1f} s | "
                    f"{s['ratio_vs_peer']:.2f}x | {per_seed} s |")
    return head + "\n" + "\n".join(rows) + "\n"


def run(size: Size, out_dir: Path, log: Callable[[str], None] = print,
        text_path: str | Path | None = None, seeds: int | None = None,
        candidates: tuple[str, ...] = CANDIDATES) -> dict[str, Any]:

    smoke = size.smoke
    if smoke:
        text = "To be, or not to be, that is the question.\n" * 200
        seeds = seeds or 2
    else:
        text = tiny_shakespeare(text_path or (DEFAULT_TEXT if DEFAULT_TEXT.is_file() else None))
        seeds = seeds or (1 if size.name == "quick" else 3)
    names = (REFERENCE, *candidates)
    _, _, vocab = encode(text)
    if not smoke:  # decided once, cached for every launch (the smoke shape is not probed)
        for name in names:
            for line in decide_precision({"recipe": name}, model_for(name), vocab)[1]:
                log(f"speedrun: {name}: {line}")
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="speedrun-whole-") as tmp:
        data_dir = prepare_data(text, Path(tmp) / "data")
        for i in range(seeds):
            seed = FIRST_SEED + i
            for name in names if i % 2 == 0 else tuple(reversed(names)):
                log(f"speedrun: seed {seed}, gptlab train --preset {name}")
                r = launch(name, data_dir, Path(tmp) / "run", seed, name == REFERENCE, smoke)
                log(f"  {r['wall_s']:.1f} s launch to exit, stopped at step {r['step']}, "
                    f"gptlab eval: whole val {r['eval_loss']:.4f}"
                    + ("" if r["target"] is None else
                       f" ({'met' if r['met'] else 'MISSED'} {r['target']})"))
                runs[name].append(r)
    summary = summarize(runs, REFERENCE)
    log(table(["command", "target", "met", "median step", "median wall s", "x nanoGPT"],
              [[n, s["target"] or "-", f"{s['seeds_met']}/{seeds}", s["median_step"],
                f"{s['median_wall_s']:.1f}", f"{s['ratio_vs_peer']:.2f}x"]
               for n, s in summary.items()]))
    data = {"size": size.name, "seeds": seeds,
            "seed_values": [FIRST_SEED + i for i in range(seeds)], "reference": REFERENCE,
            "peer_flags": list(PEER_FLAGS), "candidates": list(candidates),
            "text_chars": len(text), "summary": summary, "runs": runs}
    path = write_result(out_dir, "speedrun_whole", data)
    rows = record_rows(json.loads(path.read_text()))
    atomic_write_text(Path(out_dir) / "speedrun_whole.md", rows)
    log("\nrecord table rows (BENCHMARKS.md):\n" + rows)
    return data
