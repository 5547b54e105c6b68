"""The longer-than-trained view's API (gptlab.lab.contextview) over a runs folder holding
a quick context experiment ('ctx') and the tiny run: the experiment's curves come from its
results.json; a run's live answer is `gptlab eval --by-position`'s arithmetic and a real
softmax row; learned positions refuse past their table, in the chapter's words."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from fastapi.testclient import TestClient

from gptlab.experiments import shipped_results
from gptlab.lab.server import create_app


@pytest.fixture(scope="module")
def lab(tmp_path_factory, context_experiment, copy_tiny_run):
    root = tmp_path_factory.mktemp("runs")
    shutil.copytree(context_experiment, root / "ctx")
    copy_tiny_run(root / "tiny")
    return TestClient(create_app(root)), root


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


def test_a_run_live_past_its_training_length(lab, post):
    client, _ = lab
    d = post(client, "/api/context", {"run": "ctx/runs/alibi", "context": 256, "buckets": 8,
                                      "layer": 1, "head": 1, "position": 200})
    assert d["block_size"] == 64 and d["pos_encoding"] == "alibi"
    assert "never saw positions 64..255" in d["warning"] and d["source"] == "ctx/eval.txt"
    tokens = sum(b["tokens"] for b in d["buckets"])
    mean = math.fsum(b["loss"] * b["tokens"] for b in d["buckets"] if b["tokens"]) / tokens
    assert tokens == d["tokens_scored"] and mean == pytest.approx(d["loss"], rel=1e-12)
    a = d["attention"]
    assert (a["layer"], a["head"], a["position"]) == (1, 1, 200)
    assert len(a["weights"]) == len(a["tokens"]) == 201
    assert sum(a["weights"]) == pytest.approx(1.0, abs=1e-5) and min(a["weights"]) >= 0


def test_rope_scaling_is_applied_at_context_over_block_size(lab, post):
    client, _ = lab
    plain = post(client, "/api/context", {"run": "ctx/runs/rope", "context": 256})
    yarn = post(client, "/api/context", {"run": "ctx/runs/rope", "context": 256,
                                         "rope_scaling": "yarn"})
    assert plain["rope_scaling"] is None and yarn["rope_scaling"] == "yarn:4"
    assert yarn["loss"] != plain["loss"]
    assert len(plain["attention"]["weights"]) == 256  # the window's last position


def test_the_defaults_work_on_a_fresh_install(tmp_path, post):
    # regression: the page's defaults (context 256, no text) were a 400 for the shipped
    # model ("context 256 needs position 128 ... learned"; then "text is empty and the run
    # is not one of a context experiment's")
    from gptlab.data.corpus import shakespeare_text
    from gptlab.data.text import split_text

    client = TestClient(create_app(tmp_path))
    d = post(client, "/api/context", {"run": "shakespeare"})
    assert d["pos_encoding"] == "learned" and d["context"] == d["block_size"] == 128
    assert d["warning"] is None and d["source"] == "the embedded Shakespeare's validation tenth"
    # what it scored: the val split the shipped model never trained on, from its start
    val = split_text(shakespeare_text(), 0.1)[1]
    assert d["attention"]["tokens"] == list(val[:128])
    assert d["tokens_scored"] == 4096 - 4096 % 128 - 4096 // 128  # windows of 128, 127 scored
    assert d["loss"] < 2.0  # it knows Shakespeare (its manifest: 1.38 on the whole split)


def test_the_default_context_is_past_the_training_length(lab, post):
    client, _ = lab
    d = post(client, "/api/context", {"run": "ctx/runs/rope"})
    assert d["context"] == 128 == 2 * d["block_size"] and "never saw positions 64..127" in \
        d["warning"]
    d = post(client, "/api/context", {"run": "ctx/runs/learned"})
    assert d["context"] == 64 and d["warning"] is None


@pytest.mark.parametrize("body, fragment", [
    ({"run": "ctx/runs/learned", "context": 65}, "there is no row for position 64"),
    ({"run": "tiny", "context": 16}, "does not hold the embedded Shakespeare's validation"),
    ({"run": "tiny", "context": 40, "text": "the cat sat on the mat"},
     "no row for position 32"),
    ({"run": "ctx/runs/rope", "context": 64, "layer": 9}, "the run has 2 layers of 2 heads"),
    ({"run": "ctx/runs/rope", "context": 64, "position": 64}, "outside the window of 64"),
    ({"run": "ctx/runs/rope", "context": 64, "rope_scaling": "cubic"}, "rope_scaling"),
    ({"run": "ctx/runs/alibi", "context": 64, "rope_scaling": "linear"},
     "pos_encoding is 'alibi'"),
    ({"run": "ctx/runs/rope", "context": 2000}, "context"),
])
def test_bad_context_requests_are_one_line(lab, bad, body, fragment):
    bad(lab[0], "/api/context", body, fragment)
