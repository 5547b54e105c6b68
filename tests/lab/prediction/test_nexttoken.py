"""The next-token view's API (gptlab.lab.prediction.nexttoken): the bars against gptlab's
sampling and a float64 recomputation of top-k / top-p, "append" against `gptlab sample`, the newest
token's attention against gptlab.interp.hooks, and bad input as one-line 400s."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gptlab.cli.main import main
from gptlab.interp.hooks import capture_attention
from gptlab.lab.runs import Runs
from gptlab.model import decoding
from gptlab.model.decoding import SamplingSettings

TEXT = "the cat sat on the m"


@pytest.fixture(scope="module")
def tiny(runs_root):
    return Runs(runs_root).load("tiny")


def last_logits(run, text):
    idx = torch.tensor([run.tokenizer.encode(text)])
    with torch.no_grad():
        logits, _ = run.model.eval()(idx)
    return logits[0, -1]


def np_filtered(logits, temperature, top_k, top_p):
    """float64 NumPy: softmax(logits / T), then the top_k likeliest (ties kept), then the
    smallest likeliest set with mass >= top_p of what is left; renormalised."""
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    keep = np.ones_like(p, dtype=bool)
    if top_k is not None:
        keep &= p >= np.sort(p)[::-1][top_k - 1]
    q = np.where(keep, p, 0.0)
    q /= q.sum()
    if top_p is not None:
        order = np.argsort(-q, kind="stable")
        before = np.cumsum(q[order]) - q[order]
        drop = np.zeros_like(keep)
        drop[order] = before >= top_p
        keep &= ~drop
    final = np.where(keep, p, 0.0)
    return final / final.sum(), keep


@pytest.mark.parametrize("temperature,top_k,top_p", [
    (1.0, None, None), (0.7, 5, None), (1.3, None, 0.8), (1.0, 8, 0.6), (0.5, 3, 0.99)])
def test_bars_are_gptlab_samplings_distribution(client, tiny, temperature, top_k, top_p, post):
    d = post(client, "/api/next_token", {"run": "tiny", "text": TEXT, "temperature": temperature,
                                         "top_k": top_k, "top_p": top_p, "show": 100})
    logits = last_logits(tiny, TEXT)
    lib = torch.softmax(decoding.filter_logits(
        logits[None], SamplingSettings(temperature, top_k, top_p)).double(), -1)[0]
    ref, keep = np_filtered(logits.numpy(), temperature, top_k, top_p)
    got = np.zeros(d["vocab_size"])
    for c in d["candidates"]:
        got[c["id"]] = c["final"]
        assert c["top_p"] == bool(keep[c["id"]]) and c["token"] == tiny.tokenizer.decode([c["id"]])
    assert len(d["candidates"]) == d["vocab_size"]  # tiny's 22 symbols, all shown
    assert got.sum() == pytest.approx(1.0, abs=1e-9)
    assert np.abs(got - lib.numpy()).max() < 1e-12
    assert np.abs(got - ref).max() < 1e-6  # float32 logits vs float64 reference
    assert d["survivors"] == int(keep.sum())
    ps = [c["p"] for c in d["candidates"]]
    assert ps == sorted(ps, reverse=True)


def test_top_k_1_and_temperature_0_leave_one_bar(client, tiny, post):
    for cut in ({"top_k": 1}, {"temperature": 0.0}):
        d = post(client, "/api/next_token", {"run": "tiny", "text": TEXT, **cut})
        kept = [c for c in d["candidates"] if c["top_p"]]
        assert d["survivors"] == 1 and len(kept) == 1 and kept[0]["final"] == 1.0
        assert kept[0]["id"] == int(last_logits(tiny, TEXT).argmax()) == d["greedy_id"]
        assert d["settings"]["greedy"]


def test_newest_attention_is_the_last_row_of_each_pattern(client, tiny, post):
    d = post(client, "/api/next_token", {"run": "tiny", "text": TEXT})
    weights = capture_attention(tiny.model, torch.tensor([tiny.tokenizer.encode(TEXT)]))
    want = weights[:, 0, :, -1, :].double()  # (n_layer, n_head, T)
    got = torch.tensor(d["newest_attention"], dtype=torch.float64)
    assert got.shape == (2, 4, len(TEXT)) and torch.allclose(got, want, atol=1e-7)
    assert torch.allclose(got.sum(-1), torch.ones(2, 4, dtype=torch.float64), atol=1e-6)


def sample_cli(capsys, *argv):
    capsys.readouterr()
    assert main(["sample", *argv]) == 0
    return capsys.readouterr().out.removesuffix("\n")


def test_append_equals_gptlab_sample(client, runs_root, capsys, post):
    run_dir = str(runs_root / "tiny")
    greedy = post(client, "/api/next_token/append", {"run": "tiny", "text": TEXT,
                                                     "mode": "greedy", "temperature": 1.7})
    want = sample_cli(capsys, run_dir, "--prompt", TEXT, "--greedy", "--max-new-tokens", "1",
                      "--no-prompt")
    assert greedy["token"] == want and greedy["text"] == TEXT + want and greedy["seed"] is None
    drawn = set()
    for seed in range(6):
        body = {"run": "tiny", "text": TEXT, "mode": "sample", "seed": seed,
                "temperature": 1.5, "top_k": 10, "top_p": 0.95}
        got = post(client, "/api/next_token/append", body)
        want = sample_cli(capsys, run_dir, "--prompt", TEXT, "--seed", str(seed),
                          "--temperature", "1.5", "--top-k", "10", "--top-p", "0.95",
                          "--max-new-tokens", "1", "--no-prompt")
        assert got["token"] == want and got["seed"] == seed, (seed, got, want)
        drawn.add(want)
    assert len(drawn) > 1  # the seed matters: a sample, not the argmax six times


@pytest.mark.parametrize("body,fragment", [
    ({"run": "tiny", "text": ""}, "text must not be empty"),
    ({"run": "tiny", "text": "the cat " * 40}, "longer than the model's context of 32"),
    ({"run": "tiny", "text": "QQQ"}, "Q"),
    ({"run": "tiny", "text": "the cat sat on the mat. the dog "}, "at this view's limit of 32"),
    ({"run": "nope", "text": "the"}, "no run named 'nope'"),
    ({"run": "tiny", "text": "the", "top_p": 0}, "top_p must be greater than 0"),
    ({"run": "tiny", "text": "the", "top_k": 0}, "top_k must be between 1 and"),
    ({"run": "tiny", "text": "the", "temperature": -1}, "temperature must be between 0 and 10"),
    ({"run": "tiny", "text": "the", "mode": "beam"}, "unknown mode 'beam'"),
])
def test_bad_input_is_one_line(client, body, fragment, post):
    r = client.post("/api/next_token/append", json=body)
    assert r.status_code == 400, r.text
    message = r.json()["error"]
    assert fragment in message and "\n" not in message, message


def test_temperature_0_cuts_by_greedy_not_top_k(client, tiny, post):
    # regression: at temperature 0 with top-k 5 the page said "1 of 14 tokens pass top-k"
    # and marked every other bar "cut: top-k"; greedy cut them, and their p was 0
    logits = last_logits(tiny, TEXT)
    own = torch.softmax(logits.double(), -1)
    d = post(client, "/api/next_token", {"run": "tiny", "text": TEXT, "temperature": 0.0,
                                         "top_k": 5, "show": 100})
    assert d["after_top_k"] == 5 and d["survivors"] == 1 and d["settings"]["greedy"]
    top = int(logits.argmax())
    for c in d["candidates"]:
        assert c["p"] == pytest.approx(float(own[c["id"]]), abs=1e-6)  # the model's own
        assert c["cut"] == (None if c["id"] == top else "greedy")
        assert c["top_p"] == (c["id"] == top) and c["final"] == float(c["id"] == top)
    # at temperature 1 the same top-k cuts, and says so
    d = post(client, "/api/next_token", {"run": "tiny", "text": TEXT, "top_k": 5, "show": 100})
    cuts = [c["cut"] for c in d["candidates"]]
    assert cuts == [None] * 5 + ["top_k"] * (len(cuts) - 5)
    d = post(client, "/api/next_token", {"run": "tiny", "text": TEXT, "top_p": 0.5, "show": 100})
    assert {c["cut"] for c in d["candidates"] if not c["top_p"]} == {"top_p"}


def test_the_page_names_the_filter_the_view_calls():
    """Issue 39, defect 11: view 8 named gptlab.inference.sampling, the docs
    gptlab.model.decoding.filter_logits; the page names the function this module calls."""
    from gptlab.lab.prediction import nexttoken
    from gptlab.lab.server import STATIC

    name = f"{nexttoken.filter_logits.__module__}.{nexttoken.filter_logits.__name__}"
    assert name == "gptlab.model.decoding.filter_logits"
    for page in ("index.html", "nexttoken.js"):
        text = (STATIC / page).read_text(encoding="utf-8")
        assert name in text and "gptlab.inference.sampling" not in text, page
