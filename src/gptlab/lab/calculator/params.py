"""View 5, parameters: the parameters, FLOPs and memory of a preset or an edited config
(gptlab.model.params.accounting), and the presets the page starts from with the choices of
the config's string fields."""

from __future__ import annotations

from typing import Any

from gptlab.lab.calculator import schemas
from gptlab.model import presets
from gptlab.model.config import MLPS, NORM_POSITIONS, NORMS, POS_ENCODINGS, GPTConfig
from gptlab.model.params import accounting

# The config fields that take one of a few strings: the page builds its menus from these.
CONFIG_CHOICES = {"pos_encoding": POS_ENCODINGS, "norm": NORMS, "norm_position": NORM_POSITIONS,
                  "mlp": MLPS}


def presets_view() -> dict[str, Any]:
    return {"presets": {name: GPTConfig.from_preset(name).to_dict() for name in presets.PRESETS},
            "choices": {name: list(values) for name, values in CONFIG_CHOICES.items()}}


def params_view(body: schemas.ParamsRequest) -> dict[str, Any]:
    name = body.preset
    # Only the fields sent override the preset's (a null n_kv_head or ffn_hidden: default).
    config_body = body.config.model_dump(exclude_unset=True) if body.config else {}
    base = presets.preset_dict(name) if name else {}
    config = GPTConfig.from_dict({**base, **config_body})
    return accounting(config, seq_len=body.seq_len,
                      name=name if not config_body else None).to_dict()
