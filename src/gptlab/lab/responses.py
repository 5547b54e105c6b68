"""What the lab's answers share: the one-line error (and the 400 every route with a body
documents), the start of an answer about a run's model on some tokens, the matrix shapes,
the quick mark of an experiment's results, and a slot's event stream (the live training's
and the quick run's: its 409 and its Server-Sent Events, and the response that gives the
follower's place back). Each area's own answers are in its schemas module
(gptlab.lab.calculator.schemas, gptlab.lab.model.schemas, and so on).

The views build plain dicts and the server sends them as they are; the models are the
answers' half of the OpenAPI schema (response_model), against which tests/lab/test_fuzz.py
checks every answer. Shapes use the lab's names: T tokens, n_head heads of head_dim, n_embd
channels.
"""

from collections.abc import Callable, Iterator
from typing import Any

from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

Matrix = list[list[float]]
MaskedMatrix = list[list[float | None]]  # null: a masked score, -inf


class Error(BaseModel):
    error: str = Field(description="what was wrong, in one line that names the field")


# The 400 every route with a body documents.
BAD_INPUT = {400: {"model": Error, "description": "Bad input: one line naming the field"}}
# A slot's (the live training's, the quick run's) 409, and its event stream.
BUSY = {409: {"model": Error, "description": "A training is running (start), or none "
                                             "is (stop, events)"}}
EVENTS = {200: {"description": "Server-Sent Events, one `data: <LiveEvent JSON>` each, "
                               "until the `end` event",
                "content": {"text/event-stream": {"schema": {"type": "string"}}}}}


class ModelOnTokens(BaseModel):
    """The start of an answer about a run's model on some tokens (views 3 and 6)."""

    run: str
    tokens: list[str]
    ids: list[int]
    n_layer: int
    n_head: int


# The quiz's choice (gptlab.lab.calculator.schemas.QuizResponse) stays here: the next-token
# view has a Choice too, and OpenAPI names the quiz's by this module
# (gptlab__lab__responses__Choice), a name clients may already use.
class Choice(BaseModel):
    id: str
    text: str




QUICK = Field(False, description="a --quick run's results (a small run): listed beside "
                                 "the shipped results, not instead of them")


class Followed(StreamingResponse):
    """An event stream that gives its follower slot back when it ends, however it ends
    (the training's end, the client gone, an error)."""

    def __init__(self, events: Iterator[str], release: Callable[[], None]) -> None:
        super().__init__(events, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache"})
        self.release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()
