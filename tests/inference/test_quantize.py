"""Reduced-precision decoding weights (gptlab.inference.quantize): each kernel against
F.linear, the int8 rounding bound, quality on a trained model, and the probe's choice and
cache. `gptlab sample --weights`: tests/cli/test_sample.py; load(weights=...):
tests/test_loading.py."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gptlab import GPT, GPTConfig, probe
from gptlab.errors import UsageError
from gptlab.inference import quantize
from gptlab.inference.evaluate import score_ids
from gptlab.inference.quantize import KERNELS, DecodeLinear, int8_per_channel
from gptlab.loading import load

pytestmark = pytest.mark.usefixtures("one_thread", "probing")  # see conftest.py
ALL_KERNELS = quantize.ALL_KERNELS
# Largest |y - F.linear| / max|F.linear| allowed per format, on N(0, 1) inputs.
TOLERANCE = {"fp32": 1e-6, "fp16": 2e-3, "bf16": 1.6e-2, "int8": 2e-2}


def test_int8_rounding_bound_and_range():
    torch.manual_seed(0)
    w = torch.randn(37, 53) * torch.logspace(-3, 1, 37)[:, None]  # rows of every scale
    for scale_dtype in (torch.float32, torch.bfloat16):
        q, scale = int8_per_channel(w, scale_dtype)
        s = scale.float()[:, None]
        assert q.dtype == torch.int8 and int(q.abs().max()) <= 127
        # round to nearest against the stored scale: off by at most half a step
        assert bool(((w - s * q.float()).abs() <= s / 2 * (1 + 1e-6)).all())
        assert bool((scale.float() >= w.abs().amax(1) / 127 * (1 - 1e-7)).all())  # no clipping
        assert int(q.abs().amax(1).min()) >= 126  # each row uses (nearly) the whole range


@pytest.mark.parametrize("kernel", ALL_KERNELS)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("in_features", [48, 40])  # 40: padded to int8's block of 16
def test_each_kernel_computes_the_linear(kernel, bias, in_features):
    torch.manual_seed(1)
    linear = nn.Linear(in_features, 67, bias=bias)
    x = torch.randn(3, 5, in_features)  # 3-D, as the model calls it
    layer = DecodeLinear(linear, kernel)
    with torch.no_grad():
        y, ref = layer(x), F.linear(x, linear.weight, linear.bias)
        exact = F.linear(x, layer.weight, linear.bias)
    assert y.shape == ref.shape and y.dtype == torch.float32
    err = float((y - ref).abs().max() / ref.abs().max())
    # the dynamic kernel also rounds the input to int8 (7 bits, per tensor)
    assert err <= (4e-2 if kernel == "int8/dynamic" else TOLERANCE[kernel.split("/")[0]]), err
    # `weight` is the matrix the layer computes with, whatever the format
    assert float((y - exact).abs().max() / ref.abs().max()) <= (
        1e-6 if kernel in ("fp32/linear", "fp32/matmul_t", "int8/fp32_input")
        else 4e-2 if kernel == "int8/dynamic" else 1.6e-2)


def test_fp32_linear_kernel_is_exactly_nn_linear():
    linear = nn.Linear(32, 20)
    x = torch.randn(4, 32)
    assert torch.equal(DecodeLinear(linear, "fp32/linear")(x), linear(x))


def fixed_timings(monkeypatch, timings, cache_dir):
    """The probe's timings fixed, its cache fresh, the machine quiet (load average 0);
    returns the list of the kernels each probe timed."""
    monkeypatch.setenv("GPTLAB_CACHE", str(cache_dir))
    monkeypatch.setattr(probe, "machine_load", lambda: 0.0)
    calls = []

    def fake(model, budget_s=0.3, kernels=ALL_KERNELS):
        calls.append(kernels)
        return {k: timings[k] for k in kernels}

    monkeypatch.setattr(quantize, "probe_kernels", fake)
    return calls


TIMINGS = {"fp32/linear": 10.0, "fp32/matmul_t": 8.0, "fp16/linear": 6.0,
           "fp16/matmul_t": 7.0, "bf16/linear": 9.0, "bf16/matmul_t": None,
           "int8/bf16_input": 4.0, "int8/fp32_input": 12.0, "int8/dynamic": 5.0}


@pytest.mark.parametrize("weights, kernel", [
    ("auto", "int8/bf16_input"), ("fp32", "fp32/matmul_t"), ("fp16", "fp16/linear"),
    ("bf16", "bf16/linear"), ("int8", "int8/bf16_input")])
def test_choice_is_the_fastest_kernel_of_the_format(monkeypatch, tmp_path, weights, kernel):
    fixed_timings(monkeypatch, TIMINGS, tmp_path)
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    choice = quantize.quantize(model, weights)
    assert choice.kernel == kernel
    layers = [m for m in model.modules() if isinstance(m, DecodeLinear)]
    assert len(layers) == 4 * model.config.n_layer + 1  # qkv, proj, fc, proj; lm_head
    assert {m.kernel for m in layers} == {kernel}
    assert not any(type(m) is nn.Linear for m in model.modules())
    fastest_fp32 = 8.0 if weights in ("auto", "fp32") else TIMINGS[kernel]  # only its own
    assert choice.reason.startswith(f"weights {kernel}: {TIMINGS[kernel]:.2f} ms per token, "
                                    f"{fastest_fp32 / TIMINGS[kernel]:.2f}x the fastest fp32"
                                    if weights in ("auto", "fp32") else
                                    f"weights {kernel}: {TIMINGS[kernel]:.2f} ms per token")


def test_a_format_by_name_times_only_its_own_kernels(monkeypatch, tmp_path):
    """`gptlab sample` decodes in fp32 by default: it timed all nine kernels, seven of them
    for formats it never uses. Every kernel's timings, once cached, answer any format."""
    calls = fixed_timings(monkeypatch, TIMINGS, tmp_path)
    heard = []
    with probe.announced(heard.append):
        choice = quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "fp32")
        assert quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "fp32").cached
    assert calls == [KERNELS["fp32"]] and choice.kernel == "fp32/matmul_t"
    assert heard == [f"timing 2 decoding kernels (fp32/linear, fp32/matmul_t) on this "
                     f"machine, once (cached in {tmp_path / probe.PROBES_FILE} when the "
                     f"timings are steady)"]
    quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "auto")  # all nine
    assert calls[1] == ALL_KERNELS
    assert quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "int8").cached
    assert len(calls) == 2


def test_probe_runs_once_per_machine_and_shape(monkeypatch, tmp_path):
    calls = fixed_timings(monkeypatch, TIMINGS, tmp_path)
    assert not quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "auto").cached
    assert quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "fp16").cached
    assert len(calls) == 1
    store = json.loads((tmp_path / probe.PROBES_FILE).read_text())
    (key,) = store["decode"]
    assert probe.cpu_name() in key and torch.__version__ in key and "vocab 97" in key
    quantize.quantize(GPT(GPTConfig.from_preset("tiny-llama")), "auto")  # another shape
    assert len(calls) == 2
    (tmp_path / probe.PROBES_FILE).write_text("{torn")  # a broken cache is probed again
    quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "auto")
    assert len(calls) == 3 and len(json.loads((tmp_path / probe.PROBES_FILE).read_text())) == 1


def test_a_busy_machine_times_nothing_and_takes_each_formats_first_kernel(monkeypatch,
                                                                          tmp_path):
    """Under load (4.0 on 2 cores) nothing is cached, so every call timed all kernels again
    and then kept fp32 whatever they said: now none is timed, auto keeps fp32 in torch's
    own layout (exactly nn.Linear), and a format by name takes its first kernel that runs
    here, each saying why."""
    calls = fixed_timings(monkeypatch, TIMINGS, tmp_path)
    monkeypatch.setattr(probe, "cores", lambda: 2)
    monkeypatch.setattr(probe, "machine_load", lambda: 4.0)
    heard = []
    with probe.announced(heard.append):
        auto = quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "auto")
        int8 = quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "int8")
    assert (auto.kernel, int8.kernel) == ("fp32/linear", "int8/bf16_input")
    assert auto.reason == ("weights fp32/linear (not timed, load average 4.00 on 2 cores: the "
                           "first fp32 kernel that runs here)")
    assert calls == [] and heard == [] and not (tmp_path / probe.PROBES_FILE).exists()


def test_auto_on_timings_that_cannot_be_trusted_keeps_fp32(monkeypatch, tmp_path):
    """Timed on a quiet machine but with scattered timings, int8 looked fastest: auto keeps
    the fastest fp32 kernel and says why; a format asked for by name still gets its
    fastest kernel."""
    calls = fixed_timings(monkeypatch, TIMINGS, tmp_path)
    monkeypatch.setattr(probe, "MAX_SPREAD", -1.0)  # every spread too wide
    choice = quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "auto")
    assert choice.kernel == "fp32/matmul_t" and not choice.cached
    assert "not trusted, not cached" in choice.reason
    assert quantize.quantize(GPT(GPTConfig.from_preset("tiny-gpt2")), "int8").kernel == (
        "int8/bf16_input")
    assert len(calls) == 2 and not (tmp_path / probe.PROBES_FILE).exists()


def test_first_that_runs_skips_a_kernel_this_torch_lacks(monkeypatch):
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))

    def missing(*args):
        raise RuntimeError("no such kernel here")

    monkeypatch.setattr(torch, "_weight_int8pack_mm", missing)
    assert quantize.first_that_runs(model, list(KERNELS["int8"])) == "int8/dynamic"
    assert quantize.first_that_runs(model, ["int8/bf16_input"]) is None
    assert not any(isinstance(m, DecodeLinear) for m in model.modules())


def test_unavailable_format_and_bad_input(monkeypatch, tmp_path):
    from gptlab.model_dir import save_model

    fixed_timings(monkeypatch, {**TIMINGS, "int8/bf16_input": None, "int8/fp32_input": None,
                                "int8/dynamic": None}, tmp_path)
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    with pytest.raises(UsageError, match="int8 weights are not available"):
        quantize.quantize(model, "int8")
    with pytest.raises(UsageError, match="weights must be one of"):
        quantize.quantize(model, "int4")
    quantize.quantize(model, "auto")
    with pytest.raises(UsageError, match="quantized already"):
        quantize.quantize(model, "fp32")
    with pytest.raises(UsageError, match="save the model before quantizing it"):
        save_model(model, tmp_path / "model")
    assert not (tmp_path / "model" / "model.safetensors").exists()


def test_real_probe_times_every_kernel_and_puts_the_model_back():
    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset("tiny-llama"))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    timings = quantize.probe_kernels(model, budget_s=0.01)
    assert set(timings) == set(ALL_KERNELS)
    assert all(timings[k] > 0 for k in KERNELS["fp32"])
    assert not any(isinstance(m, DecodeLinear) for m in model.modules())
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_big_model_is_probed_through_fewer_blocks(monkeypatch):
    model = GPT(GPTConfig.from_preset("tiny-gpt2", n_layer=6))
    total = sum(p.numel() * 4 for p in model.parameters())
    per_block = sum(p.numel() * 4 for p in model.blocks[0].parameters())
    monkeypatch.setattr(quantize, "PROBE_BYTES", total - 3 * per_block)
    stand_in = quantize._probe_model(model)
    assert stand_in is not model and len(stand_in.blocks) == 3
    assert stand_in.config.n_embd == model.config.n_embd
    monkeypatch.setattr(quantize, "PROBE_BYTES", total)
    assert quantize._probe_model(model) is model


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "int8"])
def test_trained_model_keeps_its_loss_and_greedy_tokens(tiny_run, tiny_text, fmt):
    """On the tiny trained run: the loss over its text within 1% of fp32, and greedy
    continuations that mostly agree."""
    run_dir = tiny_run
    ids = torch.tensor(load(run_dir)[1].encode(tiny_text[:600]))
    fp32, _ = load(run_dir)
    reduced, _ = load(run_dir, weights=fmt)
    assert reduced.decode_choice.kernel.startswith(fmt + "/")
    losses = [score_ids(m, ids)[0] / score_ids(m, ids)[1] for m in (fp32, reduced)]
    assert abs(losses[1] - losses[0]) <= 0.01 * losses[0], losses
    prompt = ids[None, :8]
    a = fp32.generate(prompt, 48, top_k=1)[0, 8:]
    b = reduced.generate(prompt, 48, top_k=1)[0, 8:]
    assert float((a == b).float().mean()) >= 0.9

