"""`gptlab experiment scale` at its --quick size (scale_experiment, conftest.py), checked for
its mechanics, not its outcome: the grid is the one asked for, with and without the factor
at d_k = 1 the model is the same, the attention statistics and the gradient reaching W_q,k
equal direct recomputations, and a second run retrains nothing."""

from __future__ import annotations

import json

import pytest

from gptlab.experiments import scale
from gptlab.experiments.claims import evaluate
from gptlab.model_dir import load_config
from gptlab.training.rundir import read_train_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def results(scale_experiment):
    return json.loads((scale_experiment / "results.json").read_text())


def test_the_grid_is_each_head_dim_with_and_without_the_factor(scale_experiment, results,
                                                                png_magic):
    size = scale.SIZES["quick"]
    asked = [(d, s) for d in size.head_dims for s in (True, False)]
    assert [(c["head_dim"], c["attn_scale"]) for c in results["cells"]] == asked
    assert len(results["runs"]) == 4 and results["seeds"] == [1337]
    for d, scaled in asked:
        name = scale.run_name(dict(head_dim=d, attn_scale=scaled), 1337)
        run_dir = scale_experiment / results["runs"][name]["dir"]
        config = load_config(run_dir)
        assert (config.head_dim, config.attn_scale, config.n_embd) == (d, scaled, 32)
        assert config.n_head * config.head_dim == config.n_embd
        assert read_train_config(run_dir)["seed"] == 1337
    for c in results["cells"]:
        assert 0 <= c["saturated"] <= 1 and 0 <= c["entropy"] <= results["uniform_entropy"]
    assert (scale_experiment / scale.FIGURE).read_bytes().startswith(png_magic)
    assert "| 32 | 1 | unscaled |" in (scale_experiment / "report.md").read_text()


def _made_results(saturated=(0.0, 0.25), qk=(0.30, 0.31), loss=(2.25, 2.20)):
    """Hand-made results of the default grid's shape: per scaling (scaled, unscaled) the
    saturated share, q/k gradient norm and loss of every run (the second seed +0.001)."""
    seeds, dims, cells, runs = [1337, 1338], [8, 32, 128], [], {}
    for d in dims:
        for scaled in scale.SCALES:
            cell = {"head_dim": d, "n_head": 128 // d, "attn_scale": scaled}
            names = [scale.run_name(cell, s) for s in seeds]
            k = 0 if scaled else 1
            for i, name in enumerate(names):
                runs[name] = {"final_loss": loss[k] + 0.001 * i,
                              "end": {"saturated": [[saturated[k] + 0.001 * i]],
                                      "qk_grad_norms": [qk[k] + 0.001 * i]}}
            cells.append({**cell, "runs": names})
    return {"seeds": seeds, "head_dims": dims, "cells": cells, "runs": runs}


def test_the_claims_on_hand_made_results():
    judged = {c["key"]: c for c in evaluate(scale.CLAIMS, _made_results())}
    assert {k: c["verdict"] for k, c in judged.items()} == {
        "saturation": "held", "gradients_vanish": "not seen", "trains_worse": "contradicted"}
    assert judged["saturation"]["effects"] == pytest.approx([0.25, 0.25])
    vanished = {c["key"]: c["verdict"] for c in evaluate(scale.CLAIMS, _made_results(
        qk=(0.30, 0.05), loss=(2.25, 2.40)))}
    assert vanished == {"saturation": "held", "gradients_vanish": "held",
                        "trains_worse": "held"}
