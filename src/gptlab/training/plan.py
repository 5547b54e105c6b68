"""What a `train(...)` call will do, decided before anything is touched: one frozen TrainPlan.

`plan_run` takes the call's arguments and the opened data directory and resolves them: the
mode (a fresh run, a resume, a fine-tune), the final model config and training settings
(overrides applied and checked), the data (its tokens and what the run records of them:
nothing reads the data directory again), the run directory, the model a fine-tune
starts from, the seeds and the layout of the ranks (sharded or not). It checks everything
that can be checked without the run directory's lock: it only reads that directory (a
resumed run's settings and its checkpoint's step and kind), and gptlab.training.run then
carries the plan out, checking under the lock that the directory is still what was planned.

One decision needs the processes to be up: what dtype 'auto' means, which rank 0 measures
and tells the others (`with_precision`, returning a new plan).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch.distributed as dist

from gptlab import model_dir
from gptlab.data.prepared import TokenData, check_enough_tokens
from gptlab.data.tokenizer import load_tokenizer, same_tokenizer
from gptlab.distributed.layout import Layout, plan_layout
from gptlab.distributed.process import Dist, pick_device
from gptlab.errors import Setting, SettingError, UsageError, listed
from gptlab.files import kinds
from gptlab.loading import describe
from gptlab.model.config import GPTConfig
from gptlab.model.positional import check_context
from gptlab.training import precision, rundir
from gptlab.training.config import (
    AFTER_DIVERGENCE,
    RESUME_OVERRIDES,
    TrainConfig,
    flat_settings,
)

FRESH, RESUME, FINE_TUNE = "fresh", "resume", "fine-tune"
# What a resume may change (RESUME_OVERRIDES; AFTER_DIVERGENCE too once it diverged):
# gptlab.training.config, where the CLI's help reads them without importing torch.
_EVAL_SETTINGS = ("eval_interval", "eval_iters")
# What a fine-tune may change of its starting model's config: how far its positions reach,
# which no weight's shape depends on but learned positions' (Position Interpolation is a
# fine-tune at a longer block_size with linear rope scaling, Chen et al. 2023).
FINE_TUNE_MAY_CHANGE = ("block_size", "rope_scaling")


def check_settings(cfg: TrainConfig, config: GPTConfig, world_size: int) -> Layout:
    """The layout a run's settings ask for, or a one-line UsageError naming the setting a
    sharded mode does not support: training policy, so it lives here, above the layer
    (gptlab.distributed.parallelize) that only arranges the ranks."""
    layout = plan_layout(cfg.parallel, cfg.tp, world_size, config)
    if layout.mode == "ddp":
        return layout
    refused = (("compile", cfg.compile, "not tried on sharded modules yet"),
               ("dtype float16", cfg.dtype == "float16", "it needs a GradScaler; use bfloat16"),
               ("batch_rng nanogpt", cfg.batch_rng == "nanogpt",
                "each rank would initialise different weights"),
               ("stop_at_val", cfg.speed.stop_at_val is not None,
                "its looks score a whole model on every rank; use --parallel ddp"),
               ("optimizer muon", cfg.speed.optimizer == "muon",
                "Muon orthogonalises each whole matrix, and a rank holds only a shard; "
                "use --parallel ddp"))
    for what, used, why in refused:  # what: a setting, perhaps with its value
        if used:
            name = what.split()[0]
            raise SettingError(f"--parallel {layout.mode} does not support ", Setting(name),
                               f"{what[len(name):]} ({why})")
    if layout.tp > 1 and config.pos_encoding == "alibi":
        raise UsageError(f"--parallel {layout.mode} with --tp {layout.tp} does not support "
                         f"pos_encoding 'alibi': its bias holds every head's slope, and a "
                         f"rank computes only its share of the heads")
    if layout.tp > 1 and not config.has_mlp:
        raise UsageError(f"--parallel {layout.mode} with --tp {layout.tp} has no plan for an "
                         f"attention-only model (mlp none) yet; use --parallel ddp or fsdp")
    if layout.tp > 1 and config.value_residual:
        raise UsageError(f"--parallel {layout.mode} with --tp {layout.tp} has no plan for the "
                         f"learned scalars of value_residual yet; use --parallel ddp or fsdp")
    if layout.tp > 1 and config.dropout:
        raise UsageError(f"--parallel {layout.mode} with --tp {layout.tp} needs dropout 0: the "
                         f"ranks of a tensor-parallel group would drop different units of "
                         f"the same activations")
    return layout


@dataclass(frozen=True, eq=False)
class DataFacts:
    """Everything a run takes from its data directory (gptlab.data.prepared): where it is,
    its tokens (what the batches and the whole-val score read) and their fingerprint."""

    directory: Path
    vocab_size: int
    fingerprint: str  # its tokens' (gptlab.data.prepared.fingerprint), recorded in the run
    train: np.ndarray  # read-only memmaps of token ids
    val: np.ndarray

    @property
    def tokenizer_path(self) -> Path:
        return self.directory / kinds.TOKENIZER_FILE

    @property
    def train_tokens(self) -> int:
        return len(self.train)

    @property
    def val_tokens(self) -> int:
        return len(self.val)


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a resume continues from, as its state.pt describes it."""

    step: int
    shards: str | None  # the shards directory a sharded run's state.pt names; None: whole
    data_ranks: int | None  # the data-parallel ranks it trained with (older runs: None)


@dataclass(frozen=True)
class TrainPlan:
    """Everything a train() call will do and needs (the data's tokens too);
    gptlab.training.run executes it."""

    mode: str  # FRESH, RESUME or FINE_TUNE
    model_config: GPTConfig
    train_config: TrainConfig
    data: DataFacts  # the opened data directory: nothing reads it again
    run_dir: Path
    overwrite: bool  # a fresh start may replace a run that holds work in run_dir
    owner: str  # the command whose run it is (its mark, gptlab.files.kinds)
    resume_from: ResumePoint | None  # RESUME only
    changes: tuple[str, ...]  # RESUME: the settings it changes, said at the start
    rank: int  # this process, of world_size (torchrun's RANK and WORLD_SIZE)
    world_size: int
    layout: Layout  # how the ranks are arranged; mode "ddp": a whole model on each
    init_seed: int  # torch's seed before the model is built
    # Torch's seed once the weights are in place (dropout), or None where the batches
    # continue the stream that initialised the weights (batch_rng "nanogpt").
    dropout_seed: int | None

    @property
    def sharded(self) -> bool:
        return self.layout.mode != "ddp"

    @property
    def is_main(self) -> bool:
        """The process that takes the run directory's lock and writes its files."""
        return self.rank == 0

    @property
    def starting_model(self) -> str | None:
        """The model a fine-tune starts from (a resumed fine-tune continues its own)."""
        return self.train_config.init_from if self.mode == FINE_TUNE else None


def plan_run(model_config: GPTConfig | None, train_config: TrainConfig | None,
             data: TokenData, run_dir: Path, *, resume: bool = False,
             overrides: dict[str, Any] | None = None, overwrite: bool = False,
             owner: str = "train", rank: int = 0, world_size: int = 1) -> TrainPlan:
    """The plan of gptlab.training.run.train's call with these arguments, or the one-line
    UsageError that call would end with, before anything is written."""
    overrides = overrides or {}
    point, changes = None, ()
    if resume:
        model_config, train_config, point, layout, changes = _resumed(
            model_config, train_config, data, run_dir, overrides, world_size)
        mode = RESUME
    else:
        claim_run(run_dir, overwrite)  # again under the lock, before writing
        model_config, train_config = _started(model_config, train_config, data, overrides,
                                              run_dir)
        layout = check_settings(train_config, model_config, world_size)
        mode = FINE_TUNE if train_config.init_from is not None else FRESH
    _check_run(model_config, train_config, data)
    init_seed, dropout_seed = _seeds(train_config, rank)
    facts = DataFacts(data.directory, data.vocab_size, data.fingerprint(), data.train,
                      data.val)
    if resume:
        rundir.check_same_data(run_dir, facts.directory, facts.fingerprint)
    return TrainPlan(mode=mode, model_config=model_config, train_config=train_config,
                     data=facts, run_dir=run_dir, overwrite=overwrite and not resume,
                     owner=owner, resume_from=point, changes=changes, rank=rank,
                     world_size=world_size, layout=layout, init_seed=init_seed,
                     dropout_seed=dropout_seed)


def claim_run(run_dir: Path, overwrite: bool) -> None:
    """A fresh start may write run_dir (gptlab.files.kinds.claim): absent, empty, or a run
    that holds no work unless overwrite."""
    kinds.claim(run_dir, kinds.RUN, force=overwrite, hint=rundir.fresh_start_hint(run_dir))


def _started(model_config: GPTConfig | None, train_config: TrainConfig | None,
             data: TokenData, overrides: dict[str, Any], run_dir: Path
             ) -> tuple[GPTConfig, TrainConfig]:
    """The configs of a fresh run or a fine-tune, overrides applied."""
    if train_config is None:
        raise UsageError("a fresh run needs a training config")
    train_config = TrainConfig.from_dict({**train_config.flat(), **overrides})
    if train_config.init_from is not None:
        start = Path(train_config.init_from)
        if start.exists() and run_dir.exists() and start.resolve() == run_dir.resolve():
            raise UsageError(f"{run_dir} is the model the fine-tune starts from: give the "
                             f"fine-tune a folder of its own")
        return _starting_config(train_config.init_from, model_config, data), train_config
    if model_config is None:
        raise UsageError("a fresh run needs a model config (or init_from)")
    return GPTConfig.from_dict({**model_config.to_dict(), "vocab_size": data.vocab_size}), \
        train_config


def _resumed(model_config: GPTConfig | None, train_config: TrainConfig | None,
             data: TokenData, run_dir: Path, overrides: dict[str, Any], world_size: int
             ) -> tuple[GPTConfig, TrainConfig, ResumePoint, Layout, tuple[str, ...]]:
    """The configs a run directory holds, overrides applied, where it stopped, the layout
    of the ranks and the settings that change, checked against the data."""
    if model_config is not None or train_config is not None:
        raise UsageError("resume reads the model and training settings from the run "
                         "directory; give no model_config or train_config")
    rundir.check_resumable(run_dir)
    point = resume_point(rundir.load_checkpoint(run_dir, mmap=True))
    model_config = model_dir.load_config(run_dir)
    saved = flat_settings(rundir.read_train_config(run_dir))  # as the overrides name them
    diverged = rundir.divergence(run_dir, point.step)
    train_config, changes = _resumed_settings(saved, overrides, point, run_dir, diverged)
    _check_same_kind(point, train_config, saved)
    train_config, layout, moved = _resumed_layout(train_config, saved, overrides, point,
                                                  model_config, world_size)
    rundir.check_same_tokenizer(data.tokenizer_path, run_dir)
    if model_config.vocab_size != data.vocab_size:
        raise UsageError(f"the run's vocab_size {model_config.vocab_size} differs from the "
                         f"data's {data.vocab_size}")
    return model_config, train_config, point, layout, changes + moved


def _seeds(cfg: TrainConfig, rank: int) -> tuple[int, int | None]:
    """(init_seed, dropout_seed). The same initial weights on every rank (DDP also
    broadcasts rank 0's; FSDP and TP keep each rank's slice of its own), and dropout that
    differs across ranks; nanoGPT instead seeds each rank with seed + rank before building
    the model, and its batches continue that stream."""
    if cfg.batch_rng == "nanogpt":
        return cfg.seed + rank, None
    return cfg.seed, cfg.seed + rank


def resume_point(state: dict[str, Any]) -> ResumePoint:
    """What a checkpoint (rundir.load_checkpoint) says of where a resume starts."""
    return ResumePoint(state["step"], state.get("sharded"), state.get("data_ranks"))


def with_precision(plan: TrainPlan, ctx: Dist) -> tuple[TrainPlan, list[str]]:
    """(plan with dtype, attention_dtype and muon_dtype 'auto' made concrete, the lines
    saying why): gptlab.training.precision decides on the first process for all, so every
    rank trains alike and train.json records what was used. Every rank calls it."""
    cfg = plan.train_config
    if (cfg.dtype != "auto" and cfg.speed.attention_dtype != "auto"
            and not (cfg.speed.optimizer == "muon" and cfg.speed.muon_dtype == "auto")):
        return plan, []
    decided = [None, None]
    if ctx.is_main:
        resolved, reasons = precision.resolve_settings(cfg, plan.model_config, ctx.device)
        decided = [resolved.to_dict(), reasons]
    if ctx.enabled:
        dist.broadcast_object_list(decided, src=0)
    settings, reasons = decided
    return replace(plan, train_config=TrainConfig.from_dict(settings)), reasons


def _starting_config(init_from: str, model_config: GPTConfig | None,
                     data: TokenData) -> GPTConfig:
    """The config of the model a fine-tune starts from, checked against the data; or
    model_config, where it differs from that one in FINE_TUNE_MAY_CHANGE alone."""
    config, tokenizer = describe(init_from)
    if model_config is not None:
        config = _with_new_reach(config, model_config, init_from)
    if not same_tokenizer(load_tokenizer(data.tokenizer_path), tokenizer):
        raise UsageError(f"the data in {data.directory} was prepared with another "
                         f"tokenizer than {init_from}'s: prepare it with `gptlab prepare "
                         f"--tokenizer MODEL/tokenizer.json`")
    if data.vocab_size > config.vocab_size:
        raise UsageError(f"the data's vocabulary ({data.vocab_size}) is larger than "
                         f"{init_from}'s ({config.vocab_size})")
    return config


def _with_new_reach(start: GPTConfig, wanted: GPTConfig, init_from: str) -> GPTConfig:
    """start with wanted's FINE_TUNE_MAY_CHANGE fields, or a UsageError naming the first
    other field that differs (vocab_size aside: a fresh config's comes from the data)."""
    ours, theirs = start.to_dict(), wanted.to_dict()
    for name in ours:
        if name not in FINE_TUNE_MAY_CHANGE + ("vocab_size",) and ours[name] != theirs[name]:
            raise SettingError(
                Setting("init_from"), f" keeps the starting model's architecture: {init_from} "
                "has ", Setting(name), f" {ours[name]!r}, the model config {theirs[name]!r} (a "
                "fine-tune may change only ", *listed(FINE_TUNE_MAY_CHANGE, " and "), ")")
    check_context(start, wanted.block_size)  # learned positions have no rows to add
    return replace(start, block_size=wanted.block_size, rope_scaling=wanted.rope_scaling)


def _check_run(model_config: GPTConfig, train_config: TrainConfig, data: TokenData) -> None:
    """What would otherwise fail only once the run directory is written."""
    check_enough_tokens(data, model_config.block_size)
    precision.autocast_dtype(train_config.dtype, pick_device(train_config.device))


def _resumed_settings(saved: dict[str, Any], overrides: dict[str, Any], point: ResumePoint,
                      run_dir: Path, diverged: dict[str, Any] | None
                      ) -> tuple[TrainConfig, tuple[str, ...]]:
    """The saved settings with the overrides a resume may apply (RESUME_OVERRIDES; after a
    divergence AFTER_DIVERGENCE too), and lines saying what they change."""
    changed = {k: v for k, v in overrides.items() if k not in saved or saved[k] != v}
    allowed = RESUME_OVERRIDES + (AFTER_DIVERGENCE if diverged else ())
    bad = sorted(set(changed) - set(allowed))
    if bad:
        why = ("; the learning rate, warm-up and clipping may change only after the run "
               "diverged" if set(bad) & set(AFTER_DIVERGENCE) else "")
        raise SettingError("a resumed run keeps its settings; cannot change ", *listed(bad),
                           " (only ", *listed(allowed), f"{why})")
    if saved.get("batch_rng") == "nanogpt" and set(changed) & set(_EVAL_SETTINGS):
        names = sorted(set(changed) & set(_EVAL_SETTINGS))
        raise SettingError("cannot change ", *listed(names), " on resume: with ",
                           Setting("batch_rng"), " nanogpt the evaluation batches come from "
                           "the training stream, so the run would no longer retrace itself")
    max_iters = changed.get("max_iters", saved.get("max_iters"))
    if isinstance(max_iters, int) and max_iters < point.step:
        raise SettingError(f"{run_dir} is at step {point.step} already: ", Setting("max_iters"),
                           f" {max_iters} would end it before that; give at least {point.step}")
    warmup = changed.get("warmup_iters", saved.get("warmup_iters"))
    if isinstance(max_iters, int) and isinstance(warmup, int) and max_iters < warmup:
        raise SettingError(f"the run warms up for {warmup} steps: ", Setting("max_iters"),
                           f" {max_iters} would end it inside its warm-up; give at least {warmup}")
    # a run saved before attention_dtype existed computed attention as autocast had it
    settings = TrainConfig.from_dict({"attention_dtype": "autocast", **saved, **changed})
    lines = []
    if changed:
        lines.append("resuming with " + ", ".join(
            f"{k} {saved[k]} -> {v}" if k in saved else f"{k} {v}" for k, v in changed.items()))
    if set(changed) & set(AFTER_DIVERGENCE):
        lines.append(f"the run diverged at step {diverged['step']}; it continues from its "
                     f"checkpoint of step {point.step} with the new settings")
    return settings, tuple(lines)


def _resumed_layout(settings: TrainConfig, saved: dict[str, Any], overrides: dict[str, Any],
                    point: ResumePoint, model_config: GPTConfig, world_size: int
                    ) -> tuple[TrainConfig, Layout, tuple[str, ...]]:
    """The layout of the ranks a resume runs on, and the settings it implies where they were
    not given: the run's tensor-parallel width where it fits these ranks (else the mode's
    default), and the per-rank batch that keeps its global batch. Refusals name only what
    was given."""
    lines, dropped = [], None
    if "tp" not in overrides and settings.tp is not None:
        try:
            plan_layout(settings.parallel, settings.tp, world_size, model_config)
        except UsageError:
            dropped, settings = settings.tp, replace(settings, tp=None)
    layout = check_settings(settings, model_config, world_size)
    if dropped is not None:
        lines.append(f"tensor-parallel width {dropped} -> {layout.tp}: the run's width does "
                     f"not fit {world_size} process{'es' if world_size > 1 else ''}")
    if point.data_ranks is None:
        return settings, layout, tuple(lines)
    old = point.data_ranks * saved["batch_size"]
    if layout.dp * settings.batch_size == old:
        return settings, layout, tuple(lines)
    if "batch_size" in overrides or old % layout.dp:
        per_rank = (("give ", Setting("batch_size"), f" {old // layout.dp}")
                    if old % layout.dp == 0 else
                    (f"{layout.dp} data-parallel ranks cannot share it: resume on a number "
                     f"of them that divides {old}",))
        raise SettingError(f"the run trained with a global batch of {old} sequences "
                           f"({point.data_ranks} data-parallel "
                           f"rank{'s' if point.data_ranks > 1 else ''} x ", Setting("batch_size"),
                           f" {saved['batch_size']}): ", *per_rank)
    settings = replace(settings, batch_size=old // layout.dp)
    lines.append(f"batch_size {saved['batch_size']} -> {settings.batch_size} per process, "
                 f"keeping the run's global batch of {old} over {layout.dp} data-parallel "
                 f"rank{'s' if layout.dp > 1 else ''}")
    return settings, layout, tuple(lines)


def _check_same_kind(point: ResumePoint, new: TrainConfig, saved: dict[str, Any]) -> None:
    """A resumed run keeps its kind of checkpoint: sharded or whole."""
    was_sharded, sharded = point.shards is not None, new.parallel != "ddp"
    if was_sharded != sharded:
        modes = "fsdp, tp or fsdp+tp" if was_sharded else "ddp"
        raise SettingError("this run's checkpoint was saved with ", Setting("parallel"),
                           f" {saved.get('parallel', 'ddp')}: resume it with ",
                           Setting("parallel"), f" {modes}")
