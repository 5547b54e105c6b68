"""TrainConfig: the settings of a training run (saved as train.json), and recipes.

Each field carries its help text and its check in its metadata, so `gptlab train --help`,
validation and the saved file all read from one place.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gptlab.errors import Setting, SettingError, UsageError
from gptlab.fields import (
    Check,
    at_least,
    from_dict,
    is_int,
    is_number,
    one_of,
    require,
    within,
    without_retired,
)
from gptlab.training.allocator import ALLOCATORS
from gptlab.training.recipes import RECIPES

DTYPES = ("auto", "float32", "bfloat16", "float16")
# What attention computes in under autocast (gptlab.model.attention.set_float32_attention).
ATTENTION_DTYPES = ("auto", "float32", "autocast")
BATCH_RNGS = ("separate", "nanogpt")
PARALLEL_MODES = ("ddp", "fsdp", "tp", "fsdp+tp")  # gptlab.distributed.parallelize
OPTIMIZERS = ("adamw", "muon")
LR_SCHEDULES = ("cosine", "wsd")
MUON_DTYPES = ("auto", "float32", "bfloat16")
# Settings the speedrun tried and did not adopt (BENCHMARKS.md: ramps, fewer Newton-Schulz
# steps, plain momentum, NorMuon), each with the value that left it off: a train.json saved
# with them off still loads.
RETIRED_SETTINGS = {"ramp": "none", "ramp_iters": 0, "ramp_start": 0.25,
                    "muon_nesterov": True, "muon_ns_steps": 5, "muon_normuon_beta2": 0.0}
# The settings of scaling out, apart from the chapter's training loop in `gptlab train
# --help` (the speedrun's levers are a group of their own: SpeedLevers, TrainConfig.speed).
SCALE_OUT = ("parallel", "tp", "reshard_after_forward")
# Where a run's progress goes besides metrics.jsonl (gptlab.training.reporting).
LOGGERS = ("none", "tensorboard")
# What a resume may change: what cannot change what is trained. Where and how it runs
# (parallel, tp and batch_size: a run may move between sharded modes and numbers of ranks,
# gptlab.distributed.parallelize, keeping its global batch), its length, and how often it
# is evaluated, logged and checkpointed (evaluation batches have generators of their own;
# batch_rng "nanogpt" draws them from the training stream, so there they are kept). A
# setting given with the value the run already has is no change, and always allowed.
RESUME_OVERRIDES = ("max_iters", "device", "compile", "parallel", "tp",
                    "reshard_after_forward", "batch_size", "eval_interval", "eval_iters",
                    "log_interval", "checkpoint_interval", "whole_val", "log",
                    "stop_at_val", "stop_at_val_every", "allocator")
# What a resume may also change once the run diverged (gptlab.training.rundir.divergence):
# its exact continuation is what diverged, and its checkpoint is the last finite one.
AFTER_DIVERGENCE = ("learning_rate", "min_lr", "muon_lr", "embedding_lr", "warmup_iters",
                    "grad_clip")


def setting(default: Any, help: str, check: Check | None = None) -> Any:
    return field(default=default, metadata={"help": help, "check": check})


POSITIVE = at_least(1)
BOOLEAN = Check(lambda v: isinstance(v, bool), "true or false")


def _check_fields(config: Any) -> None:
    """Each field of a settings dataclass against the check in its metadata."""
    for f in dataclasses.fields(config):
        if f.metadata.get("check") is not None:
            f.metadata["check"].apply(f.name, getattr(config, f.name))


@dataclass
class SpeedLevers:
    """The speed levers: what the speedrun's recipes change beyond the chapter's training
    loop (BENCHMARKS.md measures each), TrainConfig.speed. Off, or at the chapter's choice,
    by default. The flags and the train.json of earlier versions name them flat
    (--muon-lr, "muon_lr"); TrainConfig.from_dict moves such keys into the group."""

    # Muon (gptlab.training.muon) for the hidden weight matrices; embeddings, the head, norms
    # and biases stay on AdamW. Its learning rate follows the same schedule, scaled by
    # muon_lr / learning_rate.
    optimizer: str = setting("adamw", "adamw, or muon (Muon for the hidden weight matrices, "
                                      "AdamW for the rest)", one_of(OPTIMIZERS))
    # 0.02 and 0.95: Keller Jordan's and torch.optim.Muon's defaults.
    muon_lr: float = setting(0.02, "Muon's peak learning rate (with --optimizer muon)",
                             within(0, None, low_open=True))
    muon_momentum: float = setting(0.95, "Muon's (Nesterov) momentum",
                                   within(0, 1, high_open=True))
    # 0 as Keller Jordan's Muon; torch.optim.Muon's 0.1 would be lr * 0.1 per step.
    muon_weight_decay: float = setting(0.0, "Muon's decoupled weight decay (times its lr)",
                                       within(0, None))
    muon_dtype: str = setting("auto", "dtype of Muon's Newton-Schulz iteration: auto (bf16 "
                                      "on CUDA; on a CPU bf16 only where a one-time probe "
                                      "finds it faster), float32, bfloat16",
                              one_of(MUON_DTYPES))
    # False: torch.optim.Muon's (a matrix is a parameter). True: modded-nanogpt's, whose
    # q, k and v are matrices of their own.
    muon_split_qkv: bool = setting(False, "Muon orthogonalises attention's fused q/k/v "
                                          "projection as its three matrices (true) or as "
                                          "one (false)", BOOLEAN)
    # modded-nanogpt steps its embedding with Adam at many times the rest's rate: a row
    # of a token's embedding is updated only where the token occurs.
    embedding_lr: float | None = setting(
        None, "AdamW's peak learning rate for the embeddings (tokens, learned positions; a "
              "head tied to the tokens' too), on the same schedule (default learning_rate)",
        Check(lambda v: v is None or (is_number(v) and 0 < v < float("inf")),
              "a positive number"))
    # nanoGPT evaluates at iter 0 too; a speedrun, which looks for the step a loss is
    # reached, has no use for the loss at initialisation and waits for it at start-up.
    eval_at_start: bool = setting(True, "evaluate before the first step (the loss at "
                                        "initialisation)", BOOLEAN)
    # gptlab.training.val_target: how the looks are placed and what decides.
    stop_at_val: float | None = setting(
        None, "end the run, with a checkpoint, once the loss over the whole val split (as "
              "`gptlab eval` scores it) is at most this; looked at near where the target is "
              "expected through growing samples of the split, the whole split deciding "
              "(kept on resume)",
        Check(lambda v: v is None or (is_number(v) and 0 < v < float("inf")),
              "a positive number"))
    stop_at_val_every: int = setting(10, "with stop_at_val: the fewest steps between two "
                                         "looks at the val loss", POSITIVE)
    # Unresolved (a Trainer given "auto" directly) it means "autocast".
    attention_dtype: str = setting(
        "auto", "what attention's softmax(QK^T)V computes in under autocast: auto (on a CPU "
                "the --dtype probe times both; float32 unless autocast's is clearly faster; "
                "elsewhere autocast), float32, autocast (autocast's dtype)",
        one_of(ATTENTION_DTYPES))
    # gptlab.training.allocator: a setting of the process, not of what is trained.
    allocator: str = setting(
        "retain", "on a CPU under glibc: retain (freed memory stays in the process for the "
                  "next step's tensors, no page faults to fetch it again) or system (glibc's "
                  "defaults)", one_of(ALLOCATORS))

    def __post_init__(self) -> None:
        _check_fields(self)


@dataclass
class TrainConfig:
    """Training settings. The defaults are nanoGPT's CPU recipe for char-level Shakespeare
    (its README, "I only have a macbook")."""

    batch_size: int = setting(12, "sequences per micro-batch, per process", POSITIVE)
    gradient_accumulation_steps: int = setting(
        1, "micro-batches per optimizer step, per process", POSITIVE)
    max_iters: int = setting(
        2000, "optimizer steps; with a recipe, the warm-up is cut to fit and the decay "
              "follows, unless --warmup-iters / --lr-decay-iters are given too", POSITIVE)
    learning_rate: float = setting(1e-3, "peak learning rate (after warm-up)",
                                   within(0, None, low_open=True))
    min_lr: float = setting(1e-4, "where the decay ends (<= learning_rate)", within(0, None))
    warmup_iters: int = setting(100, "linear warm-up steps", at_least(0))
    lr_schedule: str = setting("cosine", "after the warm-up: cosine (decay to min_lr at "
                                         "lr_decay_iters) or wsd (warm-up-stable-decay: hold, "
                                         "then a linear cool-down to min_lr)",
                               one_of(LR_SCHEDULES))
    cooldown_frac: float = setting(0.2, "wsd: the share of the steps from warm-up to "
                                        "lr_decay_iters spent cooling down",
                                   within(0, 1))
    lr_decay_iters: int | None = setting(
        None, "step where the decay (cosine or wsd) reaches min_lr (default max_iters; kept on "
              "resume)")
    # 0.1 on 2-D weights only: norms and biases stay undecayed.
    weight_decay: float = setting(0.1, "AdamW weight decay, on 2-D weights only",
                                  within(0, None))
    beta1: float = setting(0.9, "AdamW beta1", within(0, 1, high_open=True))
    # 0.99 rather than 0.999: small batches, few tokens per step.
    beta2: float = setting(0.99, "AdamW beta2", within(0, 1, high_open=True))
    grad_clip: float = setting(1.0, "clip the gradient norm to this (0: off)", within(0, None))
    eval_interval: int = setting(250, "evaluate (and checkpoint) every N steps", POSITIVE)
    eval_iters: int = setting(20, "batches per split per evaluation", POSITIVE)
    log_interval: int = setting(10, "log the training loss every N steps", POSITIVE)
    checkpoint_interval: int | None = setting(
        None, "save state for --resume every N steps (default eval_interval)")
    # torch.manual_seed takes 64 bits; ranks add their index to the seed.
    seed: int = setting(1337, "seed of the weights, batches and dropout",
                        Check(lambda v: is_int(v) and 0 <= v < 2**63, "an integer in [0, 2**63)"))
    # "separate": batches from their own generator, seeded apart from the weights, and a
    # fixed evaluation set. "nanogpt": torch's global generator, continuing the stream that
    # initialised the weights, in nanoGPT's order, so a nanoGPT recipe with the same seed
    # retraces nanoGPT's run number for number (gptlab.data.batches.NanoGPTBatches).
    batch_rng: str = setting("separate", "where batches are drawn from: separate or nanogpt",
                             one_of(BATCH_RNGS))
    dtype: str = setting("auto", "auto (bf16 on CUDA that has it, else fp16 on CUDA; on "
                                 "a CPU bf16 only where a one-time probe finds it faster), "
                                 "float32, bfloat16 (autocast), float16 (CUDA)",
                         one_of(DTYPES))
    compile: bool = setting(False, "torch.compile the model", BOOLEAN)
    device: str = setting("auto", "auto, cpu, cuda (under torchrun: one GPU per process)",
                          Check(lambda v: isinstance(v, str), "a string"))
    # A fine-tune: the weights, architecture and tokenizer of another model; the optimizer
    # and the schedule start fresh.
    init_from: str | None = setting(
        None, "start from the weights of this model (a run, RUN/best, a model or Hugging Face "
              "directory, or a hub name), keeping its architecture and tokenizer; the "
              "optimizer and schedule start fresh",
        Check(lambda v: v is None or (isinstance(v, str) and v != ""), "a path or name"))
    # Reporting only: what is trained is the same either way.
    log: str = setting("none", "also log to: none, or tensorboard (scalars, samples and these "
                               "settings in RUN_DIR/tb/; needs gptlab[tensorboard])",
                       one_of(LOGGERS))
    whole_val: bool = setting(
        True, "score the whole val split at the end (and a fine-tune's start), beside the "
              "eval_iters-batch estimates", BOOLEAN)

    # Scaling out, under torchrun (gptlab.distributed).
    # Under torchrun; a sharded mode also runs in one process (say, to resume a sharded run).
    parallel: str = setting(
        "ddp", "under torchrun: ddp (a whole copy per process), fsdp (FSDP2: weights, grads "
               "and AdamW state sharded), tp (tensor parallel over --tp ranks) or fsdp+tp "
               "(a 2-D mesh: tp within rows, fsdp across)", one_of(PARALLEL_MODES))
    tp: int | None = setting(
        None, "tensor-parallel width for tp (default: all ranks) and fsdp+tp (default 1)",
        Check(lambda v: v is None or (is_int(v) and v >= 1), "a positive integer"))
    reshard_after_forward: bool = setting(
        True, "fsdp: free gathered weights after each block's forward and gather again for "
              "backward (ZeRO-3; false keeps them, ZeRO-2-like: more memory, less traffic)",
        BOOLEAN)

    # The speedrun's levers: the settings that are not the chapter's training loop.
    speed: SpeedLevers = field(
        default_factory=SpeedLevers,
        metadata={"help": "the speed levers (SpeedLevers)",
                  "check": Check(lambda v: isinstance(v, SpeedLevers), "a SpeedLevers")})

    def __post_init__(self) -> None:
        _check_fields(self)
        require("min_lr", is_number(self.min_lr) and self.min_lr <= self.learning_rate,
                "must be in [0, ", Setting("learning_rate"), f" = {self.learning_rate}]")
        if self.warmup_iters > self.max_iters:
            raise SettingError(Setting("warmup_iters"), f" ({self.warmup_iters}) must not exceed ",
                               Setting("max_iters"), f" ({self.max_iters})")
        if self.lr_decay_iters is None:
            self.lr_decay_iters = self.max_iters
        require("lr_decay_iters",
                is_int(self.lr_decay_iters) and self.lr_decay_iters >= self.warmup_iters,
                "must be an integer >= ", Setting("warmup_iters"), f" ({self.warmup_iters})")
        if self.checkpoint_interval is None:
            self.checkpoint_interval = self.eval_interval
        POSITIVE.apply("checkpoint_interval", self.checkpoint_interval)

    def to_dict(self) -> dict[str, Any]:
        """The settings as train.json holds them: the levers in their group,
        {..., "speed": {"optimizer": ..., ...}}."""
        return dataclasses.asdict(self)

    def flat(self) -> dict[str, Any]:
        """Every setting by its own name, the levers beside the rest: as the flags and the
        recipes spell them (from_dict takes this too)."""
        return flat_settings(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """The settings of a dict in train.json's spelling or in the flat one (flat(), the
        recipes, the train.json of earlier versions): levers at its top level join its
        speed group."""
        d = without_retired(d, RETIRED_SETTINGS, "run's training settings")
        if isinstance(d, dict):
            group = d.get("speed", {})
            if isinstance(group, SpeedLevers):
                group = dataclasses.asdict(group)
            loose = {k: d[k] for k in LEVERS if k in d}
            if isinstance(group, dict):
                _refuse_twice(group, loose)
                group = {**group, **loose}
            d = {**{k: v for k, v in d.items() if k not in loose},
                 "speed": from_dict(SpeedLevers, group, "speed levers", "speed lever")}
        return from_dict(cls, d, "training settings", "training setting")


LEVERS = tuple(f.name for f in dataclasses.fields(SpeedLevers))


def flat_settings(d: dict[str, Any]) -> dict[str, Any]:
    """d (training settings in train.json's spelling) with its speed group's levers at its
    top level, the spelling of the flags, the recipes and earlier train.json files; a dict
    without the group is returned as it is. A lever both in the group and beside it with
    another value is refused."""
    group = d.get("speed")
    if not isinstance(group, dict):
        return d
    rest = {k: v for k, v in d.items() if k != "speed"}
    _refuse_twice(group, rest)
    return {**rest, **group}


def _refuse_twice(group: dict[str, Any], beside: dict[str, Any]) -> None:
    """A lever in the speed group and beside it, with two values, is a contradiction."""
    twice = sorted(k for k in group if k in beside and beside[k] != group[k])
    if twice:
        raise UsageError(f"training settings give {', '.join(twice)} twice, in speed and "
                         f"beside it, with different values")


def recipe(name: str, **overrides: Any) -> TrainConfig:
    """A named recipe with some settings changed (see with_settings for the rule)."""
    if name not in RECIPES:
        raise UsageError(f"unknown recipe {name!r}; known recipes: {', '.join(RECIPES)}")
    return with_settings(RECIPES[name], overrides)


def with_settings(base: dict[str, Any], changes: dict[str, Any]) -> TrainConfig:
    """base's settings with `changes` applied (each flat or in train.json's spelling, a
    lever in either changing the other's), and one rule for a new length: when
    max_iters changes and lr_decay_iters / warmup_iters are not given with it, the decay
    follows the new length and the warm-up is cut to fit in it. A fine-tune (init_from)
    scales its warm-up with the length instead: the recipes' warm-up is for a run from
    random weights, and cut to fit a short fine-tune it would be the whole of it."""
    settings = {**flat_settings(base), **flat_settings(changes)}
    if "max_iters" in changes:
        if "lr_decay_iters" not in changes:
            settings["lr_decay_iters"] = None  # None: max_iters
        if "warmup_iters" not in changes:
            warmup = settings.get("warmup_iters", TrainConfig.warmup_iters)
            length = base.get("max_iters", TrainConfig.max_iters)
            new = changes["max_iters"]
            if is_int(warmup) and is_int(new) and is_int(length) and length > 0:
                scaled = round(warmup * new / length) if settings.get("init_from") else warmup
                settings["warmup_iters"] = min(scaled, warmup, max(new, 0))
    return TrainConfig.from_dict(settings)
