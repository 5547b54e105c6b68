"""A trained dictionary on disk, in SAELens' layout so that `SAE.load_from_disk(folder)`
reads it (architectures standard, topk and transcoder; gptlab's topk_transcoder SAELens
has no class for):

  cfg.json                 the dictionary (gptlab.interp.sae.config.SAEConfig.to_cfg)
  sae_weights.safetensors  W_enc, b_enc, W_dec, b_dec, float32, raw activations in
  training.json            gptlab's: the training settings, tokens seen, the loss log
  trainer_state.pt         while training: the checkpoint a resumed run starts from

Loaded with safetensors and torch.load(weights_only=True): nothing here is unpickled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from gptlab.errors import UsageError
from gptlab.files.atomic import atomic_path, read_json_object, write_json
from gptlab.interp.sae.autoencoder import SparseAutoencoder
from gptlab.interp.sae.config import SAEConfig

CFG_FILE = "cfg.json"  # SAELens' SAE_CFG_FILENAME
WEIGHTS_FILE = "sae_weights.safetensors"  # SAELens' SAE_WEIGHTS_FILENAME
TRAINING_FILE = "training.json"
STATE_FILE = "trainer_state.pt"  # SAELens' TRAINER_STATE_FILENAME
FILES = (CFG_FILE, WEIGHTS_FILE, TRAINING_FILE, STATE_FILE)
TENSORS = ("W_enc", "b_enc", "W_dec", "b_dec")


def check_folder(folder: str | Path) -> Path:
    """The folder a dictionary is written to: absent, empty, or one holding nothing but a
    dictionary's files (a UsageError names what else is there)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is a file, not a folder for a dictionary")
    if folder.is_dir():
        others = sorted(p.name for p in folder.iterdir()
                        if p.name not in FILES and not p.name.startswith("."))
        if others:
            raise UsageError(f"{folder} holds files that are not a dictionary's "
                             f"({', '.join(others[:3])}): choose another folder")
    return folder


def save(folder: str | Path, sae: SparseAutoencoder, training: dict[str, Any]) -> Path:
    """Write the three files (each atomically; cfg.json last, so a folder with one holds
    weights that match it)."""
    folder = check_folder(folder)
    state = {name: getattr(sae, name).detach().float().contiguous() for name in TENSORS}
    with atomic_path(folder / WEIGHTS_FILE) as tmp:
        save_file(state, str(tmp), metadata={"format": "pt"})
    write_json(folder / TRAINING_FILE, training)
    write_json(folder / CFG_FILE, sae.config.to_cfg())
    return folder


def is_saved(folder: str | Path) -> bool:
    folder = Path(folder)
    return (folder / CFG_FILE).is_file() and (folder / WEIGHTS_FILE).is_file()


def load(folder: str | Path) -> tuple[SparseAutoencoder, dict[str, Any]]:
    """(the dictionary, training.json's contents or {}) from a folder `save` wrote."""
    folder = Path(folder)
    if not is_saved(folder):
        raise UsageError(f"{folder} holds no trained dictionary ({CFG_FILE} and "
                         f"{WEIGHTS_FILE})")
    config = SAEConfig.from_cfg(read_json_object(folder / CFG_FILE, "a dictionary's cfg.json"))
    tensors = load_file(str(folder / WEIGHTS_FILE))
    sae = SparseAutoencoder(config)
    expected = {name: tuple(getattr(sae, name).shape) for name in TENSORS}
    found = {name: tuple(t.shape) for name, t in tensors.items()}
    if found != expected:
        raise UsageError(f"{folder / WEIGHTS_FILE} does not match its {CFG_FILE}: tensors "
                         f"{found}, expected {expected}")
    with torch.no_grad():
        for name in TENSORS:
            getattr(sae, name).copy_(tensors[name])
    training = (read_json_object(folder / TRAINING_FILE, "a dictionary's training.json")
                if (folder / TRAINING_FILE).is_file() else {})
    return sae.eval().requires_grad_(False), training


def save_state(folder: Path, state: dict[str, Any]) -> None:
    with atomic_path(folder / STATE_FILE) as tmp:
        torch.save(state, tmp)


def load_state(folder: Path) -> dict[str, Any] | None:
    path = folder / STATE_FILE
    if not path.is_file():
        return None
    return torch.load(path, map_location="cpu", weights_only=True)
