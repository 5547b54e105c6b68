"""The bodies of the next-token and logit-lens views (gptlab.lab.prediction.schemas): a good body
is taken with its defaults, a bad one refused in one line naming the field, by the model
and by the server (400)."""

import pytest

from gptlab.lab.prediction import schemas


def test_good_bodies_are_taken_with_their_defaults():
    body = schemas.NextTokenRequest.model_validate({"run": "r", "text": "ab", "temperature": 0})
    assert (body.temperature, body.top_k, body.top_p, body.show) == (0.0, None, None, 20)
    append = schemas.AppendRequest.model_validate({"run": "r", "text": "a", "mode": "sample"})
    assert (append.mode, append.seed) == ("sample", 0)
    lens = schemas.LensRequest.model_validate({"run": "r", "text": "a", "target": 3})
    assert (lens.top, lens.target) == (5, 3)


@pytest.mark.parametrize("model, body, message", [
    (schemas.NextTokenRequest, {"run": "r", "text": ""}, "text must not be empty"),
    (schemas.NextTokenRequest, {"run": "r", "text": "a", "temperature": 11},
     "temperature must be between 0 and 10, got 11"),
    (schemas.NextTokenRequest, {"run": "r", "text": "a", "top_p": 0},
     "top_p must be greater than 0"),
    (schemas.NextTokenRequest, {"run": "r", "text": "a", "top_k": 0}, "top_k must be between 1"),
    (schemas.NextTokenRequest, {"run": "r", "text": "a", "show": 101},
     "show must be between 1 and 100"),
    (schemas.AppendRequest, {"run": "r", "text": "a", "mode": "beam"}, "unknown mode 'beam'"),
    (schemas.LensRequest, {"run": "r", "text": "a", "top": 21}, "top must be between 1 and 20"),
    (schemas.LensRequest, {"run": "r", "text": "a", "target": -1}, "target must be between 0"),
])
def test_bad_bodies_are_refused_in_one_line_naming_the_field(model, body, message, invalid):
    assert message in invalid(model, body)


def test_the_server_answers_a_bad_body_with_400(client, bad):
    bad(client, "/api/next_token", {"run": "tiny", "text": "a", "temperature": 11},
        "temperature must be between 0 and 10")
    bad(client, "/api/lens", {"run": "tiny", "text": "a", "top": 21}, "top must be between")
