"""`gptlab experiment norm` at its --quick size (norm_experiment, conftest.py), checked for
its mechanics, not its outcome: the grid is the one asked for, every run an ordinary run
with its settings, step 0 probed before any training (so runs that differ only in rate or
warm-up start from the same gradients), the per-layer gradient norms equal a float64
recomputation through .grad, and a second run retrains nothing."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from gptlab.experiments import norm
from gptlab.experiments.claims import evaluate
from gptlab.model_dir import load_config
from gptlab.training.rundir import read_train_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def results(norm_experiment):
    return json.loads((norm_experiment / "results.json").read_text())


def test_the_grid_is_pre_and_post_with_and_without_warmup_at_each_depth_and_rate(
        norm_experiment, results):
    size = norm.SIZES["quick"]
    asked = list(itertools.product(size.depths, size.lrs, (0, size.warmup), ("pre", "post")))
    assert [(c["depth"], c["lr"], c["warmup"], c["norm"]) for c in results["cells"]] == asked
    assert len(results["runs"]) == 16 and results["seeds"] == [1337]
    for depth, lr, warmup, position in asked:
        name = norm.run_name(dict(depth=depth, lr=lr, warmup=warmup, norm=position), 1337)
        run_dir = norm_experiment / results["runs"][name]["dir"]
        config, settings = load_config(run_dir), read_train_config(run_dir)
        assert (config.n_layer, config.norm_position) == (depth, position)
        assert (settings["learning_rate"], settings["warmup_iters"]) == (lr, warmup)
        assert settings["seed"] == 1337 and settings["max_iters"] == size.steps
        assert (run_dir / "state.pt").is_file()  # an ordinary run: resumable


def test_the_folder_holds_results_report_and_figure(norm_experiment, results, png_magic):
    assert (norm_experiment / norm.FIGURE).read_bytes().startswith(png_magic)
    report = (norm_experiment / "report.md").read_text()
    assert "Seeds 1337 for every cell" in report and "| 2 | 0.01 | none |" in report
    for run in results["runs"].values():
        assert math.isfinite(run["start_loss"])
        assert run["diverged"] is None or run["diverged"] == "loss ended above its start" \
            or run["diverged"].startswith("the loss became")
        if run["diverged"] is None:  # a finished run's loss, below where it started
            assert run["final_loss"] <= run["start_loss"]
        steps = [s for s, _ in run["layer_grad_norms"]]
        assert steps == [0, 3, 6]  # step 0, then every evaluation


def test_step_zero_gradients_depend_on_the_model_and_seed_only(results):
    """Runs that differ only in learning rate or warm-up have the same weights at step 0,
    so the same probe gives the same per-layer gradient norms, to the bit."""
    for depth, position in itertools.product((1, 2), ("pre", "post")):
        step0 = {json.dumps(c["step0_layer_grad_norms"]) for c in results["cells"]
                 if c["depth"] == depth and c["norm"] == position}
        assert len(step0) == 1
        assert len(json.loads(step0.pop())) == depth


def _made_results(post_deep=3.2, post_shallow=2.41, post_growth=1.0, pre_last=(0.56, 0.73)):
    """A hand-made results dict of the default grid's shape: Pre-LN at 2.40 (+0.01 for
    the second seed), Post-LN as given; step-0 gradients per layer."""
    seeds, depths, lrs, warmup = [1337, 1338], [2, 6], [0.002, 0.01], 60
    cells, runs = [], {}
    for d, lr, w, n in itertools.product(depths, lrs, (0, warmup), norm.NORMS):
        cell = {"depth": d, "lr": lr, "warmup": w, "norm": n}
        names = [norm.run_name(cell, s) for s in seeds]
        for i, name in enumerate(names):
            loss = 2.40 if n == "pre" else (post_deep if d == 6 else post_shallow)
            last = pre_last[depths.index(d)] if n == "pre" else post_growth
            grads = [1.0] * (d - 1) + [last] if n == "post" else [0.8] * (d - 1) + [last]
            runs[name] = {"final_loss": loss + 0.01 * i, "layer_grad_norms": [[0, grads]]}
        cells.append({**cell, "runs": names})
    return {"seeds": seeds, "depths": depths, "lrs": lrs, "warmup": warmup, "cells": cells,
            "runs": runs}


def test_the_claims_on_hand_made_results():
    judged = {c["key"]: c for c in evaluate(norm.CLAIMS, _made_results())}
    assert {k: c["verdict"] for k, c in judged.items()} == {
        "pre_stable_deep": "held", "pre_stable_shallow": "not seen",
        "no_warmup_needed": "held", "post_grad_grows": "not seen",
        "pre_grad_shrinks": "contradicted"}
    assert judged["pre_stable_deep"]["effects"] == pytest.approx([0.8, 0.8])
    assert judged["pre_stable_deep"]["seeds"] == [1337, 1338]
    assert judged["pre_grad_shrinks"]["mean"] == pytest.approx(0.56 / 0.73 - 1)


def test_a_diverged_run_leaves_its_claim_undecided():
    results = _made_results()
    results["runs"][norm.run_name({"depth": 6, "lr": 0.01, "warmup": 0, "norm": "post"},
                                  1338)]["final_loss"] = None
    judged = {c["key"]: c for c in evaluate(norm.CLAIMS, results)}
    assert judged["pre_stable_deep"]["verdict"] == "undecided"
    assert judged["pre_stable_shallow"]["verdict"] == "not seen"
