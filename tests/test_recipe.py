"""nanoGPT's CPU recipe, reproduced: char-level tiny Shakespeare, 2000 steps.

The bar. nanoGPT's README run scores val 1.8857 (train 1.7648) on this data (REFERENCE.md),
but that figure is one 20-batch estimate (12 x 64 tokens each; standard error ~0.014).
Measured here with nanoGPT's own model and loop (its seed 1337 reproduces 1.8857 exactly):
seeds 1337 / 1 / 2 give 20-batch estimates 1.8857 / 1.8735 / 1.8962, and the same weights
score 1.898 / 1.891 / 1.908 on the whole val split. Our trainer is step-for-step identical
to nanoGPT's given the same initial weights and batches (checked: equal to the last bit
over 150 steps); its seeds 1337 / 1 / 2 give estimates 1.905 / 1.908 / 1.926 and whole-split
losses 1.901 / 1.905 / 1.906, inside nanoGPT's own spread. So the bar is nanoGPT's worst
seed on the whole split, 1.908, rounded up to 1.91, for the run's estimate and the whole
split.
About 1.5-3 minutes on 2 CPU cores: the one long test of the trainer.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from gptlab import checkpoint
from gptlab.cli import main
from gptlab.config import GPTConfig
from gptlab.train import recipe, train

TINY_SHAKESPEARE = Path(__file__).resolve().parents[2] / "shared/data/tinyshakespeare/input.txt"
BAR = 1.91


@torch.no_grad()
def whole_split_loss(model, tokens: np.ndarray, block_size: int) -> float:
    """Mean loss over every token of a split, in non-overlapping windows."""
    ids = torch.from_numpy(np.asarray(tokens).astype(np.int64))
    n = (len(ids) - 1) // block_size
    x = ids[: n * block_size].view(n, block_size)
    y = ids[1 : n * block_size + 1].view(n, block_size)
    total = sum(model(x[i:i + 512], y[i:i + 512])[1].item() * len(x[i:i + 512])
                for i in range(0, n, 512))
    return total / n


@pytest.mark.timeout(900)
def test_shakespeare_char_cpu_recipe_matches_nanogpt(tmp_path, capsys):
    assert TINY_SHAKESPEARE.is_file(), f"the recipe needs {TINY_SHAKESPEARE}"
    data = tmp_path / "data"
    assert main(["prepare", "--input", str(TINY_SHAKESPEARE), "--out", str(data)]) == 0
    meta = json.loads((data / "meta.json").read_text())
    assert (meta["vocab_size"], meta["train_tokens"], meta["val_tokens"]) == (
        65, 1_003_854, 111_540)  # nanoGPT's shakespeare_char split

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # robust on a busy 2-core machine (two threads spin-wait)
    start = time.perf_counter()
    try:
        result = train(GPTConfig.from_preset("shakespeare-char-cpu"),
                       recipe("shakespeare-char-cpu"), data, tmp_path / "run", progress=False)
        wall = time.perf_counter() - start
        model = checkpoint.load_model(tmp_path / "run")
        val = np.fromfile(data / "val.bin", dtype=np.uint16)
        whole_val = whole_split_loss(model, val, model.config.block_size)
    finally:
        torch.set_num_threads(before)
    with capsys.disabled():
        print(f"\nshakespeare-char-cpu: {result.step} steps in {wall:.0f} s, train "
              f"{result.train_loss:.4f}, val {result.val_loss:.4f} (whole split {whole_val:.4f})")
    assert result.step == 2000 and result.status == "finished"
    assert result.val_loss <= BAR and whole_val <= BAR
    assert result.train_loss < result.val_loss  # the usual gap on this data
