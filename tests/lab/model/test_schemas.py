"""The bodies of the views that look into a run (gptlab.lab.model.schemas): a good body is
taken with its defaults, a bad one refused in one line naming the field, by the model and
by the server (400, before any run is read)."""

import pytest

from gptlab.lab.fields import MAX_PROMPT_CHARS
from gptlab.lab.model import schemas


def test_good_bodies_are_taken_with_their_defaults():
    heads = schemas.HeadsRequest.model_validate({"run": "tiny", "ids": [1, 2.0]})
    assert (heads.ids, heads.layer, heads.prompt) == ([1, 2], 0, None)
    assert schemas.AblateRequest.model_validate({"run": "r", "layer": 1, "head": 0}).seed == 0
    walk = schemas.WalkRequest.model_validate({"run": "r", "text": "ab"})
    assert (walk.position, walk.top) == (None, 5)
    positions = schemas.LearnedPositionsRequest.model_validate({"run": "r"})
    assert (positions.positions, positions.neighbours) == (None, 3)
    assert schemas.AllHeadsRequest.model_validate({"run": "r", "prompt": "x"}).prompt == "x"


@pytest.mark.parametrize("model, body, message", [
    (schemas.HeadsRequest, {}, "run is required"),
    (schemas.HeadsRequest, {"run": ""}, "run must not be empty"),
    (schemas.HeadsRequest, {"run": "r", "layer": -1}, "layer must be at least 0, got -1"),
    (schemas.HeadsRequest, {"run": "r", "ids": []}, "ids needs at least 1 item(s)"),
    (schemas.HeadsRequest, {"run": "r", "prompt": "x" * (MAX_PROMPT_CHARS + 1)},
     f"prompt is {MAX_PROMPT_CHARS + 1} characters long; the limit is {MAX_PROMPT_CHARS}"),
    (schemas.AblateRequest, {"run": "r", "layer": 0}, "head is required"),
    (schemas.RunsEncodingRequest, {"text": ""}, "text must not be empty"),
    (schemas.WalkRequest, {"run": "r", "text": "a", "top": 0}, "top must be between 1 and"),
    (schemas.AllHeadsRequest, {"run": "r", "prompt": 3}, "prompt must be a string, got 3"),
    (schemas.LearnedPositionsRequest, {"run": "r", "positions": 1}, "positions must be between 2"),
])
def test_bad_bodies_are_refused_in_one_line_naming_the_field(model, body, message, invalid):
    assert message in invalid(model, body)


def test_the_server_answers_a_bad_body_with_400(client, bad):
    bad(client, "/api/walk", {"run": "tiny", "text": "a", "top": 0}, "top must be between 1")
    bad(client, "/api/ablate", {"run": "tiny", "layer": 0}, "head is required")
