"""The whole-model view: one token of a text through every stage of a run's model, as the
chapter draws it (gptlab.interp.walk), and the run's parameters by part
(gptlab.model.params), where the feed-forward networks hold about two thirds."""

from __future__ import annotations

from typing import Any

import torch

from gptlab.errors import UsageError
from gptlab.interp.walk import FFNStep, NormStep, Reading, walk_token
from gptlab.lab import model_schemas as ms
from gptlab.lab.api import encode_prompt, model_on_tokens
from gptlab.lab.runs import Runs
from gptlab.model.params import accounting


def _vec(t: torch.Tensor) -> list[float]:
    return t.detach().double().tolist()


def _norm(n: NormStep | None) -> dict[str, Any] | None:
    if n is None:
        return None
    return {"kind": n.kind, "input": _vec(n.input), "mean": n.mean, "scale": n.scale,
            "normalized": _vec(n.normalized), "weight": _vec(n.weight),
            "bias": None if n.bias is None else _vec(n.bias), "output": _vec(n.output)}


def _ffn(f: FFNStep) -> dict[str, Any]:
    return {"kind": f.kind, "input": _vec(f.input), "expand": _vec(f.expand),
            "up": None if f.up is None else _vec(f.up), "activation": _vec(f.activation),
            "fired": f.fired, "units": f.expand.numel(), "output": _vec(f.output)}


def param_share(config) -> dict[str, Any]:
    """The run's parameters by part, from gptlab.model.params's rows (whole model)."""
    acc = accounting(config)
    part = {row.name: row.params * row.count for row in acc.rows}
    ffn, attention = part["feed-forward (per block)"], part["attention (per block)"]
    per_block_ffn = ffn // config.n_layer
    return {
        "total": acc.total,
        "embeddings": part["token embeddings (wte)"] + part["positions (wpe)"],
        "attention": attention, "ffn": ffn,
        "norms": part["norms (per block)"] + part["final norm (ln_f)"],
        "lm_head": part["lm_head"],
        "ffn_share_of_block": per_block_ffn / acc.per_block,
        "ffn_share_of_total": ffn / acc.total,
    }


def walk_view(runs: Runs, body: ms.WalkRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    idx = encode_prompt(run, body.text, ms.MAX_WALK_TOKENS, what="text")
    T = idx.shape[1]
    position = T - 1 if body.position is None else body.position
    if position >= T:
        raise UsageError(f"position must be between 0 and {T - 1} (the text has {T} "
                         f"tokens), got {position}")
    with runs.model_lock:
        w = walk_token(run.model, idx, position, top=body.top)
    decode = run.tokenizer.decode

    def reading(r: Reading) -> dict[str, Any]:
        return {"name": r.name, "vector": _vec(r.vector), "norm": r.norm,
                "lens": [{"id": i, "token": decode([i]), "p": p}
                         for i, p in zip(r.lens_ids, r.lens_probs, strict=True)]}

    top_p, top_ids = w.probs.topk(body.top)
    cfg = run.model.config
    return {
        **model_on_tokens(run, idx), "limit": min(cfg.block_size, ms.MAX_WALK_TOKENS),
        "position": w.position, "token": decode([w.tokens[w.position]]),
        "n_embd": cfg.n_embd, "ffn_hidden": cfg.ffn_hidden, "vocab_size": cfg.vocab_size,
        "mlp": cfg.mlp, "norm": cfg.norm, "norm_position": cfg.norm_position,
        "pos_encoding": cfg.pos_encoding, "tie_embeddings": cfg.tie_embeddings,
        "embed": _vec(w.embed), "pos_embed": None if w.pos_embed is None else _vec(w.pos_embed),
        "embedded": reading(w.embedded),
        "blocks": [{"layer": b.layer, "input": _vec(b.input), "norm_1": _norm(b.norm_1),
                    "attn_out": _vec(b.attn_out), "attention": _vec(b.attention),
                    "add_1": reading(b.add_1), "norm_2": _norm(b.norm_2), "ffn": _ffn(b.ffn),
                    "add_2": reading(b.add_2), "output": _vec(b.output)} for b in w.blocks],
        "final_norm": _norm(w.final_norm),
        "top": [{"id": int(i), "token": decode([int(i)]), "p": float(p)}
                for p, i in zip(top_p, top_ids, strict=True)],
        "logits": [float(w.logits[int(i)]) for i in top_ids],
        # the last stage's temperature control re-softmaxes these in the page
        "all_logits": _vec(w.logits),
        "params": param_share(cfg),
    }
