"""The lab's request and response models (gptlab.lab.schemas and the areas' schemas, e.g.
gptlab.lab.calculator_schemas): the config they carry is GPTConfig's, field for field."""

import dataclasses

from gptlab import GPTConfig
from gptlab.lab.calculator_schemas import ConfigFields, ConfigOut


def test_params_models_list_every_gptconfig_field():
    fields = {f.name for f in dataclasses.fields(GPTConfig) if f.init}
    assert set(ConfigFields.model_fields) == fields == set(ConfigOut.model_fields)
