"""Every experiment (gptlab.experiments.catalog, each an Experiment of
gptlab.experiments.contract): each is its module's own definition, named as its results
and folder are, with a quick and a default size, the units its claims run over, and the
tables, notes and claims that render its shipped results; an unknown name is refused
naming the known ones; a folder counts as an experiment's only with its marker and
results; a summary is its tables, the figures that exist and its timing line (the
session's quick context experiment)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import shutil

import pytest

from gptlab.cli.experiment import EXPERIMENTS as CLI_EXPERIMENTS
from gptlab.cli.experiment import READ_A_MODEL
from gptlab.errors import UsageError
from gptlab.experiments import catalog, shipped_results
from gptlab.experiments.claims import UNITS
from gptlab.experiments.contract import SIZE_NAMES, Experiment
from gptlab.experiments.grid import EXPERIMENT_FILE
from gptlab.experiments.report import RESULTS_FILE, timing_line

RUN_PARAMETERS = ["out", "data", "quick", "seed", "steps", "progress"]


def test_the_catalog_is_one_experiment_per_name_in_the_clis_order():
    assert all(isinstance(e, Experiment) for e in catalog.EXPERIMENTS)
    assert len(set(catalog.NAMES)) == len(catalog.NAMES) == len(catalog.EXPERIMENTS)
    assert list(catalog.NAMES) == list(CLI_EXPERIMENTS)  # what `--help` lists, torch-free


@pytest.mark.parametrize("name", catalog.NAMES)
def test_each_experiment_is_its_modules_own_definition(name):
    experiment = catalog.experiment(name)
    module = importlib.import_module(f"gptlab.experiments.{name}")
    # the name its folder's experiment.json and its results carry is the module's
    assert module.EXPERIMENT is experiment and module.NAME == name
    assert experiment.run.__module__ == module.__name__
    assert experiment.tables.__module__ == module.__name__
    assert experiment.title and experiment.figures
    assert all(f.endswith(".png") for f in experiment.figures)
    assert len({c.key for c in experiment.claims}) == len(experiment.claims)


@pytest.mark.parametrize("name", catalog.NAMES)
def test_each_experiment_has_a_quick_and_a_default_size_of_one_kind(name):
    sizes = catalog.experiment(name).sizes
    assert sorted(sizes) == sorted(SIZE_NAMES)
    for key, size in sizes.items():
        assert dataclasses.is_dataclass(size) and size.name == key  # results["size"]
        with pytest.raises(dataclasses.FrozenInstanceError):
            size.name = "other"
    assert type(sizes["quick"]) is type(sizes["default"])


@pytest.mark.parametrize("name", catalog.NAMES)
def test_each_run_takes_the_commands_flags(name):
    parameters = inspect.signature(catalog.experiment(name).run).parameters
    assert list(parameters)[:len(RUN_PARAMETERS)] == RUN_PARAMETERS
    assert "log" in parameters
    # --model is accepted by the CLI exactly where the experiment reads a model
    assert ("model" in parameters) == (name in READ_A_MODEL)


@pytest.mark.parametrize("name", catalog.NAMES)
def test_its_shipped_results_render_and_run_over_its_units(name):
    experiment, results = catalog.experiment(name), shipped_results.load(name)
    assert results["experiment"] == name
    tables = experiment.tables(results)
    assert tables
    for title, (header, rows) in tables:
        assert title.endswith(":") and rows
        assert all(len(row) == len(header) for row in rows), title
    notes = experiment.notes(results)
    assert isinstance(notes, list) and all(isinstance(n, str) and n for n in notes)
    # the units the shipped claims say they ran over are the ones the experiment declares
    words = {"n": "lengths", **{u: u for u in UNITS}}
    used = [words[c["units"].split()[0]] for c in results["claims"]]
    assert sorted(set(used)) == sorted(experiment.units)


def test_a_definition_without_both_sizes_or_with_unknown_units_is_refused():
    norm = catalog.experiment("norm")
    with pytest.raises(ValueError, match="sizes must be"):
        dataclasses.replace(norm, sizes={"default": norm.sizes["default"]})
    with pytest.raises(ValueError, match="units must be"):
        dataclasses.replace(norm, units=("epochs",))
    with pytest.raises(ValueError, match="units must be"):
        dataclasses.replace(norm, units=())


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
