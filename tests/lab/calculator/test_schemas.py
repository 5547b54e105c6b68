"""The bodies and answers of the views that need no run (gptlab.lab.calculator.schemas): the
config they carry is GPTConfig's, field for field; a good body is taken with its defaults,
a bad one refused in one line naming the field, by the model and by the server (400)."""

import dataclasses

import pytest

from gptlab import GPTConfig
from gptlab.lab.calculator import schemas


def test_params_models_list_every_gptconfig_field():
    fields = {f.name for f in dataclasses.fields(GPTConfig) if f.init}
    assert set(schemas.ConfigFields.model_fields) == fields == set(schemas.ConfigOut.model_fields)


def test_good_bodies_are_taken_with_their_defaults():
    attention = schemas.AttentionRequest.model_validate({"tokens": " a  b c "})
    assert attention.tokens == ["a", "b", "c"] and (attention.d, attention.causal) == (4, True)
    assert schemas.AttentionRequest.model_validate({}).tokens == ["cat", "sat", "on", "the", "mat"]
    assert schemas.AttentionRequest.model_validate(
        {"tokens": ["x", "y"], "d": 1, "x": [[1], [2.5]]}).x == [[1.0], [2.5]]
    assert schemas.RopeRequest.model_validate({"positions": 2}).offset == 1  # min(3, positions - 1)
    assert schemas.ScalingRequest.model_validate({"d_k": 4.0}).d_k == 4
    params = schemas.ParamsRequest.model_validate({"preset": "gpt2", "config": {"n_layer": 2}})
    assert params.config.n_layer == 2 and params.config.n_head is None
    assert schemas.QuizCheckRequest.model_validate({"kind": "row0", "answer": 3}).answer == 3.0


@pytest.mark.parametrize("model, body, message", [
    (schemas.AttentionRequest, {"tokens": ["a", " "]}, "tokens: give at least one token"),
    (schemas.AttentionRequest, {"tokens": "a " * 65}, "tokens: 65 given; at most 64"),
    (schemas.AttentionRequest, {"d": 65}, "d must be between 1 and 64, got 65"),
    (schemas.AttentionRequest, {"tokens": "a b", "d": 2, "w_k": [[1, 2]]}, "w_k must be a 2 x 2"),
    (schemas.ScalingRequest, {"d_k": "4"}, "d_k must be an integer, got '4'"),
    (schemas.RopeRequest, {"head_dim": 7}, "head_dim must be even"),
    (schemas.RopeRequest, {"positions": 4, "offset": 4}, "offset must be between 0 and 3, got 4"),
    (schemas.ParamsRequest, {"preset": "gpt5"}, "unknown preset 'gpt5'; expected one of"),
    (schemas.ParamsRequest, {"config": {"n_layers": 2}}, "unknown config field 'n_layers'"),
    (schemas.ParamsRequest, {"config": {"dropout": 1.0}}, "config.dropout must be less than 1"),
    (schemas.QuizRequest, {"kind": "essay"}, "unknown kind 'essay'"),
    (schemas.QuizCheckRequest, {"answer": None}, "answer must be a string or a finite number"),
    (schemas.QuizCheckRequest, {"answer": 10**400}, "is too large a number"),
])
def test_bad_bodies_are_refused_in_one_line_naming_the_field(model, body, message, invalid):
    assert message in invalid(model, body)


def test_the_server_answers_a_bad_body_with_400_and_a_good_one_with_200(client, bad, post):
    bad(client, "/api/rope", {"head_dim": 7}, "head_dim must be even")
    bad(client, "/api/params", {"config": {"n_layers": 2}}, "unknown config field 'n_layers'")
    assert post(client, "/api/rope", {"positions": 2})["offset"] == 1
