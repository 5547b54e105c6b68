"""The whole-model view: one token of a text through every stage of a run's model, as the
chapter draws it (gptlab.interp.walk), and the run's parameters by part
(gptlab.model.params), where the feed-forward networks hold about two thirds."""

from __future__ import annotations

from typing import Any

from gptlab.interp.walk import FFNStep, NormStep, Reading, walk_token
from gptlab.lab.model import schemas
from gptlab.lab.model.tokens import as_list, encode_at, model_on_tokens
from gptlab.lab.runs import Runs
from gptlab.model.params import accounting


def _norm(n: NormStep | None) -> dict[str, Any] | None:
    if n is None:
        return None
    return {"kind": n.kind, "input": as_list(n.input), "mean": n.mean, "scale": n.scale,
            "normalized": as_list(n.normalized), "weight": as_list(n.weight),
            "bias": None if n.bias is None else as_list(n.bias), "output": as_list(n.output)}


def _ffn(f: FFNStep) -> dict[str, Any]:
    return {"kind": f.kind, "input": as_list(f.input), "expand": as_list(f.expand),
            "up": None if f.up is None else as_list(f.up), "activation": as_list(f.activation),
            "fired": f.fired, "units": f.expand.numel(), "output": as_list(f.output)}


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


def walk_view(runs: Runs, body: schemas.WalkRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    idx, position = encode_at(run, body.text, body.position, schemas.MAX_WALK_TOKENS)
    with runs.model_lock:
        w = walk_token(run.model, idx, position, top=body.top)
    decode = run.tokenizer.decode

    def reading(r: Reading) -> dict[str, Any]:
        return {"name": r.name, "vector": as_list(r.vector), "norm": r.norm,
                "lens": [{"id": i, "token": decode([i]), "p": p}
                         for i, p in zip(r.lens_ids, r.lens_probs, strict=True)]}

    top_p, top_ids = w.probs.topk(min(body.top, w.probs.numel()))  # a vocabulary under top
    cfg = run.model.config
    return {
        **model_on_tokens(run, idx), "limit": min(cfg.block_size, schemas.MAX_WALK_TOKENS),
        "position": w.position, "token": decode([w.tokens[w.position]]),
        "n_embd": cfg.n_embd, "ffn_hidden": cfg.ffn_hidden, "vocab_size": cfg.vocab_size,
        "mlp": cfg.mlp, "norm": cfg.norm, "norm_position": cfg.norm_position,
        "pos_encoding": cfg.pos_encoding, "tie_embeddings": cfg.tie_embeddings,
        "embed": as_list(w.embed),
        "pos_embed": None if w.pos_embed is None else as_list(w.pos_embed),
        "embedded": reading(w.embedded),
        "blocks": [{"layer": b.layer, "input": as_list(b.input), "norm_1": _norm(b.norm_1),
                    "attn_out": as_list(b.attn_out), "attention": as_list(b.attention),
                    "add_1": reading(b.add_1), "norm_2": _norm(b.norm_2), "ffn": _ffn(b.ffn),
                    "add_2": reading(b.add_2), "output": as_list(b.output)} for b in w.blocks],
        "final_norm": _norm(w.final_norm),
        "top": [{"id": int(i), "token": decode([int(i)]), "p": float(p)}
                for p, i in zip(top_p, top_ids, strict=True)],
        "logits": [float(w.logits[int(i)]) for i in top_ids],
        # the last stage's temperature control re-softmaxes these in the page
        "all_logits": as_list(w.logits),
        "params": param_share(cfg),
    }
