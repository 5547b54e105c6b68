"""Running an experiment's --quick form from the page (gptlab.lab.experiments.quickrun): a
name not an experiment's is refused, and so is a folder the rule (gptlab.files.kinds)
refuses, before anything is written; a run writes only in RUNS/NAME-quick, streams its log
lines between a start and an end event, takes one slot, and its results are then listed
beside the shipped ones in views 11 and 14, marked quick."""

from __future__ import annotations

import json
import threading

import pytest
from fastapi.testclient import TestClient

from gptlab.experiments import report
from gptlab.experiments.grid import experiment_of
from gptlab.lab.experiments import quickrun
from gptlab.lab.server import create_app


@pytest.mark.parametrize("body, fragment", [
    ({"experiment": "nope"}, "experiment"),
    ({"experiment": "../norm"}, "experiment"),
    ({}, "experiment"),
    ({"experiment": "norm", "seed": -1}, "seed"),
])
def test_a_bad_name_is_refused_and_nothing_written(tmp_path, bad, body, fragment):
    bad(TestClient(create_app(tmp_path)), "/api/experiments/quick", body, fragment)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_the_rule_refuses_is_refused_before_a_file_is_written(tmp_path, bad):
    mine = tmp_path / "norm-quick"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    bad(TestClient(create_app(tmp_path)), "/api/experiments/quick", {"experiment": "norm"},
        "holds files gptlab did not write")
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


class FakeExperiment:
    """An experiment module's run(): a line logged, results.json written into `out` (as
    report.finish writes it), or a failure."""

    FIGURES = ()

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.calls = fail, []

    def run(self, out, quick=False, seed=1337, log=print, **_):
        self.calls.append({"out": out, "quick": quick, "seed": seed})
        log("training the grid")
        if self.fail:
            raise RuntimeError("the grid diverged\nsecond line")
        report.write_results(out, {"experiment": "norm", "size": "quick"})
        log("scored")
        return {}


def _events(client) -> list[dict]:
    r = client.get("/api/experiments/quick/events")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    return [json.loads(line.removeprefix("data: ")) for line in r.text.splitlines()
            if line.startswith("data: ")]


def _started(tmp_path, monkeypatch, fake, post):
    monkeypatch.setattr(quickrun.catalog, "experiment", lambda name: fake)
    runs = tmp_path / "runs"
    runs.mkdir()
    client = TestClient(create_app(runs))
    status = post(client, "/api/experiments/quick", {"experiment": "norm"})
    assert status["experiment"] == "norm" and status["folder"] == "norm-quick"
    return client, runs


def test_a_run_writes_only_its_folder_and_streams_its_progress(tmp_path, monkeypatch, post):
    fake = FakeExperiment()
    client, runs = _started(tmp_path, monkeypatch, fake, post)
    events = _events(client)
    assert [e["kind"] for e in events] == ["start", "log", "log", "end"]
    assert events[0]["command"] == f"gptlab experiment norm --quick --out {runs / 'norm-quick'}"
    assert [e["line"] for e in events[1:3]] == ["training the grid", "scored"]
    assert events[-1]["status"] == "finished" and "norm-quick" in events[-1]["message"]
    assert all("elapsed_s" in e for e in events)
    assert fake.calls == [{"out": runs / "norm-quick", "quick": True, "seed": 1337}]
    # everything it wrote is in the lab's folder, under NAME-quick, marked as an experiment
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]
    assert [p.name for p in runs.iterdir()] == ["norm-quick"]
    assert experiment_of(runs / "norm-quick") == "norm"
    recorded = json.loads((runs / "norm-quick" / "experiment.json").read_text())
    assert recorded["configuration"] == {"quick": True, "steps": None, "seed": 1337,
                                         "data": None}
    assert client.get("/api/experiments/quick/status").json()["running"] is False


def test_a_failure_ends_in_one_line_and_the_slot_is_free_again(tmp_path, monkeypatch, post):
    client, _ = _started(tmp_path, monkeypatch, FakeExperiment(fail=True), post)
    end = _events(client)[-1]
    assert end["status"] == "failed" and end["message"] == "the grid diverged"
    post(client, "/api/experiments/quick", {"experiment": "norm"})  # not busy


def test_one_run_at_a_time(tmp_path, monkeypatch, post):
    release = threading.Event()

    class Held(FakeExperiment):
        def run(self, out, **kwargs):
            release.wait(60)
            return super().run(out, **kwargs)

    client, _ = _started(tmp_path, monkeypatch, Held(), post)
    r = client.post("/api/experiments/quick", json={"experiment": "norm"})
    assert r.status_code == 409 and "already running (norm" in r.json()["error"]
    assert client.get("/api/experiments/quick/status").json()["running"] is True
    release.set()
    assert _events(client)[-1]["status"] == "finished"


@pytest.mark.slow
def test_a_real_quick_run_is_listed_beside_the_shipped_results(tmp_path, post):
    """`memory --quick` (nothing trained: the shipped model measured) run from the page: its
    own entry, marked quick; the shipped results stay."""
    client = TestClient(create_app(tmp_path))
    listed = client.get("/api/experiments").json()["experiments"]
    assert next(e for e in listed if e["experiment"] == "memory")["shipped"]
    post(client, "/api/experiments/quick", {"experiment": "memory"})
    events = _events(client)
    assert events[-1]["status"] == "finished", events[-1]
    assert sum(e["kind"] == "log" for e in events) >= 1
    listed = client.get("/api/experiments").json()["experiments"]
    memory = [e for e in listed if e["experiment"] == "memory"]
    assert memory[0] == {"name": "memory-quick", "experiment": "memory", "shipped": None,
                         "quick": True}
    assert len(memory) == 2 and memory[1]["name"] == "memory" and memory[1]["shipped"]
    d = post(client, "/api/experiments/report", {"experiment": "memory-quick"})
    assert d["shipped"] is None and d["figures"] and d["quick"] is True
    assert [p.name for p in tmp_path.iterdir()] == ["memory-quick"]
