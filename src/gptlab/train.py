"""The trainer: one process, or many under torchrun.

Two halves. `Trainer` knows nothing of GPT: it takes a model whose `model(x, y)` returns
`(logits, loss)`, a source of batches and a `TrainConfig`, and runs AdamW with warm-up +
cosine decay, gradient clipping and accumulation, mixed precision, evaluation, metrics,
checkpoints, signals and DistributedDataParallel. `train()` is the GPT glue the CLI calls:
it reads a data directory, builds the model, and hands both to a Trainer.

Files a run writes (rank 0 only) are listed in gptlab.checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import math
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from gptlab import checkpoint
from gptlab.config import GPTConfig
from gptlab.distributed import Dist, setup, sum_across
from gptlab.errors import GptlabError, UsageError
from gptlab.schedule import lr_at

DTYPES = ("auto", "float32", "bfloat16", "float16")
BATCH_RNGS = ("separate", "nanogpt")
METRICS_FILE = "metrics.jsonl"
PLOT_FILE = "loss.png"


@dataclass
class TrainConfig:
    """Training settings (saved as train.json). The defaults are nanoGPT's CPU recipe for
    char-level Shakespeare (its README, "I only have a macbook")."""

    batch_size: int = 12  # sequences per micro-batch, per process
    gradient_accumulation_steps: int = 1  # micro-batches per optimizer step, per process
    max_iters: int = 2000  # optimizer steps
    learning_rate: float = 1e-3  # peak, reached at the end of warm-up
    min_lr: float = 1e-4  # the floor cosine decay reaches at lr_decay_iters
    warmup_iters: int = 100
    lr_decay_iters: int | None = None  # None: max_iters (fixed at the start, kept on resume)
    weight_decay: float = 0.1  # on 2-D weights only; norms, biases stay undecayed
    beta1: float = 0.9
    beta2: float = 0.99  # 0.99 rather than 0.999: small batches, few tokens per step
    grad_clip: float = 1.0  # max global gradient norm; 0 turns clipping off
    eval_interval: int = 250
    eval_iters: int = 20  # batches per split per evaluation
    log_interval: int = 10
    checkpoint_interval: int | None = None  # None: every eval_interval
    seed: int = 1337
    # Where batches come from. "separate": their own generator, seeded apart from the
    # weights, and a fixed evaluation set (the same windows at every evaluation).
    # "nanogpt": torch's global generator, continuing the stream that initialised the
    # weights, with training batches, evaluation batches and dropout drawn in nanoGPT's
    # order (the first batch before the first evaluation), so a nanoGPT recipe with the
    # same seed retraces nanoGPT's run number for number.
    batch_rng: str = "separate"
    dtype: str = "auto"  # auto: bf16 on CUDA that has it, else fp16 on CUDA, fp32 on CPU
    compile: bool = False  # torch.compile the model
    device: str = "auto"

    def __post_init__(self) -> None:
        ints = ("batch_size", "gradient_accumulation_steps", "max_iters", "eval_interval",
                "eval_iters", "log_interval")
        for name in ints:
            _require(name, _is_int(getattr(self, name)) and getattr(self, name) >= 1,
                     "must be an integer >= 1")
        _require("warmup_iters", _is_int(self.warmup_iters) and self.warmup_iters >= 0,
                 "must be an integer >= 0")
        _require("seed", _is_int(self.seed) and self.seed >= 0, "must be an integer >= 0")
        _require("learning_rate", _is_num(self.learning_rate) and self.learning_rate > 0,
                 "must be > 0")
        _require("min_lr", _is_num(self.min_lr) and 0 <= self.min_lr <= self.learning_rate,
                 f"must be in [0, learning_rate = {self.learning_rate}]")
        _require("weight_decay", _is_num(self.weight_decay) and self.weight_decay >= 0,
                 "must be >= 0")
        for name in ("beta1", "beta2"):
            _require(name, _is_num(getattr(self, name)) and 0 <= getattr(self, name) < 1,
                     "must be in [0, 1)")
        _require("grad_clip", _is_num(self.grad_clip) and self.grad_clip >= 0, "must be >= 0")
        if self.warmup_iters > self.max_iters:
            raise UsageError(
                f"warmup_iters ({self.warmup_iters}) must not exceed max_iters ({self.max_iters})"
            )
        if self.lr_decay_iters is None:
            self.lr_decay_iters = self.max_iters
        _require("lr_decay_iters",
                 _is_int(self.lr_decay_iters) and self.lr_decay_iters >= self.warmup_iters,
                 f"must be an integer >= warmup_iters ({self.warmup_iters})")
        if self.checkpoint_interval is None:
            self.checkpoint_interval = self.eval_interval
        _require("checkpoint_interval",
                 _is_int(self.checkpoint_interval) and self.checkpoint_interval >= 1,
                 "must be an integer >= 1")
        _require("batch_rng", self.batch_rng in BATCH_RNGS,
                 f"must be one of {', '.join(BATCH_RNGS)}")
        _require("dtype", self.dtype in DTYPES, f"must be one of {', '.join(DTYPES)}")
        for name in ("compile",):
            _require(name, isinstance(getattr(self, name), bool), "must be true or false")
        _require("device", isinstance(self.device, str), "must be a string")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        if not isinstance(d, dict):
            raise UsageError(f"training settings must be a JSON object, got {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise UsageError(f"unknown training setting(s): {', '.join(unknown)}")
        return cls(**d)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _require(name: str, ok: bool, what: str) -> None:
    if not ok:
        raise UsageError(f"{name} {what}")


# Named training recipes. A preset of the same name picks its recipe up by default.
RECIPES: dict[str, dict[str, Any]] = {
    # nanoGPT README, CPU: --block_size=64 --batch_size=12 --n_layer=4 --n_head=4
    # --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0 --eval_iters=20
    # on top of config/train_shakespeare_char.py (lr 1e-3, min_lr 1e-4, beta2 0.99,
    # warmup 100, eval every 250); weight decay 0.1 and grad clip 1.0 are train.py's.
    "shakespeare-char-cpu": dict(
        batch_size=12, gradient_accumulation_steps=1, max_iters=2000, lr_decay_iters=2000,
        learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, weight_decay=0.1, beta1=0.9,
        beta2=0.99, grad_clip=1.0, eval_interval=250, eval_iters=20, batch_rng="nanogpt",
    ),
    # gptlab's default CPU recipe: nanoGPT's with twice the peak learning rate (and floor).
    # It reaches val 1.88 on tiny Shakespeare by step ~1400 of 2000, where nanoGPT's ends
    # at 1.89-1.93 across seeds (BENCHMARKS.md, time_to_quality). fp32, eager: on a CPU
    # without fast bf16 autocast loses, and a cold compile costs more than a minute saves.
    "shakespeare-char-cpu-fast": dict(
        batch_size=12, gradient_accumulation_steps=1, max_iters=2000, lr_decay_iters=2000,
        learning_rate=2e-3, min_lr=2e-4, warmup_iters=100, weight_decay=0.1, beta1=0.9,
        beta2=0.99, grad_clip=1.0, eval_interval=250, eval_iters=20,
    ),
    # nanoGPT config/train_shakespeare_char.py (its GPU recipe).
    "shakespeare-char": dict(
        batch_size=64, gradient_accumulation_steps=1, max_iters=5000, lr_decay_iters=5000,
        learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, weight_decay=0.1, beta1=0.9,
        beta2=0.99, grad_clip=1.0, eval_interval=250, eval_iters=200,
    ),
}


def recipe(name: str, **overrides: Any) -> TrainConfig:
    if name not in RECIPES:
        raise UsageError(f"unknown recipe {name!r}; known recipes: {', '.join(RECIPES)}")
    return TrainConfig.from_dict({**RECIPES[name], **overrides})


@dataclass
class TrainResult:
    run_dir: Path
    step: int  # optimizer steps done
    status: str  # "finished" | "interrupted"
    train_loss: float | None  # at the last evaluation
    val_loss: float | None
    best_val_loss: float | None
    elapsed_s: float
    is_main: bool = True  # False on torchrun ranks > 0, which write and print nothing


class TrainingDiverged(GptlabError):
    """The loss became NaN or infinite."""


# --- batches ------------------------------------------------------------------------------


class TokenBatches:
    """Random windows of a token stream, the same draws whether 1 or N processes train.

    Every process holds the same generator and draws the offsets of the *global*
    micro-batch (batch_size x world_size windows); rank r keeps rows r*B..(r+1)*B. So the
    ranks see different windows, and N ranks x B reproduce 1 rank x N*B draw for draw.
    Evaluation batches come from generators seeded by (seed, split, index): the same
    windows at every evaluation, independent of how far training has gone.

    With rng "nanogpt" every draw comes from torch's global generator instead, and the next
    training batch is drawn as soon as the last one is handed out (see TrainConfig.batch_rng).
    """

    def __init__(self, train: np.ndarray, val: np.ndarray, batch_size: int, block_size: int,
                 seed: int, ctx: Dist, get_batch: Callable, rng: str = "separate") -> None:
        self.splits = {"train": train, "val": val}
        self.batch_size, self.block_size, self.seed, self.ctx = batch_size, block_size, seed, ctx
        self._get_batch = get_batch
        self.shared_stream = rng == "nanogpt"
        if self.shared_stream:
            self.generator = torch.default_generator
            self.pending = self._draw("train", self.generator)
        else:
            self.generator = torch.Generator().manual_seed(_derived_seed(seed, 0))

    def _draw(self, split: str, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        B, ctx = self.batch_size, self.ctx
        x, y = self._get_batch(self.splits[split], B * ctx.world_size, self.block_size, generator)
        rows = slice(ctx.rank * B, (ctx.rank + 1) * B)
        return _to(x[rows], ctx.device), _to(y[rows], ctx.device)  # (B, T) each

    def train_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.shared_stream:
            return self._draw("train", self.generator)
        batch, self.pending = self.pending, self._draw("train", self.generator)
        return batch

    def eval_batch(self, split: str, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.shared_stream:
            return self._draw(split, self.generator)
        stream = 1 + 2 * index + (split == "val")
        return self._draw(split, torch.Generator().manual_seed(_derived_seed(self.seed, stream)))

    def state(self) -> torch.Tensor:
        """The generator's state; for the shared stream (which the trainer saves as torch's
        own), the pending batch, (2, B, T)."""
        if self.shared_stream:
            return torch.stack(self.pending).cpu()
        return self.generator.get_state()

    def load_state(self, state: torch.Tensor) -> None:
        if self.shared_stream:
            self.pending = (_to(state[0], self.ctx.device), _to(state[1], self.ctx.device))
        else:
            self.generator.set_state(state)


def _derived_seed(seed: int, stream: int) -> int:
    """A seed for random stream number `stream` of a run. The weights are initialised from
    `seed` itself; the batches must not replay that same Mersenne Twister sequence, so each
    stream gets a seed scrambled by one step of Knuth's MMIX linear congruential generator."""
    return (((seed << 20) + stream) * 6364136223846793005 + 1442695040888963407) % 2**63


def _to(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    t = t.contiguous()
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


# --- the generic trainer --------------------------------------------------------------------


def autocast_dtype(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for a TrainConfig.dtype on a device (None: plain float32)."""
    if name == "auto":
        if device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if name == "float16" and device.type != "cuda":
        raise UsageError("dtype float16 needs CUDA (a GradScaler); use bfloat16 on CPU")
    return {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device):
    """AdamW with weight decay on 2-D tensors only (matmul weights and embeddings); fused
    kernels where this torch has them for the device."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    extra = {}
    if "fused" in inspect.signature(torch.optim.AdamW).parameters and device.type in (
        "cuda", "cpu"
    ):
        extra["fused"] = True
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2), **extra)


class Trainer:
    """Runs the optimization loop. Writes files only through `files` (None on ranks > 0).

    model: `model(x, y) -> (logits, loss)`; batches: `train_batch()`, `eval_batch(split, i)`,
    `state()`, `load_state(s)`; files: a RunFiles.
    """

    def __init__(self, model: nn.Module, batches: Any, cfg: TrainConfig, ctx: Dist,
                 files: RunFiles | None, progress: bool = True) -> None:
        self.cfg, self.ctx, self.files, self.batches = cfg, ctx, files, batches
        self.raw_model = model
        self.optimizer = make_optimizer(model, cfg, ctx.device)
        self.amp_dtype = autocast_dtype(cfg.dtype, ctx.device)
        self.scaler = torch.amp.GradScaler(
            "cuda", enabled=self.amp_dtype == torch.float16 and ctx.device.type == "cuda")
        if cfg.compile:
            model = torch.compile(model)
        if ctx.enabled:
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(model, device_ids=[ctx.local_rank] if ctx.device.type == "cuda" else None)
        self.model = model
        self.step = 0
        self.best_val = math.inf
        self.last_eval: dict[str, float] = {}
        self.progress = progress and ctx.is_main
        self._stop_requested = False

    # state for --resume: plain tensors and numbers only, so weights_only loading works
    def state(self) -> dict[str, Any]:
        state = {
            "step": self.step,
            "best_val": self.best_val,
            "optimizer": self.optimizer.state_dict(),
            "batch_rng": self.batches.state(),
            "torch_rng": torch.get_rng_state(),
        }
        if self.scaler.is_enabled():
            state["scaler"] = self.scaler.state_dict()
        if self.ctx.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state(self.ctx.device)
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        self.step = state["step"]
        self.best_val = float(state["best_val"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.batches.load_state(state["batch_rng"])
        if self.ctx.rank == 0:
            torch.set_rng_state(state["torch_rng"])
            if "cuda_rng" in state and self.ctx.device.type == "cuda":
                torch.cuda.set_rng_state(state["cuda_rng"], self.ctx.device)
        else:  # only rank 0's dropout stream is saved; the others start a fresh one
            torch.manual_seed(self.cfg.seed + self.ctx.rank + 7919 * self.step)
        if "scaler" in state and self.scaler.is_enabled():
            self.scaler.load_state_dict(state["scaler"])

    def _autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.ctx.device.type, dtype=self.amp_dtype)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Mean loss over eval_iters batches per split; the batches are split over ranks
        and averaged, matching one process with the global batch."""
        model = self.raw_model
        was_training = model.training
        model.eval()
        out = {}
        for split in ("train", "val"):
            total = torch.zeros(1, device=self.ctx.device, dtype=torch.float64)
            for i in range(self.cfg.eval_iters):
                x, y = self.batches.eval_batch(split, i)
                with self._autocast():
                    _, loss = model(x, y)
                total += loss.double()
            total = sum_across(self.ctx, total) / (self.cfg.eval_iters * self.ctx.world_size)
            out[f"{split}_loss"] = total.item()
        model.train(was_training)
        return out

    def train_step(self, lr: float) -> float:
        """One optimizer step over gradient_accumulation_steps micro-batches; returns the
        mean loss over every process's micro-batches."""
        cfg, model = self.cfg, self.model
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        accum = cfg.gradient_accumulation_steps
        loss_sum = torch.zeros(1, device=self.ctx.device, dtype=torch.float64)
        for micro in range(accum):
            x, y = self.batches.train_batch()
            # DDP all-reduces gradients on every backward; only the last micro-step needs it.
            last = micro == accum - 1
            sync = model.no_sync() if self.ctx.enabled and not last else contextlib.nullcontext()
            with sync:
                with self._autocast():
                    _, loss = model(x, y)
                self.scaler.scale(loss / accum).backward()
            loss_sum += loss.detach().double()
        # One all-reduce carries the loss and any process's request to stop.
        packed = torch.cat([loss_sum, torch.tensor([float(self._stop_requested)],
                                                   dtype=torch.float64, device=loss_sum.device)])
        packed = sum_across(self.ctx, packed)
        mean_loss = packed[0].item() / (accum * self.ctx.world_size)
        self._stop_requested = bool(packed[1].item() > 0)
        if not math.isfinite(mean_loss):
            self.optimizer.zero_grad(set_to_none=True)
            raise TrainingDiverged(self._diverged_message(mean_loss))
        if cfg.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return mean_loss

    def _diverged_message(self, loss: float) -> str:
        where = f"; the last good checkpoint is in {self.files.run_dir}" if self.files else ""
        return (f"the loss became {loss} at step {self.step + 1}: training stopped{where} "
                f"(try a lower learning rate, more warm-up or gradient clipping)")

    def request_stop(self) -> None:
        self._stop_requested = True

    def fit(self, resumed: bool = False, stop_after: int | None = None) -> str:
        """Train until max_iters (or a signal, or stop_after steps): "finished" or
        "interrupted". A checkpoint is saved before returning either way."""
        cfg = self.cfg
        tokens_per_step = (cfg.batch_size * cfg.gradient_accumulation_steps
                           * self.ctx.world_size * self.batches.block_size)
        bar = _progress_bar(self.progress, cfg.max_iters, self.step)
        t_log, step_log = time.perf_counter(), self.step
        skip_eval = resumed  # the step we resume at was evaluated before it was saved
        try:
            while True:
                done = self.step >= cfg.max_iters
                if not skip_eval and (self.step % cfg.eval_interval == 0 or done):
                    self._evaluate_and_record(bar)
                stop = self._stop_requested or (stop_after is not None
                                                and self.step >= stop_after)
                # (When just resumed, this step's checkpoint is the one we started from.)
                if not skip_eval and (done or stop or self.step % cfg.checkpoint_interval == 0):
                    self._save_checkpoint()
                if done:
                    return "finished"
                if stop:
                    return "interrupted"
                skip_eval = False
                lr = lr_at(self.step, cfg.learning_rate, cfg.min_lr, cfg.warmup_iters,
                           cfg.lr_decay_iters)
                loss = self.train_step(lr)
                if bar is not None:
                    bar.update(1)
                if self.step % cfg.log_interval == 0 or self.step == cfg.max_iters:
                    now = time.perf_counter()
                    tok_s = tokens_per_step * (self.step - step_log) / max(now - t_log, 1e-9)
                    t_log, step_log = now, self.step
                    self._record({"kind": "train", "step": self.step, "loss": loss, "lr": lr,
                                  "tokens_per_s": round(tok_s, 1)})
                    if bar is not None:
                        bar.set_postfix_str(f"loss {loss:.4f}, {tok_s:,.0f} tok/s", refresh=False)
        finally:
            if bar is not None:
                bar.close()

    def _evaluate_and_record(self, bar) -> None:
        losses = self.evaluate()
        self.last_eval = losses
        improved = losses["val_loss"] < self.best_val
        if improved:
            self.best_val = losses["val_loss"]
        self._record({"kind": "eval", "step": self.step, **losses,
                      "best_val_loss": self.best_val})
        if self.files is not None:
            if improved:
                self.files.save_best(self.raw_model, self.step)
            self.files.plot()
            msg = (f"step {self.step}: train loss {losses['train_loss']:.4f}, "
                   f"val loss {losses['val_loss']:.4f}")
            if bar is not None:
                bar.write(msg, file=sys.stderr)
            else:
                print(msg, file=sys.stderr)

    def _save_checkpoint(self) -> None:
        state = self.state()
        if self.files is not None:
            self.files.save_checkpoint(self.raw_model, state)

    def _record(self, record: dict[str, Any]) -> None:
        if self.files is not None:
            self.files.log(record)


def _progress_bar(enabled: bool, total: int, initial: int):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="it", dynamic_ncols=True, file=sys.stderr,
                smoothing=0.1)


@contextlib.contextmanager
def stop_on_signals(trainer: Trainer) -> Iterator[None]:
    """SIGINT and SIGTERM ask the trainer to checkpoint and stop at the next step; a second
    one acts as it would have without us."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum, frame):
        trainer.request_stop()
        signal.signal(signum, previous[signum])

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class RunFiles:
    """Everything a run writes to its directory (rank 0 only)."""

    def __init__(self, run_dir: Path, title: str = "") -> None:
        self.run_dir, self.title = run_dir, title
        self.metrics_path = run_dir / METRICS_FILE
        self.records: list[dict] = []

    def reset_metrics(self, keep_until_step: int | None) -> None:
        """Start metrics.jsonl afresh, or keep the records up to a resumed step (a run
        killed after its checkpoint may have logged steps that will now run again)."""
        records = []
        if keep_until_step is not None and self.metrics_path.is_file():
            for line in self.metrics_path.read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(json.JSONDecodeError):
                    r = json.loads(line)
                    if isinstance(r, dict) and r.get("step", math.inf) <= keep_until_step:
                        records.append(r)
        self.records = records
        from gptlab.io import atomic_write_text

        atomic_write_text(self.metrics_path, "".join(json.dumps(r) + "\n" for r in records))

    def log(self, record: dict) -> None:
        record = {**record, "time": round(time.time(), 3)}
        self.records.append(record)
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def plot(self) -> None:
        from gptlab.plotting import plot_losses

        plot_losses(self.records, self.run_dir / PLOT_FILE, title=self.title)

    def save_checkpoint(self, model: nn.Module, state: dict) -> None:
        checkpoint.save_checkpoint(self.run_dir, model, state)

    def save_best(self, model: nn.Module, step: int) -> None:
        checkpoint.save_best(self.run_dir, model, step)


# --- the GPT glue -------------------------------------------------------------------------

RUN_FILES = ("config.json", "train.json", "model.safetensors", "state.pt", "tokenizer.json",
             METRICS_FILE, PLOT_FILE)
RESUME_OVERRIDES = ("max_iters", "device", "compile")


def train(
    model_config: GPTConfig | None,
    train_config: TrainConfig | None,
    data_dir: str | Path,
    out_dir: str | Path,
    *,
    resume: bool = False,
    overrides: dict[str, Any] | None = None,
    overwrite: bool = False,
    progress: bool = True,
    stop_after: int | None = None,
) -> TrainResult:
    """Train a GPT on a data directory into a run directory.

    Fresh run: model_config and train_config given; vocab_size comes from the data.
    resume=True: both None; they are read from out_dir, and `overrides` may change
    RESUME_OVERRIDES (e.g. a larger max_iters). stop_after: stop (with a checkpoint) once
    this many steps are done, as an interruption would.
    """
    from gptlab.data import check_enough_tokens, get_batch, load_data
    from gptlab.model import GPT

    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    data = load_data(data_dir)
    state = None
    if resume:
        if model_config is not None or train_config is not None:
            raise UsageError("--resume reads the model and training settings from the run "
                             "directory; give no --preset, --config or --recipe")
        if not out_dir.is_dir():
            raise UsageError(f"nothing to resume: run directory {out_dir} does not exist")
        state = checkpoint.load_checkpoint_state(out_dir)
        model_config = checkpoint.load_config(out_dir)
        saved = checkpoint.read_json(out_dir / checkpoint.TRAIN_CONFIG_FILE)
        bad = sorted(set(overrides or {}) - set(RESUME_OVERRIDES))
        if bad:
            raise UsageError(f"--resume keeps the run's settings; cannot change "
                             f"{', '.join(bad)} (only {', '.join(RESUME_OVERRIDES)})")
        train_config = TrainConfig.from_dict({**saved, **(overrides or {})})
        _check_same_tokenizer(data.tokenizer_path, out_dir / checkpoint.TOKENIZER_FILE)
        if model_config.vocab_size != data.vocab_size:
            raise UsageError(f"the run's vocab_size {model_config.vocab_size} differs from the "
                             f"data's {data.vocab_size}")
    else:
        if model_config is None or train_config is None:
            raise UsageError("a fresh run needs a model config and a training config")
        if overrides:
            train_config = TrainConfig.from_dict({**train_config.to_dict(), **overrides})
        model_config = GPTConfig.from_dict({**model_config.to_dict(),
                                            "vocab_size": data.vocab_size})
        _check_fresh_run_dir(out_dir, overwrite)
    check_enough_tokens(data, model_config.block_size)

    with setup(train_config.device) as ctx:
        shared_stream = train_config.batch_rng == "nanogpt"
        # The same initial weights on every rank (DDP also broadcasts rank 0's); nanoGPT
        # seeds each rank with seed + rank before building the model.
        torch.manual_seed(train_config.seed + (ctx.rank if shared_stream else 0))
        with torch.device(ctx.device):
            model = GPT(model_config)
        if state is not None:
            checkpoint.load_weights(model, out_dir / checkpoint.WEIGHTS_FILE)
        if not shared_stream:
            torch.manual_seed(train_config.seed + ctx.rank)  # dropout differs across ranks
        files = None
        if ctx.is_main:
            out_dir.mkdir(parents=True, exist_ok=True)
            files = RunFiles(out_dir, title=f"{out_dir.name}: {_describe(model_config)}")
            files.reset_metrics(keep_until_step=state["step"] if state is not None else None)
            if state is None:
                checkpoint.copy_file(data.tokenizer_path, out_dir / checkpoint.TOKENIZER_FILE)
            checkpoint.write_json(out_dir / checkpoint.TRAIN_CONFIG_FILE, train_config.to_dict())
        batches = TokenBatches(data.train, data.val, train_config.batch_size,
                               model_config.block_size, train_config.seed, ctx, get_batch,
                               rng=train_config.batch_rng)
        trainer = Trainer(model, batches, train_config, ctx, files, progress=progress)
        if state is not None:
            trainer.load_state(state)
        if ctx.is_main:
            print(f"training {_describe(model_config)}, {model.num_parameters():,} parameters, "
                  f"on {ctx.device} x {ctx.world_size}"
                  + (f", resuming at step {trainer.step}" if state is not None else ""),
                  file=sys.stderr)
        with stop_on_signals(trainer):
            status = trainer.fit(resumed=state is not None, stop_after=stop_after)
    return TrainResult(out_dir, trainer.step, status, trainer.last_eval.get("train_loss"),
                       trainer.last_eval.get("val_loss"),
                       trainer.best_val if math.isfinite(trainer.best_val) else None,
                       time.perf_counter() - t0, is_main=ctx.is_main)


def _describe(c: GPTConfig) -> str:
    return f"{c.n_layer} layers, {c.n_head} heads, n_embd {c.n_embd}, block {c.block_size}"


def _check_fresh_run_dir(out_dir: Path, overwrite: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} exists and is not a directory")
    present = [n for n in RUN_FILES if (out_dir / n).exists()]
    if present and not overwrite:
        raise UsageError(f"{out_dir} already holds a run ({', '.join(present)}): continue it "
                         f"with --resume, or choose another --out")
    if overwrite:
        for name in present:
            (out_dir / name).unlink()
        shutil.rmtree(out_dir / checkpoint.BEST_DIR, ignore_errors=True)


def _check_same_tokenizer(data_tokenizer: Path, run_tokenizer: Path) -> None:
    if not run_tokenizer.is_file():
        raise UsageError(f"nothing to resume: {run_tokenizer} does not exist")
    if data_tokenizer.read_bytes() != run_tokenizer.read_bytes():
        raise UsageError(f"the data's {data_tokenizer} differs from the run's {run_tokenizer}: "
                         f"resume with the data the run was trained on")
