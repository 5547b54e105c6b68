"""train()'s callbacks (gptlab.training.callbacks): a stop after N steps is an interruption
at N, resumable; the hooks come in the documented order with the documented arguments; the
default hooks leave the run exactly as it is without them; `owner` marks the run."""

from __future__ import annotations

import pytest
import torch

from gptlab import model_dir
from gptlab.files import kinds
from gptlab.training import rundir
from gptlab.training.callbacks import Callbacks, StopAfter
from gptlab.training.reporting import Reporter
from gptlab.training.run import train

pytestmark = pytest.mark.usefixtures("one_thread")  # see tests/conftest.py


class Recording(Callbacks):
    """The default hooks, each call written down with its arguments, and what the run
    directory held when make_reporter was called."""

    owner = "lab"

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.files_at_start: set[str] = set()

    def make_reporter(self, files: rundir.RunFiles, progress: bool) -> Reporter:
        self.calls.append(("make_reporter", files.run_dir, progress))
        self.files_at_start = {p.name for p in files.run_dir.iterdir()}
        return super().make_reporter(files, progress)

    def should_stop(self, step: int) -> bool:
        self.calls.append(("should_stop", step))
        return super().should_stop(step)


def test_a_stop_after_n_steps_ends_the_run_with_a_checkpoint_at_n_and_resumes(
        data_dir, tmp_path, tiny_model, tiny_train):
    run = tmp_path / "run"
    stopped = train(tiny_model(), tiny_train(), data_dir, run, progress=False,
                    callbacks=StopAfter(5))
    assert (stopped.status, stopped.step, stopped.signal) == ("interrupted", 5, None)
    assert rundir.load_checkpoint(run)["step"] == 5
    assert rundir.weights_step(run / "model.safetensors") == 5
    assert rundir.has_checkpoint(run)
    resumed = train(None, None, data_dir, run, resume=True, progress=False)
    assert (resumed.status, resumed.step, resumed.start_step) == ("finished", 12, 5)


def test_the_hooks_come_in_the_documented_order_with_the_documented_arguments(
        data_dir, tmp_path, tiny_model, tiny_train):
    run, hooks = tmp_path / "run", Recording()
    train(tiny_model(), tiny_train(max_iters=4), data_dir, run, progress=False,
          callbacks=hooks)
    # make_reporter once, after the run's first files, then should_stop before every step
    assert hooks.calls == [("make_reporter", run, False)] + [
        ("should_stop", step) for step in range(4)]
    assert {"config.json", "train.json", "tokenizer.json"} <= hooks.files_at_start
    assert "state.pt" not in hooks.files_at_start  # before the step-0 checkpoint
    assert kinds.recognise(run).by == "lab"  # owner: the run's mark
    # a resume asks from its checkpoint's step on, and a finished run's last step is not asked
    again = Recording()
    train(None, None, data_dir, run, resume=True, overrides={"max_iters": 6},
          progress=True, callbacks=again)
    assert again.calls == [("make_reporter", run, True), ("should_stop", 4),
                           ("should_stop", 5)]


def test_the_default_callbacks_change_nothing(data_dir, tmp_path, tiny_model, tiny_train,
                                              losses):
    settings = tiny_train(max_iters=8)
    plain = train(tiny_model(dropout=0.1), settings, data_dir, tmp_path / "plain",
                  progress=False)
    hooked = train(tiny_model(dropout=0.1), settings, data_dir, tmp_path / "hooked",
                   progress=False, callbacks=Callbacks())
    assert losses(tmp_path / "hooked") == losses(tmp_path / "plain")  # bit for bit
    assert (hooked.status, hooked.step, hooked.val_loss) == (plain.status, plain.step,
                                                             plain.val_loss)
    a, b = (model_dir.load_model(tmp_path / name) for name in ("plain", "hooked"))
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(x, y), name
    assert kinds.recognise(tmp_path / "hooked").by == "train"  # the default owner
