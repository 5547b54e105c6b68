"""The watch-it-learn view's time estimate (gptlab.lab.live_estimate): steps x a step plus
evaluations x an evaluation, from a probe taken once per task; said as an estimate, with
the machine; the route checks its body."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from gptlab.lab import live_estimate
from gptlab.lab.server import create_app


@pytest.fixture
def probed(monkeypatch):
    fixed = live_estimate.Probe(step_s=0.05, eval_s=0.2, load=1.5)
    monkeypatch.setitem(live_estimate._probes, "induction", fixed)
    return fixed


def test_the_estimate_is_steps_times_a_step_plus_evaluations(probed):
    d = live_estimate.estimate("induction", 1500, 25)
    assert d["evaluations"] == 61  # step 0, every 25 steps, the last
    assert d["seconds"] == pytest.approx(1500 * 0.05 + 61 * 0.2)
    assert d["step_ms"] == 50.0 and d["eval_ms"] == 200.0 and d["load"] == 1.5
    assert d["words"].startswith("about 1 min 30 s (an estimate from a probe on this machine: "
                                 "50 ms a step, 0.20 s an evaluation, ")
    assert "load 1.5" in d["words"]


@pytest.mark.parametrize("seconds, words", [
    (0.2, "1 s"), (44.6, "45 s"), (60, "1 min"), (61, "1 min 5 s"), (119, "2 min"),
    (131, "2 min 15 s")])
def test_durations_read_as_a_person_says_them(seconds, words):
    assert live_estimate.duration(seconds) == words


def test_a_probe_is_taken_once_per_task_and_measures_something(monkeypatch):
    monkeypatch.setattr(live_estimate, "_probes", {})
    taken = []
    real = live_estimate._measure
    monkeypatch.setattr(live_estimate, "_measure", lambda task: taken.append(task) or real(task))
    first = live_estimate.probe_task("induction")
    assert live_estimate.probe_task("induction") is first and taken == ["induction"]
    assert first.step_s > 0 and first.eval_s > 0


def test_the_route_answers_the_estimate_and_checks_its_body(tmp_path, probed, post, bad):
    client = TestClient(create_app(tmp_path))
    d = post(client, "/api/live/estimate", {"task": "induction", "steps": 100, "every": 50})
    assert d["seconds"] == pytest.approx(100 * 0.05 + 3 * 0.2)
    assert d["cpus"] >= 1 and d["threads"] >= 1
    bad(client, "/api/live/estimate", {"steps": 100, "every": 200}, "must not exceed steps")
    bad(client, "/api/live/estimate", {"task": "nope"}, "task")
    assert list(tmp_path.iterdir()) == []  # nothing written: the probe trains in memory
