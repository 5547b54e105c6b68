"""What a run reports (gptlab.training.reporting). On stderr: a progress bar on a terminal;
elsewhere (a CI log, `| tee`, a notebook's captured output) plain lines, never the bar's
carriage-return frames, one per redraw, that made a 3000-step `make demo` log ~3,000
frames long (issue 23). With `log tensorboard`: the event files a run writes, read back
with TensorBoard's own EventAccumulator, hold every number of metrics.jsonl at its step, a
sample at every evaluation and the configs as hyper-parameters; a resumed run leaves no
step twice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from gptlab.errors import UsageError
from gptlab.training import reporting, rundir
from gptlab.training.callbacks import StopAfter
from gptlab.training.reporting import SCALAR_TAGS, markdown_block
from gptlab.training.run import train

pytestmark = pytest.mark.usefixtures("one_thread")


def test_off_a_terminal_progress_is_plain_lines(data_dir, tmp_path, capsys, monkeypatch,
                                                tiny_model, tiny_train):
    monkeypatch.setattr(reporting, "PLAIN_LINE_S", 0.0)  # a line at every logged step
    train(tiny_model(), tiny_train(max_iters=6, eval_interval=3, log_interval=2), data_dir,
          tmp_path / "run", progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b[" not in err
    lines = err.splitlines()
    assert [line.split(":")[0] for line in lines if " of 6 (" in line] == [
        "step 2 of 6 (33%)", "step 4 of 6 (67%)", "step 6 of 6 (100%)"]
    assert all(" tok/s, " in line and " left" in line for line in lines if " of 6 (" in line)
    assert any(line.startswith("step 3: train loss") for line in lines)  # the evaluations


def test_plain_lines_are_spaced_in_time_and_a_terminal_gets_the_bar(data_dir, tmp_path, capsys,
                                                                   monkeypatch, tiny_model,
                                                                   tiny_train):
    train(tiny_model(), tiny_train(max_iters=4), data_dir, tmp_path / "quiet", progress=True)
    err = capsys.readouterr().err  # 30 s between plain lines: a tiny run prints none
    assert "\r" not in err and " of 4 (" not in err and "step 4: train loss" in err
    monkeypatch.setattr(reporting, "is_terminal", lambda stream: True)
    train(tiny_model(), tiny_train(max_iters=4), data_dir, tmp_path / "bar", progress=True)
    assert "\r" in capsys.readouterr().err  # tqdm's frames, where they belong


def read_board(run: Path) -> EventAccumulator:
    board = EventAccumulator(str(run / rundir.TB_DIR), size_guidance={"scalars": 0,
                                                                      "tensors": 0})
    board.Reload()
    return board


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def assert_board_equals_metrics(run: Path) -> EventAccumulator:
    """Every scalar tag holds exactly its records' values, step for step (TensorBoard keeps
    a float32), and nothing else."""
    board, logged = read_board(run), records(run)
    assert sorted(board.Tags()["scalars"]) == sorted(SCALAR_TAGS.values())
    for (kind, key), tag in SCALAR_TAGS.items():
        expected = [(r["step"], np.float32(r[key])) for r in logged if r["kind"] == kind]
        got = [(e.step, np.float32(e.value)) for e in board.Scalars(tag)]
        assert got == expected and expected, tag
    return board


@pytest.fixture(scope="module")
def logged_run(data_dir, tmp_path_factory, one_thread_module, tiny_model, tiny_train):
    run = tmp_path_factory.mktemp("board") / "run"
    train(tiny_model(), tiny_train(log="tensorboard"), data_dir, run, progress=False)
    return run


def test_every_scalar_is_a_value_of_metrics_jsonl_at_its_step(logged_run):
    board = assert_board_equals_metrics(logged_run)
    kinds = {r["kind"] for r in records(logged_run)}
    assert kinds == {"train", "eval", "whole_val"}
    steps = [e.step for e in board.Scalars("optimizer/grad_norm")]
    assert steps == list(range(1, 13))  # log_interval 1: every step's norm
    assert all(e.value > 0 for e in board.Scalars("optimizer/grad_norm"))


def test_a_sample_at_each_evaluation_and_the_configs_as_hyper_parameters(logged_run):
    board = read_board(logged_run)
    samples = board.Tensors("sample/text_summary")
    evals = [r["step"] for r in records(logged_run) if r["kind"] == "eval"]
    assert [s.step for s in samples] == evals == [0, 4, 8, 12]
    vocab = set((logged_run / "tokenizer.json").read_text(encoding="utf-8"))
    for s in samples:
        text = s.tensor_proto.string_val[0].decode()
        assert text.startswith("```\n") and text.endswith("\n```")
        assert len(text) > 8 and set(text[4:-4]) <= vocab | {"\n"}
    content = board.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    config = json.loads((logged_run / "config.json").read_text())
    settings = json.loads((logged_run / "train.json").read_text())
    assert start.hparams["model/n_layer"].number_value == config["n_layer"] == 2
    assert start.hparams["model/pos_encoding"].string_value == config["pos_encoding"]
    assert start.hparams["train/learning_rate"].number_value == settings["learning_rate"]
    assert start.hparams["train/log"].string_value == "tensorboard"


def test_a_resume_from_an_earlier_checkpoint_logs_no_step_twice(
        logged_run, data_dir, tmp_path, tiny_model, tiny_train, losses):
    """A process killed after logging steps 5-7 but before checkpointing them: the resume
    from step 4 trains them again, and the board, like metrics.jsonl, keeps them once."""
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(log="tensorboard"), data_dir, run, progress=False,
          callbacks=StopAfter(4))
    kept = tmp_path / "step4"
    kept.mkdir()
    for name in ("state.pt", "model.safetensors"):
        shutil.copy2(run / name, kept / name)
    result = train(None, None, data_dir, run, resume=True, progress=False, callbacks=StopAfter(7))
    assert result.step == 7 and max(r["step"] for r in records(run)) == 7
    for name in ("state.pt", "model.safetensors"):  # back to step 4, as after a kill
        shutil.copy2(kept / name, run / name)
    result = train(None, None, data_dir, run, resume=True, progress=False)
    assert (result.status, result.step) == ("finished", 12)
    assert len(list((run / rundir.TB_DIR).glob("events.out.tfevents.*"))) >= 3
    board = assert_board_equals_metrics(run)
    assert losses(run) == losses(logged_run)  # and the same numbers as one whole run
    assert [e.step for e in board.Scalars("loss/train_batch")] == list(range(1, 13))
    assert [s.step for s in board.Tensors("sample/text_summary")] == [0, 4, 8, 12]


def test_the_log_can_start_on_resume_and_a_missing_package_is_refused_first(
        data_dir, tmp_path, tiny_model, tiny_train, monkeypatch):
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(), data_dir, run, progress=False, callbacks=StopAfter(4))
    assert not (run / rundir.TB_DIR).exists()
    monkeypatch.setattr(reporting.importlib.util, "find_spec", lambda name: None)
    before = sorted(p.name for p in run.iterdir())
    with pytest.raises(UsageError, match=r"pip install 'gptlab\[tensorboard\]'"):
        train(None, None, data_dir, run, resume=True, progress=False,
              overrides={"log": "tensorboard"})
    assert sorted(p.name for p in run.iterdir()) == before
    monkeypatch.undo()
    train(None, None, data_dir, run, resume=True, progress=False,
          overrides={"log": "tensorboard", "max_iters": 8})
    board = read_board(run)
    assert [e.step for e in board.Scalars("loss/train_batch")] == [5, 6, 7, 8]
    assert "_hparams_/session_start_info" in board.PluginTagToContent("hparams")


def test_markdown_block_keeps_any_text_verbatim():
    assert markdown_block("a\n b") == "```\na\n b\n```"
    assert markdown_block("x ``` y") == "````\nx ``` y\n````"


def test_logging_changes_nothing_that_is_trained(data_dir, tmp_path, tiny_model, tiny_train,
                                                 losses):
    """The samples draw from their own generator: with dropout on (torch's global stream),
    a logged run trains exactly as an unlogged one."""
    for log in ("none", "tensorboard"):
        train(tiny_model(dropout=0.1), tiny_train(log=log), data_dir, tmp_path / log,
              progress=False)
    assert losses(tmp_path / "none") == losses(tmp_path / "tensorboard")


def test_event_files_opened_in_one_second_are_read_in_the_order_written(
        data_dir, tmp_path, tiny_model, tiny_train, monkeypatch):
    """Regression: a fast resumed run opened its event files within one second, named
    ...<second>.<host>.<pid>.9 and ...10: TensorBoard reads them in name order, ".10"
    first, and the resume's purge then dropped the whole-val score (a CI failure that came
    and went with how many writers the session had opened; without the wait in
    sort_after_existing_files this test fails whenever the run takes under a second)."""
    import tensorboard.summary.writer.event_file_writer as event_files

    monkeypatch.setattr(event_files._global_uid, "_value", 8)  # the next files: .8, .9, .10
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(log="tensorboard"), data_dir, run, progress=False,
          callbacks=StopAfter(4))
    train(None, None, data_dir, run, resume=True, progress=False)
    names = sorted(p.name for p in (run / rundir.TB_DIR).glob("events.out.tfevents.*"))
    uids = [int(n.split(".")[-1]) for n in names]
    assert uids == sorted(uids) and len(uids) >= 3  # name order is the order written
    assert_board_equals_metrics(run)


def test_loss_png_is_first_drawn_at_an_evaluation_after_a_trained_step(data_dir, tmp_path,
                                                                      monkeypatch, tiny_model,
                                                                      tiny_train):
    drawn_at: list[int] = []
    monkeypatch.setattr(rundir.RunFiles, "plot",
                        lambda files: drawn_at.append(files.records[-1]["step"]))
    train(tiny_model(), tiny_train(max_iters=6, eval_interval=3, log_interval=1), data_dir,
          tmp_path / "run", progress=False)
    assert drawn_at == [3, 6]  # not at step 0, where nothing has trained
