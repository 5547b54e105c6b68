"""`gptlab experiment brackets` at its --quick size, checked for what must hold whatever the
models learned: a run per seed, ordinary and listed; every head's scores are the trained
weights' own, recomputed directly; the ablated heads are the ones the scores pick; the
shipped model's previous-token scores are recomputed; the claims are judged from the numbers
written; a second run reuses every run. (The data: tests/data/test_dyck.py; the scores:
tests/interp/test_brackets.py.)"""

from __future__ import annotations

import pytest
import torch

from gptlab.data.dyck import dyck_rows
from gptlab.experiments import brackets, catalog
from gptlab.experiments.claims import VERDICTS, evaluate
from gptlab.interp.brackets import bracket_heads
from gptlab.interp.heads import chance_scores, head_scores, repeated_random_tokens
from gptlab.loading import load
from gptlab.training.runs import list_runs

pytestmark = pytest.mark.usefixtures("one_thread_module")
QUICK = brackets.SIZES["quick"]
SEEDS = [1337 + i for i in range(QUICK.seeds)]


@pytest.fixture(scope="module")
def experiment(quick_experiment):
    return quick_experiment("brackets")


def test_a_run_per_seed_listed_with_its_report_and_figure(experiment, results, png_magic):
    assert set(results["runs"]) == {f"dyck-seed-{s}" for s in SEEDS}
    assert sorted(r["seed"] for r in results["runs"].values()) == SEEDS
    listed = {r.name for r in list_runs(experiment.parent)}
    assert {f"{experiment.name}/runs/dyck-seed-{s}" for s in SEEDS} <= listed
    assert (experiment / brackets.FIGURE).read_bytes().startswith(png_magic)
    report = (experiment / "report.md").read_text()
    assert "The claims, judged" in report and "previous-token" in report


def test_every_heads_scores_are_the_trained_models_own(experiment, results):
    rows = dyck_rows(QUICK.rows, QUICK.model["block_size"], seed=brackets.PROBE_SEED)
    for name, run in results["runs"].items():
        model, tokenizer = load(experiment / results["records"][name]["dir"])
        again = bracket_heads(model, rows, tokenizer.encode)
        for where in ("closing", "before"):
            for key, grid in again[where]["heads"].items():
                assert torch.allclose(torch.tensor(run[where]["heads"][key]),
                                      torch.tensor(grid), atol=1e-6), (name, where, key)
        assert run["closing_accuracy"] == pytest.approx(again["closing_accuracy"])
        assert run["closing_loss"] == pytest.approx(again["closing_loss"], abs=1e-6)


def test_the_ablated_heads_are_the_ones_the_scores_pick(results):
    for run in results["runs"].values():
        match = torch.tensor(run["before"]["heads"]["match"])
        uniformity = torch.tensor(run["before"]["heads"]["uniformity"])
        best, uniform = run["best"], run["most_uniform"]
        assert match[best["layer"], best["head"]] == match.max()
        assert uniformity[uniform["layer"], uniform["head"]] == uniformity.max()
        assert uniform["ablated_loss"] == run["ablated_loss"][uniform["layer"]][uniform["head"]]
        needed = run["most_needed"]
        ablated = torch.tensor(run["ablated_loss"])
        assert ablated[needed["layer"], needed["head"]] == ablated.max()
        assert needed["uniformity"] == pytest.approx(
            float(uniformity[needed["layer"], needed["head"]]))
        assert best["ablated_loss"] == pytest.approx(
            run["ablated_loss"][best["layer"]][best["head"]])


def test_the_shipped_models_previous_token_scores_are_recomputed(results):
    shipped = results["shipped"]
    model, tokenizer = load(brackets.SHIPPED)
    tokens = repeated_random_tokens(tokenizer.vocab_size, model.config.block_size // 2,
                                    QUICK.shipped_batch,
                                    torch.Generator().manual_seed(brackets.PROBE_SEED))
    grid = head_scores(model, tokens)["previous_token"]
    assert torch.allclose(torch.tensor(shipped["scores"]), grid, atol=1e-6)
    assert shipped["best"]["score"] == pytest.approx(float(grid.max()))
    assert shipped["chance"] == pytest.approx(chance_scores(tokens)["previous_token"])
    assert "not" in shipped["gpt2_small"]["scored"]  # never claimed as measured


def test_the_claims_are_judged_from_the_numbers_written(experiment, results):
    judged = results["claims"]
    assert [c["key"] for c in judged] == [c.key for c in brackets.CLAIMS]
    assert all(c["verdict"] in VERDICTS and c["seeds"] == SEEDS for c in judged)
    again = evaluate(brackets.CLAIMS, results)
    assert [c["verdict"] for c in again] == [c["verdict"] for c in judged]
    solves = next(c for c in judged if c["key"] == "solves_dyck")
    assert solves["effects"] == pytest.approx(
        [results["runs"][f"dyck-seed-{s}"]["closing_accuracy"] - brackets.SOLVED
         for s in SEEDS])
    shown = catalog.summary(experiment)
    assert shown["experiment"] == "brackets" and shown["figures"] == [brackets.FIGURE]
    assert [c["verdict"] for c in shown["claims"]] == [c["verdict"] for c in judged]


def test_heads_of_a_model_that_did_not_learn_are_not_read(experiment, results):
    # regression: the quick run printed "solves Dyck-2: contradicted" beside "the head the
    # model needs most attends uniformly: held"; its models name the closing bracket no
    # better than a bigram table of the training text, so no claim on their heads is judged
    table = brackets.bigram_closing_accuracy(experiment / "dyck-data",
                                             dyck_rows(QUICK.rows, QUICK.model["block_size"],
                                                       seed=brackets.PROBE_SEED))
    assert results["baselines"]["bigram_closing_accuracy"] == table
    lowest = min(r["closing_accuracy"] for r in results["runs"].values())
    assert lowest < (table + 1) / 2
    for c in results["claims"]:
        if c["key"] == "solves_dyck":  # what the precondition reads: judged, and no gate
            assert "precondition" not in c and c["verdict"] != "undecided"
            continue
        assert c["verdict"] == "undecided", c
        assert c["precondition"] == {
            "text": f"every seed's model learned Dyck-2 (lowest closing accuracy "
                    f"{lowest:.4g}, needs ≥ {(table + 1) / 2:.4g}: halfway from a bigram "
                    f"table's {table:.3f} to certain)",
            "value": lowest, "threshold": (table + 1) / 2, "met": False}
        assert c["verdict_line"] == f"undecided: precondition not met: {c['precondition']['text']}"
        assert c["units"] == "seeds 1337/1338"


def test_the_bigram_tables_accuracy_is_what_counting_pairs_gives(experiment):
    # a reference written out by hand: the training text's character pairs counted, and at
    # each closing bracket of the rows the table right when the symbol before it was
    # followed by that closing bracket more often than by the other
    from collections import Counter

    from gptlab.data.dyck import CLOSING, NONE, matching_openings
    from gptlab.data.prepared import load_data
    from gptlab.data.tokenizer import load_tokenizer

    data = load_data(experiment / "dyck-data")
    text = load_tokenizer(data.tokenizer_path).decode(data.train.tolist())
    pairs = Counter(zip(text, text[1:], strict=False))
    rows = dyck_rows(16, 24, seed=3)
    right = total = 0
    for row in rows:
        for c, match in enumerate(matching_openings(row)):
            if match != NONE and c > 0:
                other = CLOSING[1 - CLOSING.index(row[c])]
                right += pairs[(row[c - 1], row[c])] > pairs[(row[c - 1], other)]
                total += 1
    assert total > 20
    assert brackets.bigram_closing_accuracy(experiment / "dyck-data", rows) == \
        pytest.approx(right / total)


def test_a_second_run_reuses_every_run(experiment, rerun):
    again = rerun(experiment, "brackets")
    assert again.code == 0
    assert all(r["reused"] for r in again.results["records"].values())
    assert again.grid_after == again.grid_before
    assert "heads that track matching" in again.out
