"""`gptlab experiment` stopped by a signal: exit 130 / 143 within seconds, never 2 ("bad
input"); its runs keep their checkpoints. (The experiments themselves: tests/experiments.)"""

from __future__ import annotations

import signal

import pytest


@pytest.mark.slow
def test_an_experiment_sent_sigterm_while_training_exits_143_within_seconds(tmp_path,
                                                                           signalled):
    out = tmp_path / "norm"

    def training():
        return any('"kind": "train"' in m.read_text() for m in out.glob("runs/*/metrics.jsonl"))

    code = ("import sys; from gptlab.cli.main import main; "
            f"sys.exit(main(['experiment', 'norm', '--quick', '--out', {str(out)!r}]))")
    exit_code, _, err, seconds = signalled(code, training, signal.SIGTERM)
    assert (exit_code, err.splitlines()[-1]) == (143, "interrupted (SIGTERM)"), err
    assert seconds < 15  # a bound for a loaded machine, not a speed claim
    assert "Traceback" not in err
    assert any(out.glob("runs/*/state.pt"))  # the stopped run resumes next time
