"""View 6, head scores: every head's previous-token, duplicate and induction scores and the
loss without it (gptlab.interp.heads), and the loss with one head switched off, on a prompt
or, by default, a random token sequence repeated twice."""

from __future__ import annotations

from typing import Any

import torch

from gptlab.errors import UsageError
from gptlab.interp.heads import ablate_heads, ablation_deltas, chance_scores, head_scores
from gptlab.lab.fields import MAX_TOKENS
from gptlab.lab.model import schemas
from gptlab.lab.model.tokens import below, encode_prompt, model_on_tokens, token_ids
from gptlab.lab.runs import Runs


def default_scores_prompt(run, seed: int) -> torch.Tensor:
    """A random token sequence repeated twice (1, 2n): the standard probe for induction."""
    n = min(MAX_TOKENS, run.model.config.block_size) // 2
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(run.model.config.vocab_size, (1, n), generator=g)
    return torch.cat([half, half], dim=1)


def _prompt_ids(run, body: schemas.HeadScoresRequest) -> torch.Tensor:
    if body.ids is not None:
        return token_ids(run, body.ids)
    if not body.prompt:
        return default_scores_prompt(run, body.seed)
    return encode_prompt(run, body.prompt)


def head_scores_view(runs: Runs, body: schemas.HeadScoresRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    idx = _prompt_ids(run, body)
    if idx.shape[1] < 2:
        raise UsageError("head scores need a prompt of at least 2 tokens")
    with runs.model_lock, torch.no_grad():
        scores = head_scores(run.model, idx)
        deltas = ablation_deltas(run.model, idx)
        _, loss = run.model(idx[:, :-1], idx[:, 1:])
    return {
        **model_on_tokens(run, idx),
        "scores": {k: t.tolist() for k, t in scores.items()},
        "chance": chance_scores(idx),
        "ablation_deltas": deltas.tolist(), "loss": loss.item(),
    }


def ablate_view(runs: Runs, body: schemas.AblateRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    cfg = run.model.config
    layer = below("layer", body.layer, cfg.n_layer)
    head = below("head", body.head, cfg.n_head)
    idx = _prompt_ids(run, body)
    if idx.shape[1] < 2:
        raise UsageError("ablation needs a prompt of at least 2 tokens")
    with runs.model_lock, torch.no_grad():
        _, loss = run.model(idx[:, :-1], idx[:, 1:])
        with ablate_heads(run.model, [(layer, head)]):
            _, ablated = run.model(idx[:, :-1], idx[:, 1:])
    return {"run": run.name, "layer": layer, "head": head, "loss": loss.item(),
            "ablated_loss": ablated.item(), "delta": ablated.item() - loss.item()}
