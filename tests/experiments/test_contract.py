"""The contract every experiment keeps (gptlab.experiments.contract): each catalog entry
is its module's own Experiment, named as its folder and results are, with a quick and a
default size of one kind, a run that takes the command's flags (--model exactly where the
CLI offers it), and tables, notes and claims that render its shipped results over the units
it declares; a definition without both sizes, or with units no claim can have, is refused."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

from gptlab.cli.experiment import READ_A_MODEL
from gptlab.experiments import catalog, shipped_results
from gptlab.experiments.claims import UNITS
from gptlab.experiments.contract import SIZE_NAMES, no_notes

RUN_PARAMETERS = ["out", "data", "quick", "seed", "steps", "progress"]


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


def test_an_experiment_without_notes_prints_none():
    assert catalog.experiment("norm").notes is no_notes and no_notes({"any": 1}) == []


def test_a_definition_without_both_sizes_or_with_unknown_units_is_refused():
    norm = catalog.experiment("norm")
    with pytest.raises(ValueError, match="sizes must be"):
        dataclasses.replace(norm, sizes={"default": norm.sizes["default"]})
    with pytest.raises(ValueError, match="units must be"):
        dataclasses.replace(norm, units=("epochs",))
    with pytest.raises(ValueError, match="units must be"):
        dataclasses.replace(norm, units=())
