"""The lab's quiz (gptlab.lab.calculator.quiz): questions from (kind, seed) whose answers,
computed here independently, are accepted; wrong ones are not; answers shown as a reader
writes them."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from gptlab import GPT, GPTConfig
from gptlab.lab.calculator.quiz import ROW0_CHOICES


def _answer(q: dict) -> str:
    text = q["question"]
    if q["kind"] == "params":
        fields = dict(re.findall(r"(\w+)=(\w+)", text))
        config = GPTConfig(
            vocab_size=int(fields["vocab_size"]), block_size=int(fields["block_size"]),
            n_layer=int(fields["n_layer"]), n_head=int(fields["n_head"]),
            n_embd=int(fields["n_embd"]), bias=fields["bias"] == "yes",
            tie_embeddings=fields["embeddings"] == "yes", mlp="gelu")
        return str(GPT(config).num_parameters())
    if q["kind"] == "masked_row":
        def mat(name):
            return np.array(json.loads(re.search(name + r" = (\[\[.*?\]\])", text).group(1)))
        Q, K = mat("Q"), mat("K")
        row = int(re.search(r"row (\d+)", text).group(1))
        s = Q[row] @ K[: row + 1].T / math.sqrt(2)
        w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
        return ", ".join(f"{x:.2f}" for x in w)
    if q["kind"] == "row0":
        return "mask"
    if q["kind"] == "rope_offset":
        return re.search(r"score (-?\d+\.\d+)", text).group(1)  # same offset, same score
    d_k = int(re.search(r"d_k = (\d+)", text).group(1))
    return str(math.sqrt(d_k))


@pytest.mark.parametrize("kind", ["params", "masked_row", "row0", "rope_offset", "sqrt_dk"])
def test_quiz_answers_computed_independently_are_accepted(client, kind, post):
    for seed in (1, 2, 3):
        q = post(client, "/api/quiz", {"kind": kind, "seed": seed})
        assert "answer" not in q  # the answer stays on the server
        r = post(client, "/api/quiz/check", {"kind": kind, "seed": seed, "answer": _answer(q)})
        assert r["correct"], (q, r)
        assert r["worked"]
        wrong = {"row0": "largest", "masked_row": "1, 0, 0, 0"}.get(kind, "123456.5")
        r = post(client, "/api/quiz/check", {"kind": kind, "seed": seed, "answer": wrong})
        assert not r["correct"]


def test_quiz_shows_answers_as_a_reader_writes_them(client, post):
    # regression: a wrong choice answered "the answer is mask" (the choice's id), and the
    # masked-row question printed Python list syntax (['0.01, 1.20', ...])
    r = post(client, "/api/quiz/check", {"kind": "row0", "seed": 4, "answer": "largest"})
    assert not r["correct"] and r["expected"] == "mask"
    assert r["expected_text"] == ROW0_CHOICES["mask"]
    q = post(client, "/api/quiz", {"kind": "masked_row", "seed": 4})
    assert "['" not in q["question"] and "'" not in q["question"].split("K = ")[1]
    r = post(client, "/api/quiz/check", {"kind": "masked_row", "seed": 4, "answer": "1"})
    assert r["expected_text"] == ", ".join(f"{x:.2f}" for x in r["expected"])
    r = post(client, "/api/quiz/check", {"kind": "params", "seed": 4, "answer": "1"})
    assert r["expected_text"] == f"{r['expected']:,}"
    r = post(client, "/api/quiz/check", {"kind": "sqrt_dk", "seed": 4, "answer": "1"})
    assert r["expected_text"] == f"{r['expected']:.4f}"


def test_quiz_rejects_bad_input(client, bad):
    bad(client, "/api/quiz", {"kind": "poetry"}, "unknown kind 'poetry'; expected one of")
    bad(client, "/api/quiz/check", {"kind": "sqrt_dk", "seed": 1, "answer": "eight"},
        "is not a number")
    bad(client, "/api/quiz/check", {"kind": "sqrt_dk", "seed": 1, "answer": "inf"}, "finite")
    bad(client, "/api/quiz/check", {"kind": "row0", "seed": 1, "answer": 3}, "choices")
    bad(client, "/api/quiz/check", {"kind": "sqrt_dk", "seed": 1, "answer": 10**400},
        "too large a number")


def test_quiz_asks_for_the_rounding_it_accepts(client, post):
    # regression: 3.91 was marked wrong for 3.9111, though the question asked no rounding
    for seed in (1, 2, 3):
        q = post(client, "/api/quiz", {"kind": "rope_offset", "seed": seed})
        assert "to 2 decimals" in q["question"]
        exact = post(client, "/api/quiz/check", {"kind": "rope_offset", "seed": seed,
                                                 "answer": "0"})["expected"]
        for answer, right in [(f"{exact:.2f}", True), (f"{exact:.3f}", True),
                              (f"{exact + 0.01:.2f}", False)]:
            r = post(client, "/api/quiz/check", {"kind": "rope_offset", "seed": seed,
                                                 "answer": answer})
            assert r["correct"] is right, (answer, exact)
        assert r["expected_text"] == f"{exact:.2f} ({exact:.4f})"


def test_quiz_quotes_its_tokens(client, post):
    # regression: "Tokens cat sat on the, d_k = 2": the tokens read as a sentence
    q = post(client, "/api/quiz", {"kind": "masked_row", "seed": 4})
    tokens = q["question"].split(", d_k")[0].removeprefix("Tokens ")
    assert re.fullmatch(r'("\w+" ){3}"\w+"', tokens), tokens
