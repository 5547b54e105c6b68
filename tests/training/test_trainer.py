"""The trainer's waits for the device: none on a step that neither logs, evaluates nor
checkpoints; a divergence is still caught before a checkpoint or best/ could keep it."""

from __future__ import annotations

import json
import socket
import sys
import threading

import numpy as np
import pytest
import torch
import torch.distributed as dist

from gptlab import model_dir
from gptlab.data.batches import TokenBatches
from gptlab.distributed.process import Dist
from gptlab.errors import GptlabError
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training import rundir
from gptlab.training.callbacks import StopAfter
from gptlab.training.config import TrainConfig
from gptlab.training.reporting import Reporter
from gptlab.training.run import train
from gptlab.training.trainer import CHECK_EVERY, NoCheckpoints, Trainer

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py

# What makes the host wait for the device: reading a tensor's value.
READS = ("item", "tolist", "__bool__", "__float__", "__int__")


class SyncCounter(Reporter):
    """Counts the trainer's reads of a tensor's value and its all-reduces, and keeps the
    count at each step the trainer reports: syncs[step] is what that step cost."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count, self.syncs, self.logged = 0, {}, []
        self._before = 0
        for name in READS:
            monkeypatch.setattr(torch.Tensor, name, self._counted(getattr(torch.Tensor, name)))
        monkeypatch.setattr(dist, "all_reduce", self._counted(dist.all_reduce, anywhere=True))
        loop = Trainer._loop

        def counted_from_the_first_step(trainer, *args):
            self._before = self.count  # not the step-0 checkpoint and evaluation before it
            return loop(trainer, *args)
        monkeypatch.setattr(Trainer, "_loop", counted_from_the_first_step)

    def _counted(self, method, anywhere: bool = False):
        def counted(*args, **kwargs):
            # gptlab's reads only: torch's optimizers read their step counts, which live on
            # the host even when the weights are on a GPU
            if anywhere or sys._getframe(1).f_globals.get("__name__", "").startswith("gptlab"):
                self.count += 1
            return method(*args, **kwargs)
        return counted

    def step(self, record):
        self.syncs[len(self.syncs) + 1] = self.count - self._before
        self._before = self.count
        if record is not None:
            self.logged.append(record["step"])


class StopAt(SyncCounter):
    """A SyncCounter that sets `stop` (as a signal would) once step `at` is reported."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, stop: threading.Event, at: int):
        super().__init__(monkeypatch)
        self.stop, self.at = stop, at

    def step(self, record):
        super().step(record)
        if len(self.syncs) == self.at:
            self.stop.set()


def trainer_for(cfg: TrainConfig, ctx: Dist, reporter, stop=None) -> Trainer:
    tokens = np.arange(4000, dtype=np.uint16) % 31
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=31, block_size=16, n_layer=1, n_head=2, n_embd=16))
    return Trainer(model, TokenBatches(tokens, tokens, 4, 16, 0, ctx), cfg, ctx,
                   NoCheckpoints(), reporter, stop)


def settings(**kw) -> TrainConfig:
    base = dict(batch_size=4, max_iters=20, warmup_iters=2, eval_iters=1, log_interval=5,
                eval_interval=100, checkpoint_interval=100, grad_clip=1.0, device="cpu",
                whole_val=False)
    return TrainConfig.from_dict({**base, **kw})


def test_a_step_that_does_not_log_never_waits_for_the_device(monkeypatch):
    ctx = Dist(device=torch.device("cpu"))
    counter = SyncCounter(monkeypatch)
    trainer = trainer_for(settings(), ctx, counter)
    assert trainer.fit() == "finished"
    assert counter.logged == [5, 10, 15, 20]
    assert {s for s, n in counter.syncs.items() if n} == {5, 10, 15, 20}
    assert all(counter.syncs[s] > 0 for s in counter.logged)  # what fails if it counts nothing


@pytest.fixture
def one_process_group():
    """A gloo group of this process alone: the trainer's collectives run, summing itself."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                            world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_under_torchrun_ranks_agree_on_a_stop_every_check_every_steps(monkeypatch,
                                                                      one_process_group):
    """A rank stops only at a step where every rank looked (an all-reduce): CHECK_EVERY
    steps at most after the request, and no collective at the steps between."""
    ctx = Dist(rank=0, world_size=2, device=torch.device("cpu"))  # the trainer's multi-rank path
    stop = threading.Event()
    counter = StopAt(monkeypatch, stop, 3)
    trainer = trainer_for(settings(max_iters=40, log_interval=100), ctx, counter, stop)
    assert trainer.fit() == "interrupted"
    assert trainer.step == CHECK_EVERY  # asked at step 3, seen by every rank at 10
    assert {s for s, n in counter.syncs.items() if n} == {CHECK_EVERY}


def poison_training_step(monkeypatch, bad_step: int) -> None:
    """The loss of training step `bad_step` becomes NaN (and so do the weights after it)."""
    forward, calls = GPT.forward, {"n": 0}

    def poisoned(self, idx, targets=None, **kw):
        logits, loss = forward(self, idx, targets, **kw)
        if targets is not None and self.training:
            calls["n"] += 1
            if calls["n"] == bad_step:
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(GPT, "forward", poisoned)


def test_a_nan_between_logging_steps_is_caught_before_the_next_checkpoint(
        data_dir, tmp_path, monkeypatch, tiny_model, tiny_train):
    """Step 6's loss is NaN; nothing reads it until step 8's checkpoint, which is not
    written: the one of step 4 stays, and the error names step 6, the first bad one."""
    run = tmp_path / "run"
    poison_training_step(monkeypatch, 6)
    cfg = tiny_train(log_interval=100, eval_interval=100, checkpoint_interval=4)
    with pytest.raises(GptlabError, match=r"the loss became nan at step 6: training stopped; "
                                          r"its last checkpoint, step 4 in .*run, has finite"):
        train(tiny_model(), cfg, data_dir, run, progress=False)
    assert rundir.load_checkpoint(run)["step"] == 4
    assert all(torch.isfinite(p).all() for p in model_dir.load_model(run).parameters())
    assert rundir.divergence(run, 4)["step"] == 6
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records] == ["eval", "diverged"]  # step 0's; no step logged


def test_a_nan_between_evaluations_is_never_kept_as_best(data_dir, tmp_path, monkeypatch,
                                                         tiny_model, tiny_train):
    """Step 5's loss is NaN; step 8's evaluation would score NaN weights: the check before
    it stops the run, best/ stays step 4's and no evaluation of step 8 is recorded."""
    run = tmp_path / "run"
    poison_training_step(monkeypatch, 5)
    cfg = tiny_train(log_interval=100, eval_interval=4, checkpoint_interval=100)
    with pytest.raises(GptlabError, match=r"the loss became nan at step 5: training stopped"):
        train(tiny_model(), cfg, data_dir, run, progress=False)
    assert rundir.weights_step(run / "best" / "model.safetensors") == 4
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "eval"] == [0, 4]
    assert records[-1] == {**records[-1], "kind": "diverged", "step": 5}


def test_a_nan_before_a_stop_is_caught_by_the_stop_s_checkpoint(data_dir, tmp_path,
                                                                 monkeypatch, tiny_model,
                                                                 tiny_train):
    run = tmp_path / "run"
    poison_training_step(monkeypatch, 3)
    cfg = tiny_train(log_interval=100, eval_interval=100, checkpoint_interval=100)
    with pytest.raises(GptlabError, match=r"the loss became nan at step 3: training stopped; "
                                          r"its last checkpoint, step 0 in"):
        train(tiny_model(), cfg, data_dir, run, progress=False, callbacks=StopAfter(5))
    assert rundir.load_checkpoint(run)["step"] == 0
