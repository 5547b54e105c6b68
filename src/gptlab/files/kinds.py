"""What a folder holds, told from its files alone (nothing is imported or loaded), and the
names of a model directory's files: torch-free, for the CLI's checks before any work."""

from __future__ import annotations

import json
from pathlib import Path

CONFIG_FILE = "config.json"  # a gptlab model directory's and a Hugging Face export's
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "meta.json"  # a data directory's (gptlab.data.prepared), written last
TRAIN_CONFIG_FILE = "train.json"  # a run directory's (gptlab.training.rundir)
STATE_FILE = "state.pt"  # a run's checkpoint commit point
METRICS_FILE = "metrics.jsonl"  # a run's log, one JSON object per logged step
LOCK_FILE = ".lock"  # a run's: held (flock) by its one trainer, holding its PID


def is_hf_dir(path: str | Path) -> bool:
    """Whether path holds a Hugging Face config.json (one with a model_type, and none of
    gptlab's own config fields)."""
    try:
        raw = json.loads((Path(path) / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(raw, dict) and "model_type" in raw and "pos_encoding" not in raw
