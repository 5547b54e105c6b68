"""`gptlab experiment scale` at its --quick size (scale_experiment, conftest.py), checked for
its mechanics, not its outcome: the grid is the one asked for, with and without the factor
at d_k = 1 the model is the same, the attention statistics and the gradient reaching W_q,k
equal direct recomputations, and a second run retrains nothing."""

from __future__ import annotations

import json

import pytest

from gptlab.experiments import scale
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
