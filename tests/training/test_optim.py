"""The optimizers a run uses (gptlab.training.optim): AdamW's weight decay on matrices and
embeddings only, every parameter in one group once; Muon's groups and settings; the AdamW
implementation per device, which reaches torch, and the three implementations compute the
same update (the choice is speed only; bench/adamw_startup.py measures it)."""

from __future__ import annotations

import copy

import pytest
import torch

from gptlab import GPT, GPTConfig
from gptlab.errors import UsageError
from gptlab.model.params import count_parameters
from gptlab.training.config import SpeedLevers, TrainConfig
from gptlab.training.muon import MuonWithAdamW
from gptlab.training.optim import (
    ADAMW_IMPLEMENTATIONS,
    adamw_implementation,
    fused_qkv_rows,
    make_optimizer,
)

CPU = torch.device("cpu")


def muon_settings(**levers) -> TrainConfig:
    """TrainConfig's defaults with Muon, and these levers."""
    return TrainConfig(speed=SpeedLevers(optimizer="muon", **levers))


@pytest.mark.parametrize("preset", ["tiny-gpt2", "tiny-llama"])
def test_adamw_decays_matrices_and_embeddings_only(preset):
    model = GPT(GPTConfig.from_preset(preset))
    opt = make_optimizer(model, TrainConfig(weight_decay=0.25), CPU)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.25 and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    assert {"wte.weight", "blocks.0.attn.qkv.weight", "blocks.1.mlp.proj.weight"} <= decayed
    assert all(p.dim() >= 2 for p in decay["params"])
    assert no_decay["params"] and all(p.dim() < 2 for p in no_decay["params"])  # norms, biases
    # every parameter once (the tied head is wte, listed once), nothing else
    params = [id(p) for g in opt.param_groups for p in g["params"]]
    assert sorted(params) == sorted(id(p) for p in model.parameters())
    held = sum(p.numel() for g in opt.param_groups for p in g["params"])
    assert held == count_parameters(model.config)


def test_frozen_parameters_are_left_out():
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    model.wte.weight.requires_grad_(False)
    opt = make_optimizer(model, TrainConfig(), CPU)
    held = {id(p) for g in opt.param_groups for p in g["params"]}
    assert id(model.wte.weight) not in held
    assert held == {id(p) for p in model.parameters() if p.requires_grad}


def test_adamw_takes_the_configs_rate_and_betas():
    opt = make_optimizer(GPT(GPTConfig.from_preset("tiny-gpt2")),
                         TrainConfig(learning_rate=3e-4, beta1=0.8, beta2=0.9), CPU)
    assert opt.defaults["lr"] == 3e-4 and opt.defaults["betas"] == (0.8, 0.9)


def test_devices_without_a_choice_get_torchs_default():
    assert adamw_implementation(torch.device("meta")) is None
    opt = make_optimizer(GPT(GPTConfig.from_preset("tiny-gpt2")), TrainConfig(),
                         torch.device("meta"))
    assert not opt.defaults["fused"] and opt.defaults["foreach"] is None


def test_fused_qkv_rows_names_each_layers_q_k_and_v_rows():
    model = GPT(GPTConfig.from_preset("tiny-llama"))
    attn = model.blocks[0].attn
    q, kv = attn.n_head * attn.head_dim, attn.n_kv_head * attn.head_dim
    assert fused_qkv_rows(model) == {f"blocks.{i}.attn.qkv.weight": (q, kv, kv)
                                     for i in range(len(model.blocks))}
    assert set(fused_qkv_rows(model)) <= dict(model.named_parameters()).keys()


def test_a_cpu_run_gets_fused_adamw():
    assert adamw_implementation(CPU) == "fused"
    opt = make_optimizer(GPT(GPTConfig.from_preset("tiny-gpt2")), TrainConfig(), CPU)
    assert opt.defaults["fused"] is True


@pytest.mark.parametrize("implementation, flags", [
    ("fused", {"fused": True}), ("foreach", {"foreach": True}),
    ("for-loop", {"foreach": False, "fused": None})])
def test_each_implementation_reaches_torch(implementation, flags):
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    opt = make_optimizer(model, muon_settings(), CPU, adamw=implementation)
    assert {k: opt.adamw.defaults[k] for k in flags} == flags  # Muon's AdamW part too


def test_the_implementations_compute_the_same_steps():
    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    idx = torch.randint(model.config.vocab_size, (2, 9))
    after = {}
    for implementation in ADAMW_IMPLEMENTATIONS:
        twin = copy.deepcopy(model)
        opt = make_optimizer(twin, TrainConfig(weight_decay=0.1, learning_rate=1e-2), CPU,
                             adamw=implementation)
        for _ in range(3):
            _, loss = twin(idx[:, :-1], idx[:, 1:])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        after[implementation] = torch.cat([p.detach().flatten() for p in twin.parameters()])
    moved = (after["fused"] - torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert moved.abs().max() > 1e-3  # the steps did something
    for implementation in ("foreach", "for-loop"):
        # Within 1% of one step (lr 1e-2): the kernels round differently (4.4e-5 at most
        # when written, in 61 of 29,600 weights).
        torch.testing.assert_close(after[implementation], after["fused"], rtol=0, atol=1e-4)


def test_split_qkv_gives_muon_attentions_q_k_and_v_rows():
    model = GPT(GPTConfig.from_preset("tiny-llama"))  # grouped-query: fewer k and v heads
    attn = model.blocks[0].attn
    assert attn.n_kv_head < attn.n_head
    opt = make_optimizer(model, muon_settings(muon_split_qkv=True),
                         CPU)
    whole, cut = opt.muon.param_groups
    assert whole["row_blocks"] is None
    assert id(attn.qkv.weight) not in {id(p) for p in whole["params"]}
    q, kv = attn.n_head * attn.head_dim, attn.n_kv_head * attn.head_dim
    assert cut["row_blocks"] == (q, kv, kv)
    assert {id(p) for p in cut["params"]} == {id(b.attn.qkv.weight) for b in model.blocks}
    assert cut["lr_scale"] == whole["lr_scale"]  # the trainer's schedule reaches both
    plain = make_optimizer(model, muon_settings(), CPU)
    assert [g["row_blocks"] for g in plain.muon.param_groups] == [None]


def test_make_optimizer_gives_every_parameter_once():
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    opt = make_optimizer(model, TrainConfig(
        learning_rate=1e-3, speed=SpeedLevers(optimizer="muon", muon_lr=0.05)), CPU)
    assert isinstance(opt, MuonWithAdamW)
    params = [p for g in opt.param_groups for p in g["params"]]
    assert len(params) == len({id(p) for p in params}) == len(list(model.parameters()))
    assert all(p.dim() == 2 for p in opt.muon.param_groups[0]["params"])
    # The trainer sets lr * lr_scale on every group: Muon follows the schedule at its own lr.
    assert opt.muon.param_groups[0]["lr_scale"] == pytest.approx(50.0)
    assert all("lr_scale" not in g for g in opt.adamw.param_groups)


def test_muon_runs_as_keller_jordans_nesterov_and_five_newton_schulz_steps():
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    group = make_optimizer(model, muon_settings(), CPU).muon.param_groups[0]
    assert group["nesterov"] is True and group["ns_steps"] == 5


def test_a_retired_setting_loads_when_off_and_is_refused_by_name_when_used():
    """Settings the speedrun tried and did not adopt (BENCHMARKS.md) are gone; a train.json
    saved with them at the value that left them off still loads, and means the same."""
    saved = TrainConfig().to_dict()
    old = {**saved, "ramp": "none", "ramp_iters": 0, "ramp_start": 0.25, "muon_nesterov": True,
           "muon_ns_steps": 5, "muon_normuon_beta2": 0.0}
    assert TrainConfig.from_dict(old) == TrainConfig.from_dict(saved)
    for used in ({"ramp": "batch"}, {"muon_ns_steps": 3}, {"muon_nesterov": False},
                 {"muon_normuon_beta2": 0.95}):
        with pytest.raises(UsageError, match=f"uses {next(iter(used))}=.*not adopted"):
            TrainConfig.from_dict({**old, **used})


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_embedding_lr_puts_the_embeddings_in_a_group_at_their_rate(optimizer):
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))  # learned positions, a tied head
    cfg = TrainConfig(learning_rate=2e-3, min_lr=2e-4,
                      speed=SpeedLevers(optimizer=optimizer, embedding_lr=0.04))
    opt = make_optimizer(model, cfg, CPU)
    adamw = opt.adamw if optimizer == "muon" else opt
    embedded = {id(model.wte.weight), id(model.wpe.weight)}
    *rest, apart = adamw.param_groups
    assert {id(p) for p in apart["params"]} == embedded
    assert not embedded & {id(p) for g in rest for p in g["params"]}
    assert apart["weight_decay"] == cfg.weight_decay and apart["lr_scale"] == pytest.approx(20)
    params = [p for g in opt.param_groups for p in g["params"]]
    assert len(params) == len({id(p) for p in params}) == len(list(model.parameters()))
    # without it, the groups a checkpoint of an earlier run holds
    without = make_optimizer(model, TrainConfig(speed=SpeedLevers(optimizer=optimizer)), CPU)
    assert len(without.param_groups) == len(opt.param_groups) - 1

    with pytest.raises(UsageError, match="embedding_lr must be a positive number"):
        SpeedLevers(embedding_lr=0.0)
