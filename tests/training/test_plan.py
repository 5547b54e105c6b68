"""The plan of a train() call (gptlab.training.plan), built for each mode without training
anything: its fields, and every refusal made before the run directory is touched."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from gptlab.data.prepared import load_data
from gptlab.distributed.parallelize import Layout
from gptlab.distributed.process import Dist
from gptlab.errors import UsageError
from gptlab.files import model_dir
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training import rundir
from gptlab.training.config import TrainConfig
from gptlab.training.plan import (
    FINE_TUNE,
    FRESH,
    RESUME,
    ResumePoint,
    plan_run,
    with_precision,
)
from gptlab.training.rundir import Checkpoints


@pytest.fixture(scope="module")
def data(words_data_dir):
    return load_data(words_data_dir)


def model(**over) -> GPTConfig:
    return GPTConfig(**{**dict(vocab_size=1, block_size=16, n_layer=1, n_head=4, n_kv_head=2,
                               n_embd=32, bias=False), **over})


def settings(**over) -> TrainConfig:
    return TrainConfig(**{**dict(batch_size=4, max_iters=8, warmup_iters=1, seed=7,
                                 device="cpu"), **over})


@pytest.fixture
def stopped_run(data, tmp_path) -> Path:
    """A run directory as a run stopped at step 3 leaves it, written without training."""
    run = tmp_path / "stopped"
    config = model(vocab_size=data.vocab_size)
    run.mkdir()
    rundir.start(run, data.tokenizer_path, settings().to_dict(), config.to_dict())
    gpt = GPT(config)
    optimizer = torch.optim.AdamW(gpt.parameters())
    Checkpoints(run, writer=True).save({"step": 3, "best_val": 2.0, "data_ranks": 1}, gpt,
                                       optimizer)
    return run


def files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_a_fresh_plan_applies_the_overrides_and_touches_nothing(data, tmp_path):
    plan = plan_run(model(), settings(), data, tmp_path / "run", overrides={"max_iters": 10})
    assert plan.mode == FRESH and plan.resume_from is None and plan.starting_model is None
    assert plan.model_config == model(vocab_size=data.vocab_size)  # the data's vocabulary
    assert (plan.train_config.max_iters, plan.train_config.lr_decay_iters) == (10, 8)
    assert (plan.data.vocab_size, plan.data.train_tokens, plan.data.val_tokens) == (
        data.vocab_size, len(data.train), len(data.val))
    assert plan.layout == Layout("ddp", 1, 1) and not plan.sharded
    assert (plan.rank, plan.world_size, plan.is_main) == (0, 1, True)
    assert (plan.init_seed, plan.dropout_seed) == (7, 7)
    assert not (tmp_path / "run").exists()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.mode = RESUME


@pytest.mark.parametrize("batch_rng, seeds", [("separate", (7, 8)), ("nanogpt", (8, None))])
def test_seeds_and_layout_of_a_rank(data, tmp_path, batch_rng, seeds):
    # rank 1 of 2: the same weights on both ranks and its own dropout, or nanoGPT's seed + rank
    plan = plan_run(model(), settings(batch_rng=batch_rng), data, tmp_path, rank=1,
                    world_size=2)
    assert (plan.init_seed, plan.dropout_seed) == seeds and not plan.is_main
    sharded = plan_run(model(), settings(parallel="fsdp+tp", tp=2), data, tmp_path, rank=3,
                       world_size=4)
    assert sharded.layout == Layout("fsdp+tp", 2, 2) and sharded.sharded


def test_a_fine_tune_plan_takes_the_starting_models_config(data, tmp_path):
    base = tmp_path / "base"
    config = model(vocab_size=data.vocab_size + 3, n_layer=2)
    model_dir.save_model(GPT(config), base)
    shutil.copy(data.tokenizer_path, base / "tokenizer.json")
    plan = plan_run(None, settings(init_from=str(base)), data, tmp_path / "run")
    assert plan.mode == FINE_TUNE and plan.starting_model == str(base)
    assert plan.model_config == config  # its architecture and vocabulary, not the data's
    with pytest.raises(UsageError, match="init_from keeps the starting model's architecture"):
        plan_run(model(), settings(init_from=str(base)), data, tmp_path / "run")


def test_a_fine_tune_may_reach_further_where_no_weight_changes(data, tmp_path):
    """Position Interpolation's fine-tune: the starting model at a longer block_size with
    linear rope scaling; any other change, or a longer learned table, is refused."""
    base = tmp_path / "base"
    config = model(vocab_size=data.vocab_size, pos_encoding="rope")
    model_dir.save_model(GPT(config), base)
    shutil.copy(data.tokenizer_path, base / "tokenizer.json")
    longer = model(block_size=64, pos_encoding="rope",
                   rope_scaling={"type": "linear", "factor": 4.0})
    plan = plan_run(longer, settings(init_from=str(base)), data, tmp_path / "run")
    assert plan.model_config == dataclasses.replace(config, block_size=64,
                                                    rope_scaling=longer.rope_scaling)
    with pytest.raises(UsageError, match="has n_layer 1, the model config 2"):
        plan_run(model(n_layer=2, pos_encoding="rope"), settings(init_from=str(base)), data,
                 tmp_path / "run")
    learned = tmp_path / "learned"
    model_dir.save_model(GPT(model(vocab_size=data.vocab_size)), learned)
    shutil.copy(data.tokenizer_path, learned / "tokenizer.json")
    with pytest.raises(UsageError, match="there is no row for position 16"):
        plan_run(model(block_size=64), settings(init_from=str(learned)), data, tmp_path / "run")


def test_a_resume_plan_reads_the_run_and_writes_nothing(data, stopped_run):
    before = files(stopped_run)
    plan = plan_run(None, None, data, stopped_run, resume=True, overrides={"max_iters": 20})
    assert plan.mode == RESUME and plan.resume_from == ResumePoint(3, None, 1)
    assert plan.train_config.max_iters == 20 and plan.train_config.lr_decay_iters == 8
    assert plan.model_config == model_dir.load_config(stopped_run) and not plan.overwrite
    assert files(stopped_run) == before


@pytest.mark.parametrize("overrides, message", [
    ({"learning_rate": 1.0}, "cannot change learning_rate"),
    ({"max_iters": 2}, "is at step 3 already: max_iters 2"),
    ({"parallel": "fsdp"}, "resume it with --parallel ddp"),
    ({"batch_size": 3}, "global batch of 4 sequences"),
])
def test_resume_refusals(data, stopped_run, overrides, message):
    before = files(stopped_run)
    with pytest.raises(UsageError, match=message):
        plan_run(None, None, data, stopped_run, resume=True, overrides=overrides)
    assert files(stopped_run) == before


def test_refusals_before_anything_is_written(data, stopped_run, tmp_path):
    run = tmp_path / "new"
    for args, kw, message in [
        ((model(), None), {}, "a fresh run needs a training config"),
        ((None, settings()), {}, "a fresh run needs a model config"),
        ((model(), settings()), {"resume": True}, "resume reads the model and training"),
        ((None, None), {"resume": True}, "nothing to resume"),
        ((model(block_size=10**6), settings()), {}, "too few for one block"),
        ((model(), settings(dtype="float16")), {}, "float16 needs CUDA"),
        ((model(), settings(parallel="tp")), {"world_size": 3}, "--tp 3 does not divide n_head"),
        ((model(), settings(parallel="fsdp", optimizer="muon")), {},
         "does not support optimizer muon"),
    ]:
        with pytest.raises(UsageError, match=message):
            plan_run(*args, data, run, **kw)
        assert not run.exists()
    with pytest.raises(UsageError, match="already holds a run"):
        plan_run(model(), settings(), data, stopped_run)
    plan = plan_run(model(), settings(), data, stopped_run, overwrite=True)
    assert plan.overwrite and plan.mode == FRESH  # replaced only once it runs


def test_precision_is_resolved_into_a_new_plan(data, tmp_path):
    plan = plan_run(model(), settings(dtype="auto"), data, tmp_path)
    resolved, reasons = with_precision(plan, Dist())
    assert resolved.train_config.dtype == "float32"  # GPTLAB_AUTO_DTYPE (conftest.py)
    assert plan.train_config.dtype == "auto"  # the plan it came from is as it was
    assert any("GPTLAB_AUTO_DTYPE" in line for line in reasons)
    assert dataclasses.replace(resolved, train_config=plan.train_config) == plan
    concrete = plan_run(model(), settings(dtype="float32"), data, tmp_path)
    assert with_precision(concrete, Dist()) == (concrete, [])
