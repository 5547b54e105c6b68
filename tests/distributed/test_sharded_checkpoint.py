"""Sharded checkpoints (gptlab.distributed.sharded_checkpoint), in one process: a stop and
a crash in the middle of a save both resume exactly (across layouts too), and a diverging
sharded run stops at its last checkpoint."""

from __future__ import annotations

import pytest
import torch.distributed.checkpoint as dcp

from gptlab.errors import GptlabError
from gptlab.model.gpt import GPT
from gptlab.training import rundir
from gptlab.training.callbacks import StopAfter
from gptlab.training.run import train

TOLERANCE = 1e-5


def test_a_stop_and_a_crash_mid_save_resume_exactly(data_dir, tmp_path, monkeypatch, one_thread,
                                                   no_loss_curves, small, tiny_sharded,
                                                   max_difference):
    config = small()
    train(config, tiny_sharded(), data_dir, tmp_path / "whole", progress=False)
    real_save, calls = dcp.save, {"n": 0}

    def dies_after_writing(state, checkpoint_id):
        calls["n"] += 1
        real_save(state, checkpoint_id=checkpoint_id)
        if calls["n"] == 3:  # step 0, step 2, then the save of step 4 dies before its rename
            raise KeyboardInterrupt

    # a stop (what Ctrl-C and SIGTERM do) in tensor-parallel mode, resumed under FSDP
    stopped = train(config, tiny_sharded(parallel="tp"), data_dir, tmp_path / "stopped",
                    progress=False, callbacks=StopAfter(2))
    assert (stopped.status, stopped.step) == ("interrupted", 2)
    train(None, None, data_dir, tmp_path / "stopped", resume=True,
          overrides={"parallel": "fsdp"}, progress=False)
    assert max_difference(tmp_path / "whole", tmp_path / "stopped") < TOLERANCE

    monkeypatch.setattr(dcp, "save", dies_after_writing)
    with pytest.raises(KeyboardInterrupt):
        train(config, tiny_sharded(), data_dir, tmp_path / "run", progress=False)
    monkeypatch.setattr(dcp, "save", real_save)
    state = rundir.load_checkpoint(tmp_path / "run")
    assert state["step"] == 2 and (tmp_path / "run" / state["sharded"] / ".metadata").is_file()
    assert list((tmp_path / "run").glob("*.partial"))  # what the crash left
    train(None, None, data_dir, tmp_path / "run", resume=True, progress=False)
    assert max_difference(tmp_path / "whole", tmp_path / "run") == 0.0
    assert not list((tmp_path / "run").glob("*.partial"))  # cleared by the next save


def test_nan_loss_stops_a_sharded_run_at_its_last_checkpoint(data_dir, tmp_path, monkeypatch,
                                                             one_thread, no_loss_curves, small,
                                                             tiny_sharded):
    forward, calls = GPT.forward, {"n": 0}

    def poisoned(self, idx, targets=None, **kw):
        logits, loss = forward(self, idx, targets, **kw)
        if targets is not None and self.training:
            calls["n"] += 1
            if calls["n"] == 3:
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(GPT, "forward", poisoned)
    with pytest.raises(GptlabError, match="loss became nan at step 3"):
        train(small(), tiny_sharded(parallel="tp"), data_dir, tmp_path / "run",
              progress=False)
    assert rundir.load_checkpoint(tmp_path / "run")["step"] == 2
