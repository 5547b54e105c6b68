"""`--dtype auto` on a CPU: the probe's rule, its cache, the override, and a run that records
what auto meant."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from gptlab import probe
from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig
from gptlab.training import precision
from gptlab.training.callbacks import StopAfter

pytestmark = pytest.mark.usefixtures("one_thread", "probing")  # see conftest.py
CPU = torch.device("cpu")
CONFIG = GPTConfig.from_preset("tiny-gpt2")


@pytest.fixture
def probed(monkeypatch, tmp_path):
    """Sets the probe's timings (ms) and returns the list of measured configs; the cache
    is fresh, the machine quiet (load average 0) and GPTLAB_AUTO_DTYPE (which the suite
    sets) unset."""
    monkeypatch.delenv(precision.OVERRIDE, raising=False)
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(probe, "machine_load", lambda: 0.0)
    calls, timings = [], {}

    def fake(config, B, T, device):
        calls.append((config, B, T))
        return dict(timings)

    monkeypatch.setattr(precision, "measure", fake)

    def set_timings(fp32, bf16, bf16_float32_attention=None):
        timings.update({"float32": fp32, "bfloat16": bf16,
                        precision.FLOAT32_ATTENTION: bf16_float32_attention})
        return calls

    return set_timings


@pytest.mark.parametrize("fp32, bf16, expected", [
    (10.0, 5.0, "bfloat16"),  # 2x: worth it
    (10.0, 8.9, "bfloat16"),  # just past the margin
    (10.0, 9.5, "float32"),  # within the margin: precision wins the tie
    (10.0, 20.0, "float32"),  # slower: never
    (10.0, None, "float32"),  # no bf16 autocast here
])
def test_bf16_only_where_clearly_faster(probed, fp32, bf16, expected):
    probed(fp32, bf16)
    name, reason = precision.resolve(CONFIG, 12, CPU)
    assert name == expected
    assert reason.startswith(f"dtype auto: {expected}") and "probed now" in reason


def test_probed_once_per_machine_shape_and_batch(probed, tmp_path):
    calls = probed(10.0, 4.0)
    assert precision.resolve(CONFIG, 12, CPU)[0] == "bfloat16"
    name, reason = precision.resolve(CONFIG, 12, CPU)
    assert name == "bfloat16" and "cached probe" in reason and len(calls) == 1
    (key,) = json.loads((tmp_path / probe.PROBES_FILE).read_text())["train_dtype"]
    assert probe.cpu_name() in key and "B=12 T=32" in key
    precision.resolve(CONFIG, 3, CPU)  # another batch is another probe
    # tokens per probe step are capped: a long context is probed at batch 1
    precision.resolve(GPTConfig.from_preset("tiny-gpt2", block_size=2048), 12, CPU)
    assert [(B, T) for _, B, T in calls] == [(12, 32), (3, 32), (1, 2048)]


def test_a_busy_machine_is_not_probed_and_says_so(probed, monkeypatch):
    """bf16 at 7.73x fp32 was measured while a test suite loaded the machine (load average
    5.3 on 2 cores), and such a timing decides nothing: on a busy machine none is taken,
    float32 stays, the line says why, and a run on a quiet machine probes."""
    calls = probed(77.3, 10.0)
    monkeypatch.setattr(probe, "cores", lambda: 2)
    monkeypatch.setattr(probe, "machine_load", lambda: 5.3)
    assert precision.resolve(CONFIG, 12, CPU) == (
        "float32", "dtype auto: float32 (not timed, load average 5.30 on 2 cores)")
    assert calls == []
    monkeypatch.setattr(probe, "machine_load", lambda: 0.3)
    calls = probed(5.4, 10.0)  # quiet: bf16 is slower here
    name, reason = precision.resolve(CONFIG, 12, CPU)
    assert name == "float32" and "0.54x" in reason and "probed now;" in reason
    assert len(calls) == 1 and "cached probe" in precision.resolve(CONFIG, 12, CPU)[1]


def test_override_skips_the_probe(probed, monkeypatch):
    calls = probed(10.0, 1.0)
    monkeypatch.setenv(precision.OVERRIDE, "float32")
    assert precision.resolve(CONFIG, 12, CPU) == (
        "float32", "dtype auto: float32 (GPTLAB_AUTO_DTYPE says so)")
    assert calls == []
    monkeypatch.setenv(precision.OVERRIDE, "fp8")
    with pytest.raises(UsageError, match="GPTLAB_AUTO_DTYPE must be float32 or bfloat16"):
        precision.resolve(CONFIG, 12, CPU)


@pytest.fixture
def clock(monkeypatch):
    """gptlab.probe's clock, made to stand still: advance(seconds) is the only time that
    passes, so a timing is exactly what the test says the work costs."""
    now = [0.0]
    monkeypatch.setattr(probe, "time", SimpleNamespace(perf_counter=lambda: now[0]))

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


def test_measure_times_each_dtype_under_its_own_autocast(clock, monkeypatch):
    """A float32 step costs 5 ms and a bf16-autocast step 2 ms (charged as the step enters
    its autocast), and each attention layer that leaves autocast for float32 1 ms more:
    measure reports exactly those, and leaves the caller's random streams as they were."""
    real_autocast = torch.autocast

    def charged_autocast(device_type, dtype=None, enabled=True):
        if torch.is_autocast_enabled(device_type):  # inside a step: attention in float32
            clock(1e-3)
        else:
            clock(2e-3 if enabled else 5e-3)
        return real_autocast(device_type, dtype=dtype, enabled=enabled)

    monkeypatch.setattr(torch, "autocast", charged_autocast)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    ms = precision.measure(CONFIG, 2, CONFIG.block_size, CPU, budget_s=0.01)
    assert torch.equal(torch.rand(3), expected)
    assert ms == {"float32": pytest.approx(5.0), "bfloat16": pytest.approx(2.0),
                  precision.FLOAT32_ATTENTION: pytest.approx(2.0 + CONFIG.n_layer)}


def test_a_run_records_what_auto_meant(probed, tmp_path, capsys):
    """train.json holds the concrete dtype, so a resume trains exactly as the run began."""
    from gptlab.data.prepared import prepare
    from gptlab.data.tokenizer import CharTokenizer
    from gptlab.training.config import TrainConfig
    from gptlab.training.run import train

    probed(10.0, 4.0)
    data, text = tmp_path / "data", "abcdefgh " * 400
    prepare(text, data, CharTokenizer.from_text(text))
    run = tmp_path / "run"
    cfg = TrainConfig(max_iters=4, eval_interval=2, eval_iters=1, batch_size=2,
                      warmup_iters=0, lr_decay_iters=4)
    train(GPTConfig.from_preset("tiny-gpt2", block_size=16), cfg, data, run, progress=False,
          callbacks=StopAfter(2))
    assert "dtype auto: bfloat16 autocast, 2.50x float32" in capsys.readouterr().err
    assert json.loads((run / "train.json").read_text())["dtype"] == "bfloat16"
    result = train(None, None, data, run, resume=True, progress=False)
    assert result.step == 4 and "dtype auto" not in capsys.readouterr().err


def test_muon_dtype_is_probed_on_the_hidden_matrices(monkeypatch, tmp_path):
    monkeypatch.delenv(precision.OVERRIDE, raising=False)
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(probe, "machine_load", lambda: 0.0)
    seen = []

    def fake(shapes, device):
        seen.append(shapes)
        return {"float32": 30.0, "bfloat16": 10.0}

    monkeypatch.setattr(precision, "measure_muon", fake)
    name, reason = precision.resolve_muon(CONFIG, CPU)
    C, F = CONFIG.n_embd, CONFIG.ffn_hidden
    assert seen == [[(3 * C, C), (C, C), (F, C), (C, F)] * CONFIG.n_layer]
    assert name == "bfloat16" and reason.startswith(
        "muon_dtype auto: bfloat16, 3.00x float32 on this machine (Newton-Schulz for 8 ")


def test_resolve_settings_leaves_concrete_choices_alone(probed, monkeypatch):
    from gptlab.training.config import SpeedLevers, TrainConfig

    calls = probed(10.0, 5.0)
    monkeypatch.setattr(precision, "measure_muon",
                        lambda shapes, device: {"float32": 1.0, "bfloat16": 2.0})
    cfg = TrainConfig(dtype="float32", speed=SpeedLevers(optimizer="muon"))
    resolved, reasons = precision.resolve_settings(cfg, CONFIG, CPU)
    assert (resolved.dtype, resolved.speed.muon_dtype) == ("float32", "float32") and calls == []
    assert reasons == ["muon_dtype auto: float32 (bfloat16 0.50x float32 on this machine, "
                       "probed now; bf16 needs 1.11x)"]
    resolved, reasons = precision.resolve_settings(TrainConfig(), CONFIG, CPU)
    assert (resolved.dtype, resolved.speed.attention_dtype, resolved.speed.muon_dtype) == (
        "bfloat16", "float32", "auto")
    assert reasons[1] == "attention_dtype auto: float32 (not timed under autocast here)"
    calls = probed(10.0, 5.0, 6.0)
    resolved, reasons = precision.resolve_settings(
        TrainConfig(dtype="bfloat16", batch_size=3), CONFIG, CPU)  # another probe
    assert resolved.speed.attention_dtype == "autocast" and reasons == [
        "attention_dtype auto: autocast, bf16 attention 1.20x float32's on this machine "
        "(5.0 vs 6.0 ms, probed now)"]


def test_measure_muon_times_every_hidden_matrix_in_each_dtype(clock, monkeypatch):
    """Newton-Schulz on one stack of same-shaped matrices costs 3 ms in float32 and 1 ms
    in bfloat16: one measured step is every shape's stack once, as Muon.step runs it (a
    stack of each layer's matrix of that shape), in the dtype being timed."""
    cost = {torch.float32: 3e-3, torch.bfloat16: 1e-3}
    real, seen = precision.orthogonalize, []

    def charged(g, dtype):
        clock(cost[dtype])
        seen.append((tuple(g.shape), dtype))
        return real(g, dtype)

    monkeypatch.setattr(precision, "orthogonalize", charged)
    shapes = precision.hidden_shapes(CONFIG)
    assert len(shapes) == 4 * CONFIG.n_layer and len(set(shapes)) == 4
    ms = precision.measure_muon(shapes, CPU, budget_s=0.01)
    assert ms == {"float32": pytest.approx(3.0 * 4), "bfloat16": pytest.approx(1.0 * 4)}
    assert {s for s, _ in seen} == {(CONFIG.n_layer, *shape) for shape in shapes}
    assert {d for _, d in seen} == {torch.float32, torch.bfloat16}


@pytest.mark.parametrize("bf16, bf16_float32_attention, dtype, attention", [
    (12.0, 6.0, "bfloat16", "float32"),  # bf16 pays only with attention in float32
    (5.0, 6.0, "bfloat16", "autocast"),  # bf16 attention clearly faster
    (5.8, 6.0, "bfloat16", "float32"),  # within the margin: the precise one
    (12.0, 11.0, "float32", "autocast"),  # no bf16 at all: nothing to decide
])
def test_attention_dtype_follows_the_same_probe(probed, bf16, bf16_float32_attention,
                                                dtype, attention):
    """fp32 10 ms against bf16 autocast with attention in bf16 or in float32: dtype auto
    takes bf16 if either is clearly faster, attention_dtype auto float32 unless bf16
    attention is clearly faster, from one probe."""
    from gptlab.training.config import TrainConfig

    calls = probed(10.0, bf16, bf16_float32_attention)
    resolved, _ = precision.resolve_settings(TrainConfig(), CONFIG, CPU)
    assert (resolved.dtype, resolved.speed.attention_dtype) == (dtype, attention)
    assert len(calls) == 1


def test_attention_under_load_or_override_stays_float32(probed, monkeypatch):
    probed(10.0, 2.0, 8.0)
    monkeypatch.setattr(probe, "cores", lambda: 2)
    monkeypatch.setattr(probe, "machine_load", lambda: 5.3)
    choice, why = precision.resolve_attention(CONFIG, 12, CPU, "bfloat16")
    assert (choice, why) == ("float32", "attention_dtype auto: float32 (not timed, load "
                                        "average 5.30 on 2 cores)")
    monkeypatch.setenv(precision.OVERRIDE, "bfloat16")
    assert precision.resolve_attention(CONFIG, 12, CPU, "bfloat16") == (
        "float32", "attention_dtype auto: float32 (GPTLAB_AUTO_DTYPE is set)")
    assert precision.resolve_attention(CONFIG, 12, CPU, "float32") == ("autocast", None)
    assert precision.resolve_attention(CONFIG, 12, torch.device("meta"), "bfloat16") == (
        "autocast", None)


@pytest.mark.parametrize("dtype, attention, flagged", [
    ("bfloat16", "float32", True), ("bfloat16", "autocast", False),
    ("bfloat16", "auto", False),  # unresolved: as autocast has it
    ("float32", "float32", False),  # no autocast, nothing to leave
])
def test_the_trainer_sets_attention_as_its_settings_say(dtype, attention, flagged):
    import numpy as np

    from gptlab.data.batches import TokenBatches
    from gptlab.distributed.process import Dist
    from gptlab.model.attention import CausalSelfAttention
    from gptlab.model.gpt import GPT
    from gptlab.training.config import SpeedLevers, TrainConfig
    from gptlab.training.trainer import NoCheckpoints, Trainer

    tokens = np.arange(500, dtype=np.uint16) % 31
    model = GPT(GPTConfig(vocab_size=31, block_size=16, n_layer=2, n_head=2, n_embd=16))
    ctx = Dist(device=CPU)
    cfg = TrainConfig(batch_size=2, max_iters=2, warmup_iters=0, device="cpu", dtype=dtype,
                      speed=SpeedLevers(attention_dtype=attention))
    trainer = Trainer(model, TokenBatches(tokens, tokens, 2, 16, 0, ctx), cfg, ctx,
                      NoCheckpoints())
    layers = [m for m in model.modules() if isinstance(m, CausalSelfAttention)]
    assert len(layers) == 2 and all(m.float32_attention == flagged for m in layers)
    assert math.isfinite(trainer.train_step(1e-3))
