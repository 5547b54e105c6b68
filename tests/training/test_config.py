"""Training settings (gptlab.training.config.TrainConfig): the optimizer's and the
schedule's settings validate themselves, naming the field. (The basic settings:
tests/training/test_run.py's test_invalid_settings.)"""

import pytest

from gptlab.errors import UsageError
from gptlab.training.config import TrainConfig


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
