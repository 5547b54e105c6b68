"""Benchmark: the CPU speedrun. Wall-clock training time until the loss over the WHOLE val
split of tiny Shakespeare reaches each rung (1.88, then 1.70), for candidate recipes against
nanoGPT's recipe (`shakespeare-char-cpu`) timed in the same run.

The rules, after modded-nanogpt's for GPUs:
- tiny Shakespeare, char tokenizer, nanoGPT's 90/10 split (first 90% train, last 10% val);
- quality = mean loss over the whole val split (gptlab.inference.evaluate.score_ids, as the
trainer's   whole_val: windows of block_size sliding by half of it), not a 20-batch estimate;
- the clock counts what a user waits for: the start-up of `gptlab train` until its first
  step (bench/first_step.py: imports, plan, first checkpoint and evaluation, the
  optimizer; measured in a fresh process per recipe and seed) plus the training steps (a
  compile included). The evaluations at the rungs are timed apart, since how often we look
  is the benchmark's choice. A rung's time is the time at the first evaluation at or below
  it, so its resolution is the evaluation interval, which shrinks as the loss nears the
  next rung (CADENCE: every 100 steps, every 25 within 0.1 of it, every 10 within 0.025)
  and ends at the last rung;
- torch threads 2 (`python -m bench --threads`), N seeds (default 3), recipes interleaved per
  seed (A B, B A, ...); medians over seeds, a seed that never reaches a rung counted as
  infinitely slow (so a median is "not reached" when most seeds miss it);
- each candidate's time to a rung as a ratio of the reference's median in the same run;
  where the reference misses the rung (nanoGPT's recipe ends right at 1.88: 1.877 at step
  2000 for seed 1337 in one exploratory run with these windows; 1.898 in
  tests/training/test_recipes.py's non-overlapping windows, which give each token less
  context), its whole training time
  stands in: the ratio is then an upper bound, printed "<= 0.45x".

A candidate is a recipe in gptlab.training.recipes.RECIPES; its model is the preset of the same name
if there is one, else nanoGPT's shape (`shakespeare-char-cpu`).
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.common import Size, table, write_result
from bench.first_step import prepare_data, time_to_first_step
from bench.time_to_quality import encode, tiny_shakespeare
from gptlab import GPT, GPTConfig
from gptlab.data.batches import BATCH_STREAMS
from gptlab.distributed.process import Dist
from gptlab.files.atomic import atomic_write_text
from gptlab.inference.evaluate import score_ids
from gptlab.model.presets import PRESETS
from gptlab.training import precision
from gptlab.training.config import recipe
from gptlab.training.trainer import NoCheckpoints, Trainer, scheduled_lr

RUNGS = (1.88, 1.70)  # 1.88: nanoGPT README's val loss for its CPU recipe
# (within this of the next rung: evaluate every N steps), the first entry always applies
CADENCE = ((math.inf, 100), (0.1, 25), (0.025, 10))
SMOKE_CADENCE = ((math.inf, 10), (0.1, 5))
REFERENCE = "shakespeare-char-cpu"  # nanoGPT's CPU recipe, re-created (presets.RECIPES)
# the first lap's record (issue 14), the second's (issue 28) and its 1.88 track (one block)
CANDIDATES = ("shakespeare-char-cpu-speedrun", "shakespeare-char-cpu-speedrun-2",
              "shakespeare-char-cpu-speedrun-188")
SEEDS = 3
# TrainConfig's settings that the probes decide where a recipe leaves them 'auto'
PRECISION_SETTINGS = ("dtype", "attention_dtype", "muon_dtype")
FIRST_SEED = 1337  # nanoGPT's
DEFAULT_TEXT = Path(__file__).resolve().parents[1] / "tests/assets/tinyshakespeare/input.txt"


def model_for(name: str, **overrides: Any) -> GPTConfig:
    return GPTConfig.from_preset(name if name in PRESETS else REFERENCE, **overrides)


def whole_val_loss(model: torch.nn.Module, val: torch.Tensor) -> float:
    nll, scored = score_ids(model, val, batch_size=64)
    return nll / scored


def train_to_rungs(
    train: Any, val: Any, vocab_size: int, settings: dict[str, Any], model_config: GPTConfig,
    rungs: tuple[float, ...], cadence: tuple[tuple[float, int], ...] = CADENCE,
) -> dict[str, Any]:
    """Train with `settings` (TrainConfig fields) until the whole-val loss reaches the last
    rung or max_iters, evaluating as often as `cadence` says for the loss's distance to the
    next rung.
    Seeds and batch streams as gptlab.training.run does, so a recipe trains here as it would
    there."""
    cfg = recipe(settings.pop("recipe"), **{**settings, "device": "cpu"})
    config = GPTConfig.from_dict({**model_config.to_dict(), "vocab_size": vocab_size})
    # 'auto' dtypes as gptlab.training.run decides them (the probes are not timed)
    cfg, _ = precision.resolve_settings(cfg, config, torch.device("cpu"))
    ctx = Dist(device=torch.device("cpu"))
    torch.manual_seed(cfg.seed)
    model = GPT(config)
    if cfg.batch_rng != "nanogpt":
        torch.manual_seed(cfg.seed)  # nanoGPT's stream continues from the init instead
    batches = BATCH_STREAMS[cfg.batch_rng](train, val, cfg.batch_size, config.block_size,
                                           cfg.seed, ctx)
    trainer = Trainer(model, batches, cfg, ctx, NoCheckpoints())
    val_ids = torch.from_numpy(val.astype("int64"))
    train_s = eval_s = 0.0
    curve: list[dict[str, Any]] = []
    reached: dict[str, dict[str, Any]] = {}
    next_eval = cadence[0][1]
    while trainer.step < cfg.max_iters and len(reached) < len(rungs):
        t = time.perf_counter()
        trainer.train_step(scheduled_lr(cfg, trainer.step))
        evaluating = trainer.step == next_eval or trainer.step == cfg.max_iters
        if evaluating:
            trainer.check()  # waits for the device: the steps' time is training time
        train_s += time.perf_counter() - t
        if evaluating:
            t = time.perf_counter()
            loss = whole_val_loss(model, val_ids)
            eval_s += time.perf_counter() - t
            curve.append({"step": trainer.step, "train_s": train_s, "val_loss": loss})
            for rung in rungs:
                if loss <= rung and str(rung) not in reached:
                    reached[str(rung)] = {"step": trainer.step, "train_s": train_s,
                                          "val_loss": loss}
            left = [r for r in rungs if str(r) not in reached]
            every = eval_every(loss - max(left), cadence) if left else cadence[0][1]
            next_eval = min(trainer.step + every, cfg.max_iters)
    tokens_per_step = cfg.batch_size * cfg.gradient_accumulation_steps * config.block_size
    return {"settings": cfg.flat(), "model": config.to_dict(), "steps": trainer.step,
            "train_s": train_s,
            "eval_s": eval_s, "tokens_per_step": tokens_per_step,
            "final_val_loss": curve[-1]["val_loss"] if curve else math.inf,
            "rungs": reached, "curve": curve}


def decide_precision(plan: dict[str, Any], model_config: GPTConfig, vocab_size: int
                     ) -> tuple[dict[str, Any], list[str]]:
    """(plan with its recipe's dtype, attention_dtype and muon_dtype made concrete as
    gptlab.training.run decides them, the probes' lines saying why)."""
    settings = dict(plan)
    cfg = recipe(settings.pop("recipe"), **{**settings, "device": "cpu"})
    config = GPTConfig.from_dict({**model_config.to_dict(), "vocab_size": vocab_size})
    cfg, reasons = precision.resolve_settings(cfg, config, torch.device("cpu"))
    return {**plan, **{k: cfg.flat()[k] for k in PRECISION_SETTINGS}}, reasons


def eval_every(gap: float, cadence: tuple[tuple[float, int], ...]) -> int:
    """Steps to the next evaluation for a loss `gap` above the next rung: the interval of
    the tightest cadence entry the gap is within."""
    return min(every for within, every in cadence if gap <= within)


def median_time(runs: list[dict[str, Any]], rung: float, miss_as_total: bool = False) -> float:
    """Median seconds to `rung` over seeds, start-up plus training. A seed that missed it
    counts as infinitely slow, or with miss_as_total as its whole time (a lower bound)."""
    return statistics.median(
        r["startup_s"] + r["rungs"][str(rung)]["train_s"] if str(rung) in r["rungs"]
        else r["startup_s"] + r["train_s"] if miss_as_total else math.inf for r in runs)


def summarize(runs: dict[str, list[dict[str, Any]]], rungs: tuple[float, ...],
              reference: str) -> dict[str, dict[str, Any]]:
    """Per recipe and rung: the median time, start-up plus training (None: not reached by
    most seeds), how many seeds reached it, the median steps, and the ratio to the
    reference's median. Where the reference misses a rung (nanoGPT's recipe ends right at
    1.88), its whole time stands in, a lower bound: the ratio is then an upper bound."""
    out = {}
    for name, seeds in runs.items():
        per_rung = {}
        for rung in rungs:
            t = median_time(seeds, rung)
            ref = median_time(runs[reference], rung)
            bound = not math.isfinite(ref)
            if bound:
                ref = median_time(runs[reference], rung, miss_as_total=True)
            hit = [s["rungs"][str(rung)] for s in seeds if str(rung) in s["rungs"]]
            per_rung[str(rung)] = {
                "median_s": t if math.isfinite(t) else None,
                "seeds_reached": len(hit),
                "median_steps": statistics.median(h["step"] for h in hit) if hit else None,
                "median_total_s": statistics.median(s["startup_s"] + s["train_s"]
                                                    for s in seeds),
                "median_startup_s": statistics.median(s["startup_s"] for s in seeds),
                "ratio_vs_reference": t / ref if math.isfinite(t) else None,
                "ratio_is_upper_bound": bound,
            }
        out[name] = per_rung
    return out


def ratio_text(r: dict[str, Any]) -> str:
    if r["ratio_vs_reference"] is None:
        return "-"
    return ("<= " if r["ratio_is_upper_bound"] else "") + f"{r['ratio_vs_reference']:.2f}x"


def time_text(r: dict[str, Any]) -> str:
    if r["median_s"] is None:
        return f"not reached (> {r['median_total_s']:.1f} s)"
    return f"{r['median_s']:.1f} s"


def record_rows(data: dict[str, Any]) -> str:
    """Rows for BENCHMARKS.md's speedrun record table, one per candidate (and the
    reference): date | machine | recipe | seeds | per rung: median time, ratio."""
    date = data["time_utc"][:10]
    where = f"{data['machine']['cpu']}, {data['machine']['torch_threads']} threads"
    rows = []
    for name, per_rung in data["summary"].items():
        cells = [date, where, f"`{name}`", str(data["seeds"])]
        for rung in data["rungs"]:
            r = per_rung[str(rung)]
            cells += [time_text(r), ratio_text(r)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def record_header(rungs: tuple[float, ...]) -> str:
    cols = ["date", "machine", "recipe", "seeds"]
    for rung in rungs:
        cols += [f"time to {rung}", f"x nanoGPT ({rung})"]
    return "| " + " | ".join(cols) + " |\n|" + " --- |" * len(cols)


def run_rungs(size: Size, out_dir: Path, log: Callable[[str], None] = print,
              text_path: str | Path | None = None, seeds: int | None = None,
              candidates: tuple[str, ...] = CANDIDATES) -> dict[str, Any]:
    """Time to each rung, training clock plus start-up (laps 1 and 2's record)."""
    names = (REFERENCE, *candidates)
    if size.smoke:
        # Plumbing only: a tiny model on a repetitive text reaches loose rungs at once.
        text = "To be, or not to be, that is the question.\n" * 200
        rungs, cadence = (2.6, 2.4), SMOKE_CADENCE
        shape = dict(n_layer=1, n_embd=32, n_head=2, block_size=16)
        plans = {n: dict(recipe=n, max_iters=40, warmup_iters=5, batch_size=4,
                         eval_iters=2, compile=False) for n in names}
        seeds = seeds or 2
    else:
        path = text_path or (DEFAULT_TEXT if DEFAULT_TEXT.is_file() else None)
        text, rungs, cadence = tiny_shakespeare(path), RUNGS, CADENCE
        shape = {}
        plans = {n: dict(recipe=n) for n in names}
        seeds = seeds or (1 if size.name == "quick" else SEEDS)
    train, val, vocab = encode(text)
    # The probes decide each recipe's 'auto' dtypes once, before anything trains: every seed
    # then trains alike, and the start-up launches find the answers cached. (Probed between
    # runs instead, a probe may see the last run's load, decide nothing, and leave seeds of
    # one recipe training in different dtypes.)
    precision_settings = {}
    for name in names:
        plans[name], reasons = decide_precision(plans[name], model_for(name, **shape), vocab)
        precision_settings[name] = {k: plans[name][k] for k in PRECISION_SETTINGS}
        precision_settings[name]["why"] = reasons
        for line in reasons:
            log(f"speedrun: {name}: {line}")
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="speedrun-") as tmp:
        data_dir = prepare_data(text, Path(tmp) / "data")
        for i in range(seeds):
            seed = FIRST_SEED + i
            order = names if i % 2 == 0 else tuple(reversed(names))
            for name in order:
                log(f"speedrun: seed {seed}, '{name}' to whole-val "
                    f"{' then '.join(map(str, rungs))}")
                # `gptlab train --preset NAME`'s start-up, as a user launches it
                first = time_to_first_step(name, data_dir, Path(tmp) / "run")
                result = train_to_rungs(train, val, vocab, {**plans[name], "seed": seed},
                                        model_for(name, **shape), rungs, cadence)
                runs[name].append({**result, **first})
    summary = summarize(runs, rungs, REFERENCE)
    log(f"\nspeedrun: seconds to whole-val loss, start-up to the first step plus training, "
        f"median of {seeds} seeds (evaluations excluded). '<=': the reference missed the "
        f"rung, so its whole time stands in for its time to it.")
    rows = []
    for name in names:
        for rung in rungs:
            r = summary[name][str(rung)]
            rows.append([name, rung, f"{r['seeds_reached']}/{seeds}",
                         r["median_steps"] if r["median_steps"] is not None else "-",
                         f"{r['median_startup_s']:.1f}", time_text(r), ratio_text(r)])
    log(table(["recipe", "rung", "reached", "steps", "start-up s", "wall s", "x nanoGPT"],
              rows))
    data = {"size": size.name, "rungs": list(rungs), "seeds": seeds,
            "seed_values": [FIRST_SEED + i for i in range(seeds)], "reference": REFERENCE,
            "candidates": list(candidates), "cadence": [list(c) for c in cadence],
            "text_chars": len(text), "precision": precision_settings, "summary": summary,
            "runs": runs}
    path = write_result(out_dir, "speedrun", data)
    # The record table's rows, with the date and machine write_result stamped on the JSON.
    rows_md = record_header(rungs) + "\n" + record_rows(json.loads(path.read_text())) + "\n"
    atomic_write_text(Path(out_dir) / "speedrun.md", rows_md)
    log("\nrecord table rows (BENCHMARKS.md):\n" + rows_md)
    return data
