"""The answers' log-probability objects: OpenAI's legacy format (the likeliest tokens and
the chosen one, offsets into the choice's text) and the chat format (bytes, exactly the
asked alternatives)."""

from gptlab.serve.answers import Tokens, Usage
from gptlab.serve.scheduler import Alternatives

TEXT = {0: "a", 1: "bc", 2: "\u00e9"}
tokens = Tokens(TEXT.__getitem__)


def test_completion_logprobs_hold_the_likeliest_and_the_chosen_token():
    out = tokens.completion_logprobs(
        [1, 0, 2], [None, Alternatives(-0.5, ((1, -0.2),)), Alternatives(-3.0, ((0, -0.1),))],
        offset=4)
    assert out["tokens"] == ["bc", "a", "\u00e9"]
    assert out["text_offset"] == [4, 6, 7]
    assert out["token_logprobs"] == [None, -0.5, -3.0]
    assert out["top_logprobs"] == [None, {"bc": -0.2, "a": -0.5}, {"a": -0.1, "\u00e9": -3.0}]


def test_chat_logprobs_give_bytes_and_exactly_the_alternatives_asked():
    out = tokens.chat_logprobs([2], [Alternatives(-1.0, ((0, -0.3), (1, -0.9)))])
    [entry] = out["content"]
    assert entry["token"] == "\u00e9" and entry["bytes"] == [0xC3, 0xA9]
    assert [t["token"] for t in entry["top_logprobs"]] == ["a", "bc"]


def test_usage_adds_up():
    assert Usage(6, 60).to_dict() == {"prompt_tokens": 6, "completion_tokens": 60,
                                      "total_tokens": 66}
