"""The next-token view: what a run predicts after some text, filter by filter, and where
its newest token looks.

The filters are gptlab.model.decoding.filter_logits's (with a SamplingSettings), the code
`gptlab sample` runs, so the bars on the page are the distribution `gptlab sample` draws
from with the same settings. "Append" draws one token with gptlab.model.decoding.generate_tokens,
the loop behind `gptlab sample`, with a generator seeded as `gptlab sample --seed` seeds it.
"""

from __future__ import annotations

from typing import Any

import torch

from gptlab.errors import UsageError
from gptlab.interp.hooks import capture_attention, eval_mode
from gptlab.lab.model.tokens import encode_prompt
from gptlab.lab.prediction import schemas
from gptlab.lab.runs import Runs
from gptlab.model.decoding import SamplingSettings, filter_logits, generate_tokens


def settings_of(body: schemas.NextTokenRequest) -> SamplingSettings:
    return SamplingSettings(body.temperature, body.top_k, body.top_p)


def encode_text(run, text: str) -> torch.Tensor:
    """(1, T) ids of text, T within the model's context and the views' limit."""
    return encode_prompt(run, text, schemas.MAX_NEXT_TOKENS, what="text")


def distribution(logits: torch.Tensor, settings: SamplingSettings, show: int) -> dict[str, Any]:
    """logits (V,) -> the `show` likeliest tokens, each with its probability before the
    cuts, whether top-k and then top-p keep it, what cut it, and its probability after the
    cuts (renormalised over the survivors, as sample_next draws). At temperature 0 (greedy)
    every token but the argmax is cut by greedy itself, whatever top-k and top-p say; the
    probabilities before the cuts are then the model's own (temperature 1), since the limit
    T -> 0 puts them all on one token."""
    row = logits[None].float()  # (1, V)
    greedy = settings.temperature == 0
    t = 1.0 if greedy else settings.temperature
    scaled = filter_logits(row, SamplingSettings(t))  # temperature only
    after_k = filter_logits(row, SamplingSettings(t, settings.top_k))
    after_p = filter_logits(row, SamplingSettings(t, settings.top_k, settings.top_p))
    drawn = filter_logits(row, settings)  # what sample_next draws from (greedy: the argmax)
    # float64 softmax of the filtered logits: what sample_next's multinomial draws from
    before = torch.softmax(scaled.double(), dim=-1)[0]
    final = torch.softmax(drawn.double(), dim=-1)[0]
    order = torch.argsort(before, descending=True, stable=True)[:show]
    kept_k, kept_p, kept = (~torch.isinf(x[0]) for x in (after_k, after_p, drawn))

    def cut(i: int) -> str | None:
        return (None if kept[i] else "greedy" if greedy else "top_k" if not kept_k[i]
                else "top_p")

    return {
        "candidates": [{"id": int(i), "p": float(before[i]), "top_k": bool(kept_k[i]),
                        "top_p": bool(kept[i]), "cut": cut(i), "final": float(final[i])}
                       for i in order.tolist()],
        "survivors": int(kept.sum()), "after_top_k": int(kept_k.sum()),
        "after_top_p": int(kept_p.sum()),
        "vocab_size": int(logits.numel()), "greedy_id": int(drawn[0].argmax()),
    }


def next_token_view(runs: Runs, body: schemas.NextTokenRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    settings = settings_of(body)
    idx = encode_text(run, body.text)
    with runs.model_lock, torch.no_grad(), eval_mode(run.model):
        logits, _ = run.model(idx)  # the plain forward `gptlab sample` runs
        weights = capture_attention(run.model, idx)  # (n_layer, 1, nh, T, T)
    dist = distribution(logits[0, -1], settings, body.show)
    for c in dist["candidates"]:
        c["token"] = run.tokenizer.decode([c["id"]])
    cfg = run.model.config
    return {
        "run": run.name, "tokens": [run.tokenizer.decode([i]) for i in idx[0].tolist()],
        "ids": idx[0].tolist(), "n_layer": cfg.n_layer, "n_head": cfg.n_head,
        "limit": min(cfg.block_size, schemas.MAX_NEXT_TOKENS),
        "settings": {"temperature": settings.temperature, "top_k": settings.top_k,
                     "top_p": settings.top_p, "greedy": settings.greedy},
        **dist,
        # where the newest token looks: (n_layer, n_head, T), each row sums to 1
        "newest_attention": weights[:, 0, :, -1, :].double().tolist(),
    }


def append_view(runs: Runs, body: schemas.AppendRequest) -> dict[str, Any]:
    """One more token, chosen as `gptlab sample` chooses it: greedy (temperature 0) or
    drawn with the settings from a generator seeded with body.seed."""
    run = runs.load(body.run)
    greedy = body.mode == "greedy"
    settings = SamplingSettings(0.0) if greedy else settings_of(body)
    idx = encode_text(run, body.text)
    limit = min(run.model.config.block_size, schemas.MAX_NEXT_TOKENS)
    if idx.shape[1] >= limit:  # one more would not fit the view (nor, here, the context)
        raise UsageError(f"the text is at this view's limit of {limit} tokens: undo or "
                         f"shorten it to append")
    generator = torch.Generator().manual_seed(body.seed)
    with runs.model_lock:
        token = int(next(generate_tokens(run.model, idx, 1, settings, generator))[0, 0])
    piece = run.tokenizer.decode([token])
    return {"run": run.name, "mode": body.mode, "seed": None if greedy else body.seed,
            "id": token, "token": piece, "text": body.text + piece}
