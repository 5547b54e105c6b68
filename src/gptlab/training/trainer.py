"""The trainer, which knows nothing of GPT: it takes a model whose `model(x, y)` returns
`(logits, loss)`, a source of batches (gptlab.data.batches.TokenBatches) and a `TrainConfig`, and
runs AdamW (or Muon + AdamW) with warm-up and decay, gradient clipping and accumulation,
mixed precision, evaluation, stop requests and DistributedDataParallel (or a model that
gptlab.distributed.parallelize sharded). Its checkpoints go to one Checkpointer (a run directory's,
gptlab.training.rundir.Checkpoints, for every mode; NoCheckpoints where nothing is kept); what it
has to say goes to one reporter (gptlab.training.reporting), which only reports.
gptlab.training.run builds a GPT and hands it over.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from gptlab.distributed.process import Dist, min_across, sum_across
from gptlab.errors import GptlabError
from gptlab.model.attention import set_float32_attention
from gptlab.training.config import TrainConfig
from gptlab.training.optim import make_optimizer
from gptlab.training.precision import autocast_dtype
from gptlab.training.reporting import Reporter
from gptlab.training.schedule import lr_at
from gptlab.training.val_target import Look, ValTarget

# Under torchrun, every rank must stop at the same step, so a stop request is agreed on by an
# all-reduce, which waits for the device: at logging, evaluation and checkpoint steps, and at
# least every CHECK_EVERY steps. A stop there waits at most CHECK_EVERY steps; one process
# reads its stop flag (a host-side Event) before every step.
CHECK_EVERY = 10


class TrainingDiverged(GptlabError):
    """A loss or a weight became NaN or infinite. Nothing that was not finite was kept: the
    run's last checkpoint (`checkpoint_step`, in `where`) is one whose losses and weights
    all were, and a resume from it may lower the learning rate (gptlab.training.plan)."""

    def __init__(self, happened: str, step: int, checkpoint_step: int | None, where: str,
                 learning_rate: float) -> None:
        self.happened, self.step, self.checkpoint_step = happened, step, checkpoint_step
        self.where, self.learning_rate = where, learning_rate
        # What happened and where the run stands; the advice follows (a caller that knows
        # the command to give, gptlab.cli.train, replaces it).
        self.stopped = f"{happened} at step {step}: training stopped"
        self.resumable = bool(where) and checkpoint_step is not None
        if self.resumable:
            self.stopped += (f"; its last checkpoint, step {checkpoint_step} in {where}, has "
                             f"finite losses and weights")
        advice = ("resume from it with a lower learning rate (learning_rate, now "
                  f"{learning_rate:g}), more warm-up or gradient clipping" if self.resumable
                  else "try a lower learning rate, more warm-up or gradient clipping")
        super().__init__(f"{self.stopped}: {advice}")

    def record(self) -> dict[str, Any]:
        """The run's record of it (metrics.jsonl): see gptlab.training.rundir.divergence."""
        return {"kind": "diverged", "step": self.step, "what": self.happened,
                "checkpoint_step": self.checkpoint_step}


def scheduled_lr(cfg: TrainConfig, step: int) -> float:
    """AdamW's learning rate at optimizer step `step` (Muon's is muon_lr / learning_rate
    times it, the embeddings' embedding_lr / learning_rate: their param groups carry that
    lr_scale)."""
    return lr_at(step, cfg.learning_rate, cfg.min_lr, cfg.warmup_iters, cfg.lr_decay_iters,
                 cfg.lr_schedule, cfg.cooldown_frac)


class Checkpointer(Protocol):
    """Where the trainer's checkpoints go. Every rank calls each method (a sharded model's
    save is collective); `where` names the place for messages ("" when nowhere)."""

    where: str

    def save(self, progress: dict[str, Any], model: nn.Module,
             optimizer: torch.optim.Optimizer) -> None:
        """Commit a checkpoint: the trainer's `progress` (Trainer.state()), the model's
        weights and the optimizer's moments."""

    def restore(self, state: dict[str, Any], model: nn.Module,
                optimizer: torch.optim.Optimizer) -> None:
        """Put back what save kept beside `progress`: the optimizer's moments (and a
        sharded model's weights)."""

    def save_best(self, model: nn.Module, step: int) -> None:
        """Keep `model` (whole: gathered if it was sharded) as the best one so far."""


class NoCheckpoints:
    """Keeps nothing: a trainer driven step by step without a run directory (benchmarks)."""

    where = ""

    def save(self, progress: dict[str, Any], model: nn.Module,
             optimizer: torch.optim.Optimizer) -> None: ...

    def restore(self, state: dict[str, Any], model: nn.Module,
                optimizer: torch.optim.Optimizer) -> None:
        raise ValueError("NoCheckpoints kept nothing to restore")

    def save_best(self, model: nn.Module, step: int) -> None: ...


class Trainer:
    """Runs the optimization loop; its checkpoints go to `checkpoints`, everything it has to
    say to `reporter`.

    model: `model(x, y) -> (logits, loss)`; batches: `train_batch()`, `eval_batch(split, i)`,
    `state()`, `load_state(s)`; stop: set (by a signal handler) to end at the next step (one
    process; under torchrun within CHECK_EVERY steps).

    A step never waits for the device: its loss stays there, and whether it was finite is
    noted there too (the first step whose loss was not). `check()` reads both, at logging,
    evaluation and checkpoint steps (and every CHECK_EVERY steps under torchrun), and before
    anything is written: a divergence is raised, naming the first step whose loss was not
    finite, before a checkpoint or best/ could keep it.
    """

    def __init__(self, model: nn.Module, batches: Any, cfg: TrainConfig, ctx: Dist,
                 checkpoints: Checkpointer, reporter: Reporter | None = None,
                 stop: threading.Event | None = None, sharding: Any = None,
                 target: ValTarget | None = None) -> None:
        # target: looks at the whole val split, for stop_at_val (a whole model only).
        # sharding: when the model is already sharded (FSDP, tensor parallel), its `layout`
        # (the data-parallel width) and `gathered()`, a whole copy (gptlab.training.run's
        # ShardedGPT).
        self.cfg, self.ctx, self.batches, self.sharding = cfg, ctx, batches, sharding
        self.checkpoints, self.target = checkpoints, target
        self.target_met: Look | None = None  # the look that met stop_at_val, if one did
        self.reporter = reporter or Reporter()
        self.raw_model = model
        self.optimizer = make_optimizer(model, cfg, ctx.device)
        self.amp_dtype = autocast_dtype(cfg.dtype, ctx.device)
        set_float32_attention(model, self.amp_dtype is not None
                              and cfg.speed.attention_dtype == "float32")
        self.scaler = torch.amp.GradScaler(
            "cuda", enabled=self.amp_dtype == torch.float16 and ctx.device.type == "cuda")
        if cfg.compile:
            model = torch.compile(model)
        if ctx.enabled and sharding is None:
            model = DistributedDataParallel(
                model, device_ids=[ctx.local_rank] if ctx.device.type == "cuda" else None)
        self.model = model
        self.step = 0
        self.tokens = 0  # trained on since this process began (for tokens/s; not saved)
        self.best_val = math.inf
        self.last_eval: dict[str, float] = {}
        self.last_eval_step: int | None = None  # the step of last_eval
        self.start_step = 0  # where this process began (a resume's checkpoint step)
        self.train_s = 0.0  # seconds in this process's optimizer steps (not evaluations)
        self.stop = stop or threading.Event()
        # True from the start of an evaluation until it is recorded: a checkpoint saved in
        # between (a stop mid-evaluation) makes --resume run that evaluation first. Step
        # 0's evaluation is pending from the start, where the recipe has one.
        self.eval_pending = cfg.speed.eval_at_start
        self._unsaved = True  # state has moved on since the last checkpoint
        self.saved_step: int | None = None  # the step of the last checkpoint
        self.grad_norm: torch.Tensor | None = None  # of the last step, when clipping
        # On the device, read only by check(): the last step's summed loss; the first step
        # whose loss was not finite (0: none yet) and that loss.
        zero = torch.zeros(1, dtype=torch.float64, device=ctx.device)
        self._last_loss, self._first_bad, self._bad_loss = zero, zero, zero
        self._unchecked = False  # steps were taken since the last check()
        self._stop_agreed = False  # every rank saw a stop request (under torchrun)

    # state for --resume: plain tensors and numbers only, so weights_only loading works. The
    # weights and the optimizer's moments go beside it, as the Checkpointer keeps them.
    def state(self) -> dict[str, Any]:
        state = {
            "step": self.step,
            "best_val": self.best_val,
            "batch_rng": self.batches.state(),
            "torch_rng": torch.get_rng_state(),
            "eval_pending": self.eval_pending,
            "data_ranks": self.data_ranks,
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
        self.saved_step = self.step
        self.checkpoints.restore(state, self.raw_model, self.optimizer)
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

    def _any_rank(self, value: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """value summed over ranks, and whether any rank was asked to stop: one all-reduce
        carries both, so every rank stops at the same point and none waits for another."""
        stop = torch.tensor([float(self.stop.is_set())], dtype=torch.float64,
                            device=value.device)
        packed = sum_across(self.ctx, torch.cat([value, stop]))
        if packed[-1].item() > 0:
            self.stop.set()
            self._stop_agreed = True
        return packed[:-1], self.stop.is_set()

    def _stopping(self) -> bool:
        """Whether to stop before the next step: one process looks at its flag; ranks stop
        only once check() or an evaluation agreed on it, so that all stop together."""
        return self._stop_agreed if self.ctx.enabled else self.stop.is_set()

    def _stop_requested(self) -> bool:
        """Whether this rank or any other was asked to stop (an all-reduce only when there
        are other ranks, which must all stop at the same batch)."""
        if self.ctx.world_size == 1:
            return self.stop.is_set()
        return self._any_rank(torch.zeros(0, dtype=torch.float64, device=self.ctx.device))[1]

    @torch.no_grad()
    def evaluate(self) -> dict[str, float] | None:
        """Mean loss over eval_iters batches per split; the batches are split over ranks
        and averaged, matching one process with the global batch. None if a stop was
        requested meanwhile, looked at between batches (a long evaluation should not keep
        Ctrl-C waiting)."""
        model = self.raw_model
        was_training = model.training
        model.eval()
        out = {}
        try:
            for split in ("train", "val"):
                total = torch.zeros(1, device=self.ctx.device, dtype=torch.float64)
                for i in range(self.cfg.eval_iters):
                    if self._stop_requested():
                        return None
                    x, y = self.batches.eval_batch(split, i)
                    with self._autocast():
                        _, loss = model(x, y)
                    total += loss.double()
                total, stopping = self._any_rank(total)
                if stopping:
                    return None
                out[f"{split}_loss"] = total.item() / (self.cfg.eval_iters * self.ctx.world_size)
        finally:
            model.train(was_training)
        return out

    def train_step(self, lr: float) -> torch.Tensor:
        """One optimizer step over gradient_accumulation_steps micro-batches, without waiting
        for the device; returns this process's mean micro-batch loss, still on the device.
        Whether it was finite is noted there and raised by the next check()."""
        cfg, model = self.cfg, self.model
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        accum = cfg.gradient_accumulation_steps
        loss_sum = torch.zeros(1, device=self.ctx.device, dtype=torch.float64)
        for micro in range(accum):
            x, y = self.batches.train_batch()
            self.tokens += x.numel() * self.data_ranks
            # DDP all-reduces gradients on every backward; only the last micro-step needs it.
            last = micro == accum - 1
            ddp = self.ctx.enabled and hasattr(model, "no_sync")
            sync = model.no_sync() if ddp and not last else contextlib.nullcontext()
            with sync:
                with self._autocast():
                    _, loss = model(x, y)
                self.scaler.scale(loss / accum).backward()
            loss_sum += loss.detach().double()
        self._note_loss(loss_sum)
        if cfg.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)
            # the norm before clipping, kept as a tensor: read only at a logging step (a
            # .item() every step would wait for the GPU)
            self.grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                            cfg.grad_clip).detach()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self._unsaved = True
        return loss_sum / accum

    def _note_loss(self, loss_sum: torch.Tensor) -> None:
        """Keep the step's loss and, the first time one is not finite, its step, on the
        device (torch.where with a Python number: no copy, no wait)."""
        fresh = ~torch.isfinite(loss_sum) & (self._first_bad == 0)
        self._first_bad = torch.where(fresh, float(self.step + 1), self._first_bad)
        self._bad_loss = torch.where(fresh, loss_sum, self._bad_loss)
        self._last_loss = loss_sum
        self._unchecked = True

    def check(self) -> float:
        """Wait for the device and read what the steps since the last check left there: the
        last step's mean loss over every process's micro-batches, returned; a TrainingDiverged
        naming the first step whose loss was not finite (on any rank); and, under torchrun,
        whether any rank was asked to stop (then every rank stops before its next step)."""
        total, _ = self._any_rank(self._last_loss)
        first_bad = min_across(self.ctx, torch.where(self._first_bad > 0, self._first_bad,
                                                     math.inf)).item()
        self._unchecked = False
        if math.isfinite(first_bad):
            step = int(first_bad)
            # this rank's bad loss where it was the first; another's reads as nan
            value = self._bad_loss.item() if self._first_bad.item() == step else math.nan
            raise self._diverged(f"the loss became {value}", step)
        return total.item() / (self.cfg.gradient_accumulation_steps * self.ctx.world_size)

    def _diverged(self, happened: str, step: int) -> TrainingDiverged:
        return TrainingDiverged(happened, step, self.saved_step, self.checkpoints.where,
                                self.cfg.learning_rate)

    def fit(self, resumed: bool = False,
            should_stop: Callable[[int], bool] | None = None) -> str:
        """Train until max_iters, or the target's whole val loss is met (target_met says
        so; "finished" either way), or a stop request (or should_stop(steps done) says so
        before a step: a stop request too; "interrupted"). A checkpoint is
        saved before returning either way, and on a fresh run before anything else, so
        --resume works from the first moment on."""
        cfg = self.cfg
        self.start_step = self.step
        if self.target is not None:
            self.target.start(self.step)
        self.reporter.open(cfg.max_iters, self.step)
        try:
            if not resumed:
                self._save_checkpoint()  # step 0, its evaluation pending
            if self.eval_pending:
                self._evaluate_and_record()
            status = self._loop(should_stop)
            if self._unsaved:
                self._save_checkpoint()
            return status
        except TrainingDiverged as exc:
            self.reporter.diverged(exc.record())
            raise
        finally:
            self.reporter.close()

    def _loop(self, should_stop: Callable[[int], bool] | None) -> str:
        cfg = self.cfg
        t_log, tokens_log = time.perf_counter(), self.tokens
        while True:
            if self.step >= cfg.max_iters:
                return "finished"
            if should_stop is not None and should_stop(self.step):
                self.stop.set()  # as a signal's request: under torchrun, the ranks agree
            if self._stopping():
                return "interrupted"
            lr = scheduled_lr(cfg, self.step)
            t_step = time.perf_counter()
            self.train_step(lr)
            logging = self.step % cfg.log_interval == 0 or self.step == cfg.max_iters
            evaluating = self.step % cfg.eval_interval == 0 or self.step == cfg.max_iters
            saving = self.step % cfg.checkpoint_interval == 0
            loss = None
            if logging or evaluating or saving or (self.ctx.enabled
                                                   and self.step % CHECK_EVERY == 0):
                loss = self.check()  # waits for the device: the steps' time is real
            self.train_s += time.perf_counter() - t_step
            record = None
            if logging:
                now = time.perf_counter()
                tok_s = (self.tokens - tokens_log) / max(now - t_log, 1e-9)
                t_log, tokens_log = now, self.tokens
                record = {"kind": "train", "step": self.step, "loss": loss, "lr": lr,
                          "tokens_per_s": round(tok_s, 1)}
                if self.grad_norm is not None:
                    record["grad_norm"] = self._grad_norm()
            self.reporter.step(record)
            if evaluating:
                self.eval_pending = True
                self._evaluate_and_record()
            if saving:
                self._save_checkpoint()
            if self.target is not None and self.target.is_due(self.step) and self._look():
                return "finished"

    def _look(self) -> bool:
        """Look at the val loss for stop_at_val; whether it met the target."""
        if self._unchecked:
            self.check()  # a divergence is raised before its weights are scored
        look = self.target.look(self.raw_model, self.step, self.amp_dtype)
        if look is None:  # a stop was requested meanwhile: the loop stops as asked
            return False
        self.reporter.val_target(look.record(self.target.target))
        if look.met:
            self.target_met = look  # fit saves the checkpoint
        return look.met

    def _evaluate_and_record(self) -> None:
        losses = self.evaluate()
        if losses is None:  # stopped mid-way: eval_pending stays, for --resume
            return
        for split in ("train", "val"):  # never recorded, kept as best or checkpointed
            if not math.isfinite(losses[f"{split}_loss"]):
                raise self._diverged(f"the {split} loss at evaluation became "
                                     f"{losses[split + '_loss']}", self.step)
        self.eval_pending = False
        self._unsaved = True
        self.last_eval, self.last_eval_step = losses, self.step
        improved = losses["val_loss"] < self.best_val
        if improved:
            self.best_val = losses["val_loss"]
        record = {"kind": "eval", "step": self.step, **losses, "best_val_loss": self.best_val}
        model = self.raw_model
        if improved:
            if self.sharding is not None:
                model = self.sharding.gathered()  # every rank gathers; rank 0 gets it
            self.checkpoints.save_best(model, self.step)
        self.reporter.evaluation(record, model, improved)

    def _grad_norm(self) -> float:
        """The last step's gradient norm (before clipping), over the whole model: a sharded
        model's is a DTensor, made whole on every rank (each builds the record)."""
        norm = self.grad_norm
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        return float(norm)

    @property
    def data_ranks(self) -> int:
        """Ranks that train on different rows of the global batch."""
        return self.sharding.layout.dp if self.sharding is not None else self.ctx.world_size

    def _save_checkpoint(self) -> None:
        """Commit a checkpoint, whose weights must all be finite: a step whose loss was
        finite can still leave weights that are not (a huge learning rate), and a checkpoint
        is what a resume, sample and the advice on divergence trust. The losses since the
        last check are read first."""
        if self._unchecked:
            self.check()
        if not self._weights_finite():
            raise self._diverged("a weight became inf or nan", self.step)
        self.checkpoints.save(self.state(), self.raw_model, self.optimizer)
        self.saved_step = self.step
        self._unsaved = False

    @torch.no_grad()
    def _weights_finite(self) -> bool:
        """Whether every weight is finite on every rank (each checks what it holds: its
        shard of a sharded model)."""
        bad = torch.zeros(1, dtype=torch.float64, device=self.ctx.device)
        for p in self.raw_model.parameters():
            local = p.to_local() if hasattr(p, "to_local") else p  # a DTensor's shard
            if not bool(torch.isfinite(local).all()):
                bad += 1
                break
        return sum_across(self.ctx, bad).item() == 0
