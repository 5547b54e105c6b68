"""The two trainings the lab's "Watch it learn" view starts: their data, model and settings.

induction: the task the interp tests train on (tests/interp/): rows of a random
segment of distinct tokens, 8 to 24 long, repeated to the end of a 64-token row after a
random prefix, so the next token of a copy is known only from content. A 2-layer, 2-head
model learns it with a previous-token head in layer 0 and an induction head in layer 1,
and the induction score jumps in a phase change. The tokens are 64 printable characters,
so a sample reads as text ("k3Qz...k3Qz..." continued).

shakespeare: the corpus the product embeds (gptlab.data.corpus), char-level, on a small model.

Each task writes an ordinary data directory (gptlab.data.prepared.prepare) once, under the runs
folder's `live-data/`, so the run it trains resumes with `gptlab train --data ... --resume`.
"""

from __future__ import annotations

import importlib.util
import string
from dataclasses import dataclass
from pathlib import Path

import torch

from gptlab.data.corpus import shakespeare_text
from gptlab.data.prepared import ensure_prepared
from gptlab.data.tokenizer import CharTokenizer
from gptlab.model.config import GPTConfig
from gptlab.training.config import TrainConfig

DATA_FOLDER = "live-data"
INDUCTION_ALPHABET = (string.ascii_letters + string.digits + "#$")  # 64 symbols
INDUCTION_ROW, INDUCTION_SEGMENT = 64, (8, 24)
INDUCTION_ROWS = 4000  # 256k tokens: the training never sees a window twice


@dataclass(frozen=True)
class Task:
    name: str
    model: GPTConfig  # vocab_size is taken from the data
    prompt: str  # what the periodic sample continues
    description: str

    def settings(self, steps: int, every: int, seed: int) -> TrainConfig:
        return TrainConfig.from_dict({**TRAIN[self.name], "max_iters": steps,
                                      "eval_interval": every, "seed": seed,
                                      "warmup_iters": min(50, steps),
                                      "checkpoint_interval": max(every, 250)})


# The interp test's recipe (INDUCTION_TRAINING there): AdamW at a constant 2e-3 after a
# 50-step warm-up, no weight decay, 32 rows a step. Evaluations are cheap (2 batches) since
# the view evaluates often to draw the scores' curves.
COMMON = dict(eval_iters=2, log_interval=5, device="cpu", whole_val=False, dtype="float32",
              # a TensorBoard log beside metrics.jsonl (RUN/tb/), where the package is there
              log="tensorboard" if importlib.util.find_spec("tensorboard") else "none")
TRAIN = {
    "induction": dict(COMMON, batch_size=32, learning_rate=2e-3, min_lr=2e-3,
                      weight_decay=0.0),
    "shakespeare": dict(COMMON, batch_size=16, learning_rate=3e-3, min_lr=3e-4),
}

def induction_text(seed: int = 0, rows: int = INDUCTION_ROWS) -> str:
    """rows rows of INDUCTION_ROW characters: a random prefix shorter than the segment, then
    a segment of distinct random symbols repeated until the row ends (as in
    tests/interp/conftest.py's _induction_batch)."""
    g = torch.Generator().manual_seed(seed)
    low, high = INDUCTION_SEGMENT
    vocab = len(INDUCTION_ALPHABET)
    out = []
    for _ in range(rows):
        L = int(torch.randint(low, high + 1, (1,), generator=g))
        seg = torch.randperm(vocab, generator=g)[:L]
        prefix = torch.randint(vocab, (int(torch.randint(L, (1,), generator=g)),), generator=g)
        row = torch.cat([prefix, seg.repeat(INDUCTION_ROW // L + 1)])[:INDUCTION_ROW]
        out.append("".join(INDUCTION_ALPHABET[i] for i in row.tolist()))
    return "".join(out)


def induction_prompt(seed: int = 1) -> str:
    """A segment the data never showed in this order, twice, and its first 3 symbols: a
    model with an induction circuit continues the copy."""
    g = torch.Generator().manual_seed(seed)
    seg = "".join(INDUCTION_ALPHABET[i] for i in torch.randperm(64, generator=g)[:12].tolist())
    return seg + seg + seg[:3]


TASKS = {
    "induction": Task(
        "induction",
        GPTConfig(vocab_size=64, block_size=INDUCTION_ROW, n_layer=2, n_head=2, n_embd=64,
                  ffn_hidden=64, pos_encoding="rope", bias=False),
        prompt=induction_prompt(), description="2 layers, 2 heads on repeated random segments"),
    "shakespeare": Task(
        "shakespeare",
        GPTConfig(vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=64,
                  pos_encoding="rope", bias=False),
        prompt="ROMEO:\n", description="2 layers, 4 heads, char-level Shakespeare"),
}


def _text(task: str) -> str:
    if task == "induction":
        return induction_text()
    return shakespeare_text()


def ensure_data(runs_root: Path, task: str) -> Path:
    """The task's data directory under runs_root/live-data/ (the lab's own folder, so
    other data there is replaced; anything but data is refused), prepared on first use."""
    data_dir = runs_root / DATA_FOLDER / task

    def make():
        text = _text(task)
        return text, (CharTokenizer(sorted(INDUCTION_ALPHABET)) if task == "induction"
                      else CharTokenizer.from_text(text))

    ensure_prepared(data_dir, f"gptlab lab: {task}", make, replace_other=True, by="lab")
    return data_dir
