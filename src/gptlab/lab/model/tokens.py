"""What each view of the lab answers, as plain functions of the request body.

Each takes the request body as a model already checked against its limits
(gptlab.lab.calculator_schemas, gptlab.lab.model_schemas), hands the numbers to
gptlab.lab.compute (the views that need no run) or to a run's model (gptlab.lab.runs,
gptlab.interp.heads), and returns JSON-ready data. What depends on a run (a layer below its
n_layer, a prompt in its vocabulary) is checked here, as a UsageError. Masked scores (-inf)
are sent as null, since JSON has no infinities; the page draws them as -inf.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from gptlab.data.tokenizer import encode_checked
from gptlab.errors import UsageError
from gptlab.interp.heads import (
    ablate_heads,
    ablation_deltas,
    chance_scores,
    head_scores,
)
from gptlab.interp.hooks import eval_mode, forward_hooks, recording_attention
from gptlab.lab import calculator_schemas as cs
from gptlab.lab import compute
from gptlab.lab import model_schemas as ms
from gptlab.lab import schemas as m
from gptlab.lab.runs import Runs
from gptlab.model import presets
from gptlab.model.config import MLPS, NORM_POSITIONS, NORMS, POS_ENCODINGS, GPTConfig
from gptlab.model.params import accounting


def to_json(t: torch.Tensor) -> Any:
    """A tensor as nested lists, -inf as None (JSON has no infinities)."""
    t = t.detach().to(torch.float64)
    if torch.isinf(t).any():
        return [to_json(row) for row in t] if t.dim() > 1 else [
            None if math.isinf(x) else x for x in t.tolist()]
    return t.tolist()


# ----------------------------------------------------------------------------- 1. calculator


def attention_view(body: cs.AttentionRequest) -> dict[str, Any]:
    """Every stage of one head, for the mask switch's both positions (`causal` selects
    which one is the main result; `other` holds the rest, so the page can show the diff)."""
    tokens, d, seed, causal = body.tokens, body.d, body.seed, body.causal
    inputs = compute.seeded_inputs(tokens, d, seed)
    for name in ("x", "w_q", "w_k", "w_v"):  # edited cells (shapes checked) replace seeded ones
        if getattr(body, name) is not None:
            inputs[name] = torch.tensor(getattr(body, name), dtype=torch.float64)
    steps = compute.attention(inputs, causal=causal)
    other = compute.attention(inputs, causal=not causal)
    out = {"tokens": tokens, "d": d, "d_k": d, "seed": seed, "causal": causal,
           "sqrt_d_k": math.sqrt(d)}
    out.update({name: to_json(t) for name, t in inputs.items()})
    out.update({name: to_json(t) for name, t in steps.items()})
    out["other"] = {name: to_json(steps_t) for name, steps_t in other.items()
                    if name in ("masked", "weights", "out")}
    return out


# ----------------------------------------------------------------------------- 2. sqrt(d_k)


def scaling_view(body: cs.ScalingRequest) -> dict[str, Any]:
    return compute.scaling_stats(body.d_k, body.n_keys, body.seed)


# ----------------------------------------------------------------------------- 4. positions


def sinusoidal_view(body: cs.SinusoidalRequest) -> dict[str, Any]:
    positions, d_model = body.positions, body.d_model
    pe = compute.sinusoidal(positions, d_model)
    return {"positions": positions, "d_model": d_model, "table": pe["table"].tolist(),
            "similarity": pe["similarity"].tolist()}


def rope_view(body: cs.RopeRequest) -> dict[str, Any]:
    head_dim, base, positions, seed = body.head_dim, body.base, body.positions, body.seed
    offset = body.offset  # set, below positions, by the model
    r = compute.rope_scores(head_dim, base, positions, seed)
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


# The config fields that take one of a few strings: the page builds its menus from these.
CONFIG_CHOICES = {"pos_encoding": POS_ENCODINGS, "norm": NORMS, "norm_position": NORM_POSITIONS,
                  "mlp": MLPS}


def presets_view() -> dict[str, Any]:
    return {"presets": {name: GPTConfig.from_preset(name).to_dict() for name in presets.PRESETS},
            "choices": {name: list(values) for name, values in CONFIG_CHOICES.items()}}


def params_view(body: cs.ParamsRequest) -> dict[str, Any]:
    name = body.preset
    # Only the fields sent override the preset's (a null n_kv_head or ffn_hidden: default).
    config_body = body.config.model_dump(exclude_unset=True) if body.config else {}
    base = presets.preset_dict(name) if name else {}
    config = GPTConfig.from_dict({**base, **config_body})
    return accounting(config, seq_len=body.seq_len,
                      name=name if not config_body else None).to_dict()


# ----------------------------------------------------------------------------- 3, 6. models


def encode_prompt(run, prompt: str, view_limit: int = m.MAX_TOKENS, what: str = "prompt"
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


def as_list(t: torch.Tensor) -> list:
    """A tensor as nested lists of Python floats (float64, so JSON carries every digit)."""
    return t.detach().double().tolist()


def model_on_tokens(run, idx: torch.Tensor) -> dict[str, Any]:
    """What an answer about run's model on the tokens idx (1, T) starts with."""
    return {"run": run.name, "tokens": [run.tokenizer.decode([i]) for i in idx[0].tolist()],
            "ids": idx[0].tolist(), "n_layer": run.model.config.n_layer,
            "n_head": run.model.config.n_head}


def runs_view(runs: Runs) -> dict[str, Any]:
    return {"root": str(runs.root), "runs": runs.list()}


def runs_encoding_view(runs: Runs, body: ms.RunsEncodingRequest) -> dict[str, Any]:
    offer = None if body.run is None else runs.fitted(body.run, body.text)
    return {"text": body.text, "runs": runs.encoding(body.text), "offer": offer}


@torch.no_grad()
def _capture(model, idx: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Attention weights of every layer (n_layer, nh, T, T) and, for `layer`, each head's
    output (nh, T, hs) before concatenation, and the attention sublayer's output (T, C),
    all from one forward pass through gptlab.interp.heads's instruments. The caller holds the
    runs' model lock."""
    seen: dict[str, torch.Tensor] = {}

    def keep_heads(_module, _inputs, y: torch.Tensor) -> None:
        seen["heads"] = y.detach().clone()  # (B, nh, T, hs)

    def keep_output(_module, _inputs, output: torch.Tensor) -> None:
        seen["out"] = output.detach().clone()  # (B, T, C)

    attn = model.blocks[layer].attn
    with (eval_mode(model), recording_attention(model) as mods,
          forward_hooks((attn, keep_output), (attn.heads, keep_heads))):
        model(idx)
        weights = torch.stack([m.weights[0] for m in mods])  # (L, nh, T, T)
    return weights, seen["heads"][0], {"out": seen["out"][0]}


def below(name: str, value: int, n: int) -> int:
    """A layer or head index of this run: 0..n-1 (the model checked value >= 0)."""
    if not 0 <= value < n:
        raise UsageError(f"{name} must be between 0 and {n - 1}, got {m.fmt_num(value)}")
    return value


def heads_view(runs: Runs, body: ms.HeadsRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    cfg = run.model.config
    layer = below("layer", body.layer, cfg.n_layer)
    if body.ids is not None:
        idx = token_ids(run, body.ids)
    elif body.prompt is None:
        raise UsageError("prompt is required (or ids, a list of token ids)")
    else:
        idx = encode_prompt(run, body.prompt)
    with runs.model_lock:
        weights, heads, extra = _capture(run.model, idx, layer)
    T = idx.shape[1]
    concat = heads.transpose(0, 1).reshape(T, cfg.n_head * cfg.head_dim)  # (T, nh*hs)
    proj = run.model.blocks[layer].attn.proj
    return {
        **model_on_tokens(run, idx), "head_dim": cfg.head_dim, "n_embd": cfg.n_embd,
        "layer": layer,
        "attention": weights.tolist(),  # (n_layer, n_head, T, T)
        "heads": heads.tolist(),  # (n_head, T, hs): weights @ V per head
        "concat": concat.tolist(),  # (T, n_head*hs)
        "w_o": proj.weight.detach().T.tolist(),  # (n_head*hs, C): out = concat @ W_O + b
        "b_o": proj.bias.detach().tolist() if proj.bias is not None else None,
        "out": extra["out"].tolist(),  # (T, C)
    }


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


def _prompt_ids(run, body: ms.HeadScoresRequest) -> torch.Tensor:
    if body.ids is not None:
        return token_ids(run, body.ids)
    if not body.prompt:
        return default_scores_prompt(run, body.seed)
    return encode_prompt(run, body.prompt)


def head_scores_view(runs: Runs, body: ms.HeadScoresRequest) -> dict[str, Any]:
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


def ablate_view(runs: Runs, body: ms.AblateRequest) -> dict[str, Any]:
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
