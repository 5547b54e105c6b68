"""Heads on Dyck-2 (gptlab.data.dyck): does a head attend from a closing bracket to the
opening bracket it closes, more than rules that need no stack would; does it attend evenly
over the prefix instead (counting); and what does the loss on closing brackets lose when it
is ablated.

Two query positions are scored, because a next-symbol model needs the match one step
before the issue's wording puts it:

- "closing": from each closing bracket to its match (the chapter's "track bracket
  matching", read literally);
- "before": from the symbol just before each closing bracket, where the model predicts
  which closing bracket comes, to that bracket's match: the most recent unmatched opening
  there, whose kind decides the prediction.

For each, a head's match score is its mean attention weight on the match over the closing
brackets of the rows given. The same mean for rule heads that need no stack is the bar it
must clear (their score is the share of closing brackets on which the rule finds the match):
"uniform" (even over positions 0..q, the chance a head without preference has), "uniform
openings" (even over the opening brackets in 0..q), "nearest opening" (the most recent
opening bracket of any kind at or before q) and "nearest same kind" (the most recent opening
of the closing bracket's kind at or before q). Each head's weight on the two nearest-opening
rules' positions is reported too, so a head that follows one of them shows as that.

Uniformity (the counting diagnostic, ARENA's bracket classifier balances brackets with a
head that attends evenly) is 1 - TV(A_q, U_q) / (1 - 1/(q+1)), averaged over the same
queries: 1 for attention spread evenly over 0..q, 0 for all of it on one position (q = 0 is
left out: one position is both).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gptlab.data.dyck import (
    CLOSING,
    NONE,
    OPENING,
    matching_openings,
    nearest_openings,
)
from gptlab.errors import UsageError
from gptlab.interp.heads import ablate_heads, ablation_deltas, scores_from_patterns
from gptlab.interp.hooks import capture_with_logits, check_tokens, eval_mode

QUERIES = ("closing", "before")
RULES = ("uniform", "uniform_openings", "nearest_opening", "nearest_same_kind")
# A head tracks matching when its match score beats chance and every rule head by a tenth of
# all its attention: over a few hundred closing brackets a rule's score (a mean of 0/1
# outcomes) has a standard error under 0.03, so a tenth is beyond sampling noise, and a head
# that finds the match most of the time still clears it.
MATCH_MARGIN = 0.1
# A head counts (attends evenly) when its uniformity is at least this: within a fifth of the
# way from uniform to one-hot. Causal heads that average a prefix in practice keep some weight
# on the current token or the first, so exactly 1 is not asked for.
COUNTING_UNIFORMITY = 0.8


@dataclass
class Queries:
    """The (row, query position, key) triples a score averages over, one per closing bracket:
    key is the match; nearest and same_kind the two rules' positions (NONE: the rule finds
    nothing); n_open the opening brackets in 0..q."""

    row: Tensor
    query: Tensor
    match: Tensor
    nearest: Tensor
    same_kind: Tensor
    n_open: Tensor

    def __len__(self) -> int:
        return len(self.row)


def closing_queries(rows: Sequence[str], where: str = "closing") -> Queries:
    """Queries for every closing bracket in rows whose match is in its row; `where` is
    "closing" (query at the bracket) or "before" (query at the symbol before it)."""
    if where not in QUERIES:
        raise UsageError(f"unknown query position {where!r}; expected one of: "
                         f"{', '.join(QUERIES)}")
    found: dict[str, list[int]] = {k: [] for k in ("row", "query", "match", "nearest",
                                                  "same_kind", "n_open")}
    for b, text in enumerate(rows):
        match, nearest = matching_openings(text), nearest_openings(text)
        same_kind = {bracket: nearest_openings(text, bracket) for bracket in OPENING}
        opened = 0
        open_counts = []
        for symbol in text:
            opened += symbol in OPENING
            open_counts.append(opened)
        for c, symbol in enumerate(text):
            if symbol not in CLOSING or match[c] == NONE:
                continue
            q = c if where == "closing" else c - 1
            # the rules at q ("before": the nearest opening at or before q, which may be q)
            kind = OPENING[CLOSING.index(symbol)]
            for key, value in (("row", b), ("query", q), ("match", match[c]),
                               ("nearest", nearest[q]), ("same_kind", same_kind[kind][q]),
                               ("n_open", open_counts[q])):
                found[key].append(value)
    if not found["row"]:
        raise UsageError("the rows hold no closing bracket with its match: nothing to score")
    return Queries(**{k: torch.tensor(v, dtype=torch.long) for k, v in found.items()})


def rule_scores(queries: Queries) -> dict[str, float]:
    """What each rule head (RULES) scores on the match: its mean weight there."""
    q, m = queries.query.double(), queries.match
    return {
        "uniform": float((1 / (q + 1)).mean()),
        "uniform_openings": float((1 / queries.n_open.double()).mean()),
        "nearest_opening": float((queries.nearest == m).double().mean()),
        "nearest_same_kind": float((queries.same_kind == m).double().mean()),
    }


def pattern_scores(patterns: Tensor, queries: Queries) -> dict[str, Tensor]:
    """patterns (..., B, nh, T, T) (capture_attention's layout, any leading dims) ->
    {"match", "on_nearest", "on_same_kind", "uniformity"}, each (..., nh): means over the
    queries of the weight on the match, on the two rules' positions (0 where a rule finds
    nothing) and the uniformity of the query's row."""
    T = patterns.shape[-1]
    if patterns.dim() < 4 or patterns.shape[-2] != T:
        raise UsageError(f"attention patterns must be (..., B, nh, T, T), "
                         f"got {tuple(patterns.shape)}")
    if len(queries) and int(queries.query.max()) >= T:
        raise UsageError(f"a query at position {int(queries.query.max())} in patterns over "
                         f"{T} positions")
    rows = patterns[..., queries.row, :, queries.query, :]  # (N, ..., nh, T)
    rows = rows.movedim(0, -2).double()  # (..., nh, N, T)

    def weight_at(keys: Tensor) -> Tensor:
        found = keys != NONE
        picked = rows.gather(-1, keys.clamp(min=0).expand(*rows.shape[:-1])[..., None])[..., 0]
        return (picked * found).mean(dim=-1)

    n = queries.query.double() + 1  # positions each query may see
    seen = torch.arange(T)[None, :] <= queries.query[:, None]  # (N, T)
    distance = 0.5 * (rows - seen / n[:, None]).abs().sum(dim=-1)  # TV to uniform, (..., nh, N)
    spread = queries.query > 0
    uniformity = (1 - distance / (1 - 1 / n))[..., spread].mean(dim=-1)
    return {
        "match": weight_at(queries.match),
        "on_nearest": weight_at(queries.nearest),
        "on_same_kind": weight_at(queries.same_kind),
        "uniformity": uniformity,
    }


def closing_loss_targets(idx: Tensor, rows: Sequence[str]) -> Tensor:
    """Targets (B, T) like idx: the next token where it is a closing bracket with its match
    in the row, -1 (left out) everywhere else."""
    targets = torch.full_like(idx, -1)
    for b, text in enumerate(rows):
        match = matching_openings(text)
        for c in range(1, len(text)):
            if match[c] != NONE:
                targets[b, c - 1] = idx[b, c]
    return targets


def bracket_heads(model: nn.Module, rows: Sequence[str], encode: Callable[[str], list[int]],
                  ablate: bool = True) -> dict:
    """Every head of model scored on rows (equal-length Dyck strings, dyck.dyck_rows), with
    encode(text) -> token ids (the model's tokenizer's).

    Returns, per query position ("closing", "before"): "heads", pattern_scores' grids as
    (n_layer, n_head) lists; "rules", rule_scores; "tracks_matching", the (layer, head) pairs
    whose match score beats every rule by MATCH_MARGIN; "counting", those whose uniformity
    is at least COUNTING_UNIFORMITY; "n" the closing brackets scored. Also "previous_token"
    (n_layer, n_head), TransformerLens's detector score (gptlab.interp.heads), and
    "closing_accuracy" (closing_accuracy: the right kind of closing bracket preferred). With
    ablate, also "closing_loss" (the clean loss on closing brackets, in nats),
    "ablated_loss" (n_layer, n_head: that loss with the head's output zeroed) and "best"
    (the head with the largest "before" match score) with its ablated loss and accuracy.
    """
    if not rows or len({len(r) for r in rows}) != 1:
        raise UsageError("rows must be one or more strings of the same length")
    idx = check_tokens(model, torch.tensor([encode(r) for r in rows]), min_len=2)
    weights, logits = capture_with_logits(model, idx)  # (L, B, nh, T, T), (B, T, vocab)
    weights = weights.cpu()
    targets = closing_loss_targets(idx, rows)
    other = _other_closing(targets, encode)
    previous = scores_from_patterns(weights, idx.cpu()[:, None, :])["previous_token"]
    out: dict = {"previous_token": previous.mean(dim=1).tolist(),  # mean over the rows
                 "closing_accuracy": closing_accuracy(logits, targets, other)}
    for where in QUERIES:
        queries = closing_queries(rows, where)
        grids = pattern_scores(weights, queries)
        rules = rule_scores(queries)
        bar = max(rules.values()) + MATCH_MARGIN
        out[where] = {
            "n": len(queries),
            "rules": rules,
            "heads": {name: grid.tolist() for name, grid in grids.items()},
            "tracks_matching": _where(grids["match"] > bar),
            "counting": _where(grids["uniformity"] >= COUNTING_UNIFORMITY),
        }
    if ablate:
        with eval_mode(model), torch.no_grad():
            _, clean = model(idx, targets)
        deltas = ablation_deltas(model, idx, targets)
        ablated = deltas + float(clean)
        match = torch.tensor(out["before"]["heads"]["match"], dtype=torch.float64)
        layer, head = divmod(int(match.argmax()), match.shape[1])
        with eval_mode(model), torch.no_grad(), ablate_heads(model, [(layer, head)]):
            without, _ = model(idx)
        out.update(closing_loss=float(clean), ablated_loss=ablated.tolist(),
                   best={"layer": layer, "head": head,
                         "match": float(match[layer, head]),
                         "ablated_loss": float(ablated[layer, head]),
                         "ablated_accuracy": closing_accuracy(without, targets, other)})
    return out


def _other_closing(targets: Tensor, encode: Callable[[str], list[int]]) -> Tensor:
    """(B, T): at each closing target, the id of the other kind of closing bracket."""
    a, b = (encode(bracket)[0] for bracket in CLOSING)
    return torch.where(targets == a, b, a)


def closing_accuracy(logits: Tensor, targets: Tensor, other: Tensor) -> float:
    """The share of closing targets (targets != -1) where the right closing bracket's logit
    beats the other kind's: whether the model knows which bracket closes, leaving aside
    when (an opening could come instead, a coin toss in the data)."""
    kept = targets != -1
    right = logits[kept].gather(-1, targets[kept][:, None])
    wrong = logits[kept].gather(-1, other[kept][:, None])
    return float((right > wrong).double().mean())


def _where(mask: Tensor) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in mask.nonzero().tolist()]
