"""gptlab: build, count, train, sample, convert and look inside GPT-style transformers."""

from gptlab.loading import load
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT

__all__ = ["GPT", "GPTConfig", "load"]
__version__ = "0.1.0"
