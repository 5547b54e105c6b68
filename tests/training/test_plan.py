"""The plan of a train() call (gptlab.training.plan), built for each mode without training
anything: its fields, and every refusal made before the run directory is touched."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from gptlab import model_dir
from gptlab.data.prepared import load_data
from gptlab.distributed.layout import Layout
from gptlab.distributed.process import Dist
from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training import rundir
from gptlab.training.config import TrainConfig
from gptlab.training.plan import (
    FINE_TUNE,
    FRESH,
    RESUME,
    ResumePoint,
    check_settings,
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
    return TrainConfig.from_dict({**dict(batch_size=4, max_iters=8, warmup_iters=1, seed=7,
                                         device="cpu"), **over})


@pytest.fixture
def stopped_run(data, tmp_path) -> Path:
    """A run directory as a run stopped at step 3 leaves it, written without training."""
    run = tmp_path / "stopped"
    config = model(vocab_size=data.vocab_size)
    run.mkdir()
    rundir.start(run, data.directory, settings().to_dict(), config.to_dict())
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
    # the plan carries the opened data down: its tokens (nothing reads the directory again)
    # and the directory it was given, not one worked out from a file inside it
    assert plan.data.train is data.train and plan.data.val is data.val
    assert plan.data.directory == data.directory
    assert plan.data.fingerprint == data.fingerprint()
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
    ({"parallel": "fsdp"}, "resume it with parallel ddp"),
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
    with pytest.raises(UsageError, match="already holds a training run"):
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
    concrete = plan_run(model(), settings(dtype="float32", attention_dtype="autocast"), data,
                        tmp_path)
    assert with_precision(concrete, Dist()) == (concrete, [])


def _rewrite(run: Path, **changes) -> None:
    saved = json.loads((run / "train.json").read_text())
    (run / "train.json").write_text(json.dumps({**saved, **changes}))


def test_what_a_resume_changes_is_allowed_by_what_it_could_break(data, stopped_run):
    before = files(stopped_run)
    plan = plan_run(None, None, data, stopped_run, resume=True, overrides={
        "eval_interval": 2, "log_interval": 5, "checkpoint_interval": 7, "whole_val": False,
        "learning_rate": 1e-3, "seed": 7})  # the last two: the values it has
    assert plan.changes == ("resuming with eval_interval 250 -> 2, log_interval 10 -> 5, "
                            "checkpoint_interval 250 -> 7, whole_val True -> False",)
    assert (plan.train_config.eval_interval, plan.train_config.checkpoint_interval) == (2, 7)
    assert files(stopped_run) == before  # a plan writes nothing
    _rewrite(stopped_run, batch_rng="nanogpt")  # its evaluations draw from the training stream
    with pytest.raises(UsageError, match="cannot change eval_iters on resume: with batch_rng "
                                         "nanogpt"):
        plan_run(None, None, data, stopped_run, resume=True, overrides={"eval_iters": 3})
    _rewrite(stopped_run, batch_rng="separate", warmup_iters=6)
    with pytest.raises(UsageError, match="the run warms up for 6 steps: max_iters 4 would end "
                                         "it inside its warm-up; give at least 6"):
        plan_run(None, None, data, stopped_run, resume=True, overrides={"max_iters": 4})
    with pytest.raises(UsageError, match="cannot change learning_rate .*may change only after "
                                         "the run diverged"):
        plan_run(None, None, data, stopped_run, resume=True, overrides={"learning_rate": 1e-4})
    with open(stopped_run / "metrics.jsonl", "a") as f:  # what a diverged run logs last
        f.write(json.dumps({"kind": "diverged", "step": 5, "checkpoint_step": 3}) + "\n")
    plan = plan_run(None, None, data, stopped_run, resume=True,
                    overrides={"learning_rate": 1e-4, "min_lr": 1e-5})
    assert plan.train_config.learning_rate == 1e-4
    assert plan.changes[-1] == ("the run diverged at step 5; it continues from its checkpoint "
                                "of step 3 with the new settings")


@pytest.mark.parametrize("saved, world, overrides, expected, said", [
    # a tensor-parallel run of 2 ranks on 1 process: its width does not fit, nor need it
    (dict(parallel="tp", tp=2, batch_size=8), 1, {}, Layout("tp", 1, 1),
     "tensor-parallel width 2 -> 1: the run's width does not fit 1 process"),
    (dict(parallel="tp", tp=2, batch_size=8), 1, {"parallel": "fsdp"}, Layout("fsdp", 1, 1),
     "tensor-parallel width 2 -> 1"),
    # 2 FSDP ranks of 4 on 1 process: 8 sequences per step, as before
    (dict(parallel="fsdp", batch_size=4, data_ranks=2), 1, {}, Layout("fsdp", 1, 1),
     "batch_size 4 -> 8 per process, keeping the run's global batch of 8 over 1 data-parallel "
     "rank"),
])
def test_a_sharded_run_resumes_on_any_ranks_naming_no_flag_not_given(
        data, stopped_run, saved, world, overrides, expected, said):
    data_ranks = saved.pop("data_ranks", 1)
    _rewrite(stopped_run, **saved)
    state = rundir.load_checkpoint(stopped_run)
    state.update(sharded="shards-3-x", data_ranks=data_ranks)
    torch.save({k: v for k, v in state.items() if k != "model"}, stopped_run / "state.pt")
    plan = plan_run(None, None, data, stopped_run, resume=True, overrides=overrides,
                    world_size=world)
    assert plan.layout == expected and plan.train_config.batch_size == 8
    assert any(said in line for line in plan.changes), plan.changes
    if data_ranks == 2:  # a --batch-size given that breaks the global batch is named
        with pytest.raises(UsageError, match="global batch of 8 sequences .*give batch_size 8"):
            plan_run(None, None, data, stopped_run, resume=True, overrides={"batch_size": 2},
                     world_size=world)


def test_a_run_saved_before_attention_dtype_resumes_with_autocasts_attention(data,
                                                                           stopped_run):
    saved = json.loads((stopped_run / "train.json").read_text())
    assert saved["speed"]["attention_dtype"] == "auto"  # as settings() left it
    plan = plan_run(None, None, data, stopped_run, resume=True)
    assert plan.train_config.speed.attention_dtype == "auto"  # resolved later, as a fresh run's
    del saved["speed"]["attention_dtype"]
    (stopped_run / "train.json").write_text(json.dumps(saved))
    plan = plan_run(None, None, data, stopped_run, resume=True)
    assert plan.train_config.speed.attention_dtype == "autocast"


# One layer, 4 heads sharing 2 key/value heads: what a sharded mode's refusals are about.
SHARDABLE = GPTConfig(vocab_size=30, block_size=16, n_layer=1, n_head=4, n_kv_head=2,
                      n_embd=32, bias=False)
SHARDABLE_WITH_DROPOUT = GPTConfig.from_dict({**SHARDABLE.to_dict(), "dropout": 0.1})


@pytest.mark.parametrize("settings, config, message", [
    (dict(parallel="fsdp", compile=True), SHARDABLE, "does not support compile"),
    (dict(parallel="fsdp", dtype="float16"), SHARDABLE, "does not support dtype float16"),
    (dict(parallel="tp", tp=2, optimizer="muon"), SHARDABLE, "does not support optimizer muon"),
    (dict(parallel="tp", batch_rng="nanogpt"), SHARDABLE, "does not support batch_rng nanogpt"),
    (dict(parallel="tp"), SHARDABLE_WITH_DROPOUT, "needs dropout 0"),
    (dict(parallel="tp"), GPTConfig.from_dict({**SHARDABLE.to_dict(), "pos_encoding": "alibi"}),
     "does not support pos_encoding 'alibi'"),
])
def test_settings_a_sharded_mode_lacks_are_refused_by_name(settings, config, message):
    world = 2 if settings["parallel"] == "tp" else 1
    with pytest.raises(UsageError, match=message):
        check_settings(TrainConfig.from_dict(settings), config, world)
