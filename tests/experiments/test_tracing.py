"""The facts part of `gptlab experiment memory` at its --quick size: its models are ordinary
runs of the grid, its recall and traced probabilities recompute from the saved models, its
averages and claims are the per-fact and per-seed numbers, and a rerun retrains nothing;
never the outcome."""

from __future__ import annotations

import pytest
import torch

from gptlab import load
from gptlab.data.facts import make_facts
from gptlab.experiments import tracing
from gptlab.experiments.claims import VERDICTS, evaluate
from gptlab.experiments.tracing import CORPUS_SEED, encoded, peak, recalled
from gptlab.interp.tracing import POSITION_KINDS, TRACE_KINDS

pytestmark = pytest.mark.usefixtures("one_thread_module")


@pytest.fixture(scope="module")
def experiment(quick_experiment):
    return quick_experiment("memory")


@pytest.fixture(scope="module")
def corpus():
    return make_facts(tracing.SIZES["quick"].entities, CORPUS_SEED)


def test_a_model_per_seed_trained_as_a_run_and_the_figure_drawn(experiment, results,
                                                                png_magic):
    size = tracing.SIZES["quick"]
    runs = results["tracing"]["runs"]
    assert [r["seed"] for r in runs.values()] == list(range(1337, 1337 + size.seeds))
    for name, record in results["tracing"]["records"].items():
        assert (experiment / record["dir"] / "model.safetensors").is_file()
        assert record["steps"] == size.steps and name in runs
    assert (experiment / tracing.FIGURE).read_bytes().startswith(png_magic)
    assert (experiment / tracing.GRID_STATE).is_file()


def test_recall_and_the_clean_probability_recompute_from_the_saved_model(experiment, results,
                                                                         corpus):
    for name, run in results["tracing"]["runs"].items():
        model, tokenizer = load(experiment / "runs" / name)
        model.eval()
        seen = recalled(model, corpus.train_prompts, tokenizer.encode)
        assert run["recall_trained"] == sum(seen) / len(seen)
        assert run["traced"], "the quick size traces facts whatever the model recalls"
        for fact in run["traced"]:
            prompt = next(p for p in corpus.train_prompts if p.text == fact["text"])
            ids, (a, b), target = encoded(prompt, tokenizer.encode)
            assert [a, b] == fact["subject"]
            assert tokenizer.decode(ids[a:b].tolist()) == prompt.fact.subject
            with torch.no_grad():
                p = torch.softmax(model(ids[None])[0][0, -1], dim=-1)[target]
            assert float(p) == pytest.approx(fact["clean"], abs=1e-5)


def test_the_averages_are_the_traced_facts_means(results):
    for run in results["tracing"]["runs"].values():
        traced = run["traced"]
        assert run["total_effect"] == pytest.approx(
            sum(t["clean"] - t["corrupted"] for t in traced) / len(traced))
        for kind in TRACE_KINDS:
            for where in POSITION_KINDS:
                rows = [t["indirect"][kind][where] for t in traced
                        if t["indirect"][kind][where] is not None]
                if not rows:
                    assert run["aie"][kind][where] is None
                    continue
                assert run["aie"][kind][where] == pytest.approx(
                    [sum(col) / len(col) for col in zip(*rows, strict=True)])
            # Before the subject the clean and corrupted runs agree: nothing to restore.
            assert all(v == 0 for v in run["aie"][kind]["before subject"])


def test_the_claims_are_judged_on_the_per_seed_numbers(results):
    judged = {c["key"]: c for c in results["claims"]}
    assert {c.key for c in tracing.CLAIMS} <= set(judged)
    runs = sorted(results["tracing"]["runs"].values(), key=lambda r: r["seed"])
    mine = [judged[c.key] for c in tracing.CLAIMS]
    assert all(c["verdict"] in VERDICTS and c["seeds"] == [r["seed"] for r in runs]
               for c in mine)
    assert judged["tracing_mlp_over_attention"]["effects"] == pytest.approx(
        [peak(r, "mlp") - peak(r, "attn") for r in runs])
    assert judged["tracing_total"]["effects"] == pytest.approx(
        [r["total_effect"] for r in runs])
    assert evaluate(tracing.CLAIMS, results) == mine


def test_tracing_waits_for_models_that_recall(results):
    # the quick models (10 steps) recall nothing: how they recall is not read; the recall
    # itself is judged, the precondition's number
    judged = {c["key"]: c for c in results["claims"]}
    lowest = min(r["recall_trained"] for r in results["tracing"]["runs"].values())
    assert "precondition" not in judged["facts_recalled"]
    for key in ("tracing_total", "tracing_mlp_over_attention", "tracing_last_subject_token"):
        assert judged[key]["precondition"] == {
            "text": f"every seed's model recalls the facts (lowest recall (trained phrasing) "
                    f"{lowest:.4g}, needs ≥ 0.9: the facts memorised)",
            "value": lowest, "threshold": 0.9, "met": lowest >= 0.9}
    if lowest < 0.9:
        assert all(judged[k]["verdict"] == "undecided" for k in
                   ("tracing_total", "tracing_mlp_over_attention",
                    "tracing_last_subject_token"))


def test_peak_of_an_untraced_run_is_nan_so_the_claim_is_undecided():
    assert peak({"aie": None}, "mlp") != peak({"aie": None}, "mlp")
    judged = evaluate(tracing.CLAIMS[2:3], {"tracing": {"runs": {
        "a": {"seed": 1, "aie": None, "recall_trained": 1.0},
        "b": {"seed": 2, "aie": None, "recall_trained": 1.0}}}})
    assert judged[0]["verdict"] == "undecided" and judged[0]["precondition"]["met"]
    assert "has no finite number" in judged[0]["verdict_line"]


@pytest.mark.slow
def test_a_rerun_retrains_no_facts_model(experiment, rerun):
    again = rerun(experiment, "memory")
    assert again.code == 0
    assert again.grid_after == again.grid_before
    assert "facts-seed-1337: reusing the finished run" in again.out
    assert again.results["tracing"]["runs"].keys() == again.results["tracing"]["records"].keys()
