"""The runs under a folder (gptlab.training.runs): each run's row read from its files,
its status (finished, interrupted, running with the lock holder's PID), the order, and the
listing the lab's pickers share; no torch needed."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from gptlab.errors import UsageError
from gptlab.lab.runs import Runs
from gptlab.model.config import GPTConfig
from gptlab.model.params import count_parameters
from gptlab.training.callbacks import StopAfter
from gptlab.training.run import train
from gptlab.training.rundir import lock_holder
from gptlab.training.runs import list_runs, model_dirs, read_run, sort_runs


@pytest.fixture(scope="module")
def folder(tmp_path_factory, trained_run, data_dir, tiny_model, tiny_train,
           one_thread_module):
    """done (finished, 8 steps), stopped (interrupted at 4 of 12), nested/deep/live (a
    copy of stopped), a model directory that is not a run, a symlink out."""
    root = tmp_path_factory.mktemp("runs")
    shutil.copytree(trained_run, root / "done")
    train(tiny_model(), tiny_train(), data_dir, root / "stopped", progress=False,
          callbacks=StopAfter(4))
    shutil.copytree(root / "stopped", root / "nested" / "deep" / "live")
    (root / "converted").mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy2(trained_run / name, root / "converted" / name)
    outside = tmp_path_factory.mktemp("outside")
    shutil.copytree(trained_run, outside / "elsewhere")
    (root / "link").symlink_to(outside, target_is_directory=True)
    return root


@pytest.fixture
def holder(folder, lock_held):
    """nested/deep/live's lock held by another process, as a trainer holds it."""
    with lock_held(folder / "nested" / "deep" / "live") as proc:
        yield proc


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_each_row_is_what_the_runs_files_say(folder, holder):
    runs = {r.name: r for r in list_runs(folder)}
    assert list(runs) == ["done", "nested/deep/live", "stopped"]  # not converted, not link
    done, stopped, live = runs["done"], runs["stopped"], runs["nested/deep/live"]
    assert (done.status, done.step, done.max_iters, done.pid) == ("finished", 8, 8, None)
    assert (stopped.status, stopped.step, stopped.max_iters) == ("interrupted", 4, 12)
    assert (live.status, live.pid, live.step) == ("running", holder.pid, 4)
    for row in runs.values():
        records = metrics(Path(row.path))
        config = json.loads((Path(row.path) / "config.json").read_text())
        assert row.parameters == count_parameters(GPTConfig.from_dict(config))
        assert (row.n_layer, row.n_head, row.n_embd, row.block_size) == (2, 2, 32, 16)
        assert row.shape == "2L 2H d32 ctx16"
        assert row.best_val == min(r["val_loss"] for r in records if r["kind"] == "eval")
        assert row.tokens_per_s == round(statistics.median(
            r["tokens_per_s"] for r in records if r["kind"] == "train"), 1)
        assert row.changed == max(p.stat().st_mtime for p in Path(row.path).iterdir()
                                  if p.name in ("metrics.jsonl", "state.pt",
                                                "model.safetensors", "config.json",
                                                "train.json"))
    assert done.whole_val == [r["loss"] for r in metrics(folder / "done")
                              if r["kind"] == "whole_val"][-1]
    assert stopped.whole_val is None  # scored only at the end


def test_a_lock_file_without_a_living_holder_is_not_a_running_run(folder, tmp_path):
    run = shutil.copytree(folder / "stopped", tmp_path / "run")
    assert lock_holder(run) is None  # its trainer left .lock behind, with its PID
    (run / ".lock").write_text(f"{os.getpid()}\n")  # alive, but holding no lock on it
    assert lock_holder(run) is None
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (run / ".lock").write_text(done.stdout)  # a process that has ended
    assert read_run(run).status == "interrupted"
    (run / ".lock").write_text("not a pid")
    assert lock_holder(run) is None


def test_order_by_any_column_with_missing_values_last(folder):
    runs = list_runs(folder)
    by_whole = sort_runs(runs, "whole-val")
    assert [r.name for r in by_whole][0] == "done" and by_whole[-1].whole_val is None
    assert [r.name for r in sort_runs(runs, "steps", reverse=True)] == [
        "done", "nested/deep/live", "stopped"]
    assert [r.name for r in list_runs(folder, "name", reverse=True)] == [
        "stopped", "nested/deep/live", "done"]
    with pytest.raises(UsageError, match="sort must be one of"):
        sort_runs(runs, "colour")


def test_the_labs_pickers_list_the_same_model_directories(folder):
    expected = ["converted", "done", "nested/deep/live", "stopped"]
    assert [p.relative_to(folder).as_posix() for p in model_dirs(folder)] == expected
    assert Runs(folder).list() == ["shakespeare", *expected]  # the shipped model first
    assert model_dirs(folder / "nowhere") == []


def test_broken_files_leave_blanks_not_errors(folder, tmp_path):
    run = shutil.copytree(folder / "stopped", tmp_path / "run")
    (run / "config.json").write_text("{not json")
    (run / "metrics.jsonl").write_text('{"kind": "eval", "step": 0, "val_loss": 2.5}\n{"cut')
    (run / "model.safetensors").write_bytes(b"\x00" * 4)
    row = read_run(run)
    assert (row.parameters, row.n_layer, row.step, row.best_val) == (None, None, None, 2.5)
    assert row.status == "interrupted" and row.shape == "?"


def test_listing_needs_no_torch(folder):
    code = ("import sys; from gptlab.training.runs import list_runs; "
            f"rows = list_runs({str(folder)!r}); "
            "print(len(rows), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                             [str(Path(__file__).parents[2] / "src"),
                              os.environ.get("PYTHONPATH", "")])})
    assert out.stdout.split() == ["3", "False"]
