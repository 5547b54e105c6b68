"""The shipped results (gptlab.experiments.shipped_results): every experiment's, at the
default size, dated, with its figures, readable from the package."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gptlab.experiments import catalog, shipped_results


@pytest.mark.parametrize("name", catalog.NAMES)
def test_every_experiment_ships_default_size_results_with_machine_and_date(name):
    results = shipped_results.load(name)
    assert results is not None and results["experiment"] == name
    assert results["size"] == "default"
    assert results["machine"]["cpus"] >= 1
    assert len(results["machine"]["date"]) == 10  # YYYY-MM-DD
    assert shipped_results.figures(name), f"no shipped figure for {name}"


@pytest.mark.parametrize("name", catalog.NAMES)
def test_the_shipped_results_say_what_they_know(name):
    # the fields the lab and the docs read: each claim's units and verdict line, its
    # precondition where it reads a mechanism, the thread count, the undecided line; the
    # claims are what today's rule gives on the file's numbers
    from gptlab.experiments import report
    from gptlab.experiments.claims import UNITS

    results = shipped_results.load(name)
    assert isinstance(results["threads"], int) and results["threads"] >= 1
    assert "undecided_line" in results
    gated = {c.key for c in catalog.experiment(name).claims if c.precondition is not None}
    for c in results["claims"]:
        assert c["units"].split()[0] in (*UNITS, "n"), c["units"]
        assert c["verdict_line"].startswith(f"{c['verdict']}: ")
        assert ("precondition" in c) == (c["key"] in gated)
    assert report.judge(json.loads(json.dumps(results)), catalog.experiment(name).claims) == \
        results
    # where the numbers were built says nothing here: data by name
    text = json.dumps(results)
    assert "/tmp/" not in text and "/home/" not in text


def test_figures_are_the_experiments_own_by_name():
    assert [p.name for p in shipped_results.figures("heads")] == ["heads-pruning.png"]
    assert [p.name for p in shipped_results.figures("norm")] == ["norm.png"]
    for path in shipped_results.FOLDER.glob("*.png"):
        assert any(path in shipped_results.figures(n) for n in catalog.NAMES), path.name


def test_a_missing_experiment_is_none(tmp_path):
    assert shipped_results.load("norm", tmp_path) is None
    assert shipped_results.figures("norm", tmp_path) == []


def test_the_label_names_the_machine_and_the_date(tmp_path):
    results = json.loads(shipped_results.results_path("context").read_text())
    label = shipped_results.label(results)
    assert label.startswith("shipped results (default size), measured on 2 CPU cores")
    assert label.endswith(f"at {results['machine']['date']}")
    undated = {**results, "machine": {"cpus": 4}}
    assert shipped_results.label(undated).endswith("measured on 4 CPU cores at an unrecorded date")


def test_the_machine_in_words():
    words = shipped_results.machine_words({"cpus": 2, "torch_threads": 1,
                                           "load_average": [1.02, 2.0, 3.0],
                                           "torch": "2.13.0+cpu"})
    assert words == "2 CPU cores (1 torch thread, load 1.0), torch 2.13.0+cpu"


def test_a_pip_install_carries_them():
    # the package data's globs (pyproject.toml's [tool.setuptools.package-data]; read as
    # text: tomllib is Python 3.11's, and 3.10 is supported)
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    data = pyproject.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    assert '"experiments/shipped/*"' in data
    assert shipped_results.FOLDER == Path(shipped_results.__file__).resolve().parent / "shipped"
