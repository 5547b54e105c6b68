"""What the views on a run share: its tokens and the indices asked of it, checked against
the run, and the start of every answer about them.

A prompt or text is encoded within the model's context and the view's limit, token ids the
page sends back are checked against the vocabulary, and a position, layer or head must be
one the run has: each refused as a UsageError in one line. The views of gptlab.lab.model
and gptlab.lab.prediction build their answers from model_on_tokens, their tensors sent as
float64 lists (as_list).
"""

from __future__ import annotations

from typing import Any

import torch

from gptlab.data.tokenizer import encode_checked
from gptlab.errors import UsageError
from gptlab.lab.fields import MAX_TOKENS, fmt_num


def encode_prompt(run, prompt: str, view_limit: int = MAX_TOKENS, what: str = "prompt"
                  ) -> torch.Tensor:
    """(1, T) token ids of prompt, within the model's context and the view's limit; `what`
    names the field in the errors."""
    context = run.model.config.block_size
    limit = "the model's context" if context <= view_limit else "this view's limit"
    return torch.tensor([encode_checked(run.tokenizer, prompt, f"the {what}",
                                        min(context, view_limit), limit=limit)])


def encode_at(run, text: str, position: int | None, view_limit: int
              ) -> tuple[torch.Tensor, int]:
    """The text encoded as encode_prompt does, and the token position asked for (None: the
    last), refused in one line past the text's end."""
    idx = encode_prompt(run, text, view_limit, what="text")
    T = idx.shape[1]
    position = T - 1 if position is None else position
    if position >= T:
        raise UsageError(f"position must be between 0 and {T - 1} (the text has {T} "
                         f"tokens), got {position}")
    return idx, position


def token_ids(run, value: list[int]) -> torch.Tensor:
    """(1, T) from a list of token ids sent back by the page (e.g. a random probe)."""
    limit = min(run.model.config.block_size, MAX_TOKENS)
    vocab = run.model.config.vocab_size
    if not 1 <= len(value) <= limit:
        raise UsageError(f"ids must be a list of 1 to {limit} integer token ids "
                         f"(the model's context is {run.model.config.block_size})")
    bad = [i for i in value if not 0 <= i < vocab]
    if bad:
        raise UsageError(f"token id {fmt_num(bad[0])} is outside the vocabulary (0..{vocab - 1})")
    return torch.tensor([value])


def below(name: str, value: int, n: int) -> int:
    """A layer or head index of this run: 0..n-1 (the model checked value >= 0)."""
    if not 0 <= value < n:
        raise UsageError(f"{name} must be between 0 and {n - 1}, got {fmt_num(value)}")
    return value


def as_list(t: torch.Tensor) -> list:
    """A tensor as nested lists of Python floats (float64, so JSON carries every digit)."""
    return t.detach().double().tolist()


def model_on_tokens(run, idx: torch.Tensor) -> dict[str, Any]:
    """What an answer about run's model on the tokens idx (1, T) starts with."""
    return {"run": run.name, "tokens": [run.tokenizer.decode([i]) for i in idx[0].tolist()],
            "ids": idx[0].tolist(), "n_layer": run.model.config.n_layer,
            "n_head": run.model.config.n_head}
