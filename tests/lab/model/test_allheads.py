"""The all-heads view's API (gptlab.lab.model.allheads, POST /api/all_heads): every layer's and
head's pattern equals gptlab.interp.hooks.capture_attention's and view 3's (/api/heads) for
the same prompt; bad input as one-line 400s."""

from __future__ import annotations

import torch

from gptlab.interp.hooks import capture_attention
from gptlab.lab.runs import Runs

PROMPT = "the cat sat on the mat"


def test_every_head_is_the_models_pattern(client, runs_root, post):
    d = post(client, "/api/all_heads", {"run": "tiny", "prompt": PROMPT})
    run = Runs(runs_root).load("tiny")
    idx = torch.tensor([run.tokenizer.encode(PROMPT)])
    want = capture_attention(run.model, idx)[:, 0].double()  # (L, nh, T, T)
    got = torch.tensor(d["attention"], dtype=torch.float64)
    assert got.shape == (2, 4, 22, 22) and (d["n_layer"], d["n_head"]) == (2, 4)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-7)
    assert torch.allclose(got.sum(-1), torch.ones(2, 4, 22, dtype=torch.float64))
    assert (got.triu(1) == 0).all()  # causal
    heads = post(client, "/api/heads", {"run": "tiny", "prompt": PROMPT, "layer": 1})
    torch.testing.assert_close(got, torch.tensor(heads["attention"], dtype=torch.float64),
                               rtol=0, atol=1e-9)  # the detailed view shows the same
    assert d["tokens"] == list(PROMPT) and d["limit"] == 32


def test_bad_input_is_one_line(client, bad):
    bad(client, "/api/all_heads", {"run": "tiny", "prompt": ""}, "prompt must not be empty")
    bad(client, "/api/all_heads", {"run": "tiny", "prompt": "XYZ"}, "not in the vocabulary")
    bad(client, "/api/all_heads", {"run": "tiny", "prompt": "the cat " * 5}, "context")
    bad(client, "/api/all_heads", {"run": "../x", "prompt": "the"}, "without '..'")
