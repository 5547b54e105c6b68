"""What the views on a run share (gptlab.lab.model.tokens), through view 3's route: a prompt
outside the vocabulary, empty or past the model's context, token ids outside the vocabulary
or not a list, and a layer the run does not have are each refused in one line."""

from __future__ import annotations


def test_heads_reject_bad_prompts(client, bad):
    bad(client, "/api/heads", {"run": "tiny", "prompt": "XYZ"}, "not in the vocabulary")
    bad(client, "/api/heads", {"run": "tiny", "prompt": ""}, "the prompt is empty")
    bad(client, "/api/heads", {"run": "tiny", "prompt": "the cat " * 10},
        "longer than the model's context of 32")
    bad(client, "/api/heads", {"run": "tiny", "prompt": "the", "layer": 2}, "layer must be")
    bad(client, "/api/heads", {"run": "tiny", "ids": [0, 999]}, "outside the vocabulary")
    bad(client, "/api/heads", {"run": "tiny", "ids": "0 1"}, "ids must be a list")
    bad(client, "/api/heads", {"run": "tiny", "prompt": "x" * 5000}, "limit is 4000")
