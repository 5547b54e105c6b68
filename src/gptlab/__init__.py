"""gptlab: build, count, train, sample, convert and look inside GPT-style transformers.

    from gptlab import GPT, GPTConfig, load, train, TrainConfig

The names are imported on first use (PEP 562): `import gptlab`, and every gptlab module
the CLI parses with, stays free of torch and of the optional extras.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gptlab.version import __version__

# name -> (module, attribute). `train` is the function; its package is gptlab.training.
_LAZY = {
    "GPT": ("gptlab.model.gpt", "GPT"),
    "GPTConfig": ("gptlab.model.config", "GPTConfig"),
    "load": ("gptlab.loading", "load"),
    "train": ("gptlab.training.run", "train"),
    "TrainConfig": ("gptlab.training.config", "TrainConfig"),
}

__all__ = ["GPT", "GPTConfig", "TrainConfig", "__version__", "load", "train"]

if TYPE_CHECKING:
    from gptlab.loading import load
    from gptlab.model.config import GPTConfig
    from gptlab.model.gpt import GPT
    from gptlab.training.config import TrainConfig
    from gptlab.training.run import train


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'gptlab' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # imported once; later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
