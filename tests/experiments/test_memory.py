"""`gptlab experiment memory` at its --quick size (the shipped model over a few hundred
characters of make_data's validation text, a few units a layer), checked for what must hold
whatever the model learned: every kept record recomputes (its value's top token is the
direct float64 projection's argmax, its activation the hooked one on its trigger alone, its
trigger and next token the slice's), the slices are disjoint, the claims are judged on the
per-slice numbers, and the command refuses what makes no sense for it; never the outcome."""

from __future__ import annotations

import pytest
import torch

from gptlab import load
from gptlab.cli.main import main
from gptlab.data.prepared import load_data
from gptlab.data.tokenizer import load_tokenizer
from gptlab.experiments import baselines, catalog, memory
from gptlab.experiments.claims import VERDICTS, evaluate
from gptlab.interp.memory import unit_activation

pytestmark = pytest.mark.usefixtures("one_thread_module")


@pytest.fixture(scope="module")
def experiment(quick_experiment):
    return quick_experiment("memory")


@pytest.fixture(scope="module")
def shipped():
    return load(memory.MODEL)


@pytest.fixture(scope="module")
def slices(experiment, shipped):
    """The quick size's held-out slices, as the experiment read them."""
    _, tokenizer = shipped
    return memory.held_out_slices(experiment.parent / "data", tokenizer,
                                  memory.SIZES["quick"])


def test_the_folder_holds_results_report_and_figure(experiment, results, png_magic):
    size = memory.SIZES["quick"]
    n_layer = results["architecture"]["n_layer"]
    assert [s["sample"] for s in results["samples"]] == list(range(size.samples))
    assert all(len(s["layers"]) == n_layer for s in results["samples"])
    assert results["per_layer"] == size.per_layer
    assert (experiment / memory.FIGURE).read_bytes().startswith(png_magic)
    report = (experiment / "report.md").read_text()
    assert "The claims, judged" in report and "Facts: causal tracing" in report
    assert catalog.summary(experiment)["experiment"] == "memory"  # listed: CLI and lab


def test_records_are_the_fields_promised_and_a_sample_per_layer(results):
    size = memory.SIZES["quick"]
    fields = {"layer", "unit", "top_trigger", "next_token", "value_top_token", "activation"}
    assert all(set(r) == fields for r in results["records"])
    per_layer = [sum(r["layer"] == layer for r in results["records"])
                 for layer in range(results["architecture"]["n_layer"])]
    assert per_layer == [size.kept] * len(per_layer)


def test_a_records_value_top_token_is_the_direct_projections_argmax(results, shipped):
    model, tokenizer = shipped
    for r in results["records"]:
        value = model.blocks[r["layer"]].mlp.proj.weight.double()[:, r["unit"]]
        logits = model.lm_head.weight.double() @ (model.ln_f.weight.double() * value)
        assert r["value_top_token"]["id"] == int(logits.argmax())
        assert r["value_top_token"]["text"] == tokenizer.decode([int(logits.argmax())])


def test_a_records_activation_is_the_hooked_one_on_its_trigger_alone(results, shipped,
                                                                      slices):
    model, tokenizer = shipped
    first = slices[0]
    for r in results["records"]:
        trigger, position = r["top_trigger"]["ids"], r["top_trigger"]["position"]
        assert first[position + 1 - len(trigger): position + 1].tolist() == trigger
        assert r["next_token"]["id"] == int(first[position + 1])
        assert r["top_trigger"]["text"] == tokenizer.decode(trigger)
        again = unit_activation(model, torch.tensor(trigger), r["layer"], r["unit"])
        assert again == pytest.approx(r["activation"], rel=1e-4, abs=1e-5)


def test_the_slices_are_disjoint_runs_of_the_validation_text(experiment, slices, shipped):
    size = memory.SIZES["quick"]
    data = load_data(experiment.parent / "data")
    text = load_tokenizer(data.tokenizer_path).decode(data.val[: size.chars * size.samples]
                                                      .tolist())
    _, tokenizer = shipped
    assert [tokenizer.decode(s.tolist()) for s in slices] == [
        text[i * size.chars:(i + 1) * size.chars] for i in range(size.samples)]


def test_every_claim_is_judged_on_the_per_slice_numbers(results):
    judged = {c["key"]: c for c in results["claims"]}
    assert set(judged) == {c.key for c in memory.CLAIMS}
    assert all(c["verdict"] in VERDICTS for c in judged.values())
    geva = [judged[c.key] for c in memory.CLAIMS if not c.key.startswith(("facts",
                                                                           "tracing"))]
    assert all(c["seeds"] == [s["sample"] for s in results["samples"]] for c in geva)
    composition = [sum(r["composition"][str(memory.CLAIM_UNITS)] for r in s["layers"])
                   / len(s["layers"]) - memory.COMPOSED for s in results["samples"]]
    assert judged["composition"]["effects"] == pytest.approx(composition)
    pattern = [sum(r["pattern"] for r in s["layers"]) / len(s["layers"]) - s["random_pattern"]
               for s in results["samples"]]
    assert judged["pattern"]["effects"] == pytest.approx(pattern)
    assert evaluate(memory.CLAIMS, results) == results["claims"]  # recomputes the same


def test_the_memories_are_read_off_a_model_that_reads_its_text(experiment, results,
                                                                shipped, slices):
    # the precondition's numbers: the model's loss on each slice, every token after the
    # first predicted once, from the start of a window of at most block_size tokens (here
    # longer than one block), and the bigram table of the training text in the model's
    # tokens
    model, tokenizer = shipped
    block = model.config.block_size
    for sample, ids in zip(results["samples"], slices, strict=True):
        assert len(ids) > block
        total, predicted = 0.0, []
        for start in range(0, len(ids) - 1, block - 1):
            window = ids[start:start + block]
            with torch.no_grad():
                logits, _ = model(window[None])
            total += float(torch.nn.functional.cross_entropy(logits[0, :-1], window[1:],
                                                             reduction="sum"))
            predicted += range(start + 1, start + len(window))
        assert predicted == list(range(1, len(ids)))
        assert sample["loss"] == pytest.approx(total / len(predicted), rel=1e-5)
    assert results["baselines"]["bigram"] == baselines.bigram_loss(
        memory.training_ids(experiment.parent / "data", tokenizer))
    geva = [c for c in results["claims"] if not c["key"].startswith(("facts", "tracing"))]
    worst = max(s["loss"] for s in results["samples"])
    assert all(c["precondition"]["value"] == worst and c["units"] == "slices 0/1/2"
               for c in geva)
    assert all(c["precondition"]["met"] == (worst < results["baselines"]["bigram"])
               for c in geva)
    # a model that had not learned its text: its memories are not judged
    unlearned = {**results, "samples": [{**s, "loss": 9.0} for s in results["samples"]]}
    assert {c["verdict"] for c in evaluate(memory.CLAIMS[:4], unlearned)} == {"undecided"}


def test_composition_shares_are_shares_and_more_units_match_more_often(results):
    for sample in results["samples"]:
        for row in sample["layers"]:
            shares = [row["composition"][str(n)] for n in results["composition_units"]]
            assert all(0 <= s <= 1 for s in shares)
            assert shares == sorted(shares, reverse=True)  # top 5 contains top 1, ...


def test_upper_layers_are_the_top_share_of_the_model():
    assert memory.upper_layers(16) == list(range(10, 16))  # Geva et al.'s 11-16 of 16
    assert memory.upper_layers(6) == [4, 5]
    assert memory.upper_layers(1) == [0]


def test_the_command_refuses_model_for_others(tmp_path, capsys):
    assert main(["experiment", "heads", "--model", "shakespeare",
                 "--out", str(tmp_path / "h")]) == 2
    assert "--model" in capsys.readouterr().err
