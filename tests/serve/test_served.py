"""The checks every request passes before it is queued, and the seeds of its choices."""

from __future__ import annotations

import pytest

from gptlab.serve.app import open_model
from gptlab.serve.errors import ApiError


@pytest.fixture(scope="module")
def served():
    return open_model("shakespeare", max_batch=4, max_tokens=50)


@pytest.mark.parametrize("prompt, asked, default, status_text", [
    (129, 0, None, "longer than the model's context of 128"),
    (128, None, None, "no token can follow it"),
    (100, 51, None, "allows at most 50 (--max-tokens)"),
    (100, 29, None, "make 129 tokens, more than the model's context of 128: ask for at most 28"),
])
def test_room_refuses_past_the_context_or_the_cap(served, prompt, asked, default,
                                                 status_text):
    with pytest.raises(ApiError, match=status_text.replace("(", r"\(").replace(")", r"\)")):
        served.room(prompt, asked, default)


def test_room_defaults_to_what_is_left(served):
    assert served.room(128, 0, None) == 0  # scoring a whole context
    assert served.room(100, None, None) == 28  # the rest of the context
    assert served.room(10, None, None) == 50  # the server's cap
    assert served.room(10, None, 16) == 16  # completions' default


def test_prompts_are_checked_and_names_matched(served):
    assert served.encode("ROMEO:") == [40, 37, 35, 27, 37, 20]
    assert served.encode([0, 75]) == [0, 75]
    for prompt, fragment in (("", "is empty"), ("\u00e9", "cannot be encoded"),
                             ([76], "outside the vocabulary")):
        with pytest.raises(ApiError, match=fragment):
            served.encode(prompt)
    with pytest.raises(ApiError) as caught:
        served.check_model("gpt-4")
    assert caught.value.status == 404 and caught.value.code == "model_not_found"
    with pytest.raises(ApiError, match="at most 4 texts at once"):
        served.check_choices(5)
    assert served.eos is None  # a character vocabulary has no end-of-text token


def test_choice_zero_takes_the_seed_and_the_others_derived_ones(served):
    seeds = served.seeds(7, 3)
    assert seeds[0] == 7 and len(set(seeds)) == 3 and served.seeds(7, 3) == seeds
    assert served.seeds(-1, 1) == (2**64 - 1,) and served.seeds(None, 2) == (None, None)
