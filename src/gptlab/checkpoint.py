"""The only place that reads and writes model files.

A model directory holds `config.json` (GPTConfig.to_dict) and `model.safetensors` (the
unwrapped model's weights; a tied lm_head is stored once, as `wte.weight`), optionally a
`tokenizer.json`. Every write is atomic, and nothing is loaded with pickle.

A run directory (what `gptlab train` writes) is a model directory holding the latest
weights, plus:
  train.json     the TrainConfig (gptlab.train)
  state.pt       optimizer, step, RNG states, best val loss: plain tensors and numbers,
                 loaded with torch.load(weights_only=True)
  metrics.jsonl  one JSON object per logged step; loss.png, the curve drawn from it
  best/          a model directory with the weights of the best validation loss so far
The weights carry their step in the safetensors metadata and state.pt repeats it, so a run
killed between the two writes is noticed on --resume instead of mixing two steps.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from gptlab.config import GPTConfig
from gptlab.errors import UsageError
from gptlab.io import atomic_path, atomic_write_text
from gptlab.model import GPT

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
TRAIN_CONFIG_FILE = "train.json"
STATE_FILE = "state.pt"
BEST_DIR = "best"


def unwrap(model: torch.nn.Module) -> GPT:
    """The GPT inside a DistributedDataParallel and/or torch.compile wrapper."""
    while True:
        if hasattr(model, "module"):  # DistributedDataParallel
            model = model.module
        elif hasattr(model, "_orig_mod"):  # torch.compile
            model = model._orig_mod
        else:
            return model


def weights_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """State dict to save: tied lm_head dropped (it is wte), every tensor contiguous."""
    gpt = unwrap(model)
    state = gpt.state_dict()
    if gpt.config.tie_embeddings:
        state.pop("lm_head.weight", None)
    return {name: t.detach().contiguous() for name, t in state.items()}


def save_weights(model: torch.nn.Module, path: str | Path, step: int | None = None) -> None:
    metadata = {"format": "pt"}
    if step is not None:
        metadata["step"] = str(step)
    with atomic_path(path) as tmp:
        save_file(weights_state(model), str(tmp), metadata=metadata)


def weights_step(path: str | Path) -> int | None:
    """The training step recorded in a weights file's metadata (None if it has none)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            step = (f.metadata() or {}).get("step")
    except (SafetensorError, OSError, ValueError) as exc:
        raise UsageError(f"{path} is not a readable safetensors file ({exc})") from None
    return int(step) if step is not None and step.isdigit() else None


def load_weights(model: GPT, path: str | Path) -> None:
    """Load model.safetensors into model, checking every name and shape against it."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"weights file not found: {path}")
    try:
        state = load_file(str(path), device=str(model.wte.weight.device))
    except (SafetensorError, OSError, ValueError) as exc:
        raise UsageError(f"{path} is not a readable safetensors file ({exc})") from None
    expected = weights_state(model)
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
        if unexpected:
            extra = ", ".join(unexpected[:4]) + (" ..." if len(unexpected) > 4 else "")
            parts.append(f"unexpected {extra}")
        raise UsageError(f"{path} does not match its config: {'; '.join(parts)}")
    for name, tensor in expected.items():
        if state[name].shape != tensor.shape:
            raise UsageError(
                f"{path} does not match its config: {name} has shape "
                f"{tuple(state[name].shape)}, config says {tuple(tensor.shape)}"
            )
    model.load_state_dict(state, strict=not model.config.tie_embeddings)


def save_model(model: torch.nn.Module, out_dir: str | Path, step: int | None = None) -> None:
    """Write config.json and model.safetensors into out_dir (weights first, so a config
    never points at weights that are not there yet)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    gpt = unwrap(model)
    save_weights(gpt, out_dir / WEIGHTS_FILE, step=step)
    atomic_write_text(out_dir / CONFIG_FILE, json.dumps(gpt.config.to_dict(), indent=2) + "\n")


def load_config(model_dir: str | Path) -> GPTConfig:
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise UsageError(f"model directory not found: {model_dir}")
    if not (model_dir / CONFIG_FILE).is_file():
        raise UsageError(f"{model_dir} has no {CONFIG_FILE}: not a gptlab model directory")
    return GPTConfig.from_json(model_dir / CONFIG_FILE)


def load_model(model_dir: str | Path, device: str | torch.device = "cpu") -> GPT:
    """The GPT saved in model_dir, in eval mode, on device."""
    config = load_config(model_dir)
    with torch.device(device):
        model = GPT(config)
    load_weights(model, Path(model_dir) / WEIGHTS_FILE)
    return model.eval()


def load_tokenizer_of(model_dir: str | Path):
    """The tokenizer.json saved beside a model."""
    from gptlab.tokenizers import load_tokenizer

    path = Path(model_dir) / TOKENIZER_FILE
    if not path.is_file():
        raise UsageError(f"{model_dir} has no {TOKENIZER_FILE}: cannot turn text into tokens")
    return load_tokenizer(path)


# --- run directories ------------------------------------------------------------------


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")


def read_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"missing {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None


def copy_file(src: str | Path, dst: str | Path) -> None:
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


def save_checkpoint(run_dir: str | Path, model: torch.nn.Module, state: dict[str, Any]) -> None:
    """The latest weights (+ config.json) and the training state, for --resume.

    state: plain data (tensors, numbers, strings, lists, dicts) with an int "step"."""
    run_dir = Path(run_dir)
    save_model(model, run_dir, step=state["step"])
    with atomic_path(run_dir / STATE_FILE) as tmp:
        torch.save(state, tmp)


def save_best(run_dir: str | Path, model: torch.nn.Module, step: int) -> None:
    """RUN_DIR/best/: a plain model directory (config, weights, tokenizer)."""
    best = Path(run_dir) / BEST_DIR
    save_model(model, best, step=step)
    tokenizer = Path(run_dir) / TOKENIZER_FILE
    if tokenizer.is_file():
        copy_file(tokenizer, best / TOKENIZER_FILE)


def load_checkpoint_state(run_dir: str | Path) -> dict[str, Any]:
    """state.pt of a run, checked against the weights beside it."""
    run_dir = Path(run_dir)
    path = run_dir / STATE_FILE
    if not path.is_file():
        raise UsageError(f"nothing to resume: {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file; torch raises many kinds
        raise UsageError(f"{path} is not a readable training state ({type(exc).__name__})") \
            from None
    if not isinstance(state, dict) or not isinstance(state.get("step"), int):
        raise UsageError(f"{path} is not a gptlab training state")
    weights = run_dir / WEIGHTS_FILE
    if not weights.is_file():
        raise UsageError(f"nothing to resume: {weights} does not exist")
    if weights_step(weights) != state["step"]:
        raise UsageError(
            f"{weights} (step {weights_step(weights)}) and {path} (step {state['step']}) "
            f"are from different steps: the run stopped mid-checkpoint; start it again"
        )
    return state
