"""The experiments' --quick runs, each trained once for the session on make_data's text
(the folder NAME of a folder of its own: data/ beside it). Read-only: a test that writes
copies it. (context's lives in tests/conftest.py: the lab's tests use it too.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gptlab.experiments import norm, scale


def _quick(tmp_path_factory, make_data, experiment) -> Path:
    name = experiment.NAME
    root = tmp_path_factory.mktemp(f"experiment-{name}")
    data = make_data(root / "data")
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is as fast, and never spin-waits
    try:
        experiment.run(root / name, data=data, quick=True, log=lambda line: None)
    finally:
        torch.set_num_threads(before)
    return root / name


@pytest.fixture(scope="session")
def norm_experiment(tmp_path_factory, make_data) -> Path:
    """`gptlab experiment norm --quick`: 16 tiny runs (pre/post, warm-up or none, depths
    1 and 2, two rates, seed 1337), results.json, report.md, norm.png."""
    return _quick(tmp_path_factory, make_data, norm)


@pytest.fixture(scope="session")
def scale_experiment(tmp_path_factory, make_data) -> Path:
    """`gptlab experiment scale --quick`: 4 tiny runs (d_k 8 and 32, scaled or not, seed
    1337), results.json, report.md, scale.png."""
    return _quick(tmp_path_factory, make_data, scale)
