"""Bracket heads (gptlab.interp.brackets): on hand-built attention patterns the scores are
what they must be (all weight on the match scores 1, even attention has uniformity 1, a
one-hot row 0); the rule heads' scores are read off the rules; the ablated loss on closing
brackets equals the loss of the model with that head's slice of the output projection
zeroed; a tiny model runs end to end."""

from __future__ import annotations

import copy

import pytest
import torch

from gptlab.data import dyck
from gptlab.data.tokenizer import CharTokenizer
from gptlab.errors import UsageError
from gptlab.interp.brackets import (
    bracket_heads,
    closing_accuracy,
    closing_loss_targets,
    closing_queries,
    pattern_scores,
    rule_scores,
)
from gptlab.interp.heads import head_scores

TOKENIZER = CharTokenizer.from_text(dyck.SYMBOLS)
ROWS = ["\n([()])[]", "\n[[]]()()"]
#         012345678


def uniform_patterns(B: int, T: int) -> torch.Tensor:
    """(1, B, 1, T, T): every row even over the positions it may see."""
    causal = torch.ones(T, T).tril()
    return (causal / causal.sum(-1, keepdim=True)).expand(1, B, 1, T, T).clone()


@pytest.mark.parametrize("where", ["closing", "before"])
def test_all_weight_on_the_match_scores_one(where):
    queries = closing_queries(ROWS, where)
    patterns = uniform_patterns(len(ROWS), len(ROWS[0]))
    patterns[0, queries.row, 0, queries.query] = 0.0
    patterns[0, queries.row, 0, queries.query, queries.match] = 1.0
    scores = pattern_scores(patterns, queries)
    assert scores["match"].item() == pytest.approx(1.0)
    rules = rule_scores(queries)
    # a head that always finds the match is on a rule's position exactly when the rule is right
    assert scores["on_nearest"].item() == pytest.approx(rules["nearest_opening"])
    assert scores["on_same_kind"].item() == pytest.approx(rules["nearest_same_kind"])
    assert scores["uniformity"].item() == pytest.approx(0.0)  # one-hot rows


def test_even_attention_has_uniformity_one_and_scores_chance():
    queries = closing_queries(ROWS)
    scores = pattern_scores(uniform_patterns(len(ROWS), len(ROWS[0])), queries)
    assert scores["uniformity"].item() == pytest.approx(1.0)
    assert scores["match"].item() == pytest.approx(rule_scores(queries)["uniform"])
    one_hot = torch.eye(len(ROWS[0])).expand(1, len(ROWS), 1, -1, -1)  # all on itself
    assert pattern_scores(one_hot, queries)["uniformity"].item() == pytest.approx(0.0)


def test_the_queries_and_the_rules_on_hand_made_rows():
    queries = closing_queries(ROWS)
    # row 0: ")" at 4 closes 3, "]" at 5 closes 2, ")" at 6 closes 1, "]" at 8 closes 7
    # row 1: "]" at 3 closes 2, "]" at 4 closes 1, ")" at 6 closes 5, ")" at 8 closes 7
    assert queries.row.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert queries.query.tolist() == [4, 5, 6, 8, 3, 4, 6, 8]
    assert queries.match.tolist() == [3, 2, 1, 7, 2, 1, 5, 7]
    before = closing_queries(ROWS, "before")
    assert before.query.tolist() == (queries.query - 1).tolist()
    assert before.match.tolist() == queries.match.tolist()
    rules = rule_scores(queries)
    # nearest opening of any kind at 4, 5, 6, 8 in row 0: 3, 3, 3, 7 -> right twice of four;
    # row 1: nearest 2, 2, 5, 7 -> right three times
    assert rules["nearest_opening"] == pytest.approx(5 / 8)
    # same kind: row 0: 3, 2, 3, 7 (wrong at 6); row 1: 2, 2, 5, 7 (wrong at 4)
    assert rules["nearest_same_kind"] == pytest.approx(6 / 8)
    assert rules["uniform"] == pytest.approx(
        sum(1 / (q + 1) for q in queries.query.tolist()) / len(queries))


def test_the_closing_accuracy_counts_the_right_kind_preferred():
    targets = torch.tensor([[2, -1, 4, 2]])  # ids: ")" 2, "]" 4 (dyck.SYMBOLS sorted)
    other = torch.tensor([[4, 2, 2, 4]])
    logits = torch.zeros(1, 4, 5)
    logits[0, 0, 2] = logits[0, 2, 4] = 1.0  # right at 0 and 2
    logits[0, 3, 4] = 1.0  # wrong at 3; position 1 is not a closing target
    assert closing_accuracy(logits, targets, other) == pytest.approx(2 / 3)
    assert TOKENIZER.encode(")]") == [2, 4]


def test_the_ablated_loss_equals_the_loss_with_the_heads_output_projection_zeroed(
        preset_model):
    model = preset_model("tiny-gpt2", seed=1, vocab_size=len(dyck.SYMBOLS))
    rows = dyck.dyck_rows(3, 24, seed=5)
    result = bracket_heads(model, rows, TOKENIZER.encode)
    idx = torch.tensor([TOKENIZER.encode(r) for r in rows])
    targets = closing_loss_targets(idx, rows)
    assert (targets != -1).sum() == result["closing"]["n"] == result["before"]["n"]
    with torch.no_grad():
        _, clean = model(idx, targets)
    assert result["closing_loss"] == pytest.approx(float(clean), rel=1e-6)
    hs = model.config.head_dim
    for layer, head in [(0, 0), (1, model.config.n_head - 1)]:
        direct = copy.deepcopy(model)
        with torch.no_grad():
            direct.blocks[layer].attn.proj.weight[:, head * hs:(head + 1) * hs] = 0.0
            _, loss = direct(idx, targets)
        assert result["ablated_loss"][layer][head] == pytest.approx(float(loss), rel=1e-5)
        assert float(loss) != pytest.approx(float(clean), rel=1e-6)  # the head mattered


def test_a_tiny_model_end_to_end(preset_model):
    model = preset_model("tiny-gpt2", seed=0, vocab_size=len(dyck.SYMBOLS))
    L, H = model.config.n_layer, model.config.n_head
    rows = dyck.dyck_rows(4, 32, seed=0)
    result = bracket_heads(model, rows, TOKENIZER.encode)
    for where in ("closing", "before"):
        part = result[where]
        assert set(part["heads"]) == {"match", "on_nearest", "on_same_kind", "uniformity"}
        assert all(torch.tensor(g).shape == (L, H) for g in part["heads"].values())
        assert set(part["rules"]) == {"uniform", "uniform_openings", "nearest_opening",
                                      "nearest_same_kind"}
        assert part["tracks_matching"] == []  # an untrained model finds no match
    best = result["best"]
    assert best["ablated_loss"] == result["ablated_loss"][best["layer"]][best["head"]]
    assert best["match"] == max(max(row) for row in result["before"]["heads"]["match"])
    assert 0.0 <= best["ablated_accuracy"] <= 1.0 and 0.0 <= result["closing_accuracy"] <= 1.0
    idx = torch.tensor([TOKENIZER.encode(r) for r in rows])
    assert torch.allclose(torch.tensor(result["previous_token"]),
                          head_scores(model, idx)["previous_token"], atol=1e-6)
    assert "ablated_loss" not in bracket_heads(model, rows, TOKENIZER.encode, ablate=False)


@pytest.mark.parametrize("rows, where, message", [
    (["\n()", "\n()()"], "closing", "rows must be one or more strings of the same length"),
    ([], "closing", "rows must be one or more strings"),
    (["\n(((("], "closing", "no closing bracket with its match"),
    (["\n()"], "middle", "unknown query position 'middle'"),
])
def test_bad_rows_are_refused_in_one_line(preset_model, rows, where, message):
    model = preset_model("tiny-gpt2", vocab_size=len(dyck.SYMBOLS))
    with pytest.raises(UsageError, match=message) as error:
        if where == "closing":
            bracket_heads(model, rows, TOKENIZER.encode)
        else:
            closing_queries(rows, where)
    assert "\n" not in str(error.value)


@pytest.mark.slow  # a real train() and load(): seconds, beyond make check's budget
def test_a_run_trained_on_the_dyck_data_directory_is_scored(tmp_path, tiny_model, tiny_train):
    """The data directory dyck writes trains an ordinary run; the run, loaded with its own
    tokenizer, is scored on rows of its context."""
    from gptlab import load, train

    dyck.ensure_dyck(tmp_path / "data", 5000, seed=0)
    train(tiny_model(), tiny_train(max_iters=4), tmp_path / "data", tmp_path / "run",
          progress=False)
    model, tokenizer = load(tmp_path / "run")
    rows = dyck.dyck_rows(2, model.config.block_size, seed=1)
    result = bracket_heads(model, rows, tokenizer.encode, ablate=False)
    assert model.config.vocab_size == 5 and result["closing"]["n"] > 0
    assert torch.tensor(result["closing"]["heads"]["match"]).shape == (2, 2)
