"""Shared by the experiment tests: an experiment run once at its --quick size, its results,
and running it again on a copy of its folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gptlab.cli.experiment import GENERATE_THEIR_DATA
from gptlab.cli.main import main
from gptlab.experiments import catalog
from gptlab.experiments.grid import GRID_FILE


@pytest.fixture
def rerun(tmp_path, capsys):
    """rerun(folder, name) -> SimpleNamespace(code, out, grid_before, grid_after, results):
    `gptlab experiment NAME --quick` run again on a copy of folder (its data the folder's
    sibling data/), what it printed, its grid state files before and after ({name: state}:
    grid.json, or one per data directory), its new results."""
    def grids(copy: Path) -> dict[str, dict]:
        return {str(p.relative_to(copy)): json.loads(p.read_text())
                for p in sorted(copy.glob("grid*.json"))}

    def run(folder: Path, name: str) -> SimpleNamespace:
        copy = tmp_path / name
        shutil.copytree(folder, copy)
        before = grids(copy)
        assert before, f"no {GRID_FILE} (or grid-*.json) in {folder}"
        data = [] if name in GENERATE_THEIR_DATA else ["--data", str(folder.parent / "data")]
        code = main(["experiment", name, "--quick", "--out", str(copy), *data])
        return SimpleNamespace(code=code, out=capsys.readouterr().out, grid_before=before,
                               grid_after=grids(copy),
                               results=json.loads((copy / "results.json").read_text()))

    return run


@pytest.fixture(scope="session")
def quick_experiment(tmp_path_factory, make_data):
    """quick_experiment(name) -> folder: `gptlab experiment NAME --quick`'s library call,
    run once per session at one thread on make_data's text (data/ beside the folder).
    Read-only: a test that writes copies it (rerun)."""
    done: dict[str, Path] = {}

    def run(name: str) -> Path:
        if name not in done:
            root = tmp_path_factory.mktemp(name)
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                data = None if name in GENERATE_THEIR_DATA else make_data(root / "data")
                catalog.experiment(name).run(root / name, data=data, quick=True,
                                             log=lambda line: None)
            finally:
                torch.set_num_threads(threads)
            done[name] = root / name
        return done[name]

    return run


@pytest.fixture(scope="module")
def results(experiment):
    """The module's experiment's results.json (each module names its `experiment`)."""
    return json.loads((experiment / "results.json").read_text())
