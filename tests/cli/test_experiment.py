"""`gptlab experiment` stopped by a signal: exit 130 / 143 within seconds, never 2 ("bad
input"); its runs keep their checkpoints; a flag an experiment cannot use refused in one line
before anything is written. (The experiments themselves: tests/experiments.)"""

from __future__ import annotations

import signal

import pytest

from gptlab.cli.experiment import threads_for
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
    from gptlab.experiments import norm

    def stopped(*args, **kwargs):
        raise stopping.Interrupted()

    monkeypatch.setattr(norm, "run", stopped)
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


def test_an_experiment_trains_at_one_thread_where_anything_else_runs():
    assert threads_for(0.3, 2) == 2 and threads_for(0.99, 16) == 16
    assert threads_for(1.0, 2) == 1 and threads_for(9.5, 2) == 1 and threads_for(2.0, 1) == 1
