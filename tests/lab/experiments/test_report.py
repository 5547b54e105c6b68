"""The experiments view's API (gptlab.lab.experiments.report) over a runs folder holding a
quick norm experiment ('norm'), a quick context experiment ('ctx'), the tiny run and a
folder of something else: every experiment is listed by kind, a --quick run marked quick
beside the shipped results it does not replace; its report is the tables `gptlab
experiment` prints (a path where it was built cut to the folder's name), its figure the very
file it drew, its runs the grid's, each one the lab opens; a name outside the folder is
refused."""

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
    # regression: a --quick run replaced the shipped results (the shipped "context" could
    # no longer be picked); it is a small run, listed beside them, marked quick
    client, _ = lab
    found = client.get("/api/experiments").json()["experiments"]
    assert found[:2] == [{"name": "ctx", "experiment": "context", "shipped": None, "quick": True},
                         {"name": "norm", "experiment": "norm", "shipped": None, "quick": True}]
    shipped = found[2:]
    assert [e["name"] for e in shipped] == list(catalog.NAMES)
    assert all(e["shipped"].startswith("shipped results (default size), measured on ")
               and e["quick"] is False for e in shipped)
    # the context view lists its own kind only, from the same walk, the shipped one beside
    listed = client.get("/api/context/experiments").json()["experiments"]
    assert [(e["name"], e["quick"], e["shipped"] is None) for e in listed] == \
        [("ctx", True, True), ("context", False, False)]


def test_full_size_results_replace_the_shipped_ones(tmp_path, norm_experiment):
    shutil.copytree(norm_experiment, tmp_path / "mine")
    results = json.loads((tmp_path / "mine" / "results.json").read_text())
    (tmp_path / "mine" / "results.json").write_text(json.dumps({**results, "size": "default"}))
    client = TestClient(create_app(tmp_path))
    found = client.get("/api/experiments").json()["experiments"]
    assert found[0] == {"name": "mine", "experiment": "norm", "shipped": None, "quick": False}
    assert [e["name"] for e in found[1:]] == [n for n in catalog.NAMES if n != "norm"]


def test_a_quick_report_says_so_and_passes_the_verdicts_words_on(tmp_path, norm_experiment,
                                                                 post):
    # results.json's newer fields (a claim's precondition, units and verdict line, the
    # run's undecided line) reach the page as written; a file without them is read as before
    shutil.copytree(norm_experiment, tmp_path / "norm")
    client = TestClient(create_app(tmp_path))
    path = tmp_path / "norm" / "results.json"
    results = json.loads(path.read_text())
    # as the experiment wrote it: its verdict lines, units, thread count and (one seed, so
    # no spread) the line of a run that decides nothing reach the page
    d = post(client, "/api/experiments/report", {"experiment": "norm"})
    assert d["quick"] is True and d["threads"] == results["threads"] == 1
    assert d["undecided_line"] == results["undecided_line"] is not None
    assert [c["verdict_line"] for c in d["claims"]] == \
        [c["verdict_line"] for c in results["claims"]]
    assert all(c["units"] == "seeds 1337" for c in d["claims"])
    # a file from before those fields: read as before
    for c in results["claims"]:
        for key in ("verdict_line", "units"):
            c.pop(key)
    old = {k: v for k, v in results.items() if k not in ("undecided_line", "threads")}
    path.write_text(json.dumps(old))
    d = post(client, "/api/experiments/report", {"experiment": "norm"})
    assert d["quick"] is True and d["undecided_line"] is None and d["threads"] is None
    assert all("verdict_line" not in c for c in d["claims"])
    line = "this --quick run is too small to decide anything: the 2-layer model did not learn"
    pre = {"text": "the model learned the task (loss 4.16, needs < 2.08)", "value": 4.16,
           "threshold": 2.08, "met": False}
    results["undecided_line"] = line
    results["threads"] = 1
    results["claims"][0].update(precondition=pre, units="seeds 1337",
                                verdict_line="undecided: the model did not learn the task",
                                verdict="undecided")
    path.write_text(json.dumps(results))
    d = post(client, "/api/experiments/report", {"experiment": "norm"})
    assert d["undecided_line"] == line and d["threads"] == 1
    claim = d["claims"][0]
    assert (claim["precondition"], claim["units"], claim["verdict_line"]) == \
        (pre, "seeds 1337", "undecided: the model did not learn the task")


def test_no_path_where_the_results_were_built(tmp_path, post):
    # regression: the shipped phase report's captions read "(/tmp/quiet/phase/data)"; a
    # results.json that records a path still shows the folder's name at most
    from gptlab.experiments.grid import experiment_folder

    for name, results in [("phase", shipped_results.load("phase")),
                          ("memory", shipped_results.load("memory"))]:
        folder = experiment_folder(tmp_path / f"old-{name}", name)
        # the shipped results record their data by name; an older file by its path
        if name == "phase":
            for found in results["tasks"].values():
                found["data"] = f"/home/builder/build/phase/{found['data']}"
        else:
            results["data"] = f"/home/builder/build/memory/{results['data']}"
        (folder / "results.json").write_text(json.dumps(results))
    client = TestClient(create_app(tmp_path))
    for experiment in ("phase", "old-phase", "memory", "old-memory"):
        d = post(client, "/api/experiments/report",
                 {"experiment": experiment, "shipped": "old" not in experiment})
        words = json.dumps(d["tables"])
        assert "/tmp/" not in words and "/home/builder" not in words, experiment
    tables = post(client, "/api/experiments/report", {"experiment": "old-phase"})["tables"]
    assert "segments-data" in json.dumps(tables)  # the folder's name stays


def test_folder_name_cuts_absolute_paths_only():
    from gptlab.lab.experiments.report import folder_name

    assert folder_name("segments (/tmp/quiet/phase/segments-data); ICL") == \
        "segments (segments-data); ICL"
    assert folder_name("~/runs/data, C:\\runs\\x\\data") == "data, data"
    for kept in ("slices 0/1/2", "runs/norm/a", "./runs/a", "1/2 of it", "/data"):
        assert folder_name(kept) == kept


@pytest.mark.parametrize(("name", "experiment"),
                         [("norm", norm.EXPERIMENT), ("ctx", context.EXPERIMENT)])
def test_a_report_is_the_printed_tables_and_the_drawn_figures(lab, post, name, experiment):
    client, root = lab
    d = post(client, "/api/experiments/report", {"experiment": name})
    results = json.loads((root / name / "results.json").read_text())
    assert d["title"] == experiment.title and d["experiment"] == results["experiment"]
    assert [(t["title"], t["header"], t["rows"]) for t in d["tables"]] == [
        (title.rstrip(":"), list(h), [[str(c) for c in r] for r in rows])
        for title, (h, rows) in experiment.tables(results)]
    assert [f["file"] for f in d["figures"]] == list(experiment.figures)
    for f in d["figures"]:
        data = base64.b64decode(f["png"].removeprefix("data:image/png;base64,"))
        assert data == (root / name / f["file"]).read_bytes()
    assert len(d["runs"]) == len(results["runs"])
    assert set(d["runs"]) <= set(client.get("/api/runs").json()["runs"])  # the lab opens them
    assert "torch thread" in d["timing"]
    # its claims, judged, as results.json holds them (the experiment's own CLAIMS)
    assert [c["key"] for c in d["claims"]] == [c.key for c in experiment.claims]
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
    assert not any(e["quick"] for e in found)


@pytest.mark.parametrize("name", catalog.NAMES)
def test_a_shipped_report_is_its_tables_figures_and_label(lab, post, name):
    d = post(lab[0], "/api/experiments/report", {"experiment": name, "shipped": True})
    results = shipped_results.load(name)
    experiment = catalog.experiment(name)
    assert d["experiment"] == name and d["title"] == experiment.title and d["runs"] == []
    assert d["shipped"] == shipped_results.label(results)
    assert results["machine"]["date"] in d["shipped"]
    assert [t["rows"] for t in d["tables"]] == [
        [[str(c) for c in r] for r in rows] for _, (_, rows) in experiment.tables(results)]
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
