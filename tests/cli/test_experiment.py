"""`gptlab experiment` stopped by a signal: exit 130 / 143 within seconds, never 2 ("bad
input"); its runs keep their checkpoints; a flag an experiment cannot use refused in one line
before anything is written; the models train at one torch thread whatever the load, or at
--threads, recorded. (The experiments themselves: tests/experiments.)"""

from __future__ import annotations

import dataclasses
import json
import os
import signal

import pytest
import torch

from gptlab.cli.main import main
from gptlab.errors import UsageError
from gptlab.experiments.brackets import run_brackets


@pytest.mark.slow
def test_an_experiment_sent_sigterm_while_training_exits_143_within_seconds(tmp_path,
                                                                           signalled):
    out = tmp_path / "norm"

    def training():
        return any('"kind": "train"' in m.read_text() for m in out.glob("runs/*/metrics.jsonl"))

    code = ("import sys; from gptlab.cli.main import main; "
            f"sys.exit(main(['experiment', 'norm', '--quick', '--out', {str(out)!r}]))")
    exit_code, _, err, seconds = signalled(code, training, signal.SIGTERM)
    assert (exit_code, err.splitlines()[-2]) == (143, "interrupted (SIGTERM)"), err
    assert err.splitlines()[-1].endswith("run the same command again to resume the experiment")
    assert seconds < 15  # a bound for a loaded machine, not a speed claim
    assert "Traceback" not in err
    assert any(out.glob("runs/*/state.pt"))  # the stopped run resumes next time


def test_an_interrupted_experiment_says_the_same_command_resumes_it(tmp_path, capsys,
                                                                    monkeypatch):
    from gptlab import stopping
    from gptlab.experiments import catalog, norm

    def stopped(*args, **kwargs):
        raise stopping.Interrupted()

    monkeypatch.setattr(catalog, "experiment",
                        lambda name: dataclasses.replace(norm.EXPERIMENT, run=stopped))
    out = tmp_path / "norm"
    assert main(["experiment", "norm", "--quick", "--out", str(out)]) == 130
    assert capsys.readouterr().err.splitlines() == [
        "interrupted",
        f"the runs it finished are kept in {out}/runs, an interrupted one at its last "
        f"checkpoint: run the same command again to resume the experiment"]


def test_brackets_refuses_data_it_would_ignore(tmp_path, capsys):
    out = tmp_path / "brackets"
    code = main(["experiment", "brackets", "--quick", "--data", str(tmp_path / "text"),
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--data is not for `gptlab experiment brackets`" in err and "Dyck-2" in err
    assert not out.exists()
    with pytest.raises(UsageError, match="^data: the brackets experiment trains on Dyck-2"):
        run_brackets(out, data=tmp_path / "text", quick=True)
    assert not out.exists()


def test_memory_reads_data_so_does_not_refuse_it(tmp_path, capsys):
    """memory reads --data's text (as phase trains on it beside its generated task): a
    --data that is not there is refused as missing data, not as a flag it cannot use."""
    code = main(["experiment", "memory", "--quick", "--data", str(tmp_path / "absent"),
                 "--out", str(tmp_path / "memory")])
    err = capsys.readouterr().err
    assert code == 2 and "--data is not for" not in err and "absent" in err, err


@pytest.fixture
def trained_at(monkeypatch):
    """The torch threads `gptlab experiment brackets` ran its experiment at: its run() is
    replaced by one that notes the count and stops (a usage error, exit 2)."""
    from gptlab.experiments import brackets, catalog

    seen = []

    def noted(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise UsageError("stopped here")

    monkeypatch.setattr(catalog, "experiment",
                        lambda name: dataclasses.replace(brackets.EXPERIMENT, run=noted))
    return seen


def test_an_experiment_trains_at_one_thread_even_on_an_idle_machine(tmp_path, monkeypatch,
                                                                    trained_at, capsys):
    # regression: an idle machine (load under 1) gave it every thread, a busy one one thread,
    # and the same seed's brackets verdicts moved between them ("held" against "held
    # weakly", docs/experiments.md)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert main(["experiment", "brackets", "--quick", "--out", str(tmp_path / "b")]) == 2
        assert torch.get_num_threads() == 2  # the process gets its count back
    finally:
        torch.set_num_threads(threads)
    assert trained_at == [1]
    assert "stopped here" in capsys.readouterr().err


def test_threads_are_chosen_recorded_and_part_of_what_a_folder_holds(tmp_path, trained_at,
                                                                     capsys):
    out = str(tmp_path / "b")
    assert main(["experiment", "brackets", "--quick", "--out", out, "--threads", "2"]) == 2
    assert trained_at == [2]
    recorded = json.loads((tmp_path / "b" / "experiment.json").read_text())["configuration"]
    assert recorded["threads"] == 2
    capsys.readouterr()
    # the default count over a folder trained at another: refused before anything runs
    assert main(["experiment", "brackets", "--quick", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "made with --threads 2, not with --threads 1" in err and trained_at == [2]
    assert main(["experiment", "brackets", "--threads", "0", "--out", out]) == 2
    assert "--threads" in capsys.readouterr().err


def test_the_help_says_what_a_quick_run_trains_and_what_threads_do(capsys):
    assert main(["experiment", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--quick trains tiny models a few steps, seed S alone for context, norm, " \
           "scale and features, S and S+1 for the others: too few steps to learn" in text
    assert "slices of text" in text and "not seeds" in text
    assert "--threads N torch threads the models train and are measured at (default 1" in text
