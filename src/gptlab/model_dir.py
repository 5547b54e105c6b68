"""The only place that reads and writes model files.

A model directory holds `config.json` (GPTConfig.to_dict) and `model.safetensors` (the
unwrapped model's weights; a tied lm_head is stored once, as `wte.weight`), optionally a
`tokenizer.json`. Every write is atomic, and nothing is loaded with pickle.

A run directory (what `gptlab train` writes) is a model directory with more files in it,
and the step of its weights in their metadata: gptlab.training.rundir owns that format
(rundir.weights_metadata, rundir.weights_step). Here the metadata is whatever a caller
passes, written, never read back, but for one key of this module's own: CHECKSUM_KEY, the
sha256 of the tensors the file holds (tensors_sha256), written with every weights file and
checked by every load of one that has it. safetensors keeps no checksum of its own, so
without it a flipped bit in the tensor data loads as a model that quietly predicts
nonsense; a file written before the checksum loads as it is.

Importing this module loads no torch (`gptlab params` reads a config.json through it):
torch, safetensors' torch functions, the model and the tokenizer are imported by the
functions that need them.
"""

from __future__ import annotations

import hashlib
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
CHECKSUM_KEY = "tensors_sha256"  # in model.safetensors' metadata: tensors_sha256 of its tensors


def weights_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """State dict to save: tied lm_head dropped (it is wte), every tensor contiguous."""
    from gptlab.model.inputs import unwrap  # start-up time: torch, only where weights are

    gpt = unwrap(model)
    state = gpt.state_dict()
    if gpt.config.tie_embeddings:
        state.pop("lm_head.weight", None)
    return {name: t.detach().contiguous() for name, t in state.items()}


def tensors_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """The sha256 (hex) of a state dict's tensors, in name order: each one's name, dtype and
    shape, then its bytes as they lie in memory (little-endian on every machine torch runs
    on), so the same weights give the same checksum on any device or machine."""
    import torch  # start-up time: only where weights are

    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach()
        digest.update(f"{name} {str(tensor.dtype)} {list(tensor.shape)}\n".encode())
        flat = tensor.reshape(-1).contiguous().cpu().view(torch.uint8)
        digest.update(memoryview(flat.numpy()))
    return digest.hexdigest()


def save_weights(model: torch.nn.Module, path: str | Path,
                 metadata: Mapping[str, str] | None = None) -> None:
    """model.safetensors, its header carrying `metadata` (a run's step:
    gptlab.training.rundir.weights_metadata) beside safetensors' "format" and the tensors'
    checksum (CHECKSUM_KEY), which every load_weights checks."""
    from safetensors.torch import save_file  # start-up time: torch

    state = weights_state(model)
    header = {"format": "pt", **(metadata or {}), CHECKSUM_KEY: tensors_sha256(state)}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata=header)


def load_weights(model: GPT, path: str | Path) -> None:
    """Load model.safetensors into model, checking every name and shape against it, and its
    tensors against the checksum its header records (a file without one, written before
    gptlab recorded it, is taken as it is)."""
    from safetensors import SafetensorError, safe_open  # start-up time: torch

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"weights file not found: {path}")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            recorded = (f.metadata() or {}).get(CHECKSUM_KEY)
            state = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118
    except (SafetensorError, OSError, ValueError) as exc:
        raise UsageError(f"{path} is not a readable safetensors file ({exc})") from None
    if recorded is not None:
        found = tensors_sha256(state)
        if found != recorded:
            raise UsageError(f"{path} is damaged: its tensors' sha256 is {found[:12]}..., "
                             f"the file records {recorded[:12]}... (changed since gptlab "
                             f"wrote it); load another copy, a run's best/, or train it again")
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
