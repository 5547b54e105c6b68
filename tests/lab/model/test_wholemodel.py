"""The whole-model view's API (gptlab.lab.model.wholemodel, POST /api/walk) against the library:
the final stage's probabilities equal softmax(model(idx)) within 1e-6, the stream after the
last add equals gptlab.interp.residuals's capture, the embeddings are W_E's and W_P's rows,
every norm rebuilds its output, the logit lens after each block is the lens's row; the
parameter shares are gptlab.model.params's; pre- and post-norm, GELU and SwiGLU; bad input as
one-line 400s."""

from __future__ import annotations

import pytest
import torch

from gptlab.interp.lens import logit_lens
from gptlab.interp.residuals import capture_residuals
from gptlab.lab.runs import Runs
from gptlab.model.params import accounting

TEXT = "the cat sat on the m"


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory, copy_tiny_run, save_char_model, tiny_text):
    """The tiny run, and with its characters and random weights a Llama-style run (RMSNorm,
    RoPE, SwiGLU) and a post-norm one."""
    root = tmp_path_factory.mktemp("runs")
    copy_tiny_run(root / "tiny")
    save_char_model(root / "llama", tiny_text, preset="tiny-llama", widen_seed=1)
    save_char_model(root / "post", tiny_text, preset="tiny-gpt2", norm_position="post",
                    widen_seed=2)
    return root


def model_of(runs_root, name):
    run = Runs(runs_root).load(name)
    return run.model.eval(), torch.tensor([run.tokenizer.encode(TEXT)]), run.tokenizer


@pytest.mark.parametrize("name", ["tiny", "llama", "post"])
@pytest.mark.parametrize("position", [None, 4])
def test_final_stage_is_softmax_of_the_model(client, runs_root, post, name, position):
    d = post(client, "/api/walk", {"run": name, "text": TEXT, "position": position, "top": 7})
    model, idx, tokenizer = model_of(runs_root, name)
    t = idx.shape[1] - 1 if position is None else position
    with torch.no_grad():
        logits, _ = model(idx)
    probs = torch.softmax(logits[0, t].double(), -1)
    p, ids = probs.topk(7)
    assert d["position"] == t and d["token"] == TEXT[t]
    assert [c["id"] for c in d["top"]] == ids.tolist()
    assert max(abs(c["p"] - float(q)) for c, q in zip(d["top"], p, strict=True)) < 1e-6
    assert d["logits"] == pytest.approx(logits[0, t, ids].tolist(), abs=1e-6)
    # every logit, for the last stage's temperature
    assert d["all_logits"] == pytest.approx(logits[0, t].tolist(), abs=1e-6)
    assert d["top"][0]["token"] == tokenizer.decode([int(ids[0])])
    last = (d["blocks"][-1]["add_2"])
    assert last["lens"][0]["id"] == int(ids[0])  # the last lens is the model's prediction
    assert len(d["blocks"]) == model.config.n_layer
    assert (d["final_norm"] is None) == (name == "post")


@pytest.mark.parametrize("name", ["tiny", "llama"])
def test_stream_equals_the_residuals_capture_and_lens(client, runs_root, post, name):
    d = post(client, "/api/walk", {"run": name, "text": TEXT, "position": 9})
    model, idx, _ = model_of(runs_root, name)
    parts = capture_residuals(model, idx)
    close = lambda a, b: torch.testing.assert_close(  # noqa: E731
        torch.tensor(a, dtype=torch.float64), b.double(), rtol=0, atol=1e-6)
    close(d["blocks"][-1]["add_2"]["vector"], parts.final[0, 9])
    lens = torch.softmax(logit_lens(model, idx).double(), -1)[:, 0, 9]  # (L + 1, vocab)
    assert d["embedded"]["lens"][0]["id"] == int(lens[0].argmax())
    for layer, b in enumerate(d["blocks"]):
        close(b["input"], parts.resid_pre[layer][0, 9])
        close(b["add_1"]["vector"], parts.resid_mid[layer][0, 9])
        close(b["attn_out"], parts.attn_out[layer][0, 9])
        close(b["ffn"]["output"], parts.mlp_out[layer][0, 9])
        assert b["add_2"]["norm"] == pytest.approx(float(parts.resid_post[layer][0, 9].norm()),
                                                    rel=1e-6)
        assert b["add_2"]["lens"][0]["id"] == int(lens[layer + 1].argmax())
        assert b["add_2"]["lens"][0]["p"] == pytest.approx(float(lens[layer + 1].max()),
                                                            abs=1e-6)
        assert all(sum(row) == pytest.approx(1, abs=1e-6) for row in b["attention"])
        assert len(b["attention"]) == model.config.n_head
        assert all(len(row) == 20 and not any(row[10:]) for row in b["attention"])  # causal


def test_embeddings_norms_and_ffn_against_the_weights(client, runs_root, post):
    d = post(client, "/api/walk", {"run": "tiny", "text": TEXT, "position": 6})
    model, idx, _ = model_of(runs_root, "tiny")
    tid = int(idx[0, 6])
    assert d["embed"] == pytest.approx(model.wte.weight[tid].tolist(), abs=1e-7)
    assert d["pos_embed"] == pytest.approx(model.wpe.weight[6].tolist(), abs=1e-7)
    summed = (model.wte.weight[tid] + model.wpe.weight[6]).tolist()
    assert d["embedded"]["vector"] == pytest.approx(summed, abs=1e-6)
    for b in d["blocks"]:
        for n in (b["norm_1"], b["norm_2"]):
            x = torch.tensor(n["input"], dtype=torch.float64)
            assert n["mean"] == pytest.approx(float(x.mean()), abs=1e-9)
            scale = float(((x - x.mean()).pow(2).mean() + 1e-5).sqrt())
            assert n["scale"] == pytest.approx(scale, rel=1e-9)
            rebuilt = [z * w + c for z, w, c in zip(n["normalized"], n["weight"], n["bias"],
                                                    strict=True)]
            assert rebuilt == pytest.approx(n["output"], abs=1e-5)
        f = b["ffn"]
        assert f["kind"] == "gelu_tanh" and f["up"] is None
        assert f["units"] == len(f["expand"]) == len(f["activation"]) == model.config.ffn_hidden
        assert f["fired"] == sum(v > 0 for v in f["expand"])
        gelu = torch.nn.functional.gelu(torch.tensor(f["expand"]), approximate="tanh")
        assert f["activation"] == pytest.approx(gelu.tolist(), abs=1e-6)
    final = d["final_norm"]
    assert final["output"] is not None and len(final["normalized"]) == model.config.n_embd


def test_swiglu_has_gate_and_up(client, post):
    d = post(client, "/api/walk", {"run": "llama", "text": TEXT})
    f = d["blocks"][0]["ffn"]
    assert d["mlp"] == "swiglu" and d["pos_embed"] is None and d["norm"] == "rmsnorm"
    act = torch.nn.functional.silu(torch.tensor(f["expand"])) * torch.tensor(f["up"])
    assert f["activation"] == pytest.approx(act.tolist(), abs=1e-6)
    assert d["blocks"][0]["norm_1"]["mean"] is None


@pytest.mark.parametrize("name", ["tiny", "llama", "post"])
def test_parameter_shares_are_the_runs_own_counts(client, runs_root, post, name):
    d = post(client, "/api/walk", {"run": name, "text": "the"})
    model, _, _ = model_of(runs_root, name)
    p = d["params"]
    assert p["total"] == model.num_parameters() == accounting(model.config).total
    assert p["embeddings"] + p["attention"] + p["ffn"] + p["norms"] + p["lm_head"] == p["total"]
    ffn = sum(prm.numel() for blk in model.blocks for prm in blk.mlp.parameters())
    attn = sum(prm.numel() for blk in model.blocks for prm in blk.attn.parameters())
    assert (p["ffn"], p["attention"]) == (ffn, attn)
    per_block = sum(prm.numel() for prm in model.blocks[0].parameters())
    assert p["ffn_share_of_block"] == pytest.approx(ffn / model.config.n_layer / per_block)
    if name != "llama":  # GELU at 4d: 8d^2 of 12d^2 (+ biases and norms), about 2/3
        assert 0.6 < p["ffn_share_of_block"] < 0.7


def test_bad_input_is_one_line(client, bad):
    bad(client, "/api/walk", {"run": "tiny", "text": "the", "position": 3}, "between 0 and 2")
    bad(client, "/api/walk", {"run": "tiny", "text": "XYZ"}, "not in the vocabulary")
    bad(client, "/api/walk", {"run": "tiny", "text": ""}, "text must not be empty")
    bad(client, "/api/walk", {"run": "tiny", "text": "the", "top": 0}, "top must be between")
    bad(client, "/api/walk", {"run": "nope", "text": "the"}, "no run named 'nope'")
    bad(client, "/api/walk", {"run": "tiny", "text": "the cat " * 10}, "context")
