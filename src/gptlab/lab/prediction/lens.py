"""The logit-lens view: what a run would predict after each block, at each position of a
text (gptlab.interp.lens), and how each part of the residual stream pushes one next token's logit
(gptlab.interp.attribution's direct logit attribution).

Both come from the library as `gptlab lens` and `gptlab attribute` call it, so the grid's
last row is the model's own next-token distribution and the parts sum to its logit.
"""

from __future__ import annotations

from typing import Any

import torch

from gptlab.interp import lens
from gptlab.interp.attribution import logit_attribution
from gptlab.interp.hooks import eval_mode
from gptlab.interp.residuals import check_pre_norm
from gptlab.lab.prediction import schemas
from gptlab.lab.prediction.nexttoken import encode_text
from gptlab.lab.runs import Runs

CHOICES = 20  # the model's likeliest next tokens offered as the attribution's target


def lens_view(runs: Runs, body: schemas.LensRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    check_pre_norm(run.model)  # a post-norm model's stream does not decompose: one line
    idx = encode_text(run, body.text)
    decode = run.tokenizer.decode
    with runs.model_lock, torch.no_grad(), eval_mode(run.model):
        logits = lens.logit_lens(run.model, idx)[:, 0]  # (rows, T, vocab)
        probs, ids = lens.top_tokens(logits, body.top)  # (rows, T, k)
        own = torch.softmax(logits[-1, -1].double(), dim=-1)  # the model's own distribution
        choices = torch.argsort(own, descending=True, stable=True)[:CHOICES]
        target = int(choices[0]) if body.target is None else body.target
        parts = logit_attribution(run.model, idx, target)  # refuses an id outside the vocab
    values = [float(v) for v in parts.values[:, 0].double()]
    cfg = run.model.config
    return {
        "run": run.name, "tokens": [decode([i]) for i in idx[0].tolist()],
        "ids": idx[0].tolist(), "n_layer": cfg.n_layer, "n_head": cfg.n_head,
        "limit": min(cfg.block_size, schemas.MAX_NEXT_TOKENS), "vocab_size": cfg.vocab_size,
        "tie_embeddings": cfg.tie_embeddings,
        "rows": lens.depth_names(cfg.n_layer),
        "top_ids": ids.tolist(), "top_probs": probs.double().tolist(),
        "top_tokens": [[[decode([i]) for i in cell] for cell in row] for row in ids.tolist()],
        "choices": [{"id": int(i), "token": decode([int(i)]), "p": float(own[i])}
                    for i in choices],
        "attribution": {
            "target": target, "token": decode([target]), "position": parts.position,
            "labels": parts.labels, "values": values, "sum": sum(values),
            "logit": float(parts.total[0]),
        },
    }
