"""stop_at_val's looks replayed on recorded losses (issue 41): how near the look policy of
gptlab.training.val_target comes to the best any policy could do, over more seeds than a
timed run affords. A run's steps do not depend on its looks (they score in eval mode and
draw no random numbers), so one recording per seed serves every policy.

record: train a preset for each seed with its stop turned off, in segments of `every`
steps from `--from` on (each a resume of the last: a resumed run retraces an uninterrupted
one exactly), and after each segment score every window of the val split as the looks do
(under bf16 autocast with attention in float32, as the speedrun's runs on the development
VM; `--float32` for neither). One .npz per seed: each window's summed loss at each step.

replay: for each recorded seed, ValTarget itself with its scorer reading the recording (a
window costs --window-ms, a training step --step-ms: the measured costs of the lap-2 model
on the development VM), and the oracle: the first recorded step whose whole split meets
the target, at the cost of one whole split. Seconds after gptlab's clock starts, without
the start-up.

    python -m bench.stop_replay record --preset shakespeare-char-cpu-speedrun-2 \\
        --data DATA --seeds 1337-1344 --out /tmp/replay
    python -m bench.stop_replay replay /tmp/replay
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import numpy as np
import torch

from gptlab.data.prepared import load_data
from gptlab.loading import load
from gptlab.model.attention import set_float32_attention
from gptlab.model.config import GPTConfig
from gptlab.model.presets import preset_dict
from gptlab.training import val_target
from gptlab.training.callbacks import StopAfter
from gptlab.training.config import recipe
from gptlab.training.run import train

STEP_MS, WINDOW_MS = 37.5, 1150 / 3485  # lap 2 on the development VM: a step, a window


def record(preset: str, data: Path, seed: int, start: int, every: int, out: Path,
           autocast: bool = True) -> Path:
    """Train `preset` with `seed` to its max_iters, its stop off; the val split's per-window
    losses every `every` steps from `start`, saved as out/seed{seed}.npz."""
    settings = recipe(preset, seed=seed, stop_at_val=None, whole_val=False, log_interval=every)
    model_config = GPTConfig(**preset_dict(preset))
    scorer = val_target.ValTarget(1.0, val_ids(data), model_config.block_size,
                                  settings.max_iters, every)
    losses: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        for i, step in enumerate(range(start, settings.max_iters, every)):
            train(model_config if i == 0 else None, settings if i == 0 else None, data,
                  run_dir, resume=i > 0, progress=False, callbacks=StopAfter(step))
            model, _ = load(run_dir)
            set_float32_attention(model, autocast)
            nll, counts = scorer.window_losses(model, torch.bfloat16 if autocast else None)
            losses[str(step)] = nll.numpy()
    losses["counts"] = counts.numpy()  # the same at every step: the windows' scored tokens
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"seed{seed}.npz"
    np.savez(path, **losses)
    return path


def val_ids(data: Path) -> torch.Tensor:
    """The val split's token ids of a prepared data directory, as the trainer reads them."""
    return torch.from_numpy(load_data(data).val.astype(np.int64))


class Replayed(val_target.ValTarget):
    """The look policy on recorded losses: `_score` reads the recording at `self.step`."""

    def __init__(self, losses: dict[str, np.ndarray], *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.losses, self.step, self.windows_scored = losses, 0, 0
        self.index = {span: i for i, span in enumerate(self.spans)}

    def _score(self, model, spans, autocast):
        rows = [self.index[w] for w in spans]
        self.windows_scored += len(rows)
        return (torch.from_numpy(self.losses[str(self.step)][rows]),
                torch.from_numpy(self.losses["counts"][rows]))


def replay(losses: dict[str, np.ndarray], val: torch.Tensor, block_size: int, target: float,
           max_iters: int, every: int, step_ms: float = STEP_MS,
           window_ms: float = WINDOW_MS) -> dict[str, float | int | None]:
    """The policy's stop step and seconds (steps + windows scored), and the oracle's."""
    looks = Replayed(losses, target, val, block_size, max_iters, every)
    looks.start(0)
    stop = None
    for step in range(1, max_iters):
        if looks.is_due(step):
            if str(step) not in losses:
                raise ValueError(f"the recording has no step {step}: record from earlier")
            looks.step = step
            if looks.look(None, step, torch.bfloat16).met:
                stop = step
                break
    counts = losses["counts"]
    whole = {int(k): float(v.sum() / counts.sum()) for k, v in losses.items() if k != "counts"}
    oracle = next((s for s in sorted(whole) if whole[s] <= target), None)
    n = len(counts)
    return {"stop": stop, "seconds": None if stop is None else
            (stop * step_ms + looks.windows_scored * window_ms) / 1000,
            "oracle": oracle, "oracle_seconds": None if oracle is None else
            (oracle * step_ms + n * window_ms) / 1000}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.stop_replay", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--preset", default="shakespeare-char-cpu-speedrun-2")
    rec.add_argument("--data", type=Path, required=True)
    rec.add_argument("--seeds", default="1337-1344", help="FIRST-LAST")
    rec.add_argument("--from", dest="start", type=int, default=160)
    rec.add_argument("--every", type=int, default=10)
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--float32", action="store_true")
    rep = sub.add_parser("replay")
    rep.add_argument("dir", type=Path)
    rep.add_argument("--preset", default="shakespeare-char-cpu-speedrun-2")
    rep.add_argument("--data", type=Path, required=True)
    args = p.parse_args(argv)
    if args.command == "record":
        first, last = (int(s) for s in args.seeds.split("-"))
        for seed in range(first, last + 1):
            print(record(args.preset, args.data, seed, args.start, args.every, args.out,
                         autocast=not args.float32))
        return
    settings = recipe(args.preset)
    val = val_ids(args.data)
    block = preset_dict(args.preset)["block_size"]
    rows = []
    for path in sorted(args.dir.glob("seed*.npz")):
        r = replay(dict(np.load(path)), val, block, settings.speed.stop_at_val,
                   settings.max_iters, settings.speed.stop_at_val_every)
        rows.append(r)
        print(f"{path.stem}: policy stops at {r['stop']} ({_seconds(r['seconds'])}), "
              f"oracle at {r['oracle']} ({_seconds(r['oracle_seconds'])})")
    seconds = [r["seconds"] for r in rows if r["seconds"] is not None]
    oracle = [r["oracle_seconds"] for r in rows if r["oracle_seconds"] is not None]
    print(f"policy: median {statistics.median(seconds):.2f} s, "
          f"mean {statistics.mean(seconds):.2f}; oracle: median "
          f"{statistics.median(oracle):.2f} s, mean {statistics.mean(oracle):.2f}")


def _seconds(value: float | None) -> str:
    return "not met before max_iters" if value is None else f"{value:.2f} s"


if __name__ == "__main__":
    main()
