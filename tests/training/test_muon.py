"""Muon (gptlab.training.muon): its update against torch.optim.Muon's, where the Newton-Schulz
iteration puts singular values, which parameters it takes, exact resume, bad arguments."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training.callbacks import StopAfter
from gptlab.training.config import SpeedLevers, TrainConfig
from gptlab.training.muon import (
    NS_COEFFICIENTS,
    STACKED_BY,
    Muon,
    hidden_matrices,
    orthogonalize,
)
from gptlab.training.optim import make_optimizer
from gptlab.training.run import train

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py

# p(x) = a x + b x^3 + c x^5 (gptlab.training.muon's docstring derives these): its local minimum on
# (0, 1.2] and its local maximum, so 5 steps leave every s >= SMALLEST in [LOW, HIGH].
LOW, HIGH, SMALLEST = 0.68183, 1.20237, 0.0016


def muon_settings(**levers) -> TrainConfig:
    """TrainConfig's defaults with Muon, and these levers."""
    return TrainConfig(speed=SpeedLevers(optimizer="muon", **levers))


def quintic(x: np.ndarray, steps: int = 5) -> np.ndarray:
    a, b, c = NS_COEFFICIENTS
    for _ in range(steps):
        x = a * x + b * x**3 + c * x**5
    return x


def test_the_band_is_where_the_polynomial_turns():
    xs = np.linspace(0, 1.25, 1_000_001)
    once = quintic(xs, 1)
    turning = np.diff(np.sign(np.diff(once))) != 0
    assert once[1:-1][turning] == pytest.approx([HIGH, LOW], abs=1e-5)
    start = np.logspace(np.log10(SMALLEST), 0, 100_000)
    after = quintic(start)
    assert after.min() >= LOW - 1e-5 and after.max() <= HIGH + 1e-5
    assert quintic(np.array([SMALLEST / 2]))[0] < LOW  # too small to get there in 5 steps


@pytest.mark.parametrize("rule", ["original", "match_rms_adamw"])
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("shape", [(64, 32), (32, 96), (48, 48)])
def test_update_equals_torch_muon_in_bf16(shape, nesterov, rule):
    # Three steps, so the momentum buffer and weight decay count as well.
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(shape, generator=gen) * 0.02
    ours, theirs = torch.nn.Parameter(w.clone()), torch.nn.Parameter(w.clone())
    settings = dict(lr=0.02, momentum=0.95, nesterov=nesterov, weight_decay=0.1)
    opt_ours = Muon([ours], ns_dtype="bfloat16", adjust_lr=rule, **settings)
    opt_theirs = torch.optim.Muon([theirs], adjust_lr_fn=rule, **settings)
    for _ in range(3):
        grad = torch.randn(shape, generator=gen)
        ours.grad, theirs.grad = grad.clone(), grad.clone()
        before = theirs.detach().clone()
        opt_ours.step()
        opt_theirs.step()
        step = (theirs.detach() - before).abs().max().item()
        # bf16's unit roundoff (2^-8) of the update: the same algorithm, not a look-alike
        # (measured: bit for bit equal on this CPU).
        assert (ours - theirs).abs().max().item() <= 2**-8 * step
    assert torch.equal(opt_ours.state[ours]["momentum_buffer"],
                       opt_theirs.state[theirs]["momentum_buffer"])


@pytest.mark.parametrize("shape", [(96, 32), (32, 64)])
def test_fp32_singular_values_follow_the_scalar_iteration(shape):
    # G = U diag(s) V^T built in float64, s / ||G||_F from just above SMALLEST up: the fp32
    # iteration must give U diag(p^5(s / ||G||_F)) V^T, each value in the band.
    gen = torch.Generator().manual_seed(1)
    k = min(shape)
    u, _ = torch.linalg.qr(torch.randn(shape[0], k, generator=gen, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(shape[1], k, generator=gen, dtype=torch.float64))
    s = torch.logspace(np.log10(0.002), np.log10(0.3), k, dtype=torch.float64)
    g = (u * s) @ v.T
    assert (s / s.norm()).min() >= SMALLEST  # ||G||_F = ||s||_2
    expected = quintic((s / s.norm()).numpy())
    out = orthogonalize(g.float(), torch.float32).double()
    got = torch.linalg.svdvals(out).numpy()  # p is not monotonic: compare sorted
    assert np.sort(got) == pytest.approx(np.sort(expected), abs=1e-5)  # measured 7e-7
    assert got.min() >= LOW - 1e-5 and got.max() <= HIGH + 1e-5
    # ...and the singular vectors are G's: the update is U p(S) V^T.
    assert torch.allclose(out, (u * torch.from_numpy(expected)) @ v.T, atol=1e-5)


def test_fp32_iteration_agrees_with_float64():
    g = torch.randn(40, 120, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    exact = orthogonalize(g, torch.float64)
    assert torch.allclose(orthogonalize(g.float(), torch.float32).double(), exact, atol=1e-5)
    # a random gradient's singular values (all well above SMALLEST here) are in the band
    sv = torch.linalg.svdvals(exact)
    assert sv.min() >= LOW - 1e-6 and sv.max() <= HIGH + 1e-6


@pytest.mark.parametrize("shape", [(3, 64, 32), (4, 32, 96)])
def test_a_stack_is_orthogonalised_matrix_by_matrix(shape):
    # Muon.step runs the iteration once per shape, on the stack of that shape's updates.
    g = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    stacked = orthogonalize(g)
    for i in range(shape[0]):
        torch.testing.assert_close(stacked[i], orthogonalize(g[i]), rtol=1e-5, atol=1e-6)


def test_a_step_over_same_shaped_matrices_equals_one_matrix_at_a_time():
    gen = torch.Generator().manual_seed(1)
    shapes = [(32, 16)] * 3 + [(16, 16)]
    weights = [torch.randn(shape, generator=gen) for shape in shapes]
    together = [torch.nn.Parameter(w.clone()) for w in weights]
    apart = [torch.nn.Parameter(w.clone()) for w in weights]
    opt_together = Muon(together, weight_decay=0.1)
    opt_apart = [Muon([p], weight_decay=0.1) for p in apart]
    for _ in range(3):
        grads = [torch.randn(w.shape, generator=gen) for w in weights]
        for p, q, grad in zip(together, apart, grads, strict=True):
            p.grad, q.grad = grad.clone(), grad.clone()
        opt_together.step()
        for opt in opt_apart:
            opt.step()
    for p, q in zip(together, apart, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
        assert not torch.equal(p, torch.zeros_like(p))


def _stacking_step(groups_of: list[list[torch.nn.Parameter]], lrs: list[float],
                   per_parameter: bool, grads: list[list[torch.Tensor]]):
    """Muon steps on parameters in groups (one group per list, with its lr, the first
    group's with q/k/v-like row_blocks), as one optimizer or one per parameter."""
    def group(params, lr, first):
        return {"params": params, "lr": lr, **({"row_blocks": (16, 16, 16)} if first else {})}

    if per_parameter:
        opts = [Muon([group([p], lr, i == 0)], weight_decay=0.1)
                for i, (params, lr) in enumerate(zip(groups_of, lrs, strict=True))
                for p in params]
    else:
        opts = [Muon([group(params, lr, i == 0)
                      for i, (params, lr) in enumerate(zip(groups_of, lrs, strict=True))],
                     weight_decay=0.1)]
    flat = [p for params in groups_of for p in params]
    for step_grads in grads:
        for p, g in zip(flat, step_grads, strict=True):
            p.grad = g.clone()
        for opt in opts:
            opt.step()


@pytest.mark.parametrize("lrs", [(0.05, 0.05), (0.05, 0.02)])  # stacked across, or not
def test_groups_with_equal_settings_stack_and_step_as_each_matrix_alone(lrs):
    """A fused q/k/v cut into 16 x 16 blocks (one group) and 16 x 16 output projections
    (another): with equal settings their blocks go through Newton-Schulz in one stack,
    and every matrix steps as it would alone; with another lr, each group keeps its own."""
    gen = torch.Generator().manual_seed(3)
    shapes = [[(48, 16)] * 2, [(16, 16)] * 2 + [(32, 16)]]
    weights = [[torch.randn(s, generator=gen) for s in group] for group in shapes]
    grads = [[torch.randn(s, generator=gen) for group in shapes for s in group]
             for _ in range(3)]
    stacked = [[torch.nn.Parameter(w.clone()) for w in group] for group in weights]
    alone = [[torch.nn.Parameter(w.clone()) for w in group] for group in weights]
    _stacking_step(stacked, list(lrs), False, grads)
    _stacking_step(alone, list(lrs), True, grads)
    for p, q, w in zip(sum(stacked, []), sum(alone, []), sum(weights, []), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
        assert not torch.allclose(p.detach(), w, atol=1e-4)  # it moved


def test_the_split_qkv_model_stacks_its_blocks_with_the_projections():
    """lap 2's optimizer (q, k and v apart): the 128 x 128 blocks of the fused q/k/v and
    the attention's output projections are one stack (STACKED_BY settings equal)."""
    model = GPT(GPTConfig.from_preset("shakespeare-char-cpu-speedrun-2"))
    opt = make_optimizer(model, muon_settings(muon_split_qkv=True),
                         torch.device("cpu")).muon
    assert len(opt.param_groups) == 2
    assert ({tuple(g.get(k) for k in STACKED_BY) for g in opt.param_groups} ==
            {tuple(opt.param_groups[0].get(k) for k in STACKED_BY)})


def test_row_blocks_step_each_block_as_a_matrix_of_its_own():
    """A fused (q; k; v) weight with row_blocks steps as the three matrices would, each
    with its own shape's learning rate (and the same weight decay)."""
    gen = torch.Generator().manual_seed(2)
    rows = (32, 16, 16)  # a GQA-like cut: q wider than k and v
    weight = torch.randn(sum(rows), 16, generator=gen)
    fused = torch.nn.Parameter(weight.clone())
    parts = [torch.nn.Parameter(w.clone()) for w in weight.split(rows)]
    opt_fused = Muon([{"params": [fused], "row_blocks": rows}], lr=0.05, weight_decay=0.1)
    opt_parts = Muon(parts, lr=0.05, weight_decay=0.1)
    for _ in range(3):
        grad = torch.randn(weight.shape, generator=gen)
        fused.grad = grad.clone()
        for p, g in zip(parts, grad.split(rows), strict=True):
            p.grad = g.clone()
        opt_fused.step()
        opt_parts.step()
    torch.testing.assert_close(fused.detach(), torch.cat([p.detach() for p in parts]),
                               rtol=1e-5, atol=1e-6)
    whole = torch.nn.Parameter(weight.clone())  # without the cut, another update
    whole.grad = torch.randn(weight.shape, generator=gen)
    Muon([whole], lr=0.05).step()
    fused.grad = whole.grad.clone()
    before = fused.detach().clone()
    Muon([{"params": [fused], "row_blocks": rows}], lr=0.05).step()
    assert not torch.allclose(fused - before, whole - weight, atol=1e-4)


def test_the_split_setting_resumes_exactly(data_dir, tmp_path, tiny_model, losses,
                                           muon_train):
    cfg = muon_train(muon_split_qkv=True)
    whole = train(tiny_model(), cfg, data_dir, tmp_path / "whole", progress=False)
    train(tiny_model(), cfg, data_dir, tmp_path / "part", progress=False, callbacks=StopAfter(5))
    state = torch.load(tmp_path / "part/state.pt", weights_only=True)["optimizer"]["muon"]
    assert [g["row_blocks"] for g in state["param_groups"]] == [None, (32, 32, 32)]
    resumed = train(None, None, data_dir, tmp_path / "part", resume=True, progress=False)
    assert resumed.step == whole.step
    assert losses(tmp_path / "part") == losses(tmp_path / "whole")


def test_row_blocks_must_split_the_rows():
    with pytest.raises(UsageError, match=r"row_blocks \(4, 4\) do not split the 6 rows"):
        Muon([{"params": [torch.nn.Parameter(torch.zeros(6, 2))], "row_blocks": (4, 4)}])


def test_the_iteration_runs_in_fp32_on_a_cpu_by_default():
    gen = torch.Generator().manual_seed(3)
    w, grad = torch.randn(32, 48, generator=gen), torch.randn(32, 48, generator=gen)
    after = {}
    for dtype in (None, "float32", "bfloat16"):
        p = torch.nn.Parameter(w.clone())
        p.grad = grad.clone()
        Muon([p], ns_dtype=dtype).step()
        after[dtype] = p.detach()
    assert torch.equal(after[None], after["float32"])
    assert not torch.equal(after[None], after["bfloat16"])


def parameter_split(preset: str, **kw) -> tuple[list[str], list[str]]:
    return hidden_matrices(GPT(GPTConfig.from_preset(preset, **kw)))


def test_gpt2_style_split_with_tied_embeddings():
    muon, adamw = parameter_split("tiny-gpt2")
    assert muon == [f"blocks.{i}.{m}.weight" for i in range(2)
                    for m in ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")]
    # wte is also the head (tied): it stays on AdamW, as do positions, norms and biases.
    assert {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias",
            "blocks.0.attn.qkv.bias", "blocks.1.norm_2.weight"} <= set(adamw)
    assert "lm_head.weight" not in adamw  # the tied matrix is listed once, as wte
    assert not set(muon) & set(adamw)


def test_llama_style_split_with_an_untied_head():
    muon, adamw = parameter_split("tiny-llama")
    assert muon == [f"blocks.{i}.{m}.weight" for i in range(2)
                    for m in ("attn.qkv", "attn.proj", "mlp.gate", "mlp.up", "mlp.proj")]
    assert sorted(adamw) == sorted(["wte.weight", "lm_head.weight", "ln_f.weight"]
                                   + [f"blocks.{i}.norm_{j}.weight" for i in range(2)
                                      for j in (1, 2)])


@pytest.fixture(scope="session")
def muon_train(tiny_train):
    """muon_train(**overrides) -> tiny_train with Muon (lr 0.02) and AdamW at 3e-3."""
    def make(**kw) -> TrainConfig:
        return tiny_train(optimizer="muon", muon_lr=0.02, learning_rate=3e-3, **kw)

    return make


@pytest.mark.parametrize("stop_at", [4, 7])  # at a checkpoint step, and between two
def test_resume_with_muon_reproduces_the_uninterrupted_run(data_dir, tmp_path, stop_at,
                                                           tiny_model, losses, muon_train):
    model, cfg = tiny_model(dropout=0.1), muon_train(lr_schedule="wsd", cooldown_frac=0.5)
    whole = train(model, cfg, data_dir, tmp_path / "whole", progress=False)
    part = train(model, cfg, data_dir, tmp_path / "part", progress=False,
                 callbacks=StopAfter(stop_at))
    assert part.status == "interrupted" and part.step == stop_at
    state = torch.load(tmp_path / "part/state.pt", weights_only=True)
    assert set(state["optimizer"]) == {"adamw", "muon"} and state["optimizer"]["muon"]["state"]
    resumed = train(None, None, data_dir, tmp_path / "part", resume=True, progress=False)
    assert resumed.step == whole.step == 12
    assert losses(tmp_path / "part") == losses(tmp_path / "whole")  # exactly, every value
    evals = [r for r in losses(tmp_path / "whole") if r[0] == "eval"]
    assert evals[-1][5] < evals[0][5] - 0.5  # and it learned


def test_muon_state_is_not_loaded_into_adamw(data_dir, tmp_path, tiny_model, tiny_train):
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(max_iters=2, eval_interval=2), data_dir, run,
          progress=False)
    adamw_state = torch.load(run / "state.pt", weights_only=True)["optimizer"]
    model = GPT(GPTConfig.from_preset("tiny-gpt2"))
    opt = make_optimizer(model, muon_settings(), torch.device("cpu"))
    with pytest.raises(UsageError, match="not Muon \\+ AdamW's"):
        opt.load_state_dict(adamw_state)


@pytest.mark.parametrize("kw, message", [
    (dict(lr=-1.0), "lr must be >= 0"),
    (dict(momentum=1.0), "momentum must be in [0, 1)"),
    (dict(ns_steps=0), "ns_steps must be an integer in [1, 100)"),
    (dict(ns_dtype="float16"), "ns_dtype must be one of float32, bfloat16"),
    (dict(adjust_lr="none"), "adjust_lr must be one of original, match_rms_adamw"),
])
def test_invalid_muon_arguments(kw, message):
    with pytest.raises(UsageError) as err:
        Muon([torch.nn.Parameter(torch.zeros(2, 2))], **kw)
    assert str(err.value).startswith(message)


def test_muon_refuses_a_vector():
    with pytest.raises(UsageError, match=r"2-D weight matrices only.*\(5,\): give it to AdamW"):
        Muon([torch.nn.Parameter(torch.zeros(5))])

