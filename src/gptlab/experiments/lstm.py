"""The recurrence experiment's baseline and what it measures on both kinds of model: an LSTM
language model (torch.nn.LSTM between an embedding and a linear head: the chapter's
previous model; not a gptlab model, so not a gptlab run), a plain training loop for models
that are not runs, and the gradient of the loss at one position with respect to the input
embedding k positions earlier.

The LSTM's weights are saved with safetensors (atomically) beside a record of what it was
asked to be, so a second call reuses it (`cached`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from gptlab.files.atomic import atomic_path, read_json_object, write_json
from gptlab.training.schedule import lr_at

Logits = Callable[[Tensor], Tensor]  # input embeddings (B, T, E) -> logits (B, T, V)


class LSTMModel(nn.Module):
    """Embedding -> one-or-more-layer LSTM -> linear head (untied)."""

    def __init__(self, vocab_size: int, embed: int, hidden: int, layers: int = 1) -> None:
        super().__init__()
        self.shape = {"vocab_size": vocab_size, "embed": embed, "hidden": hidden,
                      "layers": layers}
        self.embedding = nn.Embedding(vocab_size, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab_size)

    def logits_of_embeddings(self, x: Tensor) -> Tensor:
        return self.head(self.lstm(x)[0])

    def forward(self, idx: Tensor) -> Tensor:
        return self.logits_of_embeddings(self.embedding(idx))


def lstm_parameters(vocab_size: int, embed: int, hidden: int, layers: int = 1) -> int:
    """LSTMModel's parameter count by arithmetic: per layer four gates, each an input and a
    recurrent matrix and two biases (PyTorch keeps b_ih and b_hh)."""
    lstm = sum(4 * (hidden * ((embed if i == 0 else hidden) + hidden) + 2 * hidden)
               for i in range(layers))
    return vocab_size * embed + lstm + hidden * vocab_size + vocab_size


def matching_hidden(target: int, vocab_size: int, embed: int, layers: int = 1) -> int:
    """The hidden size whose LSTMModel comes closest to `target` parameters."""
    return min(range(1, 4096), key=lambda h: abs(lstm_parameters(vocab_size, embed, h, layers)
                                                - target))


def gpt_logits(model: nn.Module) -> Logits:
    """A GPT as a function of its input embeddings: its token embedding's output replaced
    by the given tensor (a forward hook), everything after it the model's own."""
    def logits(x: Tensor) -> Tensor:
        handle = model.wte.register_forward_hook(lambda _m, _i, _o: x)
        try:
            idx = torch.zeros(x.shape[:2], dtype=torch.long, device=x.device)
            return model(idx)[0]
        finally:
            handle.remove()
    return logits


def lstm_logits(model: LSTMModel) -> Logits:
    return model.logits_of_embeddings


def distance_gradients(logits: Logits, embeddings: Tensor, targets: Tensor,
                       position: int) -> Tensor:
    """(B, position + 1): the norm of d loss_position / d embedding_(position - k) for
    k = 0..position, per row, where loss_position is the cross-entropy of the next token at
    `position` (targets[:, position]). One backward pass: the loss at one position reaches
    every earlier embedding."""
    x = embeddings.detach().requires_grad_(True)
    out = logits(x)[:, position]
    loss = F.cross_entropy(out, targets[:, position], reduction="sum")  # rows independent
    (grad,) = torch.autograd.grad(loss, x)
    norms = grad[:, : position + 1].norm(dim=-1)  # (B, position + 1), by absolute position
    return norms.flip(-1)  # index k: the embedding k positions back


def train_model(model: nn.Module, loss_of: Callable[[nn.Module, Tensor, Tensor], Tensor],
                batches: Iterator[tuple[Tensor, Tensor]], steps: int, lr: float,
                warmup: int, weight_decay: float = 0.1, grad_clip: float = 1.0) -> list[float]:
    """AdamW (betas 0.9, 0.99, as the CPU recipes) with warm-up and cosine decay to lr/10
    (gptlab.training.schedule.lr_at), gradients clipped at grad_clip; returns each step's
    loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99),
                                  weight_decay=weight_decay)
    model.train()
    losses = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, lr, lr / 10, warmup, steps)
        x, y = next(batches)
        loss = loss_of(model, x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


def lstm_loss(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """Cross-entropy of the next token; targets of -1 left out (as GPT.forward)."""
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=-1)


def gpt_loss(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    return model(x, y)[1]


def cached(folder: Path, name: str, spec: dict[str, Any], make: Callable[[], nn.Module],
           train: Callable[[nn.Module], dict[str, Any]]) -> tuple[nn.Module, dict[str, Any]]:
    """(model, record): FOLDER/NAME.safetensors loaded into make() where FOLDER/NAME.json
    records the same spec, trained at the same torch thread count (as a grid's runs:
    gptlab.experiments.grid); else make() trained by train(model) -> record (its numbers),
    then the weights and {"spec", "record"} written, each atomically. record gains
    "reused" and "train_s"."""
    spec = {**spec, "threads": torch.get_num_threads()}
    weights, meta = folder / f"{name}.safetensors", folder / f"{name}.json"
    model = make()
    if weights.is_file() and meta.is_file():
        saved = read_json_object(meta, f"{name}'s record")
        if saved.get("spec") == spec:
            model.load_state_dict(load_file(str(weights)))
            model.eval()
            return model, {**saved["record"], "reused": True}
    t0 = time.perf_counter()
    record = train(model)
    record["train_s"] = round(time.perf_counter() - t0, 2)
    with atomic_path(weights) as tmp:
        # cloned: a tied matrix (a GPT's wte and lm_head) is two names for one tensor,
        # which safetensors refuses to write
        state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        save_file(state, str(tmp), metadata={"format": "pt"})
    write_json(meta, {"spec": spec, "record": record})
    return model, {**record, "reused": False}
