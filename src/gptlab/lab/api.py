"""What each view of the lab computes, as plain functions of the request body.

Each takes the request body as a model already checked against its limits
(gptlab.lab.models), calls gptlab's own code and returns JSON-ready data. What depends on
a run (a layer below its n_layer, a prompt in its vocabulary) is checked here, as a
UsageError. Masked scores (-inf) are sent as null, since JSON has no infinities; the page
draws them as -inf.
"""

from __future__ import annotations

import math
import threading
import zlib
from typing import Any

import torch

from gptlab import presets
from gptlab.attention import attention_steps, attention_weights
from gptlab.config import GPTConfig
from gptlab.errors import GptlabError, UsageError
from gptlab.lab import models as m
from gptlab.lab.runs import Runs
from gptlab.positional import RotaryEmbedding, apply_rope, sinusoidal_table

# Models are shared by every request; their capture switches are not.
_model_lock = threading.Lock()


def to_json(t: torch.Tensor) -> Any:
    """A tensor as nested lists, -inf as None (JSON has no infinities)."""
    t = t.detach().to(torch.float64)
    if torch.isinf(t).any():
        return [to_json(row) for row in t] if t.dim() > 1 else [
            None if math.isinf(x) else x for x in t.tolist()]
    return t.tolist()


# ----------------------------------------------------------------------------- 1. calculator


def seeded_inputs(tokens: list[str], d: int, seed: int) -> dict[str, torch.Tensor]:
    """Embeddings and W_Q, W_K, W_V rounded to 2 decimals, so a learner can redo the sums.

    A token's embedding depends on the seed and the token's text only: "the" twice gives
    two equal rows, and editing one token leaves the others' rows alone.
    """
    def randn(shape: tuple[int, ...], key: int, scale: float = 1.0) -> torch.Tensor:
        g = torch.Generator().manual_seed(key)
        sample = torch.randn(shape, generator=g, dtype=torch.float64) * scale
        return torch.round(sample * 100) / 100

    x = torch.stack([randn((d,), zlib.crc32(f"{seed}:{tok}".encode())) for tok in tokens])
    w = randn((3, d, d), seed, scale=1 / math.sqrt(d))  # keeps q.k on the scale of x.x
    return {"x": x, "w_q": w[0], "w_k": w[1], "w_v": w[2]}


def attention_view(body: m.AttentionRequest) -> dict[str, Any]:
    """Every stage of one head, for the mask switch's both positions (`causal` selects
    which one is the main result; `other` holds the rest, so the page can show the diff)."""
    tokens, d, seed, causal = body.tokens, body.d, body.seed, body.causal
    inputs = seeded_inputs(tokens, d, seed)
    for name in ("x", "w_q", "w_k", "w_v"):  # edited cells (shapes checked) replace seeded ones
        if getattr(body, name) is not None:
            inputs[name] = torch.tensor(getattr(body, name), dtype=torch.float64)
    steps = attention_steps(inputs["x"], inputs["w_q"], inputs["w_k"], inputs["w_v"],
                            causal=causal)
    other = attention_steps(inputs["x"], inputs["w_q"], inputs["w_k"], inputs["w_v"],
                            causal=not causal)
    out = {"tokens": tokens, "d": d, "d_k": d, "seed": seed, "causal": causal,
           "sqrt_d_k": math.sqrt(d)}
    out.update({name: to_json(t) for name, t in inputs.items()})
    out.update({name: to_json(t) for name, t in steps.items()})
    out["other"] = {name: to_json(steps_t) for name, steps_t in other.items()
                    if name in ("masked", "weights", "out")}
    return out


# ----------------------------------------------------------------------------- 2. sqrt(d_k)


def _softmax_stats(weights: torch.Tensor) -> dict[str, float]:
    """weights (Q, K): mean largest weight and mean entropy (nats) over the rows."""
    entropy = -(weights * torch.log(weights.clamp_min(1e-300))).sum(-1)
    return {"max_weight": weights.max(-1).values.mean().item(), "entropy": entropy.mean().item()}


def _histogram(values: torch.Tensor, lo: float, hi: float, bins: int) -> list[int]:
    return torch.histc(values.clamp(lo, hi), bins=bins, min=lo, max=hi).long().tolist()


def scaling_view(body: m.ScalingRequest) -> dict[str, Any]:
    """q, k with N(0, 1) entries: q.k has variance d_k, so unscaled scores grow like
    sqrt(d_k) and the softmax saturates; dividing by sqrt(d_k) keeps the variance 1."""
    d_k, n_keys, seed = body.d_k, body.n_keys, body.seed
    n_queries = 256
    dims = [2**i for i in range(0, 13) if 2**i <= max(d_k, 1024)]
    # One draw at the largest size; each d_k uses the first d_k coordinates of it.
    g = torch.Generator().manual_seed(seed)
    q_all = torch.randn(n_queries, max(dims[-1], d_k), generator=g, dtype=torch.float64)
    k_all = torch.randn(n_keys, max(dims[-1], d_k), generator=g, dtype=torch.float64)

    def sample(dim: int) -> dict[str, Any]:
        q, k = q_all[:, :dim], k_all[:, :dim]
        raw = q @ k.T  # (Q, K)
        return {"raw": raw, "unscaled_w": torch.softmax(raw, dim=-1),
                "scaled_w": attention_weights(q, k)}  # the library's softmax(qk^T/sqrt(d_k))

    s = sample(d_k)
    raw, scaled = s["raw"], s["raw"] / math.sqrt(d_k)
    span = max(4.0, 4 * math.sqrt(d_k))
    sweep = []
    for dim in dims:
        t = sample(dim)
        sweep.append({"d_k": dim, "unscaled": _softmax_stats(t["unscaled_w"]),
                      "scaled": _softmax_stats(t["scaled_w"]),
                      "std_raw": t["raw"].std().item()})
    return {
        "d_k": d_k, "n_keys": n_keys, "n_queries": n_queries, "seed": seed,
        "std_raw": raw.std().item(), "std_scaled": scaled.std().item(),
        "expected_std_raw": math.sqrt(d_k),
        "hist_range": [-span, span], "bins": 40,
        "hist_raw": _histogram(raw.flatten(), -span, span, 40),
        "hist_scaled": _histogram(scaled.flatten(), -span, span, 40),
        "unscaled": _softmax_stats(s["unscaled_w"]), "scaled": _softmax_stats(s["scaled_w"]),
        "max_entropy": math.log(n_keys),
        "example_row_unscaled": s["unscaled_w"][0].tolist(),
        "example_row_scaled": s["scaled_w"][0].tolist(),
        "sweep": sweep,
    }


# ----------------------------------------------------------------------------- 4. positions


def sinusoidal_view(body: m.SinusoidalRequest) -> dict[str, Any]:
    positions, d_model = body.positions, body.d_model
    table = sinusoidal_table(torch.arange(positions), d_model)  # (T, d)
    return {"positions": positions, "d_model": d_model, "table": table.tolist(),
            "similarity": (table.double() @ table.double().T).tolist()}


def rope_config(head_dim: int, base: float, positions: int) -> GPTConfig:
    return GPTConfig(vocab_size=1, block_size=positions, n_layer=1, n_head=1,
                     n_embd=head_dim, pos_encoding="rope", rope_base=base)


def rope_scores(head_dim: int, base: float, positions: int, seed: int
                ) -> dict[str, torch.Tensor]:
    """One query and one key vector placed at every position, rotated by gptlab's RoPE.
    scores[m, n] = RoPE(q, m) . RoPE(k, n), which depends on n - m only."""
    rope = RotaryEmbedding(rope_config(head_dim, base, positions))
    cos, sin = rope(torch.arange(positions))  # (P, hs) each
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, head_dim, generator=g)
    q_rot = apply_rope(q.expand(positions, head_dim), cos, sin)  # (P, hs)
    k_rot = apply_rope(k.expand(positions, head_dim), cos, sin)
    return {"q": q, "k": k, "q_rot": q_rot, "k_rot": k_rot, "scores": q_rot @ k_rot.T,
            "inv_freq": rope.inv_freq}


def rope_view(body: m.RopeRequest) -> dict[str, Any]:
    head_dim, base, positions, seed = body.head_dim, body.base, body.positions, body.seed
    offset = body.offset  # set, below positions, by the model
    r = rope_scores(head_dim, base, positions, seed)
    half = head_dim // 2
    same_offset = [{"m": m, "n": m + offset, "score": r["scores"][m, m + offset].item()}
                   for m in range(positions - offset)]
    return {
        "head_dim": head_dim, "base": base, "positions": positions, "offset": offset,
        "seed": seed, "inv_freq": r["inv_freq"].tolist(),
        "q": r["q"].tolist(), "k": r["k"].tolist(),
        "unrotated_score": (r["q"] @ r["k"]).item(),
        "scores": r["scores"].tolist(), "same_offset": same_offset,
        # the first pair (dims 0 and hs/2) of q at each position: a point on a circle
        "q_pair0": [[r["q_rot"][m, 0].item(), r["q_rot"][m, half].item()]
                    for m in range(positions)],
        "k_pair0": [[r["k_rot"][m, 0].item(), r["k_rot"][m, half].item()]
                    for m in range(positions)],
    }


# ----------------------------------------------------------------------------- 5. parameters


def presets_view() -> dict[str, Any]:
    return {"presets": {name: GPTConfig.from_preset(name).to_dict() for name in presets.PRESETS}}


def params_view(body: m.ParamsRequest) -> dict[str, Any]:
    from gptlab.params import accounting

    name = body.preset
    # Only the fields sent override the preset's (a null n_kv_head or ffn_hidden: default).
    config_body = body.config.model_dump(exclude_unset=True) if body.config else {}
    base = presets.preset_dict(name) if name else {}
    config = GPTConfig.from_dict({**base, **config_body})
    return accounting(config, seq_len=body.seq_len,
                      name=name if not config_body else None).to_dict()


# ----------------------------------------------------------------------------- 3, 6. models


def encode_prompt(run, prompt: str) -> torch.Tensor:
    """(1, T) token ids of prompt, within the model's context and the display limit."""
    ids = run.tokenizer.encode(prompt)
    limit = min(run.model.config.block_size, m.MAX_TOKENS)
    if not ids:
        raise UsageError("the prompt is empty")
    if len(ids) > limit:
        raise UsageError(f"the prompt is {len(ids)} tokens; this view shows at most {limit} "
                         f"(the model's context is {run.model.config.block_size})")
    return torch.tensor([ids])


def token_labels(run, idx: torch.Tensor) -> list[str]:
    return [run.tokenizer.decode([i]) for i in idx[0].tolist()]


def runs_view(runs: Runs) -> dict[str, Any]:
    return {"root": str(runs.root), "runs": runs.list()}


@torch.no_grad()
def _capture(model, idx: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Attention weights of every layer (n_layer, nh, T, T) and, for `layer`, each head's
    output (nh, T, hs) before concatenation, and the attention sublayer's output (T, C),
    all from one forward pass through gptlab.interp's instruments."""
    interp = _interp()
    seen: dict[str, torch.Tensor] = {}

    def keep_heads(_module, _inputs, y: torch.Tensor) -> None:
        seen["heads"] = y.detach().clone()  # (B, nh, T, hs)

    def keep_output(_module, _inputs, output: torch.Tensor) -> None:
        seen["out"] = output.detach().clone()  # (B, T, C)

    attn = model.blocks[layer].attn
    with (_model_lock, interp.eval_mode(model), interp.recording_attention(model) as mods,
          interp.forward_hooks((attn, keep_output), (attn.heads, keep_heads))):
        model(idx)
        weights = torch.stack([m.weights[0] for m in mods])  # (L, nh, T, T)
    return weights, seen["heads"][0], {"out": seen["out"][0]}


def below(name: str, value: int, n: int) -> int:
    """A layer or head index of this run: 0..n-1 (the model checked value >= 0)."""
    if not 0 <= value < n:
        raise UsageError(f"{name} must be between 0 and {n - 1}, got {m.fmt_num(value)}")
    return value


def heads_view(runs: Runs, body: m.HeadsRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    cfg = run.model.config
    layer = below("layer", body.layer, cfg.n_layer)
    if body.ids is not None:
        idx = token_ids(run, body.ids)
    elif body.prompt is None:
        raise UsageError("prompt is required (or ids, a list of token ids)")
    else:
        idx = encode_prompt(run, body.prompt)
    weights, heads, extra = _capture(run.model, idx, layer)
    T = idx.shape[1]
    concat = heads.transpose(0, 1).reshape(T, cfg.n_head * cfg.head_dim)  # (T, nh*hs)
    proj = run.model.blocks[layer].attn.proj
    return {
        "run": run.name, "tokens": token_labels(run, idx), "ids": idx[0].tolist(),
        "n_layer": cfg.n_layer, "n_head": cfg.n_head, "head_dim": cfg.head_dim,
        "n_embd": cfg.n_embd, "layer": layer,
        "attention": weights.tolist(),  # (n_layer, n_head, T, T)
        "heads": heads.tolist(),  # (n_head, T, hs): weights @ V per head
        "concat": concat.tolist(),  # (T, n_head*hs)
        "w_o": proj.weight.detach().T.tolist(),  # (n_head*hs, C): out = concat @ W_O + b
        "b_o": proj.bias.detach().tolist() if proj.bias is not None else None,
        "out": extra["out"].tolist(),  # (T, C)
    }


def _interp():
    try:
        from gptlab import interp
    except ImportError:
        raise GptlabError("this view needs gptlab.interp, which is not in this build") from None
    return interp


def default_scores_prompt(run, seed: int) -> torch.Tensor:
    """A random token sequence repeated twice (1, 2n): the standard probe for induction."""
    n = min(m.MAX_TOKENS, run.model.config.block_size) // 2
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(run.model.config.vocab_size, (1, n), generator=g)
    return torch.cat([half, half], dim=1)


def token_ids(run, value: list[int]) -> torch.Tensor:
    """(1, T) from a list of token ids sent back by the page (e.g. a random probe)."""
    limit = min(run.model.config.block_size, m.MAX_TOKENS)
    vocab = run.model.config.vocab_size
    if not 1 <= len(value) <= limit:
        raise UsageError(f"ids must be a list of 1 to {limit} integer token ids "
                         f"(the model's context is {run.model.config.block_size})")
    bad = [i for i in value if not 0 <= i < vocab]
    if bad:
        raise UsageError(f"token id {m.fmt_num(bad[0])} is outside the vocabulary (0..{vocab - 1})")
    return torch.tensor([value])


def _prompt_ids(run, body: m.HeadScoresRequest) -> torch.Tensor:
    if body.ids is not None:
        return token_ids(run, body.ids)
    if not body.prompt:
        return default_scores_prompt(run, body.seed)
    return encode_prompt(run, body.prompt)


def head_scores_view(runs: Runs, body: m.HeadScoresRequest) -> dict[str, Any]:
    interp = _interp()
    run = runs.load(body.run)
    idx = _prompt_ids(run, body)
    if idx.shape[1] < 2:
        raise UsageError("head scores need a prompt of at least 2 tokens")
    with _model_lock, torch.no_grad():
        scores = interp.head_scores(run.model, idx)
        deltas = interp.ablation_deltas(run.model, idx)
        _, loss = run.model(idx[:, :-1], idx[:, 1:])
    return {
        "run": run.name, "tokens": token_labels(run, idx), "ids": idx[0].tolist(),
        "n_layer": run.model.config.n_layer, "n_head": run.model.config.n_head,
        "scores": {k: t.tolist() for k, t in scores.items()},
        "ablation_deltas": deltas.tolist(), "loss": loss.item(),
    }


def ablate_view(runs: Runs, body: m.AblateRequest) -> dict[str, Any]:
    interp = _interp()
    run = runs.load(body.run)
    cfg = run.model.config
    layer = below("layer", body.layer, cfg.n_layer)
    head = below("head", body.head, cfg.n_head)
    idx = _prompt_ids(run, body)
    if idx.shape[1] < 2:
        raise UsageError("ablation needs a prompt of at least 2 tokens")
    with _model_lock, torch.no_grad():
        _, loss = run.model(idx[:, :-1], idx[:, 1:])
        with interp.ablate_heads(run.model, [(layer, head)]):
            _, ablated = run.model(idx[:, :-1], idx[:, 1:])
    return {"run": run.name, "layer": layer, "head": head, "loss": loss.item(),
            "ablated_loss": ablated.item(), "delta": ablated.item() - loss.item()}
