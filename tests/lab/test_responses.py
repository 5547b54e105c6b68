"""What the lab's answers share (gptlab.lab.responses): the one-line error every route with a
body documents as its 400, the start of an answer about a run's model on some tokens, and
the quiz's Choice under the OpenAPI name clients may already use."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gptlab.lab.responses import BAD_INPUT, Choice, Error, ModelOnTokens


def test_an_error_is_one_required_line():
    assert Error(error="d must be at most 64").model_dump() == {"error": "d must be at most 64"}
    with pytest.raises(ValidationError):
        Error()
    assert Error.model_json_schema()["required"] == ["error"]
    assert BAD_INPUT[400]["model"] is Error and set(BAD_INPUT) == {400}


def test_an_answer_about_a_model_on_tokens_starts_with_these_fields():
    answer = ModelOnTokens(run="tiny", tokens=["a", "b"], ids=[1, 2], n_layer=2, n_head=4)
    assert list(answer.model_dump()) == ["run", "tokens", "ids", "n_layer", "n_head"]
    with pytest.raises(ValidationError, match="n_head"):
        ModelOnTokens(run="tiny", tokens=[], ids=[], n_layer=2)
    assert Choice(id="b", text="4").model_dump() == {"id": "b", "text": "4"}


def test_the_openapi_schema_names_the_shared_models(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert "Error" in schemas
    assert "gptlab__lab__responses__Choice" in schemas  # the quiz's, as clients know it
