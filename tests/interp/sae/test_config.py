"""gptlab.interp.sae.config: configs and settings refuse nonsense in one line, a cfg.json
round-trips, and the sites are named as TransformerLens names its hook points."""

from __future__ import annotations

import json

import pytest

from gptlab.errors import UsageError
from gptlab.interp.sae.config import SAEConfig, TrainSettings, hook_names

pytestmark = pytest.mark.usefixtures("one_thread_module")


def test_settings_and_configs_refuse_nonsense():
    with pytest.raises(UsageError, match="site"):
        SAEConfig(d_in=8, d_sae=16, site="attn", layer=0)
    with pytest.raises(UsageError, match="k"):
        SAEConfig(d_in=8, d_sae=4, site="mlp_out", layer=0, k=5)
    with pytest.raises(UsageError, match="training_tokens"):
        TrainSettings(training_tokens=0)


def test_a_config_round_trips_through_its_cfg_json_and_names_its_hooks():
    for site, activation, k in (("mlp_out", "topk", 3), ("transcoder", "standard", 16)):
        config = SAEConfig(d_in=8, d_sae=24, site=site, layer=2, activation=activation, k=k,
                           model_name="m")  # (a ReLU dictionary has no k: the default)
        assert SAEConfig.from_cfg(json.loads(json.dumps(config.to_cfg()))) == config
    assert hook_names("mlp_out", 4) == ("blocks.4.hook_mlp_out", "blocks.4.hook_mlp_out")
    assert hook_names("resid_post", 0) == ("blocks.0.hook_resid_post",) * 2
    assert hook_names("transcoder", 1) == ("blocks.1.ln2.hook_normalized",
                                           "blocks.1.hook_mlp_out")
    with pytest.raises(UsageError, match="not a cfg.json gptlab wrote"):
        SAEConfig.from_cfg({"d_in": 8})
    with pytest.raises(UsageError, match="lr"):
        TrainSettings(lr=0.0)
