"""Checkpoints are the run directory's, whatever reports the run (gptlab.training.rundir.
Checkpoints); and running out of memory is known by the exception's type."""

from __future__ import annotations

import json

import pytest
import torch

from gptlab import model_dir
from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig
from gptlab.training import rundir
from gptlab.training.callbacks import Callbacks
from gptlab.training.config import TrainConfig
from gptlab.training.reporting import Reporter
from gptlab.training.run import train
from gptlab.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")  # see tests/conftest.py


def tiny() -> GPTConfig:
    return GPTConfig(vocab_size=1, block_size=16, n_layer=1, n_head=2, n_embd=16, bias=False,
                     dropout=0.1)


def settings(**over) -> TrainConfig:
    base = dict(batch_size=4, max_iters=8, warmup_iters=1, eval_interval=4, eval_iters=1,
                log_interval=1, device="cpu", whole_val=False)
    return TrainConfig.from_dict({**base, **over})


class Silent(Callbacks):
    """Reports nothing; stops once `steps` are done, if given."""

    def __init__(self, steps: int | None = None) -> None:
        self.steps = steps

    def make_reporter(self, files: rundir.RunFiles, progress: bool) -> Reporter:
        return Reporter()

    def should_stop(self, step: int) -> bool:
        return self.steps is not None and step >= self.steps


def test_a_run_that_reports_nothing_still_checkpoints_and_resumes(words_data_dir, tmp_path):
    whole = tmp_path / "whole"
    train(tiny(), settings(), words_data_dir, whole, progress=False, callbacks=Silent())
    part = tmp_path / "part"
    stopped = train(tiny(), settings(), words_data_dir, part, progress=False,
                    callbacks=Silent(6))
    assert (stopped.status, stopped.step) == ("interrupted", 6)
    state = rundir.load_checkpoint(part)  # committed without a reporter's help
    assert state["step"] == 6 and "optimizer" in state
    assert rundir.weights_step(part / "model.safetensors") == 6
    assert rundir.weights_step(part / "best" / "model.safetensors") == 4
    assert (part / "metrics.jsonl").read_text() == ""  # and nothing was reported
    resumed = train(None, None, words_data_dir, part, resume=True, progress=False)
    assert resumed.step == 8 and resumed.val_loss is not None
    a, b = model_dir.load_model(whole).state_dict(), model_dir.load_model(part).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)  # exactly the uninterrupted run
    records = [json.loads(line) for line in (part / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "eval"] == [8]  # reported from here


@pytest.mark.parametrize("error", [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
    MemoryError(),
    # torch's CPU allocator raises a plain RuntimeError, known by the allocator's name
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
                 "allocate memory: you tried to allocate 800000000000000 bytes."),
])
def test_out_of_memory_is_one_line_and_leaves_no_run(words_data_dir, tmp_path, monkeypatch, error):
    def step(self, lr):
        raise error

    monkeypatch.setattr(Trainer, "train_step", step)
    with pytest.raises(UsageError, match="^out of memory: use a smaller batch_size"):
        train(tiny(), settings(), words_data_dir, tmp_path / "run", progress=False)
    assert [p.name for p in (tmp_path / "run").iterdir()] == [".lock"]


def test_other_errors_that_mention_memory_pass_through(words_data_dir, tmp_path, monkeypatch):
    error = RuntimeError("cannot pin memory: no accelerator")

    def step(self, lr):
        raise error

    monkeypatch.setattr(Trainer, "train_step", step)
    with pytest.raises(RuntimeError) as raised:
        train(tiny(), settings(), words_data_dir, tmp_path / "run", progress=False)
    assert raised.value is error
