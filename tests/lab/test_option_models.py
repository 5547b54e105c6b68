"""The lab's run views on the speedrun's second-lap models (issue 28): QK-norm, zero-
initialised projections, the value residual and RoPE on two blocks (the second lap's
preset, smaller), QK-norm and zero-initialised projections on one (its 1.88 track, learned
positions). Every view that takes a run answers (the learned-positions view says why not
for RoPE), and its numbers are the model's own: the walk's last logits are the model's
forward."""

from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient

from gptlab import model_dir
from gptlab.lab.server import create_app
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT

TEXT = "the cat sat on the mat"
RUNS = {"lap2": ("shakespeare-char-cpu-speedrun-2", 2),  # run name: preset, blocks
        "track188": ("shakespeare-char-cpu-speedrun-188", 1)}
VIEWS = [
    ("/api/walk", {"text": TEXT}),
    ("/api/all_heads", {"prompt": TEXT}),
    ("/api/heads", {"prompt": TEXT, "layer": 0}),
    ("/api/next_token", {"text": TEXT}),
    ("/api/lens", {"text": TEXT}),
    ("/api/learned_positions", {}),
    ("/api/head_scores", {"seed": 3}),
    ("/api/ablate", {"layer": 0, "head": 1}),
]


@pytest.fixture(scope="module")
def option_runs(tmp_path_factory, copy_tiny_run):
    """A runs folder of the tiny run's tokenizer with second-lap models in it (seeded,
    every weight moved off its initial value)."""
    root = tmp_path_factory.mktemp("option-runs")
    for name, (preset, blocks) in RUNS.items():
        run = copy_tiny_run(root / name)
        vocab = model_dir.load_config(run).vocab_size
        config = GPTConfig.from_preset(preset, vocab_size=vocab, n_layer=blocks, n_embd=32,
                                       n_head=2, block_size=32)
        torch.manual_seed(0)
        model = GPT(config)
        with torch.no_grad():  # as if trained: the zero-initialised projections write too
            for weight in model.parameters():
                weight.add_(0.05 * torch.randn_like(weight))
        for directory in (run, run / "best"):
            if directory.is_dir():
                model_dir.save_model(model, directory)
    return root


@pytest.fixture(scope="module")
def option_client(option_runs):
    return TestClient(create_app(option_runs))


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("path, body", VIEWS, ids=[path for path, _ in VIEWS])
def test_every_run_view_answers_for_a_second_lap_model(option_client, post, run, path, body):
    if path == "/api/learned_positions" and run == "lap2":  # RoPE: the view says so
        answer = option_client.post(path, json={"run": run, **body})
        assert answer.status_code == 400 and "rope positions" in answer.json()["error"]
        return
    post(option_client, path, {"run": run, **body})


@pytest.mark.parametrize("run", list(RUNS))
def test_the_walk_ends_at_the_models_own_next_token(option_runs, option_client, post, run):
    model = model_dir.load_model(option_runs / run)
    assert model.config.qk_norm and model.config.zero_init_proj
    assert model.config.value_residual == (run == "lap2")
    tokenizer = model_dir.load_tokenizer_of(option_runs / run)
    with torch.no_grad():
        logits, _ = model(torch.tensor([tokenizer.encode(TEXT)]))
    walk = post(option_client, "/api/walk", {"run": run, "text": TEXT})
    assert walk["top"][0]["id"] == int(logits[0, -1].argmax())
    assert walk["logits"][0] == pytest.approx(float(logits[0, -1].max()), abs=1e-4)
