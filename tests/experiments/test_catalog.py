"""Every experiment by name (gptlab.experiments.catalog): each gives what any reader needs
(run, TITLE, FIGURES, tables); an unknown name is refused naming the known ones; a folder
counts as an experiment's only with its marker and results; a summary is its tables, the
figures that exist and its timing line (the session's quick context experiment)."""

from __future__ import annotations

import json
import shutil

import pytest

from gptlab.errors import UsageError
from gptlab.experiments import catalog
from gptlab.experiments.grid import EXPERIMENT_FILE
from gptlab.experiments.report import RESULTS_FILE, timing_line


@pytest.mark.parametrize("name", catalog.NAMES)
def test_each_experiment_gives_what_a_reader_needs(name):
    experiment = catalog.module(name)
    assert experiment.__name__ == f"gptlab.experiments.{name}"
    assert callable(experiment.run) and callable(experiment.tables)
    assert experiment.TITLE and experiment.FIGURES
    assert all(f.endswith(".png") for f in experiment.FIGURES)


def test_an_unknown_experiment_is_refused_naming_the_known_ones():
    with pytest.raises(UsageError, match="unknown experiment 'nope'; experiments: context, "
                                         "norm, scale, heads, phase, memory, brackets, "
                                         "recurrence, features$"):
        catalog.module("nope")
    with pytest.raises(UsageError, match="unknown experiment"):
        catalog.module("report")  # a module of the package, not an experiment


@pytest.fixture
def folder(tmp_path, context_experiment):
    """The quick context experiment's marker, results and figures (not its runs)."""
    for name in (EXPERIMENT_FILE, RESULTS_FILE, *catalog.module("context").FIGURES):
        shutil.copy(context_experiment / name, tmp_path / name)
    return tmp_path


def test_a_summary_is_the_tables_the_figures_and_the_timing(folder):
    results = json.loads((folder / RESULTS_FILE).read_text())
    context = catalog.module("context")
    summary = catalog.summary(str(folder))
    assert summary["experiment"] == "context" and summary["title"] == context.TITLE
    assert summary["figures"] == list(context.FIGURES)
    assert summary["timing"] == timing_line(results["timing"], results["machine"])
    [first, *_] = context.tables(results)
    assert summary["tables"][0] == {"title": first[0].rstrip(":"), "header": list(first[1][0]),
                                    "rows": [[str(c) for c in r] for r in first[1][1]]}
    assert all(isinstance(c, str) for t in summary["tables"] for r in t["rows"] for c in r)
    (folder / context.FIGURES[0]).unlink()
    assert catalog.summary(folder)["figures"] == list(context.FIGURES[1:])  # those that exist


def test_only_a_known_experiment_with_results_has_them(folder, tmp_path_factory):
    assert catalog.has_results(folder)
    (folder / RESULTS_FILE).unlink()
    assert not catalog.has_results(folder)
    with pytest.raises(UsageError, match=f"holds no experiment's {RESULTS_FILE}"):
        catalog.summary(folder)
    other = tmp_path_factory.mktemp("other")
    (other / RESULTS_FILE).write_text("{}")
    (other / EXPERIMENT_FILE).write_text(json.dumps({"experiment": "unknown"}))
    assert not catalog.has_results(other) and not catalog.has_results(other / "absent")
