"""`gptlab train`: a thin call into gptlab.training.run.train."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

from gptlab.cli import argtypes
from gptlab.errors import GptlabError, UsageError
from gptlab.files.atomic import read_json_object
from gptlab.model.config import MLPS, GPTConfig
from gptlab.model.params import counted
from gptlab.model.presets import PRESETS
from gptlab.training.config import (
    AFTER_DIVERGENCE,
    RESUME_OVERRIDES,
    SCALE_OUT,
    SpeedLevers,
    TrainConfig,
    with_settings,
)
from gptlab.training.recipes import RECIPES
from gptlab.training.rundir import (
    BEST_DIR,
    CONFIG_FILE,
    METRICS_FILE,
    PLOT_FILE,
    STATE_FILE,
    TOKENIZER_FILE,
    TRAIN_CONFIG_FILE,
    WEIGHTS_FILE,
    read_train_config,
)

# Model fields a flag may override (the rest belong in a --config file).
MODEL_FLAGS = {"n_layer": int, "n_head": int, "n_kv_head": int, "n_embd": int,
               "block_size": int, "ffn_hidden": int, "dropout": float}


# Placeholders that say what a value is where the setting's last word does not.
METAVARS = {"learning_rate": "LR", "min_lr": "LR", "muon_lr": "LR", "embedding_lr": "LR",
            "dropout": "P",
            "stop_at_val": "LOSS", "stop_at_val_every": "N"}


def _argtype(kind: type):
    """The argparse type of a setting: a float must be a finite number (1e400 is not)."""
    return argtypes.finite_float if kind is float else kind


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _fields(cls: type) -> list[tuple[str, type, str]]:
    """(name, type, help) of every setting of a config dataclass: the help lives in its
    metadata."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        base = next((t for t in (bool, int, float, str) if t == kind or t in
                     typing.get_args(kind)), str)
        out.append((f.name, base, f.metadata["help"]))
    return out


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="train a model on a data directory",
        description=(
            "Train a GPT from a preset or a config file on a data directory made by "
            "`gptlab prepare`, writing a run directory "
            f"({CONFIG_FILE}, {TRAIN_CONFIG_FILE}, {WEIGHTS_FILE}, {STATE_FILE}, "
            f"{TOKENIZER_FILE}, {METRICS_FILE}, {PLOT_FILE}, {BEST_DIR}/). "
            "Training settings come from --recipe (by default the recipe named like the "
            "preset, if there is one; else TrainConfig's defaults, nanoGPT's CPU recipe), "
            "then from the flags. --init-from fine-tunes another model instead of training "
            "from random weights. Runs under torchrun too (DistributedDataParallel, or FSDP2 / "
            "tensor parallel with --parallel)."
        ),
        examples=[
            "gptlab train --preset shakespeare-char-cpu --data data/tiny --out runs/sc",
            "gptlab train --data data/tiny --out runs/sc --resume --max-iters 4000",
            "gptlab train --init-from runs/demo --data data/play --out runs/play "
            "--max-iters 300 --learning-rate 2e-4 --min-lr 2e-5",
        ],
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", metavar="NAME", help=f"one of: {', '.join(PRESETS)}")
    src.add_argument("--config", metavar="JSON", help="a model config file (GPTConfig fields)")
    p.add_argument("--recipe", metavar="NAME",
                   help=f"named training settings: {', '.join(RECIPES)}")
    p.add_argument("--train-config", metavar="JSON",
                   help=f"training settings file ({TRAIN_CONFIG_FILE})")
    p.add_argument("--data", required=True, metavar="DATA_DIR",
                   help="a data directory from `gptlab prepare`")
    p.add_argument("--out", required=True, metavar="RUN_DIR",
                   help="the run directory to write (with --resume: the run to continue)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in RUN_DIR from its last checkpoint; only what "
                        "cannot change what is trained may change ("
                        + ", ".join(map(_flag, RESUME_OVERRIDES)) + "; a new --batch-size "
                        "keeps the run's global batch), and after a divergence "
                        + ", ".join(map(_flag, AFTER_DIVERGENCE)))
    p.add_argument("--force", action="store_true",
                   help="replace the run already in RUN_DIR (never another kind of folder)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    model = p.add_argument_group("model overrides")
    for name, kind in MODEL_FLAGS.items():
        model.add_argument(_flag(name), type=_argtype(kind), dest=f"model_{name}",
                           metavar=METAVARS.get(name, "N"))
    model.add_argument("--bias", action=argparse.BooleanOptionalAction, dest="model_bias",
                       help="biases in linear layers and norms")
    model.add_argument("--mlp", choices=MLPS, dest="model_mlp",
                       help="the feed-forward network: gelu (exact, erf), gelu_tanh (GPT-2's "
                            "approximation: what llama.cpp's gpt2 computes, so --to-gguf "
                            "exports it), swiglu, or none (attention only)")
    # The chapter's training loop first; what scales it out and what speeds it up apart.
    # The levers' flags are flat (--muon-lr), as their names are unique: TrainConfig.from_dict
    # moves them into TrainConfig.speed.
    chapter = p.add_argument_group(f"training settings (see {TRAIN_CONFIG_FILE})")
    scale_out = p.add_argument_group("scaling out (under torchrun)")
    speed = p.add_argument_group(
        "speed levers (the speedrun's recipes set them; BENCHMARKS.md measures each)")
    settings = [(scale_out if f[0] in SCALE_OUT else chapter, f)
                for f in _fields(TrainConfig) if f[0] != "speed"]
    settings += [(speed, f) for f in _fields(SpeedLevers)]
    for group, (name, kind, help) in settings:
        if kind is bool:
            group.add_argument(_flag(name), action=argparse.BooleanOptionalAction,
                               dest=f"train_{name}", help=help)
        else:
            group.add_argument(_flag(name), type=_argtype(kind), dest=f"train_{name}",
                               metavar=METAVARS.get(name, name.split("_")[-1].upper()),
                               help=help)
    p.set_defaults(func=run, on_interrupt=interrupted_note)


def interrupted_note(args: argparse.Namespace, exc: KeyboardInterrupt) -> str | None:
    """What a stop during the whole-val scoring after the last step leaves (the finished
    run) and the command that scores it (gptlab.cli.main.run_command says it)."""
    # Not imported here: a stop during the imports would import torch again, and stop again.
    run = sys.modules.get("gptlab.training.run")
    if run is None or not isinstance(exc, run.ScoringInterrupted):
        return None
    return (f"the run finished at step {exc.step:,}: its checkpoint and weights are kept in "
            f"{exc.run_dir}/; only its loss over the whole val split was cut short (gptlab "
            f"runs shows it as -). Score it with:\n  gptlab eval {exc.run_dir} --data "
            f"{args.data}")


def run(args: argparse.Namespace) -> int:
    # start-up time: torch loads here, so that `--help` and usage errors never wait for it
    from gptlab.training.trainer import TrainingDiverged

    try:
        return _run(args)
    except TrainingDiverged as exc:
        if not exc.resumable:
            raise
        raise GptlabError(f"{exc.stopped}: resume from it with a lower learning rate: "
                          f"{_resume_command(args, exc)}") from None


def _resume_command(args: argparse.Namespace, exc) -> str:
    """A command that continues a diverged run from its last checkpoint at a lower rate."""
    lower = min(exc.learning_rate / 10, 1e-3)
    command = (f"gptlab train --data {args.data} --out {args.out} --resume "
               f"--learning-rate {lower:g}")
    min_lr = args.train_min_lr
    if min_lr is None:
        min_lr = read_train_config(Path(args.out)).get("min_lr")
    if isinstance(min_lr, (int, float)) and min_lr > lower:
        command += f" --min-lr {lower / 10:g}"
    return command


def _run(args: argparse.Namespace) -> int:
    # start-up time, as above
    from gptlab.training.run import train

    model_over = {k[6:]: v for k, v in vars(args).items()
                  if k.startswith("model_") and v is not None}
    train_over = {k[6:]: v for k, v in vars(args).items()
                  if k.startswith("train_") and k != "train_config" and v is not None}
    if args.resume:
        given = [f for f, v in (("--preset", args.preset), ("--config", args.config),
                                ("--recipe", args.recipe), ("--train-config", args.train_config),
                                ("--force", args.force or None))
                 if v is not None]
        if given or model_over:
            raise UsageError(f"--resume reads the model and training settings from "
                             f"{args.out}; drop {', '.join(given + list(map(_flag, model_over)))}")
        result = train(None, None, args.data, args.out, resume=True, overrides=train_over,
                       progress=not args.no_progress)
    else:
        if "init_from" in train_over:
            given = [f for f, v in (("--preset", args.preset), ("--config", args.config))
                     if v is not None] + list(map(_flag, model_over))
            if given:
                raise UsageError(f"--init-from keeps the starting model's architecture; drop "
                                 f"{', '.join(given)}")
            model_config = None
        elif args.preset is None and args.config is None:
            raise UsageError("give --preset NAME, --config JSON or --init-from MODEL "
                             "(or --resume)")
        elif args.preset is not None:
            model_config = GPTConfig.from_preset(args.preset, **model_over)
        else:
            with _naming_the_file(args.config):
                from_file = GPTConfig.from_json(args.config).to_dict()
            model_config = GPTConfig.from_dict({**from_file, **model_over})
        train_config = _train_config(args, train_over)
        result = train(model_config, train_config, args.data, args.out,
                       overwrite=args.force, progress=not args.no_progress)
    if not result.is_main:
        return 0
    if result.status == "interrupted":
        print(f"stopped at step {result.step} of {result.max_iters}; checkpoint saved. "
              f"Continue with:\n  gptlab train --data {args.data} --out {args.out} --resume")
    else:
        if result.stop_at_val is not None:
            print(target_line(result))
        val = (f", val loss {result.val_loss:.4f} (estimate, best {result.best_val_loss:.4f})"
               if result.val_loss is not None and result.target_step is None else "")
        whole = (f", whole val split {result.whole_val_loss:.4f}"
                 if result.whole_val_loss is not None else "")
        print(f"done: {timing(result)}{val}{whole}; run in {result.run_dir}/")
        print(f"sample from it: gptlab sample {result.run_dir}")
    return 0


@contextlib.contextmanager
def _naming_the_file(path: str) -> Iterator[None]:
    """A bad setting in the file at `path` said as the file's: its key, not a flag (a plain
    UsageError, whose names the CLI says as they are)."""
    try:
        yield
    except UsageError as exc:
        message = str(exc)
        raise UsageError(message if str(path) in message else f"{path}: {message}") from None


def timing(result) -> str:
    """The steps this process trained and their time, the rest of its time apart:
    "300 steps in 41.2 s (+6.1 s start-up, evaluations, checkpoints, scoring)", and after a
    resume "300 steps (201-500; resumed at step 200) in ...". result: a TrainResult."""
    steps = result.steps_now
    span = (f" ({result.start_step + 1}-{result.step}; resumed at step {result.start_step})"
            if result.start_step and steps else "")
    return (f"{counted(steps, 'step')}{span} in {result.train_s:.1f} s "
            f"(+{result.other_s:.1f} s start-up, evaluations, checkpoints, scoring)")


def target_line(result) -> str:
    """Whether a finished run met its stop_at_val (result: a TrainResult)."""
    target = f"target {result.stop_at_val:g}"
    if result.target_step is not None:
        return f"val {result.whole_val_loss:.4f} <= {target} at step {result.target_step}"
    whole = (f"whole val split {result.whole_val_loss:.4f} at step {result.step}"
             if result.whole_val_loss is not None else f"step {result.step}")
    return f"val {target} not met within the step budget: {whole} of {result.max_iters}"


def _train_config(args: argparse.Namespace, flags: dict) -> TrainConfig:
    if args.train_config is not None:
        # The file's settings change TrainConfig's defaults by the rule flags follow (a
        # max_iters without a warm-up cuts the warm-up to fit), then the flags change them.
        with _naming_the_file(args.train_config):
            given = read_json_object(args.train_config, "training settings file")
            from_file = with_settings({}, given).to_dict()
        return with_settings(from_file, flags)
    name = args.recipe or (args.preset if args.preset in RECIPES else None)
    if name is None:
        return with_settings({}, flags)  # TrainConfig's defaults, by the same rule
    if name not in RECIPES:
        raise UsageError(f"unknown recipe {name!r}; known recipes: {', '.join(RECIPES)}")
    return with_settings(RECIPES[name], flags)
