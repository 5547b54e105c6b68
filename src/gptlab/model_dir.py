"""The only place that reads and writes model files.

A model directory holds `config.json` (GPTConfig.to_dict) and `model.safetensors` (the
unwrapped model's weights; a tied lm_head is stored once, as `wte.weight`), optionally a
`tokenizer.json`. Every write is atomic, and nothing is loaded with pickle.

A run directory (what `gptlab train` writes) is a model directory with more files in it,
and the step of its weights in their metadata: gptlab.training.rundir owns that format
(rundir.weights_metadata, rundir.weights_step). Here the metadata is whatever a caller
passes, written, never read back.

Importing this module loads no torch (`gptlab params` reads a config.json through it):
torch, safetensors' torch functions, the model and the tokenizer are imported by the
functions that need them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gptlab.errors import UsageError
from gptlab.files.atomic import atomic_path, atomic_write_text, ensure_dir
from gptlab.files.kinds import CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE, is_hf_dir
from gptlab.model.config import GPTConfig
from gptlab.model.presets import PRESETS

if TYPE_CHECKING:
    import torch

    from gptlab.data.tokenizer import Tokenizer
    from gptlab.model.gpt import GPT

# A model directory that reads and writes text (what the lab opens as a run).
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE)


def weights_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """State dict to save: tied lm_head dropped (it is wte), every tensor contiguous."""
    from gptlab.model.inputs import unwrap  # start-up time: torch, only where weights are

    gpt = unwrap(model)
    state = gpt.state_dict()
    if gpt.config.tie_embeddings:
        state.pop("lm_head.weight", None)
    return {name: t.detach().contiguous() for name, t in state.items()}


def save_weights(model: torch.nn.Module, path: str | Path,
                 metadata: Mapping[str, str] | None = None) -> None:
    """model.safetensors, its header carrying `metadata` beside safetensors' "format" (a
    run's step: gptlab.training.rundir.weights_metadata)."""
    from safetensors.torch import save_file  # start-up time: torch

    with atomic_path(path) as tmp:
        save_file(weights_state(model), str(tmp), metadata={"format": "pt", **(metadata or {})})


def load_weights(model: GPT, path: str | Path) -> None:
    """Load model.safetensors into model, checking every name and shape against it."""
    from safetensors import SafetensorError  # start-up time: torch
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"weights file not found: {path}")
    try:
        state = load_file(str(path), device=str(model.wte.weight.device))
    except (SafetensorError, OSError, ValueError) as exc:
        raise UsageError(f"{path} is not a readable safetensors file ({exc})") from None
    load_state(model, state, str(path))


def load_state(model: GPT, state: dict[str, torch.Tensor], source: str) -> None:
    """Load saved weights (as weights_state gives them) into model, checking every name and
    shape; `source` names where they came from in the error."""
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
        raise UsageError(f"{source} does not match its config: {'; '.join(parts)}")
    for name, tensor in expected.items():
        if state[name].shape != tensor.shape:
            raise UsageError(
                f"{source} does not match its config: {name} has shape "
                f"{tuple(state[name].shape)}, config says {tuple(tensor.shape)}"
            )
    model.load_state_dict(state, strict=not model.config.tie_embeddings)


def save_model(model: torch.nn.Module, out_dir: str | Path,
               metadata: Mapping[str, str] | None = None) -> None:
    """Write config.json and model.safetensors into out_dir (weights first, so a config
    never points at weights that are not there yet); metadata: save_weights'."""
    from gptlab.model.inputs import unwrap  # start-up time: torch

    out_dir = ensure_dir(out_dir)
    gpt = unwrap(model)
    save_weights(gpt, out_dir / WEIGHTS_FILE, metadata=metadata)
    atomic_write_text(out_dir / CONFIG_FILE, json.dumps(gpt.config.to_dict(), indent=2) + "\n")


def load_config(model_dir: str | Path) -> GPTConfig:
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise UsageError(f"model directory not found: {model_dir}")
    if not (model_dir / CONFIG_FILE).is_file():
        raise UsageError(f"{model_dir} has no {CONFIG_FILE}: not a gptlab model directory")
    if is_hf_dir(model_dir):
        raise UsageError(f"{model_dir} is a Hugging Face model directory: convert it first "
                         f"(gptlab convert --from-hf), or load it with gptlab.load")
    return GPTConfig.from_json(model_dir / CONFIG_FILE)


def resolve_config(name_or_path: str) -> GPTConfig:
    """The config a user names on the command line: a preset, a config JSON file, or a
    model or run directory (its config.json)."""
    if not name_or_path.strip():
        raise UsageError("give a preset name, a config JSON file or a model directory")
    if name_or_path in PRESETS:
        return GPTConfig.from_preset(name_or_path)
    path = Path(name_or_path)
    if path.is_dir():
        return load_config(path)
    if name_or_path.endswith(".json") or path.exists():
        return GPTConfig.from_json(path)
    if "/" in name_or_path:
        raise UsageError(f"not found: {name_or_path} (nor is it a preset name)")
    return GPTConfig.from_preset(name_or_path)  # raises, listing the known presets


def load_model(model_dir: str | Path, device: str | torch.device = "cpu") -> GPT:
    """The GPT saved in model_dir, in eval mode, on device."""
    import torch  # start-up time: torch, only where a model is built

    from gptlab.model.gpt import GPT

    config = load_config(model_dir)
    with torch.device(device):
        model = GPT(config)
    load_weights(model, Path(model_dir) / WEIGHTS_FILE)
    return model.eval()


def load_tokenizer_of(model_dir: str | Path) -> Tokenizer:
    """The tokenizer.json saved beside a model."""
    from gptlab.data.tokenizer import load_tokenizer  # start-up time: tokenizers, numpy

    path = Path(model_dir) / TOKENIZER_FILE
    if not path.is_file():
        raise UsageError(f"{model_dir} has no {TOKENIZER_FILE}: cannot turn text into tokens")
    return load_tokenizer(path)
