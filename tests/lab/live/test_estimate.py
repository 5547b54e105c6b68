"""The watch-it-learn view's time estimate (gptlab.lab.live.estimate): steps x a step plus
evaluations x an evaluation, from a probe of the training itself (its bookkeeping
included), taken again once a minute old; said as an estimate with its range (the probe's
fastest and slowest stretch) and the machine; the route checks its body."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from gptlab.lab.live import estimate
from gptlab.lab.live.training import LiveCallbacks
from gptlab.lab.server import create_app


@pytest.fixture
def probed(monkeypatch):
    fixed = estimate.Probe(step_s=0.05, eval_s=0.2, load=1.5, taken=time.monotonic())
    monkeypatch.setitem(estimate._probes, "induction", fixed)
    return fixed


def test_the_estimate_is_steps_times_a_step_plus_evaluations(probed):
    d = estimate.estimate("induction", 1500, 25)
    assert d["evaluations"] == 61  # step 0, every 25 steps, the last
    assert d["seconds"] == pytest.approx(1500 * 0.05 + 61 * 0.2)
    assert d["low"] == d["high"] == d["seconds"]  # a probe without its work: one number
    assert d["step_ms"] == 50.0 and d["eval_ms"] == 200.0 and d["load"] == 1.5
    assert d["words"].startswith("about 1 min 30 s (at this machine's load now, 1.5 on ")
    assert d["words"].endswith("; an estimate from a probe of the training: 50 ms a step, "
                               "0.20 s an evaluation)")


def test_a_busy_machine_says_what_a_quiet_one_takes(monkeypatch):
    # the range: the work (CPU time), what a quiet machine takes, to the wall time at the
    # share of a core the probe got
    busy = estimate.Probe(step_s=0.15, eval_s=0.8, load=7.1, step_cpu_s=0.04,
                               eval_cpu_s=0.2, taken=time.monotonic())
    monkeypatch.setitem(estimate._probes, "induction", busy)
    d = estimate.estimate("induction", 600, 25)
    assert d["evaluations"] == 25
    assert d["low"] == pytest.approx(600 * 0.04 + 25 * 0.2, abs=0.05)  # to 0.1 s
    assert d["high"] == d["seconds"] == pytest.approx(600 * 0.15 + 25 * 0.8, abs=0.05)
    assert d["words"].startswith("about 1 min 50 s (at this machine's load now, 7.1 on ")
    assert "CPU cores; 29 s of computing, what a quiet machine takes; an estimate" in d["words"]


def test_stretches_split_steps_from_evaluations():
    # logged every 5 steps (0.1 s a step, once 0.2), an evaluation after the step-10 log
    events = [(0.0, "train"), (0.5, "train"), (0.9, "eval"), (1.6, "train"), (2.6, "train"),
              (3.1, "train")]
    step, evaluation = estimate.stretches(events)
    assert step == pytest.approx(0.1)  # the median of 0.5, 1.0 and 0.5 over 5 steps
    assert evaluation == pytest.approx(1.1 - 5 * 0.1)


@pytest.mark.parametrize("seconds, words", [
    (0.2, "1 s"), (44.6, "45 s"), (60, "1 min"), (61, "1 min 5 s"), (119, "2 min"),
    (131, "2 min 15 s")])
def test_durations_read_as_a_person_says_them(seconds, words):
    assert estimate.duration(seconds) == words


@pytest.mark.slow  # two probes: a few seconds each
def test_a_probe_trains_the_task_quietly_and_is_kept_a_minute(monkeypatch, capfd):
    # regression: the probe timed the bare model's step, a third short of a real step (the
    # trainer's batches, metrics, TensorBoard, checkpoints), and was kept for the server's
    # life whatever the machine's load did
    monkeypatch.setattr(estimate, "_probes", {})
    taken, trained = [], []
    real, real_train = estimate._measure, estimate.train
    monkeypatch.setattr(estimate, "_measure", lambda task: taken.append(task) or real(task))
    monkeypatch.setattr(estimate, "train",
                        lambda *a, **k: trained.append(k["callbacks"]) or real_train(*a, **k))
    first = estimate.probe_task("induction")
    assert estimate.probe_task("induction") is first and taken == ["induction"]
    assert isinstance(trained[0], LiveCallbacks)  # the view's own training
    assert first.step_s > 0 and first.eval_s > 0
    assert 0 < first.step_cpu_s <= first.step_s * 1.05  # CPU time: no more than the wall's
    assert capfd.readouterr() == ("", "")  # nothing on the server's terminal
    monkeypatch.setattr(estimate, "PROBE_TTL_S", 0.0)
    assert estimate.probe_task("induction") is not first and len(taken) == 2


def test_the_route_answers_the_estimate_and_checks_its_body(tmp_path, probed, post, bad):
    client = TestClient(create_app(tmp_path))
    d = post(client, "/api/live/estimate", {"task": "induction", "steps": 100, "every": 50})
    assert d["seconds"] == pytest.approx(100 * 0.05 + 3 * 0.2)
    assert d["cpus"] >= 1 and d["threads"] >= 1
    bad(client, "/api/live/estimate", {"steps": 100, "every": 200}, "must not exceed steps")
    bad(client, "/api/live/estimate", {"task": "nope"}, "task")
    assert list(tmp_path.iterdir()) == []  # nothing written: the probe trains in memory
