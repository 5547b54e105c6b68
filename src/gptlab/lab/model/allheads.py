"""The all-heads view (BertViz's model view): every layer's and head's attention pattern
for one prompt, from one recorded forward pass (gptlab.interp.hooks.capture_attention)."""

from __future__ import annotations

from typing import Any

from gptlab.interp.hooks import capture_attention
from gptlab.lab.model import schemas
from gptlab.lab.model.tokens import encode_prompt, model_on_tokens
from gptlab.lab.runs import Runs


def all_heads_view(runs: Runs, body: schemas.AllHeadsRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    idx = encode_prompt(run, body.prompt, schemas.MAX_GRID_TOKENS)
    with runs.model_lock:
        weights = capture_attention(run.model, idx)[:, 0]  # (L, nh, T, T)
    return {**model_on_tokens(run, idx),
            "limit": min(run.model.config.block_size, schemas.MAX_GRID_TOKENS),
            "attention": weights.double().tolist()}
