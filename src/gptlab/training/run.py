"""`train()`: the GPT glue the CLI calls, one process or many under torchrun.

It reads a data directory, builds (or, for a fine-tune, loads) the model, takes the run
directory (gptlab.training.rundir: its lock, checks and files) and hands everything to a
gptlab.training.trainer.Trainer. Files a run writes (rank 0 only) are listed in
gptlab.training.rundir.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gptlab.distributed.process import pick_device, setup
from gptlab.errors import UsageError
from gptlab.files import model_dir
from gptlab.model.config import GPTConfig
from gptlab.model.params import count_parameters
from gptlab.training import rundir
from gptlab.training.config import TrainConfig
from gptlab.training.precision import autocast_dtype
from gptlab.training.reporting import NullReporter, Reporter
from gptlab.training.trainer import Trainer, stop_on_signals


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
    whole_val_loss: float | None = None  # over the whole val split, at the end


# --- the GPT glue -------------------------------------------------------------------------

# parallel, tp and batch_size: a run may move between sharded modes and numbers of ranks
# (gptlab.distributed.parallelize), keeping its global batch.
RESUME_OVERRIDES = ("max_iters", "device", "compile", "parallel", "tp",
                    "reshard_after_forward", "batch_size")


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
    stop: threading.Event | None = None,
    make_reporter: Callable[[rundir.RunFiles], Reporter] | None = None,
) -> TrainResult:
    """Train a GPT on a data directory into a run directory.

    Fresh run: model_config and train_config given; vocab_size comes from the data.
    resume=True: both None; they are read from out_dir, and `overrides` may change
    RESUME_OVERRIDES (e.g. a larger max_iters). stop_after: stop (with a checkpoint) once
    this many steps are done, as an interruption would.

    SIGINT and SIGTERM, from the moment this is called, end the run with a checkpoint
    (exit status "interrupted"); everything that can be checked is checked before the run
    directory is touched.

    stop: set from another thread to end the run the same way (the lab's Stop button);
    make_reporter(files): the Reporter to use instead of gptlab.training.reporting.Reporter (the
    lab's live view subclasses it to stream each step).
    """
    stop = stop or threading.Event()
    with stop_on_signals(stop.set):
        try:
            return _train(model_config, train_config, Path(data_dir), Path(out_dir),
                          resume=resume, overrides=overrides or {}, overwrite=overwrite,
                          progress=progress, stop_after=stop_after, stop=stop,
                          make_reporter=make_reporter)
        except (MemoryError, RuntimeError) as exc:  # torch's OutOfMemoryError included
            if not isinstance(exc, MemoryError) and "memory" not in str(exc):
                raise
            raise UsageError("out of memory: use a smaller batch_size (with more "
                             "gradient_accumulation_steps for the same batch) or a smaller "
                             "model") from None


def _train(model_config, train_config, data_dir: Path, out_dir: Path, *, resume: bool,
           overrides: dict[str, Any], overwrite: bool, progress: bool, stop_after: int | None,
           stop: threading.Event, make_reporter=None) -> TrainResult:
    from gptlab.data.batches import BATCH_STREAMS
    from gptlab.data.prepared import load_data
    from gptlab.model.gpt import GPT

    t0 = time.perf_counter()
    data = load_data(data_dir)
    start = None  # the model a fine-tune starts from
    # Only the first process writes files, so only it takes the run directory's lock.
    is_main = int(os.environ.get("RANK", "0")) == 0
    if resume:
        if model_config is not None or train_config is not None:
            raise UsageError("resume reads the model and training settings from the run "
                             "directory; give no model_config or train_config")
        rundir.check_resumable(out_dir)
    else:
        if train_config is None:
            raise UsageError("a fresh run needs a training config")
        train_config = TrainConfig.from_dict({**train_config.to_dict(), **overrides})
        if train_config.init_from is not None:
            start, model_config = _starting_model(train_config.init_from, model_config, data)
        elif model_config is None:
            raise UsageError("a fresh run needs a model config (or init_from)")
        else:
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
        sharded = train_config.parallel != "ddp"
        with setup(train_config.device) as ctx, _process_group(sharded, ctx):
            train_config = _resolve_dtype(train_config, model_config, ctx)
            shared_stream = train_config.batch_rng == "nanogpt"
            # The same initial weights on every rank (DDP also broadcasts rank 0's; FSDP and
            # TP keep each rank's slice of its own); nanoGPT seeds each rank with seed + rank
            # before building the model.
            torch.manual_seed(train_config.seed + (ctx.rank if shared_stream else 0))
            with torch.device(ctx.device):
                model = GPT(model_config)
            if state is not None and not sharded:
                model_dir.load_state(model, state.pop("model"),
                                      str(out_dir / rundir.STATE_FILE))
            elif start is not None:
                model_dir.load_state(model, model_dir.weights_state(start),
                                      train_config.init_from)
            if not shared_stream:
                torch.manual_seed(train_config.seed + ctx.rank)  # dropout differs across ranks
            sharding, data_ctx = None, ctx
            if sharded:
                sharding, data_ctx = _shard(model, train_config, ctx, out_dir)
            batches = BATCH_STREAMS[train_config.batch_rng](
                data.train, data.val, train_config.batch_size, model_config.block_size,
                train_config.seed, data_ctx)
            reporter = NullReporter()
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
                reporter = (make_reporter(files) if make_reporter is not None
                            else Reporter(files, progress=progress))
            trainer = Trainer(model, batches, train_config, ctx, reporter, stop=stop,
                              sharding=sharding)
            if state is not None:
                trainer.load_state(state)
            whole_val = None
            # A sharded model is scored as an ordinary one that every rank helps gather.
            scored = sharding.gathered if sharding is not None else lambda: model
            start_model = scored() if start is not None and train_config.whole_val else None
            if ctx.is_main:
                print(f"training {_describe(model_config)}, {count_parameters(model_config):,} "
                      f"parameters, on {ctx.device} x {ctx.world_size}"
                      + (f" ({train_config.parallel})" if sharded else "")
                      + (f", resuming at step {trainer.step}" if state is not None else ""),
                      file=sys.stderr)
                if start is not None:
                    print(f"fine-tuning from {train_config.init_from}: its weights, "
                          f"architecture and tokenizer; the optimizer and the learning-rate "
                          f"schedule start fresh", file=sys.stderr)
                    if start_model is not None:
                        _whole_val(start_model, data, reporter, 0)
            try:
                status = trainer.fit(resumed=state is not None, stop_after=stop_after)
            except BaseException:
                if ctx.is_main and state is None and trainer.step == 0:
                    rundir.clear(out_dir)  # nothing trained: leave no run behind
                raise
            final = scored() if status == "finished" and train_config.whole_val else None
            if ctx.is_main and final is not None:
                whole_val = _whole_val(final, data, reporter, trainer.step)
    return TrainResult(out_dir, trainer.step, status, trainer.last_eval.get("train_loss"),
                       trainer.last_eval.get("val_loss"),
                       trainer.best_val if math.isfinite(trainer.best_val) else None,
                       time.perf_counter() - t0, is_main=ctx.is_main, whole_val_loss=whole_val)


def _resolve_dtype(cfg: TrainConfig, model_config: GPTConfig, ctx) -> TrainConfig:
    """cfg with dtype and muon_dtype 'auto' made concrete (gptlab.training.precision), decided by
    the first process for all, so every rank trains alike and train.json records what was
    used."""
    if cfg.dtype != "auto" and not (cfg.optimizer == "muon" and cfg.muon_dtype == "auto"):
        return cfg
    from gptlab.training import precision

    decided = [None, None]
    if ctx.is_main:
        resolved, reasons = precision.resolve_settings(cfg, model_config, ctx.device)
        decided = [resolved.to_dict(), reasons]
    if ctx.enabled:
        import torch.distributed as dist

        dist.broadcast_object_list(decided, src=0)
    settings, reasons = decided
    if ctx.is_main:
        for reason in reasons:
            print(reason, file=sys.stderr)
    return TrainConfig.from_dict(settings)


def _process_group(sharded: bool, ctx):
    """A sharded mode needs a process group even in one process."""
    if not sharded:
        return contextlib.nullcontext()
    from gptlab.distributed.parallelize import process_group

    return process_group(ctx)


def _shard(model: nn.Module, cfg: TrainConfig, ctx, out_dir: Path):
    """Shard the model as cfg.parallel says: the trainer's ShardedRun, and ctx as the
    batches see it (the ranks of a tensor-parallel group share rows)."""
    from gptlab.distributed import parallelize

    layout = parallelize.check_settings(cfg, model.config, ctx.world_size)
    mesh = parallelize.build_mesh(layout, ctx)
    # bf16 weights for the compute under FSDP's mixed precision; reductions stay fp32.
    param_dtype = autocast_dtype(cfg.dtype, ctx.device) if layout.uses_fsdp else None
    parallelize.parallelize(model, layout, mesh, reshard_after_forward=cfg.reshard_after_forward,
                         param_dtype=param_dtype)
    return parallelize.ShardedRun(model, layout, out_dir), parallelize.data_ranks(ctx, mesh)


def _starting_model(init_from: str, model_config: GPTConfig | None, data):
    """The model a fine-tune starts from, and its config, checked against the data."""
    from gptlab.data.tokenizer import load_tokenizer, same_tokenizer
    from gptlab.loading import load

    if model_config is not None:
        raise UsageError("init_from keeps the starting model's architecture; give no model "
                         "config with it")
    start, tokenizer = load(init_from)
    if not same_tokenizer(load_tokenizer(data.tokenizer_path), tokenizer):
        raise UsageError(f"the data in {data.tokenizer_path.parent} was prepared with another "
                         f"tokenizer than {init_from}'s: prepare it with `gptlab prepare "
                         f"--tokenizer MODEL/tokenizer.json`")
    if data.vocab_size > start.config.vocab_size:
        raise UsageError(f"the data's vocabulary ({data.vocab_size}) is larger than "
                         f"{init_from}'s ({start.config.vocab_size})")
    return start, start.config


def _whole_val(model: nn.Module, data, reporter, step: int) -> float:
    """Mean loss over the whole val split (gptlab.inference.evaluate's sliding windows), logged as a
    "whole_val" record: the figure to quote, where eval_iters batches are an estimate."""
    from gptlab.inference.evaluate import score_ids

    ids = torch.from_numpy(data.val.astype("int64"))
    nll, scored = score_ids(model, ids)
    loss = nll / scored
    reporter.whole_val({"kind": "whole_val", "step": step, "loss": loss, "tokens": scored})
    return loss


def _check_run(model_config: GPTConfig, train_config: TrainConfig, data) -> None:
    """What would otherwise fail only once the run directory is written."""
    from gptlab.data.prepared import check_enough_tokens

    check_enough_tokens(data, model_config.block_size)
    autocast_dtype(train_config.dtype, pick_device(train_config.device))
    if train_config.parallel != "ddp" or train_config.tp not in (None, 1):
        from gptlab.distributed.parallelize import check_settings

        check_settings(train_config, model_config, int(os.environ.get("WORLD_SIZE", "1")))


def _read_run(out_dir: Path, data, overrides: dict[str, Any]):
    """The checkpoint, model config and training settings of a run to resume, checked
    against the data and the overrides."""
    state = rundir.load_checkpoint(out_dir)
    model_config = model_dir.load_config(out_dir)
    bad = sorted(set(overrides) - set(RESUME_OVERRIDES))
    if bad:
        raise UsageError(f"a resumed run keeps its settings; cannot change "
                         f"{', '.join(bad)} (only {', '.join(RESUME_OVERRIDES)})")
    train_config = TrainConfig.from_dict({**rundir.read_train_config(out_dir), **overrides})
    if train_config.max_iters < state["step"]:
        raise UsageError(f"{out_dir} is at step {state['step']} already: max_iters "
                         f"{train_config.max_iters} would end it before that; give at least "
                         f"{state['step']}")
    _check_same_batch(state, train_config, rundir.read_train_config(out_dir))
    rundir.check_same_tokenizer(data.tokenizer_path, out_dir)
    if model_config.vocab_size != data.vocab_size:
        raise UsageError(f"the run's vocab_size {model_config.vocab_size} differs from the "
                         f"data's {data.vocab_size}")
    return state, model_config, train_config


def _check_same_batch(state: dict, new: TrainConfig, saved: dict[str, Any]) -> None:
    """A resumed run keeps its global batch and its kind of checkpoint: the data-parallel
    ranks x batch_size it trained with, sharded or whole."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    was_sharded, sharded = "sharded" in state, new.parallel != "ddp"
    if was_sharded != sharded:
        kinds = "fsdp, tp or fsdp+tp" if was_sharded else "ddp"
        raise UsageError(f"this run's checkpoint was saved by --parallel "
                         f"{saved.get('parallel', 'ddp')}: resume it with --parallel {kinds}")
    if "data_ranks" not in state:
        return
    tp = 1  # (a layout that does not fit is refused by name later, in _check_run)
    if new.parallel in ("tp", "fsdp+tp"):
        tp = new.tp or (world if new.parallel == "tp" else 1)
    dp = max(world // tp, 1)
    old = state["data_ranks"] * saved["batch_size"]
    if dp * new.batch_size != old:
        raise UsageError(f"the run trained with a global batch of {old} sequences "
                         f"({state['data_ranks']} data-parallel ranks x batch_size "
                         f"{saved['batch_size']}): with {dp} give --batch-size "
                         f"{old // dp if old % dp == 0 else 'that divides it'}")


def _describe(c: GPTConfig) -> str:
    return f"{c.n_layer} layers, {c.n_head} heads, n_embd {c.n_embd}, block {c.block_size}"
