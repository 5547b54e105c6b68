"""The whole model, as the chapter draws it, for one token: tokens -> embedding (+ position)
-> [block] x L -> final norm -> lm_head -> next-token probabilities, every stage taken from
one forward pass of the real model.

Forward hooks (gptlab.interp.hooks) on the model's own modules catch what each stage reads
and writes: the embeddings, each norm's input and output, attention's output, the FFN's
expansion (fc, or SwiGLU's gate and up), its activation (what `proj` reads) and its output,
the blocks' outputs, and the logits. Only what a module does not expose is computed here,
from those captured tensors: a norm's mean and scale (the output is the hooked one), the
residual adds' norms, and the logit lens of the stream after every add (gptlab.interp.lens:
the final norm, then W_U; in a post-norm model, whose last block ends in the norm that
feeds W_U, that norm). The chosen token's attention rows come from a second pass that records the
softmax weights (gptlab.interp.hooks.capture_attention); the logits are the plain pass's.

Pre-norm block:  x -> norm_1 -> attn -> add (x + attn) -> norm_2 -> ffn -> add
Post-norm block: x -> attn -> add -> norm_1 -> ffn -> add -> norm_2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from gptlab.errors import Setting, SettingError, UsageError
from gptlab.interp.hooks import capture_attention, check_tokens, eval_mode, forward_hooks
from gptlab.interp.lens import top_tokens, unembed
from gptlab.model.gpt import GPT
from gptlab.model.inputs import unwrap
from gptlab.model.layers import RMSNorm


@dataclass
class NormStep:
    """A norm applied to one vector (C,): `normalized` = (input - mean) / scale (RMSNorm:
    input / scale, no mean), then `output` = normalized * weight + bias. scale includes
    the norm's eps. `output` is the module's own (hooked), the rest recomputed from input."""

    kind: str  # layernorm | rmsnorm
    input: Tensor
    mean: float | None
    scale: float
    normalized: Tensor
    weight: Tensor
    bias: Tensor | None
    output: Tensor


@dataclass
class Reading:
    """The residual stream after an add: the vector (C,), its L2 norm, and the logit lens
    there (the likeliest next tokens if the model stopped here)."""

    name: str
    vector: Tensor
    norm: float
    lens_ids: list[int]
    lens_probs: list[float]


@dataclass
class FFNStep:
    """The feed-forward network on one vector. GELU: `expand` = fc(x) (H,), `activation`
    = gelu(expand). SwiGLU: `expand` = gate(x), `up` = up(x), `activation` = silu(gate) *
    up. `fired`: units whose activation's gate is open, expand > 0 (for GELU, the units
    whose output is positive). `output` = proj(activation) (C,)."""

    kind: str
    input: Tensor
    expand: Tensor
    up: Tensor | None
    activation: Tensor
    fired: int
    output: Tensor


@dataclass
class BlockWalk:
    layer: int
    input: Tensor  # (C,) the stream the block reads
    norm_1: NormStep
    attn_out: Tensor  # (C,) attention's output, before the add
    attention: Tensor  # (n_head, T) this token's attention weights, each row sums to 1
    add_1: Reading
    norm_2: NormStep
    ffn: FFNStep
    add_2: Reading
    output: Tensor  # (C,) what the next block reads


@dataclass
class Walk:
    """One token's way through the model. tokens (T,) the whole input; position: the
    token walked; embed, pos_embed (C,) (pos_embed None with RoPE or no positions);
    embedded: their sum (the first reading); final_norm None in a post-norm model (its
    last block ends in a norm); logits (V,) and probs (V,) float64 at `position`, the
    model's own."""

    norm_position: str
    tokens: list[int]
    position: int
    embed: Tensor
    pos_embed: Tensor | None
    embedded: Reading
    blocks: list[BlockWalk]
    final_norm: NormStep | None
    logits: Tensor
    probs: Tensor

    def readings(self) -> list[Reading]:
        """The stream after every add, in order: the embeddings, then two per block."""
        return [self.embedded] + [r for b in self.blocks for r in (b.add_1, b.add_2)]


def norm_step(norm: nn.Module, x: Tensor, out: Tensor) -> NormStep:
    """What norm did to x (C,), its output `out` as the module gave it."""
    x64 = x.double()
    if isinstance(norm, RMSNorm):
        mean, centred, kind = None, x64, "rmsnorm"
        scale = torch.sqrt(x64.pow(2).mean() + norm.eps)
    elif isinstance(norm, nn.LayerNorm):
        m = x64.mean()
        mean, centred, kind = float(m), x64 - m, "layernorm"
        scale = torch.sqrt(centred.pow(2).mean() + norm.eps)
    else:
        raise UsageError(f"unknown norm {type(norm).__name__}")
    bias = getattr(norm, "bias", None)
    return NormStep(kind, x, mean, float(scale), (centred / scale).to(x.dtype),
                    norm.weight.detach(), None if bias is None else bias.detach(), out)


@torch.no_grad()
def walk_token(model: nn.Module, idx: Tensor, position: int = -1, top: int = 5) -> Walk:
    """Walk token `position` of idx (T,) or (1, T) through the model (see the module
    docstring); each reading lists the `top` likeliest tokens of its logit lens."""
    gpt: GPT = unwrap(model)
    if not gpt.config.has_mlp:
        raise UsageError("the whole-model walk draws the chapter's model; this one is "
                         "attention only (mlp none), which it does not draw")
    idx = check_tokens(model, idx)
    if idx.shape[0] != 1:
        raise UsageError(f"walk one sequence at a time, got a batch of {idx.shape[0]}")
    T = idx.shape[1]
    if not -T <= position < T:
        raise SettingError(Setting("position"), f" must be between 0 and {T - 1}, got {position}")
    t = position % T
    seen: dict[tuple[int | None, str], Tensor] = {}  # (layer or None, what)

    def keep(key: Any, from_input: bool = False):
        def hook(_module: nn.Module, args: Any, out: Tensor) -> None:
            seen[key] = (args[0] if from_input else out)[0, t].detach().clone()
        return hook

    hooks = [(gpt.wte, keep((None, "embed")))]
    if gpt.wpe is not None:
        hooks.append((gpt.wpe, keep_position(seen, t)))
    for layer, block in enumerate(gpt.blocks):
        mlp = block.mlp
        hooks += [(block, keep((layer, "in"), from_input=True)), (block, keep((layer, "out"))),
                  (block.norm_1, keep((layer, "n1_in"), from_input=True)),
                  (block.norm_1, keep((layer, "n1_out"))),
                  (block.norm_2, keep((layer, "n2_in"), from_input=True)),
                  (block.norm_2, keep((layer, "n2_out"))),
                  (block.attn, keep((layer, "attn"))),
                  (mlp, keep((layer, "ffn_in"), from_input=True)), (mlp, keep((layer, "ffn"))),
                  (mlp.proj, keep((layer, "act"), from_input=True))]
        if hasattr(mlp, "gate"):
            hooks += [(mlp.gate, keep((layer, "expand"))), (mlp.up, keep((layer, "up")))]
        else:
            hooks.append((mlp.fc, keep((layer, "expand"))))
    if gpt.ln_f is not None:
        hooks += [(gpt.ln_f, keep((None, "lnf_in"), from_input=True)),
                  (gpt.ln_f, keep((None, "lnf_out")))]
    with eval_mode(model), forward_hooks(*hooks):
        logits, _ = model(idx)
    attention = capture_attention(model, idx)[:, 0, :, t, :]  # (L, nh, T)

    pre = gpt.config.norm_position == "pre"

    def reading(name: str, vector: Tensor) -> Reading:
        # the final norm and W_U: after the last add, the model's own output
        lens = unembed(model, vector) if pre else gpt.lm_head(gpt.blocks[-1].norm_2(vector))
        probs, ids = top_tokens(lens, top)
        return Reading(name, vector, float(vector.double().norm()), ids.tolist(),
                       probs.double().tolist())

    embed, pos = seen[(None, "embed")], seen.get((None, "pos"))
    blocks = []
    for layer, block in enumerate(gpt.blocks):
        g = {key: v for (where, key), v in seen.items() if where == layer}
        norm_1 = norm_step(block.norm_1, g["n1_in"], g["n1_out"])
        norm_2 = norm_step(block.norm_2, g["n2_in"], g["n2_out"])
        ffn = FFNStep(gpt.config.mlp, g["ffn_in"], g["expand"], g.get("up"), g["act"],
                      int((g["expand"] > 0).sum()), g["ffn"])
        # the sums: pre-norm, what norm_2 and the next block read; post-norm, what each
        # norm reads
        add_1 = reading(f"block {layer}: + attention", g["n2_in" if pre else "n1_in"])
        add_2 = reading(f"block {layer}: + FFN", g["out" if pre else "n2_in"])
        blocks.append(BlockWalk(layer, g["in"], norm_1, g["attn"], attention[layer], add_1,
                                norm_2, ffn, add_2, g["out"]))
    embedded = reading("embedding" + (" + position" if pos is not None else ""),
                       blocks[0].input)
    final = (norm_step(gpt.ln_f, seen[(None, "lnf_in")], seen[(None, "lnf_out")]) if pre
             else None)
    row = logits[0, t]
    return Walk(gpt.config.norm_position, idx[0].tolist(), t, embed, pos, embedded, blocks,
                final, row, torch.softmax(row.double(), dim=-1))


def keep_position(seen: dict[Any, Tensor], t: int):
    """A hook on the absolute positions' module, whose output is (T, C) (no batch)."""
    def hook(_module: nn.Module, _args: Any, out: Tensor) -> None:
        seen[(None, "pos")] = out[t].detach().clone()
    return hook
