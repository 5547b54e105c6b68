"""An experiment's folder and grid (gptlab.experiments.grid): the folder is opened only
when empty or already this experiment's; a finished run is reused while its settings and
data are unchanged, trained afresh when they change; a fine-tune follows its start."""

from __future__ import annotations

import json
import shutil

import pytest

from gptlab.cli.main import main
from gptlab.errors import UsageError
from gptlab.experiments.grid import GRID_FILE, Grid, RunSpec, experiment_folder, experiment_of
from gptlab.files import kinds
from gptlab.model_dir import load_config
from gptlab.training.reporting import Reporter
from gptlab.training.trainer import TrainingDiverged

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_folder_is_this_experiments_or_empty(tmp_path):
    folder = experiment_folder(tmp_path / "a", "context")
    assert experiment_of(folder) == "context"
    assert experiment_folder(folder, "context") == folder  # its own: reopened
    with pytest.raises(UsageError, match="holds the experiment 'context', not 'norm'"):
        experiment_folder(folder, "norm")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("")
    with pytest.raises(UsageError, match="holds files gptlab did not write"):
        experiment_folder(tmp_path / "b", "context")
    (tmp_path / "c").write_text("")
    with pytest.raises(UsageError, match="is not a directory"):
        experiment_folder(tmp_path / "c", "context")
    # one rule for every folder (gptlab.files.kinds): it is marked as an experiment, other
    # commands refuse it by that name, and it refuses a folder of another kind
    assert kinds.recognise(folder).kind == kinds.EXPERIMENT
    assert kinds.read_marker(folder)["by"] == "experiment"
    with pytest.raises(UsageError, match="is an experiment"):
        kinds.claim(folder, kinds.RUN)
    kinds.mark(tmp_path / "d", kinds.RUN, "train")
    (tmp_path / "d" / "state.pt").write_bytes(b"")
    with pytest.raises(UsageError, match="is a training run"):
        experiment_folder(tmp_path / "d", "context")


def test_a_folder_from_before_the_mark_is_known_by_its_experiment_json(tmp_path):
    folder = experiment_folder(tmp_path / "a", "context")
    kinds.unmark(folder)
    assert kinds.recognise(folder).kind == kinds.EXPERIMENT
    assert experiment_folder(folder, "context") == folder


def test_a_run_is_reused_until_its_settings_or_data_change(tmp_path, data_dir, make_data,
                                                           tiny_model, tiny_train):
    grid = Grid(experiment_folder(tmp_path / "e", "test"), data_dir)
    spec = RunSpec("a", tiny_model(), tiny_train(max_iters=4, whole_val=False))
    first = grid.train([spec], log=lambda line: None)["a"]
    assert not first.reused and first.steps == 4 and first.run_dir == tmp_path / "e/runs/a"
    again = grid.train([spec], log=lambda line: None)["a"]
    assert again.reused and again.train_s == pytest.approx(first.train_s, abs=0.01)
    moved = shutil.copytree(data_dir, tmp_path / "moved")  # the same data elsewhere
    assert Grid(grid.folder, moved).train([spec], log=lambda line: None)["a"].reused
    other = make_data(tmp_path / "other", n_chars=21_000)
    assert not Grid(grid.folder, other).train([spec], log=lambda line: None)["a"].reused
    longer = RunSpec("a", tiny_model(), tiny_train(max_iters=6, whole_val=False))
    changed = grid.train([longer], log=lambda line: None)["a"]
    assert not changed.reused and changed.steps == 6


def test_a_run_trained_at_another_thread_count_is_trained_again(tmp_path, data_dir,
                                                               tiny_model, tiny_train):
    # another count sums the reductions in another order: the weights, and the verdicts,
    # move (docs/experiments.md), so a run is what it is at its thread count
    import torch

    grid = Grid(experiment_folder(tmp_path / "e", "test"), data_dir)
    spec = RunSpec("a", tiny_model(), tiny_train(max_iters=4, whole_val=False))
    assert not grid.train([spec], log=lambda line: None)["a"].reused
    assert json.loads(grid.state_path.read_text())["runs"]["a"]["threads"] == 1
    torch.set_num_threads(2)  # the one_thread fixture sets 1 again after
    try:
        assert not grid.train([spec], log=lambda line: None)["a"].reused
        assert json.loads(grid.state_path.read_text())["runs"]["a"]["threads"] == 2
        assert grid.train([spec], log=lambda line: None)["a"].reused
    finally:
        torch.set_num_threads(1)


def test_a_fine_tune_starts_from_an_earlier_run_of_the_grid(tmp_path, data_dir, tiny_model,
                                                            tiny_train):
    grid = Grid(experiment_folder(tmp_path / "e", "test"), data_dir)
    settings = tiny_train(max_iters=2, whole_val=False)
    base = tiny_model()
    longer = base.__class__.from_dict({**base.to_dict(), "pos_encoding": "rope"})
    with pytest.raises(UsageError, match="starts from 'b', which is not an earlier run"):
        grid.train([RunSpec("a", longer, settings, start="b"), RunSpec("b", longer, settings)])
    rope = RunSpec("rope", longer, settings)
    reach = longer.__class__.from_dict({**longer.to_dict(), "block_size": 32,
                                        "rope_scaling": {"type": "linear", "factor": 2.0}})
    records = grid.train([rope, RunSpec("pi", reach, settings, start="rope")],
                         log=lambda line: None)
    assert records["pi"].steps == 2
    tuned = load_config(records["pi"].run_dir)
    assert tuned.block_size == 32 and tuned.rope_scaling["type"] == "linear"


def test_a_watcher_sees_every_evaluation_and_is_not_part_of_the_run(tmp_path, data_dir,
                                                                     tiny_model, tiny_train):
    seen = []

    class Watcher(Reporter):
        def evaluation(self, record, model, improved):
            seen.append((record["step"], model.training))

    grid = Grid(experiment_folder(tmp_path / "e", "test"), data_dir)
    settings = tiny_train(max_iters=8, eval_interval=4, whole_val=False)
    watched = RunSpec("a", tiny_model(), settings, watcher=lambda run_dir: Watcher())
    assert not grid.train([watched], log=lambda line: None)["a"].reused
    assert [step for step, _ in seen] == [0, 4, 8]
    assert (grid.run_dir("a") / "metrics.jsonl").is_file()  # the run's own reporter too
    assert grid.train([RunSpec("a", tiny_model(), settings)], log=lambda line: None)["a"].reused


def test_a_diverged_run_is_kept_as_a_result_and_reused(tmp_path, data_dir, tiny_model,
                                                       tiny_train):
    """keep_diverged: a run whose loss became NaN is recorded (step, what) and a later call
    reuses it rather than training it again; without it the divergence is an error."""
    wild = RunSpec("wild", tiny_model(), tiny_train(max_iters=6, learning_rate=1e30,
                                                    grad_clip=0.0, warmup_iters=0,
                                                    whole_val=False))
    with pytest.raises(TrainingDiverged, match="the loss became nan"):
        Grid(experiment_folder(tmp_path / "strict", "test"), data_dir).train(
            [wild], log=lambda line: None)
    grid = Grid(experiment_folder(tmp_path / "e", "test"), data_dir, keep_diverged=True)
    lines = []
    first = grid.train([wild], log=lines.append)["wild"]
    assert first.diverged["what"] == "the loss became nan" and first.steps == first.diverged[
        "step"] < 6 and not first.reused
    again = grid.train([wild], log=lines.append)["wild"]
    assert again.reused and again.diverged == first.diverged
    assert lines[-1] == f"wild: reusing the diverged run in {first.run_dir}"
    assert again.to_dict(grid.folder)["diverged"]["step"] == first.steps


@pytest.mark.parametrize(("name", "runs", "printed"), [("norm", 16, "Post - Pre"),
                                                       ("scale", 4, "unscaled - scaled loss")])
def test_a_second_run_of_an_experiment_retrains_nothing(name, runs, printed, request,
                                                        tmp_path, capsys):
    """`gptlab experiment NAME` again on its folder: every run reused, grid.json unchanged,
    the same numbers (read back from the runs' directories), the table printed."""
    done = request.getfixturevalue(f"{name}_experiment")
    copy = shutil.copytree(done, tmp_path / name)
    before = json.loads((copy / GRID_FILE).read_text())
    old = json.loads((copy / "results.json").read_text())
    code = main(["experiment", name, "--quick", "--out", str(copy),
                 "--data", str(done.parent / "data")])
    out = capsys.readouterr().out
    assert code == 0 and out.count("reusing the finished run") == runs
    assert "steps into" not in out and printed in out
    assert json.loads((copy / GRID_FILE).read_text()) == before
    again = json.loads((copy / "results.json").read_text())
    assert all(r["reused"] for r in again["runs"].values()) and len(again["runs"]) == runs
    assert again["cells"] == old["cells"]


def test_another_configurations_results_are_replaced_only_with_force(tmp_path, tree):
    quick = {"quick": True, "steps": None, "seed": 1337, "data": None}
    folder = experiment_folder(tmp_path / "e", "test", quick)
    (folder / "results.json").write_text('{"cells": []}\n')
    assert experiment_folder(folder, "test", dict(quick)) == folder  # the same: reused
    assert experiment_folder(folder, "test") == folder  # None: whatever it records
    before = tree(folder)
    with pytest.raises(UsageError) as refused:
        experiment_folder(folder, "test", {**quick, "quick": False, "seed": 7})
    message = str(refused.value)
    assert "\n" not in message and message == (
        f"{folder} holds experiment test's results made with --quick and --seed 1337, not "
        f"with --seed 7 and without --quick: --force trains it again with this one there, "
        f"replacing them, or give another --out")
    assert tree(folder) == before
    experiment_folder(folder, "test", {**quick, "steps": 5}, force=True)
    assert json.loads((folder / "experiment.json").read_text())["configuration"]["steps"] == 5
    with pytest.raises(UsageError, match="made with --steps 5, not without --steps:"):
        experiment_folder(folder, "test", quick)


def test_a_flag_an_earlier_version_did_not_record_is_taken_as_the_same(tmp_path):
    before = {"quick": True, "steps": None, "seed": 1337, "data": None}
    folder = experiment_folder(tmp_path / "e", "test", before)
    assert experiment_folder(folder, "test", {**before, "threads": 1}) == folder
    recorded = json.loads((folder / "experiment.json").read_text())["configuration"]
    assert recorded["threads"] == 1
    with pytest.raises(UsageError, match="made with --threads 1, not with --threads 2:"):
        experiment_folder(folder, "test", {**before, "threads": 2})


def test_the_command_refuses_another_size_in_an_experiments_folder(norm_experiment, tmp_path,
                                                                  capsys, tree):
    """The README's `--quick` line over a folder of the full size: refused before any
    training, every file as it was; the same flags reuse every run."""
    copy = shutil.copytree(norm_experiment, tmp_path / "norm")
    data = str(norm_experiment.parent / "data")
    experiment_folder(copy, "norm", {"quick": True, "steps": None, "seed": 1337,
                                     "data": data, "threads": 1})  # as `gptlab experiment`
    before = tree(copy)
    for flags in (["--steps", "3"], ["--seed", "1"], ["--data", str(tmp_path)],
                  ["--threads", "2"], []):
        argv = ["experiment", "norm", "--out", str(copy), "--data", data, "--quick", *flags]
        if flags == []:
            argv.remove("--quick")  # the default size
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--force trains it again" in err, err
        assert tree(copy) == before
    # the same flags: every run reused, as the cache promises
    assert main(["experiment", "norm", "--quick", "--out", str(copy), "--data", data]) == 0
    assert capsys.readouterr().out.count("reusing the finished run") == 16
