"""`gptlab experiment heads` at its --quick size, checked for what must hold whatever the
models learned: the grid is one model per seed, 0% pruned is the model unpruned, all pruned
removes every head, one head pruned by the mask is that head's single ablation, the order
is the importance's, the counts agree with the numbers they count, and a second run reuses
every trained model."""

from __future__ import annotations

import pytest
import torch

from gptlab.data.prepared import load_data
from gptlab.experiments import baselines, heads
from gptlab.experiments.claims import evaluate
from gptlab.interp.heads import next_token_targets
from gptlab.model_dir import load_model

pytestmark = pytest.mark.usefixtures("one_thread_module")


@pytest.fixture(scope="module")
def experiment(quick_experiment):
    return quick_experiment("heads")


def test_the_grid_is_one_model_per_seed(experiment, results, png_magic):
    size = heads.SIZES["quick"]
    assert set(results["runs"]) == {"seed-1337", "seed-1338"}
    for name, run in results["runs"].items():
        config = load_model(experiment / run["dir"]).config
        assert run["seed"] == int(name.removeprefix("seed-")) and run["steps"] == size.steps
        assert (experiment / run["dir"] / "state.pt").is_file()  # an ordinary, resumable run
        assert {k: getattr(config, k) for k in size.model} == size.model
    assert results["fractions"] == [i / 10 for i in range(11)]
    assert (experiment / heads.FIGURE).read_bytes().startswith(png_magic)
    report = (experiment / "report.md").read_text()
    assert "seeds: seed-1337 1337, seed-1338 1338" in report
    assert "| 100% | 8 |" in report


def test_pruning_starts_at_the_model_and_ends_with_no_heads(experiment, results):
    n_layer, n_head = heads.SIZES["quick"].model["n_layer"], heads.SIZES["quick"].model["n_head"]
    windows = heads.held_out_windows(experiment.parent / "data", heads.SIZES["quick"].windows,
                                     heads.SIZES["quick"].model["block_size"])
    held = windows[len(windows) // 2:]
    for row in results["rows"]:
        model = load_model(experiment / results["runs"][row["run"]]["dir"]).eval()
        with torch.no_grad():
            _, plain = model(held, next_token_targets(held))
        first, last = row["pruning"][0], row["pruning"][-1]
        assert first["pruned"] == 0 and last["pruned"] == n_layer * n_head
        for order in heads.ORDERS:
            assert first["loss"][order] == row["clean_loss"] == float(plain)
            assert first["change"][order] == 0
            assert last["loss"][order] == last["loss"]["importance"]  # no heads at all
            assert sorted(map(tuple, row["orders"][order])) == [
                (layer, head) for layer in range(n_layer) for head in range(n_head)]
        counts = [s["pruned"] for s in row["pruning"]]
        assert counts == sorted(counts) and row["pruning"][1]["pruned"] == 1  # 10% of 8
        # one head gated off is that head's single ablation
        layer, head = row["orders"]["importance"][0]
        one = row["clean_loss"] + row["single"]["deltas"][layer][head]
        assert row["pruning"][1]["loss"]["importance"] == pytest.approx(one, abs=1e-6)


def test_the_orders_and_counts_follow_the_numbers(results):
    for row in results["rows"]:
        for order, key in (("importance", "importance"),
                           ("unnormalized", "importance_unnormalized")):
            values = [row[key][layer][head] for layer, head in row["orders"][order]]
            assert values == sorted(values) and len(values) == row["heads"]
        normalized = torch.tensor(row["importance"])
        raw = torch.tensor(row["importance_unnormalized"])
        assert torch.allclose(normalized * raw.norm(dim=1, keepdim=True), raw)
        relative = [v for line in row["single"]["relative"] for v in line]
        assert row["single"]["under_threshold"] == sum(abs(v) < heads.THRESHOLD
                                                       for v in relative)
        assert row["single"]["largest"] == pytest.approx(max(abs(v) for v in relative))
        for order in heads.ORDERS:
            expected = 0.0
            for step in row["pruning"]:
                if step["change"][order] >= heads.THRESHOLD:
                    break
                expected = step["fraction"]
            assert row["prunable"][order] == expected


def test_rank_correlation_against_a_direct_recomputation():
    a = torch.tensor([0.3, 0.1, 0.5, 0.2])
    b = torch.tensor([10.0, 40.0, 30.0, 20.0])
    # ranks a: 2 0 3 1; b: 0 3 2 1 -> Spearman 1 - 6 * sum(d^2) / (n (n^2 - 1)) = -0.4
    assert heads.rank_correlation(a, b) == pytest.approx(1 - 6 * (4 + 9 + 1 + 0) / 60)
    assert heads.rank_correlation(a, a) == pytest.approx(1.0)


def test_a_second_run_reuses_every_trained_model(experiment, results, rerun):
    again = rerun(experiment, "heads")
    assert again.code == 0
    assert again.out.count("reusing the finished run") == 2 and "training" not in again.out
    assert "one head removed at a time:" in again.out
    assert "at random (seeds 1337 / 1338)" in again.out
    assert again.grid_after == again.grid_before
    assert all(r["reused"] for r in again.results["runs"].values())
    assert again.results["rows"] == results["rows"]


def _made_row(seed, under, prunable, importance_step, random_step):
    """A hand-made row of results: the loss's change grows linearly with the fraction
    pruned, by importance_step (random_step) per 10%."""
    return {"seed": seed, "heads": 32, "single": {"under_threshold": under}, "clean_loss": 1.9,
            "prunable": {"importance": prunable},
            "pruning": [{"fraction": i / 10, "change": {"importance": importance_step * i,
                                                        "random": random_step * i}}
                        for i in range(11)]}


def test_the_claims_on_hand_made_results():
    results = {"rows": [_made_row(1337, 27, 0.2, 0.003, 0.02),
                        _made_row(1338, 26, 0.1, 0.0031, 0.01)],
               "baselines": {"bigram": 2.47}}
    judged = {c["key"]: c for c in evaluate(heads.CLAIMS, results)}
    assert {k: c["verdict"] for k, c in judged.items()} == {
        "alone": "held", "together": "not seen", "few_do_the_work": "contradicted",
        "importance_beats_random": "held weakly"}
    assert judged["alone"]["effects"] == pytest.approx([27 / 32 - 0.5, 26 / 32 - 0.5])
    assert judged["together"]["effects"] == pytest.approx([0.05, -0.05])  # mean 0: none
    assert judged["few_do_the_work"]["effects"] == pytest.approx([0.01 - 0.024, 0.01 - 0.0248])
    assert judged["importance_beats_random"]["effects"] == pytest.approx([0.051, 0.0207])


def test_heads_are_not_read_off_a_model_that_did_not_learn(experiment, results):
    # the quick models (20 steps) do worse on held-out text than a bigram table of the
    # training text: pruning their heads says nothing about heads, so no claim is judged
    assert results["baselines"]["bigram"] == baselines.bigram_loss(
        load_data(experiment.parent / "data").train)
    worst = max(r["clean_loss"] for r in results["rows"])
    assert worst >= results["baselines"]["bigram"]
    assert {c["verdict"] for c in results["claims"]} == {"undecided"}
    assert all(c["precondition"]["value"] == worst and not c["precondition"]["met"]
               for c in results["claims"])
    assert results["undecided_line"].startswith(
        "this --quick run is too small to decide anything: not met: every seed's model reads "
        "its context (highest held-out loss ")
    learned = {**results, "rows": [{**r, "clean_loss": 0.5} for r in results["rows"]]}
    assert all(c["precondition"]["met"] for c in evaluate(heads.CLAIMS, learned))

