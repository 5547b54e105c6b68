"""What the probed experiments measure while a model trains (gptlab.experiments.probes):
each gradient norm equals the norm of .grad after an ordinary backward (float64, to
rounding), leaves the trainer's .grad untouched, and the attention statistics equal a
direct reading of the softmax weights; scale-off with d_k = 1 is scale-on."""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.experiments import probes
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.run import train

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(n_embd: int, n_head: int, attn_scale: bool = True, n_layer: int = 2,
           norm_position: str = "pre") -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=n_layer, n_head=n_head,
                         n_embd=n_embd, attn_scale=attn_scale, norm_position=norm_position))


def _layers(model):  # every weight of each block
    return [math.sqrt(sum(float(p.grad.pow(2).sum()) for p in b.parameters()))
            for b in model.blocks]


def _qk(model):  # q's rows, then k's (8 each at width 8), in the weight and the bias
    return [math.hypot(float(b.attn.qkv.weight.grad[:16].norm()),
                       float(b.attn.qkv.bias.grad[:16].norm())) for b in model.blocks]


@pytest.mark.parametrize(("probe", "direct", "norm_position"), [
    (probes.layer_grad_norms, _layers, "pre"), (probes.layer_grad_norms, _layers, "post"),
    (probes.qk_grad_norms, _qk, "pre")])
def test_gradient_norms_equal_the_norms_of_grad_after_a_backward(probe, direct,
                                                                 norm_position):
    model = _model(8, 2, attn_scale=False, n_layer=3, norm_position=norm_position)
    x, y = torch.randint(0, 13, (2, 8)), torch.randint(0, 13, (2, 8))
    in_float32 = probe(model, x, y)
    assert all(p.grad is None for p in model.parameters())  # the trainer's grads untouched
    model.double()
    got = probe(model, x, y)
    _, loss = model(x, y)
    loss.backward()
    want = direct(model)
    assert got == pytest.approx(want, rel=1e-12)
    assert in_float32 == pytest.approx(want, rel=0.05)  # float32's softmax near uniform
    assert len(set(got)) == 3


def test_without_the_factor_at_d_k_one_the_model_is_the_same():
    x = torch.randint(0, 13, (2, 8))
    on, off = _model(6, 6, True), _model(6, 6, False)
    assert torch.equal(on(x)[0], off(x)[0])
    wide_on, wide_off = _model(8, 2, True), _model(8, 2, False)  # d_k 4: it matters
    with torch.no_grad():  # scores large enough that a factor 2 shows in float32
        for m in (wide_on, wide_off):
            for block in m.blocks:
                block.attn.qkv.weight.mul_(20)
    assert not torch.allclose(wide_on(x)[0], wide_off(x)[0])


def test_attention_stats_equal_a_direct_reading_of_the_weights():
    """Uniform attention (q = k = 0) has entropy log(t + 1) at query t and is never
    saturated; and with large q, k weights each head's numbers are those of its weights."""
    model = _model(8, 2, True)
    x = torch.randint(0, 13, (3, 8))
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv.weight[:16].zero_()  # the q and k rows
            block.attn.qkv.bias[:16].zero_()
    stats = probes.attention_stats(model, x)
    uniform = sum(math.log(t + 1) for t in range(1, 8)) / 7
    assert [h for layer in stats["entropy"] for h in layer] == pytest.approx([uniform] * 4,
                                                                             rel=1e-6)
    assert stats["saturated"] == [[0.0, 0.0], [0.0, 0.0]]
    model = _model(8, 2, False)
    with torch.no_grad():
        model.blocks[0].attn.qkv.weight.mul_(30)
    stats = probes.attention_stats(model, x)
    assert 0 < stats["saturated"][0][0] < 1 or 0 < stats["saturated"][0][1] < 1
    model.blocks[0].attn.record_weights = True
    with torch.no_grad():
        model(x)
    w = model.blocks[0].attn.weights[:, :, 1:].double()  # (B, nh, T-1, T)
    for h in range(2):
        rows = w[:, h].reshape(-1, 8)
        ent = [-sum(float(p) * math.log(float(p)) for p in r if p > 0) for r in rows]
        assert stats["entropy"][0][h] == pytest.approx(sum(ent) / len(ent), rel=1e-6)
        share = sum(float(r.max()) > probes.SATURATED for r in rows) / len(rows)
        assert stats["saturated"][0][h] == pytest.approx(share, abs=1e-12)


def test_a_probed_run_interrupted_and_resumed_probes_as_one_uninterrupted(
        tmp_path, data_dir, tiny_model, tiny_train):
    """ProbeReporter through gptlab.training.run.train: a probe at step 0 and at every
    evaluation; a run stopped at step 6 and resumed has the same probes, step by step, as
    one that ran through (the probe draws no random number and touches no .grad)."""
    x, y = probes.probe_batch(data_dir, 16, 2)

    def probe(model):
        return {"layers": probes.layer_grad_norms(model, x, y)}

    class ProbedUntil6(probes.Probed):
        def should_stop(self, step: int) -> bool:
            return step >= 6

    settings = tiny_train(max_iters=12, whole_val=False)
    whole = tmp_path / "whole"
    train(tiny_model(), settings, data_dir, whole, progress=False,
          callbacks=probes.Probed(probe))
    cut = tmp_path / "cut"
    first = train(tiny_model(), settings, data_dir, cut, progress=False,
                  callbacks=ProbedUntil6(probe))
    assert (first.status, first.step) == ("interrupted", 6)
    train(None, None, data_dir, cut, resume=True, progress=False,
          callbacks=probes.Probed(probe))
    expected = probes.read_probes(whole)
    assert [p["step"] for p in expected] == [0, 4, 8, 12]
    assert probes.read_probes(cut) == expected
