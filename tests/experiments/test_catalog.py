"""Every experiment by name (gptlab.experiments.catalog): one Experiment per name, in the
order the CLI lists them; an unknown name is refused naming the known ones; a folder counts
as an experiment's only with its marker and results; a summary is its tables, the figures
that exist and its timing line (the session's quick context experiment)."""

from __future__ import annotations

import json
import shutil

import pytest

from gptlab.cli.experiment import EXPERIMENTS as CLI_EXPERIMENTS
from gptlab.errors import UsageError
from gptlab.experiments import catalog
from gptlab.experiments.contract import Experiment
from gptlab.experiments.grid import EXPERIMENT_FILE
from gptlab.experiments.report import RESULTS_FILE, timing_line


def test_the_catalog_is_one_experiment_per_name_in_the_clis_order():
    assert all(isinstance(e, Experiment) for e in catalog.EXPERIMENTS)
    assert len(set(catalog.NAMES)) == len(catalog.NAMES) == len(catalog.EXPERIMENTS)
    assert list(catalog.NAMES) == list(CLI_EXPERIMENTS)  # what `--help` lists, torch-free


def test_an_unknown_experiment_is_refused_naming_the_known_ones():
    with pytest.raises(UsageError, match="unknown experiment 'nope'; experiments: context, "
                                         "norm, scale, heads, phase, memory, brackets, "
                                         "recurrence, features$"):
        catalog.experiment("nope")
    with pytest.raises(UsageError, match="unknown experiment"):
        catalog.experiment("report")  # a module of the package, not an experiment


@pytest.fixture
def folder(tmp_path, context_experiment):
    """The quick context experiment's marker, results and figures (not its runs)."""
    for name in (EXPERIMENT_FILE, RESULTS_FILE, *catalog.experiment("context").figures):
        shutil.copy(context_experiment / name, tmp_path / name)
    return tmp_path


def test_a_summary_is_the_tables_the_figures_and_the_timing(folder):
    results = json.loads((folder / RESULTS_FILE).read_text())
    context = catalog.experiment("context")
    summary = catalog.summary(str(folder))
    assert summary["experiment"] == "context" and summary["title"] == context.title
    assert summary["figures"] == list(context.figures)
    assert summary["timing"] == timing_line(results["timing"], results["machine"])
    [first, *_] = context.tables(results)
    assert summary["tables"][0] == {"title": first[0].rstrip(":"), "header": list(first[1][0]),
                                    "rows": [[str(c) for c in r] for r in first[1][1]]}
    assert all(isinstance(c, str) for t in summary["tables"] for r in t["rows"] for c in r)
    (folder / context.figures[0]).unlink()
    assert catalog.summary(folder)["figures"] == list(context.figures[1:])  # those that exist


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
