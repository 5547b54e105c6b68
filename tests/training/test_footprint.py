"""gptlab.training.footprint: a run's least memory, checked against the machine's before the
run folder is written."""

from __future__ import annotations

import pytest

from gptlab.cli.main import main
from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.params import count_parameters
from gptlab.training import footprint
from gptlab.training.config import SpeedLevers, TrainConfig

GIB = 1 << 30


def test_the_estimate_adds_the_optimizer_state_and_the_activations():
    model = GPTConfig.from_preset("shakespeare-char-cpu", vocab_size=65, block_size=100_000)
    train = TrainConfig(batch_size=12)
    need = footprint.estimate(model, train, fp32=True)
    assert need.state == 16 * count_parameters(model)  # weight, gradient, two moments: fp32
    tokens = 12 * 100_000
    assert need.activations == 4 * 34 * 128 * tokens * 2 + 2 * tokens * 65 * 4
    assert footprint.estimate(model, train, fp32=False).activations < need.activations
    assert 39 * GIB < need.total < 40 * GIB  # what `train --block-size 100000` asked for
    muon = footprint.estimate(
        model, TrainConfig(batch_size=12, speed=SpeedLevers(optimizer="muon")), fp32=True)
    assert muon.state == 12 * count_parameters(model)  # one momentum: still a lower bound


def test_refused_above_the_memory_warned_above_half_and_silent_below():
    need = footprint.Footprint(state=GIB, activations=3 * GIB, flops_per_step=10**12)
    with pytest.raises(UsageError, match=r"^this run needs about 4.00 GiB .* more than the "
                                         r"2.00 GiB available on cpu: use a smaller block_size"):
        footprint.check_fits(need, 2 * GIB, "cpu")
    assert footprint.check_fits(need, 6 * GIB, "cpu").startswith("warning: this run needs")
    assert footprint.check_fits(need, 16 * GIB, "cpu") is None
    assert footprint.check_fits(need, None, "mps") is None  # unknown: nothing said


def test_the_machines_memory_is_read():
    assert footprint.available_memory("cpu") > 0
    assert footprint._meminfo_available() is None or footprint._meminfo_available() > 0


def test_train_refuses_a_run_too_large_in_one_line_before_writing_anything(
        data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(footprint, "available_memory", lambda device_type: 1 << 20)
    run = tmp_path / "run"
    code = main(["train", "--preset", "tiny-gpt2", "--data", str(data_dir), "--out", str(run),
                 "--block-size", "1024", "--batch-size", "64", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and not run.exists()
    line = err.strip().splitlines()[-1]
    assert line.startswith("gptlab train: error: this run needs about ")
    assert "use a smaller --block-size or --batch-size" in line
