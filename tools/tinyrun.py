"""A tiny trained run, made in a couple of seconds without the trainer: tiny-gpt2 on a
repeated sentence, character tokenizer. For the tests (tests/conftest.py), the lab's
screenshots (tools/screenshots.py) and its latency benchmark (bench/lab_latency.py); not
part of the package."""

from __future__ import annotations

from pathlib import Path

import torch

from gptlab.data.tokenizer import CharTokenizer
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.model_dir import TOKENIZER_FILE, save_model

TEXT = "the cat sat on the mat. the dog sat on the log. " * 40


def make_tiny_run(out_dir: str | Path, steps: int = 60, seed: int = 0) -> Path:
    """Train tiny-gpt2 for `steps` AdamW steps on TEXT and save a run folder."""
    # Tiny matrices gain nothing from intra-op threads, and on a busy machine the threads
    # fight: one thread trains this in under a second, two can take half a minute.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_and_save(Path(out_dir), steps, seed)
    finally:
        torch.set_num_threads(threads)


def _train_and_save(out_dir: Path, steps: int, seed: int) -> Path:
    tokenizer = CharTokenizer.from_text(TEXT)
    data = torch.tensor(tokenizer.encode(TEXT))
    torch.manual_seed(seed)
    config = GPTConfig.from_preset("tiny-gpt2", vocab_size=tokenizer.vocab_size)
    model = GPT(config)
    train_steps(model, data, steps, lr=3e-3, seed=seed)
    save_model(model, out_dir)
    tokenizer.save(out_dir / TOKENIZER_FILE)
    return out_dir


def train_steps(model: GPT, ids: torch.Tensor, steps: int, lr: float, seed: int) -> None:
    """`steps` AdamW steps on random windows of `ids` (8 a batch, the model's block size),
    then eval mode: a model trained a little, without the trainer."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    T = model.config.block_size
    for _ in range(steps):
        starts = torch.randint(len(ids) - T - 1, (8,), generator=g)
        x = torch.stack([ids[s : s + T] for s in starts])
        y = torch.stack([ids[s + 1 : s + T + 1] for s in starts])
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    model.eval()
