"""Warm-up-stable-decay (gptlab.training.schedule.lr_at with schedule="wsd"; cosine is
nanoGPT's, tested in test_run.py) and the batch's ramp (schedule.ramped, the trainer)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gptlab.data.batches import TokenBatches
from gptlab.distributed.process import Dist
from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.callbacks import StopAfter
from gptlab.training.config import TrainConfig
from gptlab.training.run import train
from gptlab.training.schedule import lr_at, ramped
from gptlab.training.trainer import NoCheckpoints, Trainer


def wsd(step: int, cooldown_frac: float = 0.25) -> float:
    # lr 1e-3 -> 1e-4, warm-up 100, decay ends at 900: the cool-down is the last 200 steps.
    return lr_at(step, 1e-3, 1e-4, 100, 900, "wsd", cooldown_frac)


def test_wsd_warms_up_holds_then_cools_down_linearly():
    assert wsd(0) == pytest.approx(1e-3 / 101)  # the warm-up is cosine's (nanoGPT's)
    assert wsd(99) == pytest.approx(1e-3 * 100 / 101)
    assert all(wsd(s) == 1e-3 for s in range(100, 701))  # stable
    assert wsd(800) == pytest.approx(5.5e-4)  # half-way down the line
    assert wsd(900) == pytest.approx(1e-4)
    assert wsd(5000) == 1e-4
    steps = [wsd(s) for s in range(100, 901)]
    assert all(a >= b for a, b in zip(steps[:-1], steps[1:], strict=True))
    slopes = {round(a - b, 12) for a, b in zip(steps[600:-1], steps[601:], strict=True)}
    assert slopes == {round(9e-4 / 200, 12)}  # linear


def test_wsd_edges():
    assert all(wsd(s, 0.0) == 1e-3 for s in (100, 500, 900))  # no cool-down: constant
    # the whole post-warm-up span cooling down: a straight line from lr to min_lr
    assert wsd(500, 1.0) == pytest.approx(5.5e-4)
    assert lr_at(50, 1e-3, 1e-4, 50, 50, "wsd", 0.5) == 1e-3  # nothing left to decay


# The batch's ramp (TrainConfig.ramp, gptlab.training.schedule.ramped; issue 28).

def test_a_ramp_grows_linearly_from_its_start_share_to_the_whole():
    sizes = [ramped(64, step, 0.25, 10) for step in range(12)]
    assert sizes[0] == 16 and sizes[10:] == [64, 64]
    assert sizes == sorted(sizes)  # never shrinks
    # step 5 of 10 keeps 0.25 + 0.75 * 0.5 = 62.5% of 64 = 40 positions
    assert sizes[5] == 40
    assert ramped(3, 0, 0.01, 100) == 1  # never empty
    assert ramped(64, 0, 1.0, 10) == 64  # a start share of 1 is no ramp


@pytest.mark.parametrize("ramp, dim", [("batch", 0), ("sequence", 1)])
def test_a_ramp_trains_on_the_first_rows_or_positions_of_the_batch_drawn(ramp, dim, one_thread):
    """Each step draws its whole batch (so every later batch, and a resume, is the same as
    without the ramp) and trains on its first rows or positions."""
    tokens = np.arange(2000, dtype=np.uint16) % 31
    config = GPTConfig(vocab_size=31, block_size=16, n_layer=1, n_head=2, n_embd=16)
    cfg = TrainConfig(batch_size=8, max_iters=6, warmup_iters=0, ramp=ramp, ramp_iters=4,
                      ramp_start=0.5, device="cpu")
    ctx = Dist(device=torch.device("cpu"))
    seen: list[torch.Tensor] = []
    model = GPT(config)
    forward = model.forward
    model.forward = lambda x, y=None: (seen.append(x), forward(x, y))[1]
    trainer = Trainer(model, TokenBatches(tokens, tokens, 8, 16, 0, ctx), cfg, ctx,
                      NoCheckpoints())
    for _ in range(6):
        trainer.train_step(1e-3)
    drawn = TokenBatches(tokens, tokens, 8, 16, 0, ctx)
    full = [drawn.train_batch()[0] for _ in range(6)]
    kept = [ramped(full[0].size(dim), step, 0.5, 4) for step in range(6)]
    assert kept == ([4, 5, 6, 7, 8, 8] if dim == 0 else [8, 10, 12, 14, 16, 16])
    for step in range(6):
        assert torch.equal(seen[step], full[step].narrow(dim, 0, kept[step]))
    assert trainer.tokens == sum(x.numel() for x in seen)


def test_a_ramp_needs_its_length():
    with pytest.raises(UsageError, match="ramp_iters must be at least 1 with ramp 'batch'"):
        TrainConfig(ramp="batch")
    with pytest.raises(UsageError, match="ramp_start must be in \\(0, 1\\]"):
        TrainConfig(ramp="batch", ramp_iters=5, ramp_start=0.0)


def test_a_run_with_a_ramp_resumes_exactly(data_dir, tmp_path, tiny_model, tiny_train, losses,
                                           one_thread):
    model = tiny_model()
    cfg = tiny_train(ramp="sequence", ramp_iters=8, ramp_start=0.25)
    whole = train(model, cfg, data_dir, tmp_path / "whole", progress=False)
    train(model, cfg, data_dir, tmp_path / "part", progress=False, callbacks=StopAfter(5))
    train(None, None, data_dir, tmp_path / "part", resume=True, progress=False)
    assert whole.step == 12
    assert losses(tmp_path / "part") == losses(tmp_path / "whole")
    plain = train(model, tiny_train(), data_dir, tmp_path / "plain", progress=False)
    assert plain.step == 12 and losses(tmp_path / "plain") != losses(tmp_path / "whole")
