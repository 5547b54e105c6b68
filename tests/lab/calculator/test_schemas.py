"""The bodies and answers of the views that need no run (gptlab.lab.calculator_schemas): the
config they carry is GPTConfig's, field for field; a good body is taken with its defaults,
a bad one refused in one line naming the field, by the model and by the server (400)."""

import dataclasses

import pytest

from gptlab import GPTConfig
from gptlab.lab import calculator_schemas as cs
from gptlab.lab.calculator_schemas import ConfigFields, ConfigOut


def test_params_models_list_every_gptconfig_field():
    fields = {f.name for f in dataclasses.fields(GPTConfig) if f.init}
    assert set(ConfigFields.model_fields) == fields == set(ConfigOut.model_fields)


def test_good_bodies_are_taken_with_their_defaults():
    attention = cs.AttentionRequest.model_validate({"tokens": " a  b c "})
    assert attention.tokens == ["a", "b", "c"] and (attention.d, attention.causal) == (4, True)
    assert cs.AttentionRequest.model_validate({}).tokens == ["cat", "sat", "on", "the", "mat"]
    assert cs.AttentionRequest.model_validate(
        {"tokens": ["x", "y"], "d": 1, "x": [[1], [2.5]]}).x == [[1.0], [2.5]]
    assert cs.RopeRequest.model_validate({"positions": 2}).offset == 1  # min(3, positions - 1)
    assert cs.ScalingRequest.model_validate({"d_k": 4.0}).d_k == 4
    params = cs.ParamsRequest.model_validate({"preset": "gpt2", "config": {"n_layer": 2}})
    assert params.config.n_layer == 2 and params.config.n_head is None
    assert cs.QuizCheckRequest.model_validate({"kind": "row0", "answer": 3}).answer == 3.0


@pytest.mark.parametrize("model, body, message", [
    (cs.AttentionRequest, {"tokens": ["a", " "]}, "tokens: give at least one token"),
    (cs.AttentionRequest, {"tokens": "a " * 65}, "tokens: 65 given; at most 64"),
    (cs.AttentionRequest, {"d": 65}, "d must be between 1 and 64, got 65"),
    (cs.AttentionRequest, {"tokens": "a b", "d": 2, "w_k": [[1, 2]]}, "w_k must be a 2 x 2"),
    (cs.ScalingRequest, {"d_k": "4"}, "d_k must be an integer, got '4'"),
    (cs.RopeRequest, {"head_dim": 7}, "head_dim must be even"),
    (cs.RopeRequest, {"positions": 4, "offset": 4}, "offset must be between 0 and 3, got 4"),
    (cs.ParamsRequest, {"preset": "gpt5"}, "unknown preset 'gpt5'; expected one of"),
    (cs.ParamsRequest, {"config": {"n_layers": 2}}, "unknown config field 'n_layers'"),
    (cs.ParamsRequest, {"config": {"dropout": 1.0}}, "config.dropout must be less than 1"),
    (cs.QuizRequest, {"kind": "essay"}, "unknown kind 'essay'"),
    (cs.QuizCheckRequest, {"answer": None}, "answer must be a string or a finite number"),
    (cs.QuizCheckRequest, {"answer": 10**400}, "is too large a number"),
])
def test_bad_bodies_are_refused_in_one_line_naming_the_field(model, body, message, invalid):
    assert message in invalid(model, body)


def test_the_server_answers_a_bad_body_with_400_and_a_good_one_with_200(client, bad, post):
    bad(client, "/api/rope", {"head_dim": 7}, "head_dim must be even")
    bad(client, "/api/params", {"config": {"n_layers": 2}}, "unknown config field 'n_layers'")
    assert post(client, "/api/rope", {"positions": 2})["offset"] == 1
