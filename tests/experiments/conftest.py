"""Shared by the experiment tests: running an experiment again on a copy of its folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from gptlab.cli.main import main
from gptlab.experiments.grid import GRID_FILE


@pytest.fixture
def rerun(tmp_path, capsys):
    """rerun(folder, name) -> SimpleNamespace(code, out, grid_before, grid_after, results):
    `gptlab experiment NAME --quick` run again on a copy of folder (its data the folder's
    sibling data/), what it printed, its grid.json before and after, its new results."""
    def run(folder: Path, name: str) -> SimpleNamespace:
        copy = tmp_path / name
        shutil.copytree(folder, copy)
        before = json.loads((copy / GRID_FILE).read_text())
        code = main(["experiment", name, "--quick", "--out", str(copy),
                     "--data", str(folder.parent / "data")])
        return SimpleNamespace(code=code, out=capsys.readouterr().out, grid_before=before,
                               grid_after=json.loads((copy / GRID_FILE).read_text()),
                               results=json.loads((copy / "results.json").read_text()))

    return run
