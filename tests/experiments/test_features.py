"""`gptlab experiment features` at its --quick size (the shipped model, two tiny
dictionaries trained on make_data's text, three short held-out slices), checked for what
must hold whatever was learned: the dictionaries are in SAELens' layout and reload to the
measures results.json gives; each kept feature's contexts, logit effect and the neurons
needed recompute; every claim carries its precondition, units and verdict line, and an
unmet precondition makes it undecided; the command refuses what makes no sense for it."""

from __future__ import annotations

import copy

import pytest

from gptlab import load
from gptlab.cli.main import main
from gptlab.experiments import catalog
from gptlab.experiments import features as experiment_module
from gptlab.experiments.claims import UNDECIDED, VERDICTS, evaluate
from gptlab.experiments.memory import held_out_slices
from gptlab.interp.sae import features, metrics, neurons, store
from gptlab.interp.sae.sites import read_site

pytestmark = pytest.mark.usefixtures("one_thread_module")


@pytest.fixture(scope="module")
def experiment(quick_experiment):
    return quick_experiment("features")


@pytest.fixture(scope="module")
def shipped():
    return load(experiment_module.MODEL)


@pytest.fixture(scope="module")
def slices(experiment, shipped):
    _, tokenizer = shipped
    return held_out_slices(experiment.parent / "data", tokenizer,
                           experiment_module.SIZES["quick"])


def test_the_folder_holds_results_report_figure_and_both_dictionaries(experiment, results,
                                                                     png_magic):
    size = experiment_module.SIZES["quick"]
    assert (experiment / experiment_module.FIGURE).read_bytes().startswith(png_magic)
    for name in experiment_module.DICTIONARIES:
        sae, training = store.load(experiment / name)
        assert sae.config.d_sae == size.d_sae and sae.config.k == size.k
        assert sae.config.layer == results["layer"] == 3
        assert training["tokens"] == results["training"][name]["tokens"]
        assert not (experiment / name / store.STATE_FILE).exists()
    report = (experiment / "report.md").read_text()
    assert "The claims, judged" in report and "Features against neurons" in report
    assert catalog.summary(experiment)["experiment"] == "features"
    assert results["threads"] == 1


def test_a_slices_measures_are_the_reloaded_dictionaries(experiment, results, shipped,
                                                         slices):
    model, _ = shipped
    for name in experiment_module.DICTIONARIES:
        sae, _ = store.load(experiment / name)
        again = metrics.evaluate(model, sae, slices[1])
        sample = results["samples"][1][name]
        for key in ("l0", "explained_variance", "ce_loss_score", "ce_loss_with_sae",
                    "ce_loss_with_ablation", "ce_loss_without_sae", "dead_features"):
            assert sample[key] == pytest.approx(again[key], rel=1e-6, abs=1e-9), key


def test_kept_features_recompute_from_their_contexts_alone(experiment, results, shipped,
                                                          slices):
    model, tokenizer = shipped
    sae, _ = store.load(experiment / "sae")
    assert len(results["records"]) == experiment_module.SIZES["quick"].kept
    for record in results["records"]:
        f = record["feature"]
        for context in record["contexts"]:
            assert context["ids"][-1] == int(slices[0][context["position"]])
            prefix = slices[0][context["start"]: context["position"] + 1]
            x, _ = read_site(model, prefix, "mlp_out", results["layer"])
            assert float(sae.encode(x[0, -1])[f]) == pytest.approx(context["activation"],
                                                                   rel=1e-4, abs=1e-5)
        row = sae.W_dec[f].double()
        direct = model.lm_head.weight.double() @ (model.ln_f.weight.double() * row)
        assert record["promoted"][0]["id"] == int(direct.argmax())
        assert record["promoted"][0]["text"] == tokenizer.decode([int(direct.argmax())])


def test_the_neurons_needed_recompute(experiment, results, shipped, slices):
    model, tokenizer = shipped
    sae, _ = store.load(experiment / "sae")
    sample = results["samples"][2]["neurons"]
    capture = features.capture_text(model, slices[2], "mlp_out", results["layer"],
                                    neurons=True)
    basis = neurons.NeuronBasis(model, results["layer"], capture.neurons, capture.y)
    assert basis.needed(sample["explained_variance_sae"])[0] == sample["needed"]
    assert sample["needed"] == 1 or basis.explained_variance(sample["needed"] - 1) \
        < sample["explained_variance_sae"]


def test_every_claim_has_its_precondition_units_and_verdict_line(results):
    judged = {c["key"]: c for c in results["claims"]}
    assert set(judged) == {claim.key for claim in experiment_module.CLAIMS}
    for c in judged.values():
        assert c["verdict"] in VERDICTS
        assert c["units"] == "slices 0/1/2" and c["seeds"] == [0, 1, 2]
        assert set(c["precondition"]) == {"text", "value", "threshold", "met"}
        assert c["verdict_line"].startswith(c["verdict"])
        if not c["precondition"]["met"]:
            assert c["verdict"] == UNDECIDED and "precondition not met" in c["verdict_line"]
    # the effect is measured whether or not it is judged (the quick dictionaries learn
    # little: then it is not)
    sparser = [experiment_module._sparser(s) for s in results["samples"]]
    assert judged["sparser"]["effects"] == pytest.approx(sparser)
    if not judged["sparser"]["precondition"]["met"]:
        assert judged["sparser"]["verdict"] == UNDECIDED
    if all(c["verdict"] == UNDECIDED for c in judged.values()):
        assert "--quick" in results["undecided_line"]
    else:
        assert results["undecided_line"] is None


def test_a_met_precondition_lets_the_verdict_through_and_an_unmet_one_stops_it(results):
    learned = copy.deepcopy(results)
    for sample in learned["samples"]:
        for name in experiment_module.DICTIONARIES:
            sample[name]["explained_variance"] = 0.95
        sample["neurons"].update(needed=40, l0_sae=10.0)
    judged = {c["key"]: c for c in evaluate(experiment_module.CLAIMS, learned)}
    assert judged["sparser"]["precondition"]["met"]
    assert judged["sparser"]["verdict"] == "held"  # log2(4) = 2 on every slice: no spread
    assert judged["sparser"]["verdict_line"].startswith("held: +2 (needs > 0")
    for sample in learned["samples"]:
        sample["sae"]["explained_variance"] = experiment_module.EV_LEARNED - 0.01
    judged = {c["key"]: c for c in evaluate(experiment_module.CLAIMS, learned)}
    assert judged["sparser"]["verdict"] == UNDECIDED
    assert judged["sparser"]["precondition"]["value"] == pytest.approx(
        experiment_module.EV_LEARNED - 0.01)


def test_the_command_takes_model_and_refuses_it_elsewhere(tmp_path, capsys):
    assert main(["experiment", "norm", "--model", "shakespeare",
                 "--out", str(tmp_path / "n")]) == 2
    assert "memory` and `features` only" in capsys.readouterr().err


def test_claims_evaluate_alone_finds_an_unmet_precondition_undecided(results):
    """Whoever judges CLAIMS with gptlab.experiments.claims.evaluate alone (the docs tool)
    gets the verdicts results.json holds."""
    alone = {c["key"]: c["verdict"] for c in evaluate(experiment_module.CLAIMS, results)}
    assert alone == {c["key"]: c["verdict"] for c in results["claims"]}
