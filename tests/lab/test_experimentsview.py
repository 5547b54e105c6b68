"""The experiments view's API (gptlab.lab.experimentsview) over a runs folder holding a
quick norm experiment ('norm'), a quick context experiment ('ctx'), the tiny run and a
folder of something else: every experiment is listed by kind; its report is the tables
`gptlab experiment` prints, its figure the very file it drew, its runs the grid's, each one
the lab opens; a name outside the folder is refused."""

from __future__ import annotations

import base64
import json
import shutil

import pytest
from fastapi.testclient import TestClient

from gptlab.experiments import catalog, context, norm, shipped_results
from gptlab.lab.server import create_app


@pytest.fixture(scope="module")
def lab(tmp_path_factory, norm_experiment, context_experiment, copy_tiny_run):
    root = tmp_path_factory.mktemp("runs")
    shutil.copytree(norm_experiment, root / "norm")
    shutil.copytree(context_experiment, root / "ctx")
    copy_tiny_run(root / "tiny")
    (root / "notes").mkdir()
    return TestClient(create_app(root)), root


def test_every_experiment_is_listed_with_its_kind(lab):
    client, _ = lab
    found = client.get("/api/experiments").json()["experiments"]
    assert found[:2] == [{"name": "ctx", "experiment": "context", "shipped": None},
                         {"name": "norm", "experiment": "norm", "shipped": None}]
    # the user's own results replace the shipped ones; the others stay, labelled
    shipped = found[2:]
    assert [e["name"] for e in shipped] == [n for n in catalog.NAMES
                                            if n not in ("context", "norm")]
    assert all(e["shipped"].startswith("shipped results (default size), measured on ")
               for e in shipped)
    # the context view lists its own kind only, from the same walk
    assert [e["name"] for e in client.get("/api/context/experiments").json()["experiments"]] \
        == ["ctx"]


@pytest.mark.parametrize(("name", "module"), [("norm", norm), ("ctx", context)])
def test_a_report_is_the_printed_tables_and_the_drawn_figures(lab, post, name, module):
    client, root = lab
    d = post(client, "/api/experiments/report", {"experiment": name})
    results = json.loads((root / name / "results.json").read_text())
    assert d["title"] == module.TITLE and d["experiment"] == results["experiment"]
    assert [(t["title"], t["header"], t["rows"]) for t in d["tables"]] == [
        (title.rstrip(":"), list(h), [[str(c) for c in r] for r in rows])
        for title, (h, rows) in module.tables(results)]
    assert [f["file"] for f in d["figures"]] == list(module.FIGURES)
    for f in d["figures"]:
        data = base64.b64decode(f["png"].removeprefix("data:image/png;base64,"))
        assert data == (root / name / f["file"]).read_bytes()
    assert len(d["runs"]) == len(results["runs"])
    assert set(d["runs"]) <= set(client.get("/api/runs").json()["runs"])  # the lab opens them
    assert "torch thread" in d["timing"]
    # its claims, judged, as results.json holds them (the experiment's own CLAIMS)
    assert [c["key"] for c in d["claims"]] == [c.key for c in module.CLAIMS]
    assert [(c["verdict"], c["mean"], c["seeds"]) for c in d["claims"]] == [
        (c["verdict"], c["mean"], c["seeds"]) for c in results["claims"]]


def test_the_norm_report_holds_its_grid(lab, post):
    d = post(lab[0], "/api/experiments/report", {"experiment": "norm"})
    assert len(d["tables"][0]["rows"]) == 8  # depth x rate x warm-up, Pre beside Post
    assert "norm/runs/post-L2-lr0.01-nowarmup-s1337" in d["runs"]


def test_a_fresh_lab_lists_every_shipped_experiment(tmp_path):
    client = TestClient(create_app(tmp_path / "absent"))
    found = client.get("/api/experiments").json()["experiments"]
    assert [e["name"] for e in found] == list(catalog.NAMES)
    assert all(e["experiment"] == e["name"] and "measured on" in e["shipped"] for e in found)


@pytest.mark.parametrize("name", catalog.NAMES)
def test_a_shipped_report_is_its_tables_figures_and_label(lab, post, name):
    d = post(lab[0], "/api/experiments/report", {"experiment": name, "shipped": True})
    results = shipped_results.load(name)
    module = catalog.module(name)
    assert d["experiment"] == name and d["title"] == module.TITLE and d["runs"] == []
    assert d["shipped"] == shipped_results.label(results)
    assert results["machine"]["date"] in d["shipped"]
    assert [t["rows"] for t in d["tables"]] == [
        [[str(c) for c in r] for r in rows] for _, (_, rows) in module.tables(results)]
    assert [f["file"] for f in d["figures"]] == [p.name for p in shipped_results.figures(name)]
    first = shipped_results.figures(name)[0]
    assert base64.b64decode(d["figures"][0]["png"].split(",", 1)[1]) == first.read_bytes()
    assert [c["verdict"] for c in d["claims"]] == [c["verdict"] for c in results["claims"]]


def test_an_own_report_is_not_labelled_shipped(lab, post):
    assert post(lab[0], "/api/experiments/report", {"experiment": "norm"})["shipped"] is None


@pytest.mark.parametrize("body, fragment", [
    ({"experiment": "nope", "shipped": True}, "no shipped results of an experiment named 'nope'"),
    ({"experiment": "../norm", "shipped": True}, "no shipped results"),
    ({"experiment": "nope"}, "no experiment named 'nope'"),
    ({"experiment": "../norm"}, "must be a path inside the runs folder"),
    ({"experiment": "/etc"}, "must be a path inside the runs folder"),
    ({"experiment": "tiny"}, "no experiment named 'tiny'"),
    ({"experiment": "notes"}, "no experiment named 'notes'"),
])
def test_bad_report_requests_are_one_line(lab, bad, body, fragment):
    bad(lab[0], "/api/experiments/report", body, fragment)
