"""The request bodies: a prompt in each of OpenAI's four forms, stop as a string or a
list, max_completion_tokens over max_tokens, and the fields gptlab cannot honour refused
by name unless neutral (unknown fields ignored, as clients send their own)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gptlab.serve.schemas import ChatRequest, CompletionRequest


@pytest.mark.parametrize("prompt, prompts", [
    ("ROMEO:", ["ROMEO:"]), (["a", "b"], ["a", "b"]), ([1, 2], [[1, 2]]),
    ([[1], [2, 3]], [[1], [2, 3]]),
])
def test_a_prompt_in_each_form(prompt, prompts):
    assert CompletionRequest(model="m", prompt=prompt).prompts() == prompts


@pytest.mark.parametrize("fields, fragment", [
    ({"prompt": []}, "prompt"), ({"prompt": [-1]}, "prompt"),
    ({"presence_penalty": 1}, "presence_penalty is not supported"),
    ({"logit_bias": {"1": 5}}, "logit_bias is not supported"),
    ({"best_of": 3}, "best_of is not supported"),
    ({"stop": ""}, "a stop string must not be empty"),
    ({"top_k": -2}, "top_k must be >= 1"), ({"temperature": 2.5}, "temperature"),
    ({"top_p": 0}, "top_p"), ({"n": 0}, "n"),
])
def test_what_cannot_be_honoured_is_refused_by_name(fields, fragment):
    with pytest.raises(ValidationError, match=fragment):
        CompletionRequest(**{"model": "m", "prompt": "x", **fields})


def test_neutral_and_unknown_fields_are_accepted():
    body = CompletionRequest(model="m", prompt="x", presence_penalty=0, best_of=1,
                             do_sample=False, stop="\n")
    assert body.stops == ["\n"] and not body.include_usage
    chat = ChatRequest(model="m", messages=[{"role": "user", "content": [
        {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], max_tokens=5,
        max_completion_tokens=7, stream_options={"include_usage": True})
    assert chat.messages[0].text() == "ab" and chat.limit == 7 and chat.include_usage
