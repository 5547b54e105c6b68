"""The logit-lens view's API (gptlab.lab.prediction.lens, POST /api/lens): its grid against the
model's own forward pass and a float64 recomputation of the embeddings' row, its
attribution against the model's logit (the parts must sum to it) and
gptlab.interp.attribution, on a GPT-2-style and a Llama-style run; and bad input (a token
outside the vocabulary, a text past the context, a post-norm model) as one-line 400s."""

from __future__ import annotations

import pytest
import torch

from gptlab.interp.attribution import logit_attribution
from gptlab.lab.runs import Runs

TEXT = "the cat sat on the m"


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory, copy_tiny_run, save_char_model, tiny_text):
    """This module's runs folder: the tiny run, and with the tiny run's characters and
    random weights a Llama-style run (RMSNorm, RoPE, no biases) and a post-norm one."""
    root = tmp_path_factory.mktemp("runs")
    copy_tiny_run(root / "tiny")
    save_char_model(root / "llama", tiny_text, preset="tiny-llama")
    save_char_model(root / "post", tiny_text, preset="tiny-gpt2", norm_position="post")
    return root

def forward(runs, name, text=TEXT):
    run = Runs(runs).load(name)
    idx = torch.tensor([run.tokenizer.encode(text)])
    with torch.no_grad():
        logits, _ = run.model.eval()(idx)
    return run, idx, logits[0]  # (T, vocab)


@pytest.mark.parametrize("name", ["tiny", "llama"])
def test_last_row_is_the_models_own_prediction(client, runs_root, name, post):
    d = post(client, "/api/lens", {"run": name, "text": TEXT, "top": 5})
    run, idx, logits = forward(runs_root, name)
    T, rows = idx.shape[1], run.model.config.n_layer + 1
    assert len(d["top_ids"]) == len(d["rows"]) == rows and d["rows"][0] == "embed"
    assert all(len(r) == T and all(len(c) == 5 for c in r) for r in d["top_ids"])
    own = torch.softmax(logits.double(), dim=-1)  # (T, vocab)
    p, ids = own.topk(5, dim=-1)
    assert d["top_ids"][-1] == ids.tolist()
    assert torch.allclose(torch.tensor(d["top_probs"][-1], dtype=torch.float64), p, atol=1e-6)
    assert [c["id"] for c in d["choices"][:5]] == ids[-1].tolist()
    assert d["choices"][0]["p"] == pytest.approx(float(p[-1, 0]), abs=1e-9)
    assert d["top_tokens"][-1][-1][0] == run.tokenizer.decode([int(ids[-1, 0])])


@pytest.mark.parametrize("name", ["tiny", "llama"])
def test_embeddings_row_is_the_final_norm_of_the_embeddings(client, runs_root, name, post):
    """Row 0, recomputed in float64 from the weights: ln_f(wte[x] (+ wpe[t])) @ W_U."""
    d = post(client, "/api/lens", {"run": name, "text": TEXT, "top": 3})
    run, idx, _ = forward(runs_root, name)
    gpt = run.model
    sd = {k: v.double() for k, v in gpt.state_dict().items()}
    x = sd["wte.weight"][idx[0]]
    if "wpe.weight" in sd:
        x = x + sd["wpe.weight"][: idx.shape[1]]
    if "ln_f.bias" in sd:  # LayerNorm
        x = (x - x.mean(-1, keepdim=True)) / (x.var(-1, unbiased=False, keepdim=True)
                                              + gpt.ln_f.eps).sqrt()
        x = x * sd["ln_f.weight"] + sd["ln_f.bias"]
    else:  # RMSNorm
        x = x / (x.pow(2).mean(-1, keepdim=True) + gpt.ln_f.eps).sqrt() * sd["ln_f.weight"]
    p = torch.softmax(x @ sd["lm_head.weight"].T, dim=-1)
    want = p.topk(3, dim=-1)
    got = torch.tensor(d["top_probs"][0], dtype=torch.float64)
    assert torch.allclose(got, want.values, atol=1e-5), (got - want.values).abs().max()
    top1 = torch.tensor(d["top_ids"][0])[:, 0]
    assert torch.equal(p.gather(-1, top1[:, None])[:, 0], want.values[:, 0])  # ties allowed


@pytest.mark.parametrize("name", ["tiny", "llama"])
def test_attribution_parts_sum_to_the_models_logit(client, runs_root, name, post):
    run, idx, logits = forward(runs_root, name)
    default = post(client, "/api/lens", {"run": name, "text": TEXT})["attribution"]
    assert default["target"] == int(logits[-1].argmax())
    for target in (default["target"], 5):
        a = post(client, "/api/lens", {"run": name, "text": TEXT, "target": target})["attribution"]
        assert a["target"] == target and a["position"] == idx.shape[1] - 1
        assert a["logit"] == pytest.approx(float(logits[-1, target]), abs=1e-5)
        assert abs(sum(a["values"]) - a["logit"]) < 1e-5 and a["sum"] == sum(a["values"])
        lib = logit_attribution(run.model, idx, target)
        assert a["labels"] == lib.labels
        assert a["values"] == pytest.approx(lib.values[:, 0].tolist(), abs=1e-7)
    cfg = run.model.config
    heads = [f"L{layer}H{h}" for layer in range(cfg.n_layer) for h in range(cfg.n_head)]
    assert set(heads) <= set(default["labels"]) and "embed" in default["labels"]


@pytest.mark.parametrize("body,fragment", [
    ({"run": "tiny", "text": TEXT, "target": 14}, "outside the vocabulary (0..13)"),
    ({"run": "tiny", "text": TEXT, "target": -1}, "target"),
    ({"run": "tiny", "text": "the cat " * 5}, "longer than the model's context of 32"),
    ({"run": "post", "text": TEXT}, "post-norm"),
    ({"run": "tiny", "text": TEXT, "top": 21}, "top"),
    ({"run": "tiny", "text": ""}, "text"),
    ({"run": "nope", "text": TEXT}, "nope"),
])
def test_bad_input_is_a_one_line_400(client, body, fragment, post):
    error = post(client, "/api/lens", body, status=400)["error"]
    assert fragment in error and "\n" not in error, error
