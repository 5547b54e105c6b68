"""Training settings (gptlab.training.config.TrainConfig): the optimizer's and the
schedule's settings validate themselves, naming the field (the basic settings:
tests/training/test_run.py's test_invalid_settings); the speedrun's levers are a group of
their own, TrainConfig.speed, and a train.json with them flat still loads."""

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import pytest

from gptlab.errors import SettingError, UsageError
from gptlab.training.config import (
    LEVERS,
    SCALE_OUT,
    SpeedLevers,
    TrainConfig,
    recipe,
    with_settings,
)

# A train.json as gptlab wrote it before the levers had a group (the recipe
# shakespeare-char-cpu-speedrun-2's): every lever at the top level.
FLAT_TRAIN_JSON = Path(__file__).parents[1] / "assets" / "flat-train.json"


@pytest.mark.parametrize("kw, message", [
    (dict(optimizer="sgd"), "optimizer must be one of adamw, muon"),
    (dict(muon_lr=0.0), "muon_lr must be > 0"),
    (dict(muon_momentum=1.0), "muon_momentum must be in [0, 1)"),
    (dict(muon_weight_decay=-1.0), "muon_weight_decay must be >= 0"),
    (dict(muon_dtype="float16"), "muon_dtype must be one of auto, float32, bfloat16"),
    (dict(lr_schedule="linear"), "lr_schedule must be one of cosine, wsd"),
    (dict(cooldown_frac=1.5), "cooldown_frac must be in [0, 1]"),
])
def test_invalid_settings(kw, message):
    with pytest.raises(UsageError) as err:
        TrainConfig.from_dict(kw)
    assert str(err.value).startswith(message)


def test_the_levers_are_one_group_and_the_chapters_settings_read_alone():
    names = [f.name for f in dataclasses.fields(TrainConfig)]
    assert names[-1] == "speed" and not set(names) & set(LEVERS)
    chapter = [n for n in names[:-1] if n not in SCALE_OUT]
    assert len(chapter) == 25 and len(names) == 25 + len(SCALE_OUT) + 1
    assert LEVERS == ("optimizer", "muon_lr", "muon_momentum", "muon_weight_decay",
                      "muon_dtype", "muon_split_qkv", "embedding_lr", "eval_at_start",
                      "stop_at_val", "stop_at_val_every", "attention_dtype", "allocator")


def test_train_json_holds_the_levers_in_their_group_and_flat_names_them_beside_the_rest():
    cfg = recipe("shakespeare-char-cpu-speedrun-2")
    saved = json.loads(json.dumps(cfg.to_dict()))  # as train.json holds it
    assert list(saved["speed"]) == list(LEVERS) and not set(saved) & set(LEVERS)
    assert saved["speed"]["muon_lr"] == cfg.speed.muon_lr == 0.04
    flat = cfg.flat()
    assert "speed" not in flat and flat["muon_lr"] == 0.04 and flat["max_iters"] == 330
    assert TrainConfig.from_dict(saved) == TrainConfig.from_dict(flat) == cfg
    # a change to one lever, in either spelling, keeps the group's others
    for change in ({"muon_lr": 0.07}, {"speed": {"muon_lr": 0.07}}):
        for base in (saved, flat):
            assert with_settings(base, change).speed == replace(cfg.speed, muon_lr=0.07)


def test_a_train_json_with_the_levers_flat_loads_into_the_group():
    old = json.loads(FLAT_TRAIN_JSON.read_text())
    assert "speed" not in old and set(LEVERS) <= set(old)
    cfg = TrainConfig.from_dict(old)
    assert cfg == recipe("shakespeare-char-cpu-speedrun-2")
    assert cfg.speed == SpeedLevers(**{k: old[k] for k in LEVERS}) and cfg.flat() == old
    # flat levers beside a group: laid into it; the same lever twice with two values refused
    assert TrainConfig.from_dict({"muon_lr": 0.03, "speed": {"optimizer": "muon"}}).speed == \
        SpeedLevers(optimizer="muon", muon_lr=0.03)
    with pytest.raises(UsageError, match="give muon_lr twice, in speed and beside it"):
        TrainConfig.from_dict({"muon_lr": 0.03, "speed": {"muon_lr": 0.05}})


@pytest.mark.parametrize("saved, message", [
    ({"speed": {"muon_lr": 0.0}}, "muon_lr must be > 0"),  # named as its flag names it
    ({"speed": {"ramp": "none"}}, "unknown speed lever(s): ramp"),
    ({"speed": [1]}, "speed levers must be a JSON object, got list"),
    ({"muon_ns_steps": 3}, "uses muon_ns_steps=3"),  # retired, refused by name
])
def test_a_bad_speed_group_is_refused_naming_what_is_wrong(saved, message):
    with pytest.raises(UsageError) as err:
        TrainConfig.from_dict(saved)
    assert str(err.value).startswith(message) or message in str(err.value)
    if isinstance(err.value, SettingError):
        assert err.value.said_with({"muon_lr": "--muon-lr"}).startswith("--muon-lr must be")
