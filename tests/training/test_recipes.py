"""nanoGPT's CPU recipe, reproduced (gptlab.training.recipes): char-level tiny Shakespeare,
2000 steps.

The bar: val <= 1.89, nanoGPT's README run (val 1.8857, train 1.7648) rounded up. The recipe
draws batches as nanoGPT does (TrainConfig.batch_rng "nanogpt": one global stream
continuing the weight init, first batch before the first evaluation), and our arithmetic
equals nanoGPT's step for step, so seed 1337 retraces nanoGPT's run: the test requires both
figures to four decimals, which no near miss can pass.

For scale: that 1.8857 is one 20-batch estimate (12 x 64 tokens each, standard error
~0.014). nanoGPT's own seeds 1 and 2 give 1.8735 and 1.8962, and its seed-1337 weights
score 1.898 on the whole val split, so the whole split is held to 1.91, nanoGPT's worst
seed there (1.908) rounded up.
About 1.5-3 minutes on 2 CPU cores: the one long test of the trainer.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

from gptlab import model_dir
from gptlab.cli.main import main
from gptlab.model.config import GPTConfig
from gptlab.training.config import recipe
from gptlab.training.run import train

BAR = 1.89  # for the 20-batch estimate: nanoGPT's 1.8857, rounded up
WHOLE_SPLIT_BAR = 1.91
NANOGPT = {"train": 1.7648, "val": 1.8857}  # its README run, seed 1337


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


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_shakespeare_char_cpu_recipe_matches_nanogpt(tmp_path, capsys, tiny_shakespeare,
                                                     one_thread):
    data = tmp_path / "data"
    assert main(["prepare", "--input", str(tiny_shakespeare), "--out", str(data)]) == 0
    meta = json.loads((data / "meta.json").read_text())
    assert (meta["vocab_size"], meta["train_tokens"], meta["val_tokens"]) == (
        65, 1_003_854, 111_540)  # nanoGPT's shakespeare_char split

    start = time.perf_counter()  # on one thread: robust on a busy 2-core machine
    result = train(GPTConfig.from_preset("shakespeare-char-cpu"),
                   recipe("shakespeare-char-cpu"), data, tmp_path / "run", progress=False)
    wall = time.perf_counter() - start
    model = model_dir.load_model(tmp_path / "run")
    val = np.fromfile(data / "val.bin", dtype=np.uint16)
    whole_val = whole_split_loss(model, val, model.config.block_size)
    with capsys.disabled():
        print(f"\nshakespeare-char-cpu: {result.step} steps in {wall:.0f} s, train "
              f"{result.train_loss:.4f}, val {result.val_loss:.4f} (whole split {whole_val:.4f})")
    assert result.step == 2000 and result.status == "finished"
    assert result.val_loss <= BAR and whole_val <= WHOLE_SPLIT_BAR
    assert round(result.val_loss, 4) == NANOGPT["val"]
    assert round(result.train_loss, 4) == NANOGPT["train"]
    assert result.train_loss < result.val_loss  # the usual gap on this data
