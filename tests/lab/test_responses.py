"""What the lab's answers share (gptlab.lab.responses): the one-line error every route with a
body documents as its 400, the start of an answer about a run's model on some tokens, the
quiz's Choice under the OpenAPI name clients may already use, and the two slots' 409 and
event streams, a stream giving its follower slot back however it ends."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError
from starlette.requests import ClientDisconnect

from gptlab.lab.responses import BAD_INPUT, Choice, Error, Followed, ModelOnTokens


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


def test_both_slots_document_their_409_and_their_event_stream(client):
    paths = client.get("/openapi.json").json()["paths"]
    for start, events in (("/api/live/start", "/api/live/events"),
                          ("/api/experiments/quick", "/api/experiments/quick/events")):
        assert "409" in paths[start]["post"]["responses"]
        assert "text/event-stream" in paths[events]["get"]["responses"]["200"]["content"]


def test_a_stream_gives_its_slot_back_when_it_ends_or_fails():
    released = []

    async def send(message):
        if message["type"] == "http.response.body" and message.get("body"):
            raise ConnectionError("the client went away")

    async def receive():
        await asyncio.sleep(3600)  # never a disconnect: the send fails first

    stream = Followed(iter(["data: 1\n\n"]), lambda: released.append(1))
    scope = {"type": "http", "asgi": {"spec_version": "2.4"}}
    with pytest.raises(ClientDisconnect):
        asyncio.run(stream(scope, receive, send))
    assert released == [1]
    asyncio.run(Followed(iter([]), lambda: released.append(2))(
        scope, receive, lambda m: asyncio.sleep(0)))
    assert released == [1, 2]
