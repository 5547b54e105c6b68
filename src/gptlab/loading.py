"""`gptlab.load`: any model gptlab can run, with its tokenizer, in one line.

    model, tokenizer = gptlab.load("runs/demo")          # a run: its latest weights
    model, tokenizer = gptlab.load("runs/demo/best")     # ...or its best ones
    model, tokenizer = gptlab.load("shakespeare")        # a model gptlab ships
    model, tokenizer = gptlab.load("openai-community/gpt2")  # a Hugging Face dir or hub name

A path is read as what it holds: a gptlab model directory (config.json with GPTConfig
fields, model.safetensors, tokenizer.json; every run directory is one), else a Hugging Face
directory (config.json with a model_type); a name that is no directory here is a model
gptlab ships (gptlab.pretrained, checksums verified), else a hub name.
"""

from __future__ import annotations

from pathlib import Path

import torch

from gptlab.convert import hf
from gptlab.convert.hf_config import config_from_hf
from gptlab.data.tokenizer import Tokenizer, load_tokenizer
from gptlab.errors import UsageError
from gptlab.files import kinds, model_dir
from gptlab.inference import quantize
from gptlab.inference.formats import WEIGHT_CHOICES
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.pretrained import is_shipped, verified


def load(path: str | Path, device: str | torch.device | None = None,
         weights: str | None = None) -> tuple[GPT, Tokenizer]:
    """(model in eval mode on `device`, its tokenizer), from a run or model directory, a
    directory `gptlab convert` wrote, a shipped model's name ("shakespeare"), a Hugging
    Face directory or a hub name. device None:
    the CPU. The tokenizer has encode, decode and vocab_size, whatever its kind.

    weights: None keeps the weights as saved; fp32, fp16, bf16, int8 or auto makes the
    model an inference model with its matrices in that format (gptlab.inference.quantize; auto: the
    fastest on this machine), and `model.decode_choice` says what was picked and why."""
    device = torch.device("cpu" if device is None else device)
    if weights is not None and weights not in WEIGHT_CHOICES:
        raise UsageError(f"weights must be one of {', '.join(WEIGHT_CHOICES)}, "
                         f"got {weights!r}")
    found, is_hf = _locate(path)
    if is_hf:
        model = hf.from_hf(found).to(device)
    else:
        model = model_dir.load_model(found, device=device)
    tokenizer = _tokenizer(found, is_hf, path, model.config)
    model.eval()
    if weights is not None:
        model.decode_choice = quantize.quantize(model, weights)
    return model, tokenizer


def describe(path: str | Path) -> tuple[GPTConfig, Tokenizer]:
    """(config, tokenizer) of the model `load(path)` gives, checked as load checks them,
    without reading its weights (a fine-tune's plan needs only these)."""
    found, is_hf = _locate(path)
    if is_hf:
        config, _ = config_from_hf(hf.read_hf_config(found))
    else:
        config = model_dir.load_config(found)
    return config, _tokenizer(found, is_hf, path, config)


def _locate(path: str | Path) -> tuple[Path, bool]:
    """(the directory to read, whether it is a Hugging Face one): a gptlab model directory
    as it is, a shipped model by name (its checksums verified), else a Hugging Face
    directory or hub name (downloaded if need be)."""
    source = Path(path).expanduser()
    if (source / model_dir.CONFIG_FILE).is_file() and not kinds.is_hf_dir(source):
        return source, False
    if is_shipped(str(path)) and not source.exists():
        return verified(str(path)), False
    if not source.exists() and (source.is_absolute() or str(path).startswith((".", "~"))
                                or str(path).count("/") > 1):
        raise UsageError(f"model directory not found: {path}")  # a path, not a hub name
    return hf.resolve_hf_dir(path), True


def _tokenizer(found: Path, is_hf: bool, path: str | Path, config: GPTConfig) -> Tokenizer:
    if not is_hf:
        tokenizer = model_dir.load_tokenizer_of(found)
    elif not (found / hf.HF_TOKENIZER).is_file():
        raise UsageError(f"{found} has no {hf.HF_TOKENIZER}: gptlab reads tokenizers in the "
                         f"`tokenizers` library's format only")
    else:
        tokenizer = load_tokenizer(found / hf.HF_TOKENIZER)
    if tokenizer.vocab_size > config.vocab_size:
        raise UsageError(f"{path}: the tokenizer has {tokenizer.vocab_size} tokens but the model "
                         f"only {config.vocab_size}")
    return tokenizer
