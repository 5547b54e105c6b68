"""The crash harness (bench/faults.py) at a small size, one scenario per test: gptlab killed
with SIGKILL (some kills inside a checkpoint write), run again, and nothing found mixed,
refused or lost; the resumed finals bit-exact. Several processes each: the slow tier."""

from __future__ import annotations

import random

import pytest

from bench import faults

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("scenario,trials,kills", [
    ("train", 1, 2), ("prepare", 1, 2), ("convert", 1, 1), ("experiment", 1, 1),
    ("lab", 1, 2),
])
def test_killed_and_run_again(scenario, trials, kills, tmp_path):
    h = faults.Harness(tmp_path, random.Random(0), print)
    tally = faults.SCENARIO_FUNCTIONS[scenario](h, trials, kills)
    assert not tally.problems, tally.problems
    assert tally.kills >= 1  # the kills happened: the process was running
    assert tally.restarts_ok == tally.restarts >= 1
    assert tally.finals == trials * (2 if scenario == "convert" else 1)  # convert: hf, gguf
    assert tally.finals_exact == tally.finals


def test_a_kill_aimed_inside_a_write_lands_there(tmp_path):
    """The slow write (GPTLAB_FAULT_SLOW_WRITE) makes a kill inside a checkpoint write
    certain: its temp file is left behind, and state.pt is still the previous one."""
    from gptlab.training import rundir

    h = faults.Harness(tmp_path, random.Random(0), print)
    data = tmp_path / "data"
    assert h.run(["prepare", "--input", faults.TEXT, "--out", data])[0] == 0
    run = tmp_path / "run"
    tally = faults.Tally()
    killed, _, out = h.run_and_kill(["train", "--data", data, "--out", run, *faults.TRAIN_ARGS],
                                    (0, 0), [run], tally, aim_at_write=True)
    assert killed and tally.kills_inside_write == 1, out
    assert list(run.glob(".*.tmp"))  # the killed write's temp file
    if (run / "state.pt").is_file():
        assert rundir.load_checkpoint(run)["step"] % 3 == 0
