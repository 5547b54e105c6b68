"""`gptlab.load`: any model gptlab can run, with its tokenizer, in one line.

    model, tokenizer = gptlab.load("runs/demo")          # a run: its latest weights
    model, tokenizer = gptlab.load("runs/demo/best")     # ...or its best ones
    model, tokenizer = gptlab.load("openai-community/gpt2")  # a Hugging Face dir or hub name

A path is read as what it holds: a gptlab model directory (config.json with GPTConfig
fields, model.safetensors, tokenizer.json; every run directory is one), else a Hugging Face
directory (config.json with a model_type), else a hub name.
"""

from __future__ import annotations

from pathlib import Path

import torch

from gptlab.convert import hf
from gptlab.data.tokenizer import Tokenizer, load_tokenizer
from gptlab.errors import UsageError
from gptlab.files import model_dir
from gptlab.files.kinds import is_hf_dir
from gptlab.inference import quantize
from gptlab.inference.formats import WEIGHT_CHOICES
from gptlab.model.gpt import GPT


def load(path: str | Path, device: str | torch.device | None = None,
         weights: str | None = None) -> tuple[GPT, Tokenizer]:
    """(model in eval mode on `device`, its tokenizer), from a run or model directory, a
    directory `gptlab convert` wrote, a Hugging Face directory or a hub name. device None:
    the CPU. The tokenizer has encode, decode and vocab_size, whatever its kind.

    weights: None keeps the weights as saved; fp32, fp16, bf16, int8 or auto makes the
    model an inference model with its matrices in that format (gptlab.inference.quantize; auto: the
    fastest on this machine), and `model.decode_choice` says what was picked and why."""
    device = torch.device("cpu" if device is None else device)
    if weights is not None and weights not in WEIGHT_CHOICES:
        raise UsageError(f"weights must be one of {', '.join(WEIGHT_CHOICES)}, "
                         f"got {weights!r}")
    source = Path(path).expanduser()
    if (source / model_dir.CONFIG_FILE).is_file() and not is_hf_dir(source):
        model = model_dir.load_model(source, device=device)
        tokenizer = model_dir.load_tokenizer_of(source)
    elif not source.exists() and (source.is_absolute() or str(path).startswith((".", "~"))
                                  or str(path).count("/") > 1):
        raise UsageError(f"model directory not found: {path}")  # a path, not a hub name
    else:
        hf_dir = hf.resolve_hf_dir(path)
        model = hf.from_hf(hf_dir).to(device)
        if not (hf_dir / hf.HF_TOKENIZER).is_file():
            raise UsageError(f"{hf_dir} has no {hf.HF_TOKENIZER}: gptlab reads tokenizers in the "
                             f"`tokenizers` library's format only")
        tokenizer = load_tokenizer(hf_dir / hf.HF_TOKENIZER)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise UsageError(f"{path}: the tokenizer has {tokenizer.vocab_size} tokens but the model "
                         f"only {model.config.vocab_size}")
    model.eval()
    if weights is not None:
        model.decode_choice = quantize.quantize(model, weights)
    return model, tokenizer

