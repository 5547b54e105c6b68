"""What a run reports on stderr (gptlab.training.reporting): a progress bar on a terminal;
elsewhere (a CI log, `| tee`, a notebook's captured output) plain lines, never the bar's
carriage-return frames, one per redraw, that made a 3000-step `make demo` log ~3,000
frames long (issue 23)."""

from __future__ import annotations

import pytest

from gptlab.training import reporting
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
