"""`train()`: the GPT glue the CLI calls, one process or many under torchrun.

It opens the data directory and plans the call (gptlab.training.plan: everything decided and
checked before the run directory is touched; the plan holds the opened data, which nothing
reads again), then carries the plan out, step by step below: take the run directory's lock
(gptlab.training.rundir), join the processes, build (or load) the model and shard it as
planned, and hand it to a gptlab.training.trainer.Trainer, whose checkpoints go to the run
directory and whose progress goes to the reporter the callbacks make
(gptlab.training.callbacks). Files a run writes (rank 0 only) are listed in
gptlab.training.rundir.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from gptlab import model_dir, probe, stopping
from gptlab.data import prepared
from gptlab.data.batches import BATCH_STREAMS
from gptlab.data.tokenizer import load_tokenizer
from gptlab.distributed.layout import Layout
from gptlab.distributed.process import Dist, pick_device, setup
from gptlab.errors import Setting, SettingError, UsageError
from gptlab.files import kinds
from gptlab.inference.evaluate import score_ids
from gptlab.loading import load
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.model.params import count_parameters, counted
from gptlab.training import allocator, footprint, rundir
from gptlab.training.callbacks import Callbacks
from gptlab.training.config import TrainConfig
from gptlab.training.plan import (
    FINE_TUNE,
    TrainPlan,
    claim_run,
    plan_run,
    resume_point,
    with_precision,
)
from gptlab.training.precision import autocast_dtype
from gptlab.training.reporting import (
    Reporter,
    ReporterGroup,
    TensorBoardReporter,
    hparams,
    require_logger,
)
from gptlab.training.trainer import Trainer, TrainingDiverged
from gptlab.training.val_target import ValTarget

# torch.cuda's before torch 2.5, which made it torch's own (raised by every accelerator).
OUT_OF_MEMORY = (getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError), MemoryError)
# torch's CPU allocator has no type of its own for a failed allocation (a plain RuntimeError,
# as of torch 2.13): it is known by the allocator's name in it, not by any mention of memory.
CPU_ALLOCATOR = "DefaultCPUAllocator: "


class ScoringInterrupted(stopping.Interrupted):
    """A signal during the whole-val scoring after the last step: the run finished and its
    last checkpoint is written (run_dir, at `step`); only the score of its whole val split,
    which metrics.jsonl would have recorded, is missing."""

    def __init__(self, signum: int, run_dir: Path, step: int) -> None:
        super().__init__(signum)
        self.run_dir, self.step = run_dir, step


@dataclass
class TrainResult:
    run_dir: Path
    step: int  # optimizer steps done
    status: str  # "finished" | "interrupted"
    train_loss: float | None  # at the last evaluation
    val_loss: float | None
    best_val_loss: float | None
    elapsed_s: float  # since train() was called: start-up, evaluations, scoring included
    is_main: bool = True  # False on torchrun ranks > 0, which write and print nothing
    whole_val_loss: float | None = None  # over the whole val split, at the end
    eval_step: int | None = None  # the step of train_loss and val_loss (None: no evaluation)
    start_step: int = 0  # where this process began: a resume's checkpoint step, else 0
    train_s: float = 0.0  # of elapsed_s, the seconds in this process's optimizer steps
    max_iters: int = 0  # the steps the run is planned for
    signal: int | None = None  # the SIGINT or SIGTERM that stopped it, if one did
    stop_at_val: float | None = None  # the run's target for the whole val loss, if any
    target_step: int | None = None  # the step whose whole val loss met it, if one did

    @property
    def steps_now(self) -> int:
        """Optimizer steps this process trained (a resume's earlier steps left out)."""
        return self.step - self.start_step

    @property
    def other_s(self) -> float:
        """Seconds besides the optimizer steps: start-up, evaluations, checkpoints and the
        whole-val scoring."""
        return max(self.elapsed_s - self.train_s, 0.0)


@dataclass(frozen=True)
class _Watch:
    """How the caller follows the run: none of it changes what is trained."""

    progress: bool
    callbacks: Callbacks
    stop: threading.Event  # set by SIGINT, SIGTERM or the callbacks' should_stop
    t0: float  # when train() was called, for elapsed_s


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
    callbacks: Callbacks | None = None,
) -> TrainResult:
    """Train a GPT on a data directory (made by `gptlab prepare`) into a run directory.

    Fresh run: model_config and train_config given; vocab_size comes from the data. A
    fine-tune: train_config.init_from names the model it starts from, and model_config is
    None (or that model's config with another block_size or rope_scaling). resume=True:
    both None; they are read from out_dir, and `overrides` may change RESUME_OVERRIDES
    (gptlab.training.config; e.g. a larger max_iters). A fresh run's `overrides` apply to
    train_config.

    out_dir is claimed as gptlab.files.kinds says (absent, empty or a run: never another
    kind of folder or one gptlab did not make); overwrite=True replaces a run that holds
    work there. progress: a progress bar on stderr (off a terminal, a line now and then).

    callbacks: hooks that follow or steer the run (gptlab.training.callbacks: the reporter
    its steps go to, a stop before any step); without them the run is what `gptlab train`
    does. Checkpoints are the run directory's whatever the callbacks.

    SIGINT and SIGTERM, from the moment this is called, end the run with a checkpoint
    (status "interrupted", `signal` the one that came: gptlab.stopping.deferred), an
    evaluation cut short between two batches; one during the final whole-val scoring
    raises ScoringInterrupted (a gptlab.stopping.Interrupted), the finished run's checkpoint
    kept. Everything that
    can be checked is checked before the run directory is touched.
    """
    watch = _Watch(progress, callbacks or Callbacks(), threading.Event(),
                   time.perf_counter())
    with stopping.deferred(watch.stop.set) as signalled, _out_of_memory_as_usage_error():
        data = prepared.load_data(Path(data_dir))
        world = int(os.environ.get("WORLD_SIZE", "1"))
        plan = plan_run(model_config, train_config, data, Path(out_dir), resume=resume,
                        overrides=overrides, overwrite=overwrite, owner=watch.callbacks.owner,
                        rank=int(os.environ.get("RANK", "0")) if world > 1 else 0,
                        world_size=world)
        require_logger(plan.train_config.log)
        if world == 1 and not plan.sharded:
            _check_footprint(plan)
        _tune_allocator(plan.train_config)
        result = _carry_out(plan, watch)
        if result.status == "finished":
            stopping.check()  # a signal after the last step: interrupted, as in any phase
        return replace(result, signal=signalled.signum)


def _tune_allocator(cfg: TrainConfig) -> None:
    """allocator "retain" on a CPU (gptlab.training.allocator); a GPU's tensors do not come
    from malloc, and the process's own small ones gain nothing from it."""
    if cfg.speed.allocator == "retain" and pick_device(cfg.device).type == "cpu":
        allocator.retain_freed_memory()


def _check_footprint(plan: TrainPlan) -> None:
    """Refuse a run whose least memory exceeds what the device has (before the run folder
    is written: a block_size of 100,000 would otherwise sit in its first evaluation for
    many minutes); say so when it takes over half. fp32 activations only where the dtype
    says float32 (auto may pick bf16): the estimate stays a lower bound."""
    cfg = plan.train_config
    device = pick_device(cfg.device)
    need = footprint.estimate(plan.model_config, cfg, fp32=cfg.dtype == "float32")
    note = footprint.check_fits(need, footprint.available_memory(device.type), str(device))
    if note:
        print(note, file=sys.stderr)


def is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, OUT_OF_MEMORY) or (type(exc) is RuntimeError
                                              and CPU_ALLOCATOR in str(exc))


@contextlib.contextmanager
def _out_of_memory_as_usage_error() -> Iterator[None]:
    try:
        yield
    except (*OUT_OF_MEMORY, RuntimeError) as exc:
        if not is_out_of_memory(exc):
            raise
        raise SettingError("out of memory: use a smaller ", Setting("batch_size"),
                           " (with more ", Setting("gradient_accumulation_steps"),
                           " for the same batch) or a smaller model") from None


# --- carrying the plan out ------------------------------------------------------------------


def _carry_out(plan: TrainPlan, watch: _Watch) -> TrainResult:
    # Only the first process writes files, so only it takes the run directory's lock.
    with rundir.locked(plan.run_dir) if plan.is_main else contextlib.nullcontext():
        state = _checkpoint_under_lock(plan)
        with setup(plan.train_config.device) as ctx, _process_group(plan, ctx):
            with probe.announced(lambda line: _tell(ctx, line)):  # a probe says it times
                plan, reasons = with_precision(plan, ctx)
            _tell(ctx, *reasons)
            return _train_on(plan, state, ctx, watch)


def _checkpoint_under_lock(plan: TrainPlan) -> dict[str, Any] | None:
    """The checkpoint a resume continues from, read now that no one else may write it, and
    still the one planned; for a fresh start, the checks of the plan made again."""
    if plan.resume_from is None:
        if plan.is_main:
            claim_run(plan.run_dir, plan.overwrite)
        return None
    state = rundir.load_checkpoint(plan.run_dir)
    if resume_point(state) != plan.resume_from:
        raise UsageError(f"{plan.run_dir} changed while this run was starting (another "
                         f"trainer?): start it again")
    return state


def _process_group(plan: TrainPlan, ctx: Dist):
    """A sharded mode needs a process group even in one process."""
    if not plan.sharded:
        return contextlib.nullcontext()
    from gptlab.distributed import parallelize  # only a sharded run pays for its imports

    return parallelize.process_group(ctx)


def _train_on(plan: TrainPlan, state: dict[str, Any] | None, ctx: Dist, watch: _Watch
              ) -> TrainResult:
    cfg, data = plan.train_config, plan.data
    model, sharding, data_ctx = _model(plan, state, ctx)
    batches = BATCH_STREAMS[cfg.batch_rng](data.train, data.val, cfg.batch_size,
                                           plan.model_config.block_size, cfg.seed, data_ctx)
    reporter = _open_run_dir(plan, state, watch) if ctx.is_main else Reporter()
    checkpoints = rundir.Checkpoints(plan.run_dir, writer=ctx.is_main, sharding=sharding)
    trainer = Trainer(model, batches, cfg, ctx, checkpoints, reporter, stop=watch.stop,
                      sharding=sharding, target=_val_target(plan, watch))
    if state is not None:
        trainer.load_state(state)
    whole = sharding.gathered if sharding is not None else lambda: model
    _announce(plan, trainer, ctx)
    status = _fit(plan, trainer, ctx, watch.callbacks, whole, reporter)
    whole_val, met = None, trainer.target_met
    if met is not None:  # the look scored the whole split at this very step
        whole_val = met.whole
        reporter.whole_val({"kind": "whole_val", "step": met.step, "loss": met.whole,
                            "tokens": len(data.val) - 1, "autocast": met.whole_autocast})
    elif status == "finished" and (cfg.whole_val or cfg.speed.stop_at_val is not None):
        try:
            whole_val = _whole_val(whole, data.val, reporter, trainer.step, ctx)
        except stopping.Interrupted as exc:  # the run is whole: say so, and what is missing
            raise ScoringInterrupted(exc.signum, plan.run_dir, trainer.step) from None
    target_step = met.step if met is not None else None
    if target_step is None and cfg.speed.stop_at_val is not None and whole_val is not None and (
            status == "finished" and whole_val <= cfg.speed.stop_at_val):
        target_step = trainer.step  # met by the end's whole score (float32), at the last step
    best = trainer.best_val if math.isfinite(trainer.best_val) else None
    return TrainResult(plan.run_dir, trainer.step, status, trainer.last_eval.get("train_loss"),
                       trainer.last_eval.get("val_loss"), best,
                       time.perf_counter() - watch.t0, is_main=ctx.is_main,
                       whole_val_loss=whole_val, eval_step=trainer.last_eval_step,
                       start_step=trainer.start_step, train_s=trainer.train_s,
                       max_iters=cfg.max_iters, stop_at_val=cfg.speed.stop_at_val,
                       target_step=target_step)


def _val_target(plan: TrainPlan, watch: _Watch) -> ValTarget | None:
    """What looks at the whole val loss for stop_at_val (every rank holds a whole model:
    the plan refuses it with a sharded one)."""
    cfg = plan.train_config
    if cfg.speed.stop_at_val is None:
        return None
    return ValTarget(cfg.speed.stop_at_val, torch.from_numpy(plan.data.val.astype("int64")),
                     plan.model_config.block_size, cfg.max_iters, cfg.speed.stop_at_val_every,
                     stop_requested=watch.stop.is_set)


def _model(plan: TrainPlan, state: dict[str, Any] | None, ctx: Dist):
    """(the model, seeded and loaded as planned and sharded if planned; its ShardedGPT or
    None; ctx as the batches see it)."""
    start = _starting_weights(plan)  # read first: loading a model must not move the seeds
    torch.manual_seed(plan.init_seed)
    with torch.device(ctx.device):
        model = GPT(plan.model_config)
    if state is not None and not plan.sharded:  # a sharded run's weights come with its shards
        model_dir.load_state(model, state.pop("model"), str(plan.run_dir / rundir.STATE_FILE))
    elif start is not None:
        model_dir.load_state(model, start, plan.starting_model)
    if plan.dropout_seed is not None:
        torch.manual_seed(plan.dropout_seed)
    if not plan.sharded:
        return model, None, ctx
    return _shard(model, plan, ctx)


def _starting_weights(plan: TrainPlan) -> dict[str, torch.Tensor] | None:
    if plan.starting_model is None:
        return None
    start, _ = load(plan.starting_model)
    return model_dir.weights_state(start)


def _shard(model: nn.Module, plan: TrainPlan, ctx: Dist):
    """Shard the model as planned: (it, its ShardedGPT, ctx as the batches see it: the
    ranks of a tensor-parallel group share rows)."""
    from gptlab.distributed import parallelize  # only a sharded run pays for its imports

    cfg = plan.train_config
    mesh = parallelize.build_mesh(plan.layout, ctx)
    # bf16 weights for the compute under FSDP's mixed precision; reductions stay fp32.
    param_dtype = autocast_dtype(cfg.dtype, ctx.device) if plan.layout.uses_fsdp else None
    parallelize.parallelize(model, plan.layout, mesh,
                            reshard_after_forward=cfg.reshard_after_forward,
                            param_dtype=param_dtype)
    return model, ShardedGPT(model, plan.layout), parallelize.data_ranks(ctx, mesh)


@dataclass(frozen=True)
class ShardedGPT:
    """What the trainer and the run directory need of a sharded GPT besides its forward:
    its layout (the data-parallel width) and a whole copy, for model.safetensors, best/ and
    the whole-val score."""

    model: nn.Module
    layout: Layout

    def gathered(self) -> GPT | None:
        """An ordinary GPT on rank 0's CPU with the sharded weights (None on the other
        ranks, which take part all the same)."""
        from gptlab.distributed import parallelize  # only a sharded run pays for its imports

        weights = parallelize.full_weights(self.model)
        if weights is None:
            return None
        with torch.random.fork_rng(devices=[]):  # initialising must not move training's RNG
            plain = GPT(self.model.config)
        model_dir.load_state(plain, weights, "the sharded model")
        return plain


def _open_run_dir(plan: TrainPlan, state: dict[str, Any] | None, watch: _Watch
                  ) -> Reporter:
    """Rank 0: a fresh run's first files, or a resumed run's settings; its reporter (and a
    TensorBoard log beside it, if the settings ask for one)."""
    run_dir, cfg = plan.run_dir, plan.train_config
    if state is None:
        rundir.clear(run_dir)
        rundir.start(run_dir, plan.data.directory, cfg.to_dict(),
                     plan.model_config.to_dict(), by=plan.owner,
                     data_fingerprint=plan.data.fingerprint)
    else:
        if kinds.read_marker(run_dir) is None:  # a run an earlier version wrote
            kinds.mark(run_dir, kinds.RUN, plan.owner)
        rundir.write_train_config(run_dir, cfg.to_dict())
        rundir.record_data(run_dir, plan.data.directory, plan.data.fingerprint)
    files = rundir.RunFiles(run_dir, title=f"{run_dir.name}: {_describe(plan.model_config)}")
    files.reset_metrics(keep_until_step=state["step"] if state else None,
                        redo_eval=bool(state and state.get("eval_pending")))
    reporter = watch.callbacks.make_reporter(files, watch.progress)
    if cfg.log != "tensorboard":
        return reporter
    board = TensorBoardReporter(run_dir / rundir.TB_DIR,
                                hparams(plan.model_config.to_dict(), cfg.flat()),
                                load_tokenizer(run_dir / rundir.TOKENIZER_FILE),
                                resumed_at=state["step"] if state else None)
    return ReporterGroup(reporter, board)


def _announce(plan: TrainPlan, trainer: Trainer, ctx: Dist) -> None:
    _tell(ctx, f"training {_describe(plan.model_config)}, "
               f"{count_parameters(plan.model_config):,} parameters, on {ctx.device} x "
               f"{ctx.world_size}" + (f" ({plan.train_config.parallel})" if plan.sharded else "")
               + (f", resuming at step {trainer.step}" if plan.resume_from is not None else ""))
    _tell(ctx, *plan.changes)
    if plan.mode == FINE_TUNE:
        _tell(ctx, f"fine-tuning from {plan.starting_model}: its weights, architecture and "
                   f"tokenizer; the optimizer and the learning-rate schedule start fresh",
              describe_schedule(plan.train_config))


def describe_schedule(cfg: TrainConfig) -> str:
    """The learning-rate schedule in one line: warm-up, peak and where the decay ends."""
    decay = (f"cosine decay to min_lr {cfg.min_lr:g} at step {cfg.lr_decay_iters}"
             if cfg.lr_schedule == "cosine" else
             f"held, then cooled down to min_lr {cfg.min_lr:g} by step {cfg.lr_decay_iters}")
    return (f"schedule: {cfg.warmup_iters} warm-up steps to learning_rate "
            f"{cfg.learning_rate:g}, {decay}, of {cfg.max_iters} steps")


def _tell(ctx: Dist, *lines: str) -> None:
    """Lines on stderr, from rank 0 only."""
    if ctx.is_main:
        for line in lines:
            print(line, file=sys.stderr)


def _fit(plan: TrainPlan, trainer: Trainer, ctx: Dist, callbacks: Callbacks,
         whole: Callable[[], nn.Module | None], reporter: Reporter) -> str:
    try:
        if plan.mode == FINE_TUNE and plan.train_config.whole_val:
            _whole_val(whole, plan.data.val, reporter, 0, ctx)  # where the starting model stands
        return trainer.fit(resumed=plan.resume_from is not None,
                           should_stop=callbacks.should_stop)
    except TrainingDiverged:
        raise  # its message points at the checkpoint, which stays
    except BaseException:
        if ctx.is_main and plan.resume_from is None and trainer.step == 0:
            rundir.clear(plan.run_dir)  # nothing trained: leave no run behind
        raise


def _whole_val(whole: Callable[[], nn.Module | None], val: np.ndarray,
               reporter: Reporter, step: int, ctx: Dist) -> float | None:
    """Mean loss over the whole val split (gptlab.inference.evaluate's sliding windows),
    logged as a "whole_val" record: the figure to quote, where eval_iters batches are an
    estimate. Every rank calls it (every rank helps gather a sharded model); rank 0 scores."""
    model = whole()
    if not ctx.is_main:
        return None
    ids = torch.from_numpy(val.astype("int64"))
    nll, scored = score_ids(model, ids)
    loss = nll / scored
    reporter.whole_val({"kind": "whole_val", "step": step, "loss": loss, "tokens": scored})
    return loss


def _describe(c: GPTConfig) -> str:
    return (f"{counted(c.n_layer, 'layer')}, {counted(c.n_head, 'head')}, n_embd {c.n_embd}, "
            f"block {c.block_size}")
