"""The context experiment's curves in the longer-than-trained view
(gptlab.lab.context.results): listed with their runs, read from results.json at one length
by method; on a fresh install the shipped results; a name or length it does not hold
refused in one line."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from gptlab.experiments import shipped_results
from gptlab.lab.server import create_app


def test_experiments_are_listed_with_their_runs(lab):
    client, _ = lab
    found = client.get("/api/context/experiments").json()["experiments"]
    # a --quick run is listed beside the shipped results, not instead of them
    assert [e["name"] for e in found] == ["ctx", "context"]
    assert found[0]["shipped"] is None and found[0]["quick"] is True
    assert found[1]["shipped"].startswith("shipped results") and found[1]["quick"] is False
    assert found[0]["trained_length"] == 64 and found[0]["lengths"] == [64, 128, 256, 512]
    assert "ctx/runs/alibi" in found[0]["runs"] and len(found[0]["runs"]) == 8
    runs = client.get("/api/runs").json()["runs"]
    assert set(found[0]["runs"]) <= set(runs)  # the lab opens them as runs


def test_an_experiments_curves_are_its_results(lab, post):
    client, root = lab
    results = json.loads((root / "ctx" / "results.json").read_text())
    d = post(client, "/api/context/experiment", {"experiment": "ctx", "length": 256,
                                                 "mode": "sliding"})
    assert d["trained_length"] == 64 and d["length"] == 256
    by_method = {s["method"]: s for s in d["series"]}
    assert "no row for position 64" in by_method["learned"]["refused"]
    rope = next(r for r in results["rows"] if r["method"] == "rope")["cells"][2]["sliding"]
    assert by_method["rope"]["loss"] == rope["loss"]
    assert by_method["rope"]["buckets"] == rope["by_position"]
    assert "pi-ft" in by_method  # fine-tuned at 256


def test_a_fresh_lab_shows_the_shipped_experiment(tmp_path, post):
    client = TestClient(create_app(tmp_path))
    found = client.get("/api/context/experiments").json()["experiments"]
    shipped = shipped_results.load("context")
    assert found == [{"name": "context", "trained_length": shipped["trained_length"],
                      "lengths": shipped["lengths"], "runs": [],
                      "shipped": shipped_results.label(shipped), "quick": False}]
    d = post(client, "/api/context/experiment", {"experiment": "context", "shipped": True,
                                                 "length": shipped["lengths"][-1]})
    assert d["shipped"] == found[0]["shipped"] and "measured on" in d["shipped"]
    rope = next(r for r in shipped["rows"] if r["method"] == "rope")["cells"][-1]
    by_method = {s["method"]: s for s in d["series"]}
    assert by_method["rope"]["loss"] == rope["non-overlapping"]["loss"]


@pytest.mark.parametrize("body, fragment", [
    ({"experiment": "ctx", "shipped": True}, "no shipped results of a context experiment"),
    ({"experiment": "nope"}, "no context experiment named 'nope'"),
    ({"experiment": "../ctx"}, "must be a path inside the runs folder"),
    ({"experiment": "tiny"}, "no context experiment named 'tiny'"),
    ({"experiment": "ctx", "length": 100}, "length 100 is not one of the experiment's: 64"),
])
def test_bad_experiment_requests_are_one_line(lab, bad, body, fragment):
    bad(lab[0], "/api/context/experiment", body, fragment)
