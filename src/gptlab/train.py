"""The trainer: one process, or many under torchrun.

Two halves. `Trainer` knows nothing of GPT: it takes a model whose `model(x, y)` returns
`(logits, loss)`, a source of batches and a `TrainConfig`, and runs AdamW with warm-up +
cosine decay, gradient clipping and accumulation, mixed precision, evaluation, metrics,
checkpoints, signals and DistributedDataParallel. `train()` is the GPT glue the CLI calls:
it reads a data directory, builds the model, and hands both to a Trainer.

Files a run writes (rank 0 only) are listed in gptlab.rundir.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import os
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

from gptlab import checkpoint, rundir
from gptlab.config import GPTConfig
from gptlab.distributed import Dist, pick_device, setup, sum_across
from gptlab.errors import GptlabError, UsageError
from gptlab.schedule import lr_at

DTYPES = ("auto", "float32", "bfloat16", "float16")
BATCH_RNGS = ("separate", "nanogpt")


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
        _require("seed", _is_int(self.seed) and 0 <= self.seed < 2**63,
                 "must be an integer in [0, 2**63)")  # what torch.manual_seed takes, + rank
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
    """A named recipe with some settings changed (see with_settings for the rule)."""
    if name not in RECIPES:
        raise UsageError(f"unknown recipe {name!r}; known recipes: {', '.join(RECIPES)}")
    return with_settings(RECIPES[name], overrides)


def with_settings(base: dict[str, Any], changes: dict[str, Any]) -> TrainConfig:
    """base's settings with `changes` applied, and one rule for a new length: when
    max_iters changes and lr_decay_iters / warmup_iters are not given with it, the decay
    follows the new length and the warm-up is cut to fit in it."""
    settings = {**base, **changes}
    if "max_iters" in changes:
        if "lr_decay_iters" not in changes:
            settings["lr_decay_iters"] = None  # None: max_iters
        if "warmup_iters" not in changes:
            warmup = settings.get("warmup_iters", TrainConfig.warmup_iters)
            if _is_int(warmup) and _is_int(changes["max_iters"]):
                settings["warmup_iters"] = min(warmup, max(changes["max_iters"], 0))
    return TrainConfig.from_dict(settings)


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
                 files: rundir.RunFiles | None, progress: bool = True,
                 stop: threading.Event | None = None) -> None:
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
        self.stop = stop or threading.Event()  # set by a signal handler, or request_stop
        # True from the start of an evaluation until it is recorded: a checkpoint saved in
        # between (a stop mid-evaluation) makes --resume run that evaluation first.
        self.eval_pending = True
        self._unsaved = True  # state has moved on since the last checkpoint

    # state for --resume: plain tensors and numbers only, so weights_only loading works
    def state(self) -> dict[str, Any]:
        state = {
            "step": self.step,
            "best_val": self.best_val,
            "optimizer": self.optimizer.state_dict(),
            "batch_rng": self.batches.state(),
            "torch_rng": torch.get_rng_state(),
            "eval_pending": self.eval_pending,
        }
        if self.scaler.is_enabled():
            state["scaler"] = self.scaler.state_dict()
        if self.ctx.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state(self.ctx.device)
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        self.step = state["step"]
        self.best_val = float(state["best_val"])
        self.eval_pending = bool(state.get("eval_pending", False))
        self._unsaved = False
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
    def evaluate(self) -> dict[str, float] | None:
        """Mean loss over eval_iters batches per split; the batches are split over ranks
        and averaged, matching one process with the global batch. None if a stop was
        requested meanwhile (a long evaluation should not keep Ctrl-C waiting)."""
        model = self.raw_model
        was_training = model.training
        model.eval()
        out = {}
        try:
            for split in ("train", "val"):
                total = torch.zeros(1, device=self.ctx.device, dtype=torch.float64)
                for i in range(self.cfg.eval_iters):
                    x, y = self.batches.eval_batch(split, i)
                    with self._autocast():
                        _, loss = model(x, y)
                    total += loss.double()
                # Ranks agree on stopping here, so none waits in a collective for another.
                packed = torch.cat([total, self._stop_tensor(total.device)])
                packed = sum_across(self.ctx, packed)
                if packed[1].item() > 0:
                    self.stop.set()
                    return None
                out[f"{split}_loss"] = (packed[0] / (self.cfg.eval_iters
                                                     * self.ctx.world_size)).item()
        finally:
            model.train(was_training)
        return out

    def _stop_tensor(self, device: torch.device) -> torch.Tensor:
        return torch.tensor([float(self.stop.is_set())], dtype=torch.float64, device=device)

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
        packed = torch.cat([loss_sum, self._stop_tensor(loss_sum.device)])
        packed = sum_across(self.ctx, packed)
        mean_loss = packed[0].item() / (accum * self.ctx.world_size)
        if packed[1].item() > 0:  # any process's request stops them all, at the same step
            self.stop.set()
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
        self._unsaved = True
        return mean_loss

    def _diverged_message(self, loss: float) -> str:
        where = f"; the last good checkpoint is in {self.files.run_dir}" if self.files else ""
        return (f"the loss became {loss} at step {self.step + 1}: training stopped{where} "
                f"(try a lower learning rate, more warm-up or gradient clipping)")

    def request_stop(self) -> None:
        self.stop.set()

    def fit(self, resumed: bool = False, stop_after: int | None = None) -> str:
        """Train until max_iters (or a signal, or stop_after steps): "finished" or
        "interrupted". A checkpoint is saved before returning either way, and on a fresh
        run before anything else, so --resume works from the first moment on."""
        cfg = self.cfg
        tokens_per_step = (cfg.batch_size * cfg.gradient_accumulation_steps
                           * self.ctx.world_size * self.batches.block_size)
        bar = _progress_bar(self.progress, cfg.max_iters, self.step)
        t_log, step_log = time.perf_counter(), self.step
        try:
            if not resumed:
                self._save_checkpoint()  # step 0, its evaluation pending
            if self.eval_pending:
                self._evaluate_and_record(bar)
            while True:
                if self.step >= cfg.max_iters:
                    return "finished"
                if self.stop.is_set() or (stop_after is not None and self.step >= stop_after):
                    return "interrupted"
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
                if self.step % cfg.eval_interval == 0 or self.step == cfg.max_iters:
                    self.eval_pending = True
                    self._evaluate_and_record(bar)
                if self.step % cfg.checkpoint_interval == 0:
                    self._save_checkpoint()
        finally:
            if bar is not None:
                bar.close()
            if self._unsaved and sys.exc_info()[0] is None:
                self._save_checkpoint()

    def _evaluate_and_record(self, bar) -> None:
        losses = self.evaluate()
        if losses is None:  # stopped mid-way: eval_pending stays, for --resume
            return
        self.eval_pending = False
        self._unsaved = True
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
        self._unsaved = False

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
def stop_on_signals(on_signal: Callable[[], None]) -> Iterator[None]:
    """SIGINT and SIGTERM call on_signal (the trainer checkpoints and stops at the next
    step); a second one acts as it would have without us."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum, frame):
        on_signal()
        signal.signal(signum, previous[signum])

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


# --- the GPT glue -------------------------------------------------------------------------

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

    SIGINT and SIGTERM, from the moment this is called, end the run with a checkpoint
    (exit status "interrupted"); everything that can be checked is checked before the run
    directory is touched.
    """
    stop = threading.Event()
    with stop_on_signals(stop.set):
        return _train(model_config, train_config, Path(data_dir), Path(out_dir), resume=resume,
                      overrides=overrides or {}, overwrite=overwrite, progress=progress,
                      stop_after=stop_after, stop=stop)


def _train(model_config, train_config, data_dir: Path, out_dir: Path, *, resume: bool,
           overrides: dict[str, Any], overwrite: bool, progress: bool, stop_after: int | None,
           stop: threading.Event) -> TrainResult:
    from gptlab.data import get_batch, load_data
    from gptlab.model import GPT

    t0 = time.perf_counter()
    data = load_data(data_dir)
    # Only the first process writes files, so only it takes the run directory's lock.
    is_main = int(os.environ.get("RANK", "0")) == 0
    if resume:
        if model_config is not None or train_config is not None:
            raise UsageError("--resume reads the model and training settings from the run "
                             "directory; give no --preset, --config or --recipe")
        rundir.check_resumable(out_dir)
    else:
        if model_config is None or train_config is None:
            raise UsageError("a fresh run needs a model config and a training config")
        train_config = TrainConfig.from_dict({**train_config.to_dict(), **overrides})
        model_config = GPTConfig.from_dict({**model_config.to_dict(),
                                            "vocab_size": data.vocab_size})
        _check_run(model_config, train_config, data)
        rundir.check_fresh(out_dir, overwrite)  # again under the lock, before writing
    with rundir.locked(out_dir) if is_main else contextlib.nullcontext():
        state = None
        if resume:
            state, model_config, train_config = _read_run(out_dir, data, overrides)
            _check_run(model_config, train_config, data)
        elif is_main:
            rundir.check_fresh(out_dir, overwrite)
        with setup(train_config.device) as ctx:
            shared_stream = train_config.batch_rng == "nanogpt"
            # The same initial weights on every rank (DDP also broadcasts rank 0's); nanoGPT
            # seeds each rank with seed + rank before building the model.
            torch.manual_seed(train_config.seed + (ctx.rank if shared_stream else 0))
            with torch.device(ctx.device):
                model = GPT(model_config)
            if state is not None:
                checkpoint.load_state(model, state.pop("model"),
                                      str(out_dir / rundir.STATE_FILE))
            if not shared_stream:
                torch.manual_seed(train_config.seed + ctx.rank)  # dropout differs across ranks
            batches = TokenBatches(data.train, data.val, train_config.batch_size,
                                   model_config.block_size, train_config.seed, ctx, get_batch,
                                   rng=train_config.batch_rng)
            files = None
            if ctx.is_main:
                if state is None:
                    rundir.clear(out_dir)
                    rundir.start(out_dir, data.tokenizer_path, train_config.to_dict(),
                                 model_config.to_dict())
                else:
                    rundir.write_train_config(out_dir, train_config.to_dict())
                files = rundir.RunFiles(out_dir,
                                        title=f"{out_dir.name}: {_describe(model_config)}")
                files.reset_metrics(keep_until_step=state["step"] if state else None)
            trainer = Trainer(model, batches, train_config, ctx, files, progress=progress,
                              stop=stop)
            if state is not None:
                trainer.load_state(state)
            if ctx.is_main:
                print(f"training {_describe(model_config)}, {model.num_parameters():,} "
                      f"parameters, on {ctx.device} x {ctx.world_size}"
                      + (f", resuming at step {trainer.step}" if state is not None else ""),
                      file=sys.stderr)
            status = trainer.fit(resumed=state is not None, stop_after=stop_after)
    return TrainResult(out_dir, trainer.step, status, trainer.last_eval.get("train_loss"),
                       trainer.last_eval.get("val_loss"),
                       trainer.best_val if math.isfinite(trainer.best_val) else None,
                       time.perf_counter() - t0, is_main=ctx.is_main)


def _check_run(model_config: GPTConfig, train_config: TrainConfig, data) -> None:
    """What would otherwise fail only once the run directory is written."""
    from gptlab.data import check_enough_tokens

    check_enough_tokens(data, model_config.block_size)
    autocast_dtype(train_config.dtype, pick_device(train_config.device))


def _read_run(out_dir: Path, data, overrides: dict[str, Any]):
    """The checkpoint, model config and training settings of a run to resume, checked
    against the data and the overrides."""
    state = rundir.load_checkpoint(out_dir)
    model_config = checkpoint.load_config(out_dir)
    bad = sorted(set(overrides) - set(RESUME_OVERRIDES))
    if bad:
        raise UsageError(f"--resume keeps the run's settings; cannot change "
                         f"{', '.join(bad)} (only {', '.join(RESUME_OVERRIDES)})")
    train_config = TrainConfig.from_dict({**rundir.read_train_config(out_dir), **overrides})
    if train_config.max_iters < state["step"]:
        raise UsageError(f"{out_dir} is at step {state['step']} already: --max-iters "
                         f"{train_config.max_iters} would undo nothing and train nothing; "
                         f"give at least {state['step']}")
    rundir.check_same_tokenizer(data.tokenizer_path, out_dir)
    if model_config.vocab_size != data.vocab_size:
        raise UsageError(f"the run's vocab_size {model_config.vocab_size} differs from the "
                         f"data's {data.vocab_size}")
    return state, model_config, train_config


def _describe(c: GPTConfig) -> str:
    return f"{c.n_layer} layers, {c.n_head} heads, n_embd {c.n_embd}, block {c.block_size}"
