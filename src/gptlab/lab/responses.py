"""What the lab's answers share: the one-line error (and the 400 every route with a body
documents), the start of an answer about a run's model on some tokens, and the matrix
shapes. Each area's own answers are in its schemas module (gptlab.lab.calculator_schemas,
model_schemas, play_schemas, live_schemas; contextview and experimentsview hold theirs).

The views build plain dicts and the server sends them as they are; the models are the
answers' half of the OpenAPI schema (response_model), against which tests/lab/test_fuzz.py
checks every answer. Shapes use the lab's names: T tokens, n_head heads of head_dim, n_embd
channels.
"""

from pydantic import BaseModel, Field

Matrix = list[list[float]]
MaskedMatrix = list[list[float | None]]  # null: a masked score, -inf


class Error(BaseModel):
    error: str = Field(description="what was wrong, in one line that names the field")


# The 400 every route with a body documents.
BAD_INPUT = {400: {"model": Error, "description": "Bad input: one line naming the field"}}


class ModelOnTokens(BaseModel):
    """The start of an answer about a run's model on some tokens (views 3 and 6)."""

    run: str
    tokens: list[str]
    ids: list[int]
    n_layer: int
    n_head: int


# The quiz's choice (gptlab.lab.calculator_schemas.QuizResponse) stays here: the next-token
# view has a Choice too, and OpenAPI names the quiz's by this module
# (gptlab__lab__responses__Choice), a name clients may already use.
class Choice(BaseModel):
    id: str
    text: str


