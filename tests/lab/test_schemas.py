"""The lab's request and response models (gptlab.lab.schemas, gptlab.lab.responses): the
config they carry is GPTConfig's, field for field."""

import dataclasses

from gptlab import GPTConfig
from gptlab.lab.responses import ConfigOut
from gptlab.lab.schemas import ConfigFields


def test_params_models_list_every_gptconfig_field():
    fields = {f.name for f in dataclasses.fields(GPTConfig) if f.init}
    assert set(ConfigFields.model_fields) == fields == set(ConfigOut.model_fields)
