"""The feed-forward network as key-value memories (Geva et al. 2021, "Transformer
Feed-Forward Layers Are Key-Value Memories"), measured on any gptlab GPT.

A unit i of layer l's FFN is a memory: its key is what decides its coefficient m_i at a
position, its value the column of the output projection it writes, m_i * W_out[:, i].

- Key and coefficient. GELU (or ReLU², any `MLP`): the key is row i of the first matrix
  (`mlp.fc.weight[i]`) and m_i = act(x . k_i + b_i), x the normed stream (`norm_2`).
  SwiGLU: the key is the pair (gate row, up row) and the coefficient is the gate·up
  product, m_i = silu(x . g_i) * (x . u_i): the gate is not separated out, because the
  product is what multiplies the value. Either way m_i is exactly the input of
  `mlp.proj`, caught by a forward hook on it, so it is the model's own number.
- "Fires": a unit fires where m_i is largest (signed). A SwiGLU coefficient can be large
  and negative; that writes -v_i, and is not counted as firing, so that a unit's trigger
  and its value's top token speak of the same direction.
- Value through the output embedding: logits_i = W_U (gain * W_out[:, i]), in float64,
  gain the final norm's weight (LayerNorm's or RMSNorm's `ln_f.weight`): its scale and
  LayerNorm's centring depend on the whole stream, not on one value, and are left out, as
  is the norm's bias; a model without a final norm (post-norm) has no gain. A logit soft
  cap is monotone and leaves the top token where it is, so it is left out too.

Text longer than the model's context is read in windows of `block_size` overlapping by
half (gptlab.inference.evaluate.windows): each position is taken once, from the window
that gives it the longest left context, and its trigger prefix is that window's text up to
and including it, which re-run alone gives the same activation (the model is causal). The
text's first position is never taken (it has no token to remove) nor is its last (nothing
follows it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.inference.evaluate import windows
from gptlab.interp.hooks import check_tokens, eval_mode, forward_hooks
from gptlab.model.inputs import unwrap

TOP_K = 25  # Geva et al.'s top-25 trigger examples per key


@dataclass
class FFNCapture:
    """Every FFN's coefficients and output over one text (N tokens).

    activations (n_layer, N, H): unit coefficients at each position, from the window that
    takes it; previous (n_layer, N, H): the coefficients at the position before, in that
    same window (= re-running the trigger prefix without its last token); outputs
    (n_layer, N, C): the FFN's output. starts (N,): where that window begins (-1 where no
    window takes the position). candidates (N,) bool: positions that may be triggers."""

    tokens: Tensor
    activations: Tensor
    previous: Tensor
    outputs: Tensor
    starts: Tensor
    candidates: Tensor

    def prefix(self, position: int) -> Tensor:
        """The trigger prefix of `position`: its window's tokens up to and including it."""
        return self.tokens[int(self.starts[position]): position + 1]


def ffn_modules(model: nn.Module) -> list[nn.Module]:
    """Every block's FFN, in layer order; a UsageError for a model with none."""
    gpt = unwrap(model)
    if not gpt.config.has_mlp:
        raise UsageError("this model has no feed-forward networks (mlp 'none'): there are "
                         "no memories to read")
    return [block.mlp for block in gpt.blocks]


def check_layer(model: nn.Module, layer: int) -> int:
    n_layer = unwrap(model).config.n_layer
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layer:
        raise UsageError(f"layer {layer!r} is out of range: the model has layers "
                         f"0..{n_layer - 1}")
    return layer


def check_units(model: nn.Module, units: Sequence[int] | Tensor | None) -> Tensor:
    """Unit indices as a long tensor (all of them for None); a UsageError names a bad one."""
    hidden = unwrap(model).config.ffn_hidden
    if units is None:
        return torch.arange(hidden)
    ids = torch.as_tensor(units)
    if ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool:
        raise UsageError(f"units must be a list of unit indices, got {units!r}")
    bad = [int(u) for u in ids if not 0 <= int(u) < hidden]
    if bad:
        raise UsageError(f"unit {bad[0]} is out of range: each FFN has units 0..{hidden - 1}")
    return ids.long()


def check_positive(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")
    return value


@torch.no_grad()
def ffn_pass(model: nn.Module, idx: Tensor) -> tuple[Tensor, Tensor]:
    """(coefficients (n_layer, B, T, H), FFN outputs (n_layer, B, T, C)) of one forward
    pass of idx (T,) or (B, T), caught by hooks on each FFN and its output projection."""
    modules = ffn_modules(model)
    idx = check_tokens(model, idx)
    coefficients: list[Tensor] = []
    outputs: list[Tensor] = []
    hooks = [(m.proj, lambda _m, args, _out: coefficients.append(args[0])) for m in modules]
    hooks += [(m, lambda _m, _args, out: outputs.append(out)) for m in modules]
    with eval_mode(model), forward_hooks(*hooks):
        model(idx)
    return torch.stack(coefficients), torch.stack(outputs)


def unit_activation(model: nn.Module, idx: Tensor, layer: int, unit: int) -> float:
    """The coefficient of (layer, unit) at the last position of idx (T,) run alone."""
    check_layer(model, layer)
    unit = int(check_units(model, [unit])[0])
    coefficients, _ = ffn_pass(model, idx)
    return float(coefficients[layer, 0, -1, unit])


@torch.no_grad()
def capture_ffn(model: nn.Module, ids: Sequence[int] | Tensor) -> FFNCapture:
    """Read a text's token ids (N,) through the model in windows of block_size
    overlapping by half; see the module's docstring for which window takes a position.
    Holds 2 * n_layer * N * ffn_hidden float32 (10,000 characters of the shipped model:
    about 370 MB), so read a few thousand tokens, not a corpus."""
    gpt = unwrap(model)
    ids = torch.as_tensor(ids)
    if ids.dim() != 1 or len(ids) < 3:
        raise UsageError("the text must be at least 3 tokens long, one sequence")
    context = gpt.config.block_size
    n, n_layer = len(ids), gpt.config.n_layer
    hidden, width = gpt.config.ffn_hidden, gpt.config.n_embd
    activations = torch.zeros(n_layer, n, hidden)
    previous = torch.zeros(n_layer, n, hidden)
    outputs = torch.zeros(n_layer, n, width)
    starts = torch.full((n,), -1, dtype=torch.long)
    for begin, end, first in windows(n, context, max(1, context // 2)):
        coefficients, out = ffn_pass(model, ids[begin:end])
        taken = slice(begin + first, end)
        activations[:, taken] = coefficients[:, 0, first:].float().cpu()
        previous[:, taken] = coefficients[:, 0, first - 1:-1].float().cpu()
        outputs[:, taken] = out[:, 0, first:].float().cpu()
        starts[taken] = begin
    candidates = starts >= 0
    candidates[-1] = False  # nothing follows the last token
    return FFNCapture(ids.long().cpu(), activations, previous, outputs, starts, candidates)


def top_triggers(capture: FFNCapture, layer: int, unit: int, k: int = TOP_K) -> Tensor:
    """The k positions where (layer, unit) fires most, highest coefficient first."""
    check_positive(k, "k")
    check_in_capture(capture, layer, unit)
    values = capture.activations[layer, :, unit].masked_fill(~capture.candidates,
                                                             float("-inf"))
    k = min(k, int(capture.candidates.sum()))
    return values.topk(k).indices


def check_in_capture(capture: FFNCapture, layer: int, unit: int) -> None:
    n_layer, _, hidden = capture.activations.shape
    for value, name, count in ((layer, "layer", n_layer), (unit, "unit", hidden)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
            raise UsageError(f"{name} {value!r} is out of range: the capture has "
                             f"{name}s 0..{count - 1}")


def activation_drops(capture: FFNCapture, layer: int, unit: int, positions: Tensor) -> Tensor:
    """(a - a') / a at each position: a the unit's coefficient on the trigger prefix, a'
    on the same prefix without its last token. NaN where a <= 0 (no firing to drop from)."""
    a = capture.activations[layer, positions, unit].double()
    shortened = capture.previous[layer, positions, unit].double()
    return torch.where(a > 0, (a - shortened) / a, torch.nan)


# ----------------------------------------------------------------------------- patterns

def last_word(prefix: str) -> str:
    """The last whitespace-separated word the prefix ends in (trailing whitespace ignored,
    so "king", "the king" and "the king\\n" all end in "king"; "the ki" ends in "ki")."""
    words = prefix.split()
    return words[-1] if words else ""


def pattern_score(prefixes: Sequence[str], chars: int = 3) -> float:
    """The share of prefixes that share the most common ending, the larger of two kinds:
    the last `chars` characters (the whole prefix when shorter) and the last word
    (`last_word`). 1.0 when all end alike; 1/len when no two do."""
    check_positive(chars, "chars")
    if not prefixes:
        raise UsageError("pattern_score needs at least one prefix")
    by_chars = Counter(p[-chars:] for p in prefixes).most_common(1)[0][1]
    by_word = Counter(last_word(p) for p in prefixes).most_common(1)[0][1]
    return max(by_chars, by_word) / len(prefixes)


def random_pattern_score(capture: FFNCapture, decode: Callable[[Sequence[int]], str],
                         k: int = TOP_K, chars: int = 3, draws: int = 100,
                         seed: int = 0) -> float:
    """The baseline: the mean pattern_score of `draws` sets of k prefixes taken at random
    positions of the same text (those that may be triggers), seeded."""
    check_positive(draws, "draws")
    generator = torch.Generator().manual_seed(seed)
    pool = capture.candidates.nonzero()[:, 0]
    k = min(k, len(pool))
    scores = []
    for _ in range(draws):
        chosen = pool[torch.randperm(len(pool), generator=generator)[:k]]
        scores.append(pattern_score([decode(capture.prefix(int(p)).tolist()) for p in chosen],
                                    chars))
    return sum(scores) / len(scores)


# ----------------------------------------------------------------------------- values

def output_gain(model: nn.Module) -> tuple[Tensor | None, str]:
    """(the final norm's weight, or None, and what it is, in words)."""
    gpt = unwrap(model)
    norm = gpt.ln_f
    if norm is None:
        return None, "none (no final norm: post-norm)"
    weight = getattr(norm, "weight", None)
    kind = "LayerNorm" if isinstance(norm, nn.LayerNorm) else type(norm).__name__
    if weight is None:
        return None, f"none ({kind} without a weight)"
    return weight, f"{kind} weight (ln_f.weight; no centring, scale or bias)"


@torch.no_grad()
def project(model: nn.Module, vectors: Tensor) -> Tensor:
    """(..., C) vectors written into the stream -> (..., vocab) logits in float64:
    W_U (gain * vector), gain as output_gain says."""
    gpt = unwrap(model)
    gain, _ = output_gain(model)
    vectors = vectors.double().to(gpt.lm_head.weight.device)
    if gain is not None:
        vectors = vectors * gain.double()
    return vectors @ gpt.lm_head.weight.double().T


def value_logits(model: nn.Module, layer: int,
                 units: Sequence[int] | Tensor | None = None) -> Tensor:
    """(len(units), vocab) float64: each unit's value W_out[:, unit] through the gain and
    the unembedding (all units for None)."""
    mlp = ffn_modules(model)[check_layer(model, layer)]
    units = check_units(model, units)
    return project(model, mlp.proj.weight.detach()[:, units.to(mlp.proj.weight.device)].T)


def composition_share(model: nn.Module, capture: FFNCapture, layer: int,
                      top_units: int = 1) -> float:
    """The share of positions where the FFN output's top token (through `project`) is the
    top token of none of the `top_units` units with the largest coefficients there (each
    unit's "prediction" is its value's top token, `value_logits`). Geva et al. compare the
    layer's top prediction with its memories' top predictions one by one."""
    check_layer(model, layer)
    check_positive(top_units, "top_units")
    taken = capture.candidates
    layer_top = project(model, capture.outputs[layer, taken]).argmax(-1).cpu()  # (P,)
    unit_top = value_logits(model, layer).argmax(-1).cpu()  # (H,)
    strongest = capture.activations[layer, taken].topk(top_units, dim=-1).indices  # (P, n)
    matched = (unit_top[strongest] == layer_top[:, None]).any(dim=-1)
    return float((~matched).double().mean())


# ----------------------------------------------------------------------------- all at once

def unit_record(model: nn.Module, capture: FFNCapture, decode: Callable[[Sequence[int]], str],
                layer: int, unit: int, k: int = TOP_K, chars: int = 3) -> dict:
    """One sampled unit, with ids and text, so anyone can recompute it: its top trigger
    (the prefix ids and text, and the position in the text), the token after it, its
    value's top token, its coefficient there, its pattern score over its top k triggers
    and its mean activation drop over them."""
    positions = top_triggers(capture, layer, unit, k)
    top = int(positions[0])
    following = int(capture.tokens[top + 1])
    value_top = int(value_logits(model, layer, [unit])[0].argmax())
    prefix = capture.prefix(top).tolist()
    drops = activation_drops(capture, layer, unit, positions)
    return {
        "layer": layer, "unit": unit,
        "top_trigger": {"ids": prefix, "text": decode(prefix), "position": top},
        "next_token": {"id": following, "text": decode([following])},
        "value_top_token": {"id": value_top, "text": decode([value_top])},
        "activation": float(capture.activations[layer, top, unit]),
        "pattern": pattern_score([decode(capture.prefix(int(p)).tolist())
                                  for p in positions], chars),
        "drop": float(drops.nanmean()) if not drops.isnan().all() else None,
    }


def sample_units(model: nn.Module, per_layer: int, seed: int = 0) -> list[Tensor]:
    """per_layer distinct unit indices for each layer, ascending, seeded."""
    check_positive(per_layer, "per_layer")
    hidden, n_layer = unwrap(model).config.ffn_hidden, unwrap(model).config.n_layer
    generator = torch.Generator().manual_seed(seed)
    return [torch.randperm(hidden, generator=generator)[:min(per_layer, hidden)].sort().values
            for _ in range(n_layer)]


def shuffled_agreement(records: Sequence[dict]) -> float | None:
    """The share of pairs of different units (i, j) of the records where i's value top
    token is the token after j's top trigger: chance with these tokens' frequencies, which
    a character vocabulary makes far from 1/vocab (None with fewer than two records)."""
    pairs = [(a["value_top_token"]["id"], b["next_token"]["id"])
             for i, a in enumerate(records) for j, b in enumerate(records) if i != j]
    return sum(x == y for x, y in pairs) / len(pairs) if pairs else None


def memory_measures(model: nn.Module, ids: Sequence[int] | Tensor,
                    decode: Callable[[Sequence[int]], str], per_layer: int = 32,
                    k: int = TOP_K, chars: int = 3, top_units: int = 1, seed: int = 0,
                    draws: int = 100) -> dict:
    """Geva et al.'s measures over a text's ids, for per_layer sampled units of each layer:
    {"layers": [{layer, pattern, drop, agreement, composition}], "random_pattern",
    "chance" (1/vocab), "gain", "records"}. pattern, drop: means over the layer's sampled
    units (drop over those with a positive top coefficient); agreement: the share of them
    whose value's top token is the token after their top trigger (agreement_shuffled:
    the same between different units, `shuffled_agreement`); composition:
    composition_share over every position taken."""
    check_positive(k, "k")
    capture = capture_ffn(model, ids)
    records = [unit_record(model, capture, decode, layer, int(unit), k, chars)
               for layer, units in enumerate(sample_units(model, per_layer, seed))
               for unit in units]
    layers = []
    for layer in range(unwrap(model).config.n_layer):
        mine = [r for r in records if r["layer"] == layer]
        drops = [r["drop"] for r in mine if r["drop"] is not None]
        layers.append({
            "layer": layer,
            "pattern": sum(r["pattern"] for r in mine) / len(mine),
            "drop": sum(drops) / len(drops) if drops else None,
            "agreement": sum(r["value_top_token"]["id"] == r["next_token"]["id"]
                             for r in mine) / len(mine),
            "agreement_shuffled": shuffled_agreement(mine),
            "composition": composition_share(model, capture, layer, top_units),
        })
    return {"layers": layers,
            "random_pattern": random_pattern_score(capture, decode, k, chars, draws, seed),
            "chance": 1 / unwrap(model).config.vocab_size,
            "gain": output_gain(model)[1], "records": records}

