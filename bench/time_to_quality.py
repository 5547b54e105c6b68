"""Benchmark 2: time to quality. Training wall time until validation loss reaches 1.88 on
tiny Shakespeare (char-level), for gptlab's default CPU recipe and for nanoGPT's CPU recipe
re-created in gptlab's trainer. Both run in this process through `gptlab.training.trainer.Trainer`.

The clock counts training steps only (compilation included, since a user waits for it);
evaluations are timed apart, because how often we look is the benchmark's choice, not the
recipe's. Evaluation uses the trainer's own fixed windows, identical for every recipe."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.common import Size, table, write_result
from gptlab import GPT, GPTConfig
from gptlab.data.batches import TokenBatches
from gptlab.data.text import split_text
from gptlab.data.tokenizer import CharTokenizer
from gptlab.distributed.process import Dist
from gptlab.errors import UsageError
from gptlab.training.config import TrainConfig, recipe
from gptlab.training.precision import autocast_dtype
from gptlab.training.recipes import RECIPES
from gptlab.training.trainer import NoCheckpoints, Trainer, scheduled_lr

TARGET = 1.88  # nanoGPT README's val loss for its CPU recipe
# nanoGPT's CPU recipe exactly (README "I only have a macbook" on top of
# config/train_shakespeare_char.py and train.py's defaults), fp32, eager.
NANOGPT = dict(
    batch_size=12, gradient_accumulation_steps=1, max_iters=2000, lr_decay_iters=2000,
    learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, weight_decay=0.1, beta1=0.9,
    beta2=0.99, grad_clip=1.0, eval_interval=250, eval_iters=20, dtype="float32",
    compile=False, seed=1337,
)
# Only these fields change what is trained or how fast; the rest is bookkeeping.
RECIPE_FIELDS = tuple(NANOGPT)


def tiny_shakespeare(path: str | Path | None) -> str:
    """The 1.1 MB tiny Shakespeare text: from `path`, else from gptlab's download cache
    (`gptlab prepare tinyshakespeare` puts it there), else downloaded."""
    from gptlab.data import download

    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"--text {p}: no such file")
        return p.read_text(encoding="utf-8")
    return download.fetch(download.TINYSHAKESPEARE_URL,
                          sha256=download.TINYSHAKESPEARE_SHA256).read_text(encoding="utf-8")


def encode(text: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Char-level ids, first 90% train, last 10% val, as nanoGPT's prepare.py."""
    tok = CharTokenizer.from_text(text)
    train, val = split_text(text, 0.1)
    return tok.encode_array(train), tok.encode_array(val), tok.vocab_size


def train_to_target(
    train: np.ndarray, val: np.ndarray, vocab_size: int, settings: dict[str, Any],
    model_config: GPTConfig, target: float, coarse: int = 100, fine: int = 25,
) -> dict[str, Any]:
    """Train with `settings` until val loss <= target or max_iters. Evaluates every `coarse`
    steps, every `fine` once within 0.1 of the target."""
    cfg = TrainConfig.from_dict({**settings, "device": "cpu"})
    config = GPTConfig.from_dict({**model_config.to_dict(), "vocab_size": vocab_size})
    ctx = Dist(device=torch.device("cpu"))
    torch.manual_seed(cfg.seed)
    model = GPT(config)
    batches = TokenBatches(train, val, cfg.batch_size, config.block_size, cfg.seed, ctx)
    trainer = Trainer(model, batches, cfg, ctx, NoCheckpoints())
    train_s = eval_s = 0.0
    first_step_s = None
    curve, reached_at, val_loss = [], None, float("inf")
    next_eval = coarse
    while trainer.step < cfg.max_iters:
        lr = scheduled_lr(cfg, trainer.step)
        t = time.perf_counter()
        trainer.train_step(lr)
        evaluating = trainer.step == next_eval or trainer.step == cfg.max_iters
        if evaluating or first_step_s is None:
            trainer.check()  # waits for the device: the steps' time is training time
        dt = time.perf_counter() - t
        train_s += dt
        if first_step_s is None:
            first_step_s = dt  # includes torch.compile's work when compiling
        if evaluating:
            t = time.perf_counter()
            losses = trainer.evaluate()
            eval_s += time.perf_counter() - t
            val_loss = losses["val_loss"]
            curve.append({"step": trainer.step, "train_s": train_s, **losses})
            if val_loss <= target:
                reached_at = trainer.step
                break
            next_eval += fine if val_loss <= target + 0.1 else coarse
    return {"settings": cfg.flat(), "reached": reached_at is not None,
            "steps": trainer.step, "train_s": train_s, "eval_s": eval_s,
            "first_step_s": first_step_s, "final_val_loss": val_loss, "curve": curve}


def recipes() -> dict[str, dict[str, Any]]:
    """label -> settings: nanoGPT's recipe (the peer) and gptlab's default CPU recipe."""
    default = recipe("shakespeare-char-cpu-fast").flat()
    default = {k: default[k] for k in RECIPE_FIELDS}
    if autocast_dtype(default["dtype"], torch.device("cpu")) is None:
        # fp32, as the peer: this compares recipes, not dtypes ('auto' on a CPU is a
        # probe's choice per machine, bf16 on some)
        default["dtype"] = "float32"
    return {"nanoGPT CPU recipe (fp32, eager)": NANOGPT,
            "gptlab default: " + describe(default): default}


def describe(s: dict[str, Any]) -> str:
    parts = [s["dtype"].replace("bfloat16", "bf16").replace("float32", "fp32")]
    if s["compile"]:
        parts.append("compile")
    parts.append(f"lr {s['learning_rate']:g}, B {s['batch_size']}, {s['max_iters']} iters")
    return ", ".join(parts)


def run(size: Size, out_dir: Path, log: Callable[[str], None] = print,
        text_path: str | Path | None = None) -> dict[str, Any]:
    model_config = GPTConfig.from_preset("shakespeare-char-cpu")
    if size.smoke:
        # Plumbing only: a tiny model on a repetitive text reaches a loose target at once.
        text = "To be, or not to be, that is the question.\n" * 200
        model_config = GPTConfig.from_preset("shakespeare-char-cpu", n_layer=1, n_embd=32,
                                             block_size=16)
        target = 2.5
        plans = {name: {**s, "max_iters": 60, "lr_decay_iters": 60, "warmup_iters": 5,
                        "batch_size": 4, "eval_iters": 2, "compile": False}
                 for name, s in recipes().items()}
        coarse, fine = 10, 5
    else:
        text, target, plans, coarse, fine = tiny_shakespeare(text_path), TARGET, recipes(), 100, 25
    train, val, vocab = encode(text)
    results = {}
    for label, settings in plans.items():
        log(f"time to quality: training '{label}' to val loss {target} ...")
        results[label] = train_to_target(train, val, vocab, settings, model_config, target,
                                         coarse, fine)
    labels = list(results)
    peer = results[labels[0]]
    for r in results.values():
        r["time_vs_nanogpt"] = r["train_s"] / peer["train_s"]
    log(f"\ntime to val loss {target}, tiny Shakespeare char-level, shakespeare-char-cpu "
        f"model; one run each, training time only (evaluations timed apart). A recipe "
        f"that never reaches it is timed over all its steps (a lower bound on its time).")
    log(table(["recipe", "reached", "steps", "train s", "ms/step", "val", "x nanoGPT time"],
              [[k, "yes" if r["reached"] else "no", r["steps"], r["train_s"],
                r["train_s"] / r["steps"] * 1e3, f"{r['final_val_loss']:.4f}",
                r["time_vs_nanogpt"]] for k, r in results.items()]))
    data = {"size": size.name, "target_val_loss": target, "model": model_config.to_dict(),
            "trainer_recipes": sorted(RECIPES), "peer": labels[0], "recipes": results}
    write_result(out_dir, "time_to_quality", data)
    return data
