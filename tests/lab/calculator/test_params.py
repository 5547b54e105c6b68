"""View 5, parameters (gptlab.lab.calculator.params), through its routes: presets' totals
against their reference counts, an edited config against a built model's count, and every
config choice the presets send taken by the server; bad configs refused."""

from __future__ import annotations

import pytest

from gptlab import GPT, GPTConfig


@pytest.mark.parametrize("preset, total", [("gpt2", 124_439_808), ("llama2-7b", 6_738_415_616),
                                           ("llama2-70b", 68_976_648_192)])
def test_params_presets_match_reference_counts(client, preset, total, post):
    d = post(client, "/api/params", {"preset": preset})
    assert d["total"] == total
    assert sum(r["params"] * r["count"] for r in d["rows"]) == total
    L, dm = d["config"]["n_layer"], d["config"]["n_embd"]
    assert d["estimate_12Ld2"] == 12 * L * dm * dm


def test_params_edited_config_matches_a_built_model(client, post, bad):
    config = dict(GPTConfig.from_preset("tiny-llama").to_dict(), n_layer=3, n_embd=48,
                  n_head=6, n_kv_head=3)
    d = post(client, "/api/params", {"config": config})
    assert d["total"] == GPT(GPTConfig.from_dict(config)).num_parameters()
    edited = post(client, "/api/params", {"preset": "gpt2", "config": {"n_layer": 24}})
    assert edited["total"] > post(client, "/api/params", {"preset": "gpt2"})["total"]
    bad(client, "/api/params", {"preset": "gpt2", "config": {"n_head": 7}}, "divisible")
    bad(client, "/api/params", {"preset": "nope"}, "unknown preset")
    bad(client, "/api/params", {"config": {"colour": 1}}, "unknown config field")
    bad(client, "/api/params", {"config": [1]}, "config must be a JSON object")
    presets = client.get("/api/presets").json()["presets"]
    assert presets["gpt2"]["n_layer"] == 12 and "tiny-gpt2" in presets


def test_presets_send_the_config_choices_the_server_takes(client, post):
    choices = client.get("/api/presets").json()["choices"]
    assert choices["pos_encoding"] == ["learned", "sinusoidal", "rope", "alibi", "none"]
    for field, values in choices.items():
        for value in values:
            post(client, "/api/params", {"preset": "gpt2", "config": {field: value}})
