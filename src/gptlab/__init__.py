"""gptlab: build, count, train, sample, convert and look inside GPT-style transformers."""

from gptlab.config import GPTConfig
from gptlab.loading import load
from gptlab.model import GPT

__all__ = ["GPT", "GPTConfig", "load"]
__version__ = "0.1.0"
