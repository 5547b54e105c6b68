"""Fixtures shared across test modules."""

import builtins

import pytest
import torch


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
