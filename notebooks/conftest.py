"""The notebooks as tests: nbmake runs each (pyproject.toml's addopts and testpaths), in the
slow tier, in quick mode: GPTLAB_NOTEBOOK_QUICK=1 shrinks their trainings, the cells stay the
same. Their runs go to a temporary folder, and `--dtype auto` means float32 without a probe,
as in the rest of the suite (tests/conftest.py)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# A notebook's kernel is a child process: it inherits these.
os.environ["GPTLAB_NOTEBOOK_QUICK"] = "1"
os.environ["GPTLAB_AUTO_DTYPE"] = "float32"
for name in ("GPTLAB_NOTEBOOK_RUNS", "GPTLAB_CACHE"):  # fresh folders, gone at exit
    os.environ[name] = tempfile.mkdtemp(prefix=f"{name.lower()}-")
    atexit.register(shutil.rmtree, os.environ[name], ignore_errors=True)

# Each takes under a minute in quick mode on 2 cores; the limit leaves room for a busy machine.
NOTEBOOK_TIMEOUT_S = 180


@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects: the markers must be there
def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.timeout(NOTEBOOK_TIMEOUT_S))
