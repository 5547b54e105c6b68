"""Fixtures shared across test modules."""

import atexit
import builtins
import os
import shutil
import tempfile

import pytest
import torch

# No test may depend on a timing probe (gptlab.probe) or write into the user's cache: what
# `--dtype auto` means is fixed, and probes.json and downloads go to a fresh directory.
os.environ["GPTLAB_AUTO_DTYPE"] = "float32"
os.environ["GPTLAB_CACHE"] = tempfile.mkdtemp(prefix="gptlab-test-cache-")
atexit.register(shutil.rmtree, os.environ["GPTLAB_CACHE"], ignore_errors=True)


@pytest.fixture
def one_thread():
    """Tiny models: one thread is as fast, and two threads on a busy 2-core machine
    spin-wait for each other (100x slower). Restored afterwards for other tests."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def without_transformers(monkeypatch):
    """Make `import transformers` fail, as on an install without the `gptlab[hf]` extra."""
    real_import = builtins.__import__

    def no_transformers(name, *args, **kwargs):
        if name == "transformers" or name.startswith("transformers."):
            raise ImportError("No module named 'transformers'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_transformers)


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory):
    """A lab runs folder: 'tiny' (tiny-gpt2 trained 40 steps), 'escape' (a symlink to a run
    outside the folder) and 'notarun' (an empty folder). Shared by the lab's API tests."""
    from tools.tinyrun import make_tiny_run

    root = tmp_path_factory.mktemp("runs")
    make_tiny_run(root / "tiny", steps=40)
    outside = tmp_path_factory.mktemp("outside")
    make_tiny_run(outside / "secret", steps=1)
    (root / "escape").symlink_to(outside / "secret", target_is_directory=True)
    (root / "notarun").mkdir()
    return root
