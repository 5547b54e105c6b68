"""A run past its training length in the longer-than-trained view
(gptlab.lab.context.window), over a runs folder holding a quick context experiment ('ctx')
and the tiny run: a run's live answer is `gptlab eval --by-position`'s arithmetic and a
real softmax row; learned positions refuse past their table, in the chapter's words; the
defaults work on a fresh install."""

from __future__ import annotations

import math

import pytest
from fastapi.testclient import TestClient

from gptlab.lab.server import create_app


def test_a_run_live_past_its_training_length(lab, post):
    client, _ = lab
    d = post(client, "/api/context", {"run": "ctx/runs/alibi", "context": 256, "buckets": 8,
                                      "layer": 1, "head": 1, "position": 200})
    assert d["block_size"] == 64 and d["pos_encoding"] == "alibi"
    assert "never saw positions 64..255" in d["warning"] and d["source"] == "ctx/eval.txt"
    tokens = sum(b["tokens"] for b in d["buckets"])
    mean = math.fsum(b["loss"] * b["tokens"] for b in d["buckets"] if b["tokens"]) / tokens
    assert tokens == d["tokens_scored"] and mean == pytest.approx(d["loss"], rel=1e-12)
    a = d["attention"]
    assert (a["layer"], a["head"], a["position"]) == (1, 1, 200)
    assert len(a["weights"]) == len(a["tokens"]) == 201
    assert sum(a["weights"]) == pytest.approx(1.0, abs=1e-5) and min(a["weights"]) >= 0


def test_rope_scaling_is_applied_at_context_over_block_size(lab, post):
    client, _ = lab
    plain = post(client, "/api/context", {"run": "ctx/runs/rope", "context": 256})
    yarn = post(client, "/api/context", {"run": "ctx/runs/rope", "context": 256,
                                         "rope_scaling": "yarn"})
    assert plain["rope_scaling"] is None and yarn["rope_scaling"] == "yarn:4"
    assert yarn["loss"] != plain["loss"]
    assert len(plain["attention"]["weights"]) == 256  # the window's last position


def test_the_defaults_work_on_a_fresh_install(tmp_path, post):
    # regression: the page's defaults (context 256, no text) were a 400 for the shipped
    # model ("context 256 needs position 128 ... learned"; then "text is empty and the run
    # is not one of a context experiment's")
    from gptlab.data.corpus import shakespeare_text
    from gptlab.data.text import split_text

    client = TestClient(create_app(tmp_path))
    d = post(client, "/api/context", {"run": "shakespeare"})
    assert d["pos_encoding"] == "learned" and d["context"] == d["block_size"] == 128
    assert d["warning"] is None and d["source"] == "the embedded Shakespeare's validation tenth"
    # what it scored: the val split the shipped model never trained on, from its start
    val = split_text(shakespeare_text(), 0.1)[1]
    assert d["attention"]["tokens"] == list(val[:128])
    assert d["tokens_scored"] == 4096 - 4096 % 128 - 4096 // 128  # windows of 128, 127 scored
    assert d["loss"] < 2.0  # it knows Shakespeare (its manifest: 1.38 on the whole split)


def test_the_default_context_is_past_the_training_length(lab, post):
    client, _ = lab
    d = post(client, "/api/context", {"run": "ctx/runs/rope"})
    assert d["context"] == 128 == 2 * d["block_size"] and "never saw positions 64..127" in \
        d["warning"]
    d = post(client, "/api/context", {"run": "ctx/runs/learned"})
    assert d["context"] == 64 and d["warning"] is None


@pytest.mark.parametrize("body, fragment", [
    ({"run": "ctx/runs/learned", "context": 65}, "there is no row for position 64"),
    ({"run": "tiny", "context": 16}, "does not hold the embedded Shakespeare's validation"),
    ({"run": "tiny", "context": 40, "text": "the cat sat on the mat"},
     "no row for position 32"),
    ({"run": "ctx/runs/rope", "context": 64, "layer": 9}, "the run has 2 layers of 2 heads"),
    ({"run": "ctx/runs/rope", "context": 64, "position": 64}, "outside the window of 64"),
    ({"run": "ctx/runs/rope", "context": 64, "rope_scaling": "cubic"}, "rope_scaling"),
    ({"run": "ctx/runs/alibi", "context": 64, "rope_scaling": "linear"},
     "pos_encoding is 'alibi'"),
    ({"run": "ctx/runs/rope", "context": 2000}, "context"),
])
def test_bad_context_requests_are_one_line(lab, bad, body, fragment):
    bad(lab[0], "/api/context", body, fragment)
