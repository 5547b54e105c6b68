"""The trainer: schedule, optimizer groups, exact resume, signals, divergence, bad input."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from gptlab import model_dir
from gptlab.cli.main import main
from gptlab.errors import GptlabError, UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training import rundir
from gptlab.training.callbacks import StopAfter
from gptlab.training.config import TrainConfig
from gptlab.training.optim import make_optimizer
from gptlab.training.recipes import RECIPES
from gptlab.training.run import train
from gptlab.training.schedule import lr_at

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def test_schedule_is_nanogpts():
    # nanoGPT get_lr with lr 1e-3, min 1e-4, warmup 100, decay 2000.
    args = (1e-3, 1e-4, 100, 2000)
    assert lr_at(0, *args) == pytest.approx(1e-3 * 1 / 101)
    assert lr_at(99, *args) == pytest.approx(1e-3 * 100 / 101)
    assert lr_at(100, *args) == pytest.approx(1e-3)
    assert lr_at(1050, *args) == pytest.approx(5.5e-4)  # half-way down the cosine
    assert lr_at(2000, *args) == pytest.approx(1e-4)
    assert lr_at(5000, *args) == 1e-4
    steps = [lr_at(s, *args) for s in range(100, 2001)]
    assert all(a >= b for a, b in zip(steps[:-1], steps[1:], strict=True))


def test_recipe_is_nanogpts_cpu_recipe():
    r = TrainConfig.from_dict(RECIPES["shakespeare-char-cpu"])
    assert (r.batch_size, r.learning_rate, r.min_lr, r.beta2, r.weight_decay) == (
        12, 1e-3, 1e-4, 0.99, 0.1)
    assert (r.warmup_iters, r.lr_decay_iters, r.max_iters, r.grad_clip) == (100, 2000, 2000, 1.0)
    assert (r.eval_interval, r.eval_iters, r.batch_rng) == (250, 20, "nanogpt")
    m = GPTConfig.from_preset("shakespeare-char-cpu")
    assert (m.n_layer, m.n_head, m.n_embd, m.block_size, m.bias, m.dropout) == (
        4, 4, 128, 64, False, 0.0)


def test_weight_decay_on_2d_tensors_only():
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
    opt = make_optimizer(model, TrainConfig(weight_decay=0.1), torch.device("cpu"))
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decay["params"])
    assert all(p.dim() == 1 for p in no_decay["params"]) and no_decay["params"]
    n = sum(p.numel() for g in opt.param_groups for p in g["params"])
    assert n == model.num_parameters()  # every parameter once (the tied one too)


@pytest.mark.parametrize("kw, message", [
    (dict(learning_rate=0.0), "learning_rate must be > 0"),
    (dict(batch_size=0), "batch_size must be an integer >= 1"),
    (dict(warmup_iters=50, max_iters=10), "warmup_iters (50) must not exceed max_iters (10)"),
    (dict(min_lr=1.0), "min_lr must be in [0, learning_rate"),
    (dict(beta2=1.0), "beta2 must be in [0, 1)"),
    (dict(dtype="fp8"), "dtype must be one of"),
])
def test_invalid_settings(kw, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        TrainConfig(**kw)


def test_run_directory_and_learning(data_dir, tmp_path, tiny_model, tiny_train, losses):
    run = tmp_path / "run"
    result = train(tiny_model(), tiny_train(max_iters=30, eval_interval=15, learning_rate=3e-3),
                   data_dir, run, progress=False)
    assert result.status == "finished" and result.step == 30
    for name in ("config.json", "train.json", "model.safetensors", "state.pt",
                 "tokenizer.json", "metrics.jsonl", "loss.png", "best/model.safetensors",
                 "best/config.json", "best/tokenizer.json"):
        assert (run / name).is_file(), name
    evals = [r for r in losses(run) if r[0] == "eval"]
    assert [r[1] for r in evals] == [0, 15, 30]
    assert evals[-1][5] < evals[0][5] - 0.5  # it learned (from ~ln(vocab))
    assert evals[0][5] == pytest.approx(math.log(model_dir.load_config(run).vocab_size),
                                        abs=0.3)
    vocab = json.loads((data_dir / "meta.json").read_text())["vocab_size"]
    assert json.loads((run / "config.json").read_text())["vocab_size"] == vocab != 1
    assert (run / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    best = model_dir.load_model(run / "best")
    assert rundir.weights_step(run / "best/model.safetensors") == 30
    assert best.config == model_dir.load_config(run)
    state = torch.load(run / "state.pt", weights_only=True)
    assert state["step"] == 30 and state["best_val"] == pytest.approx(result.best_val_loss)


@pytest.mark.parametrize("batch_rng", ["separate", "nanogpt"])
@pytest.mark.parametrize("stop_at", [4, 7])  # at a checkpoint step, and between two
def test_resume_reproduces_the_uninterrupted_run(data_dir, tmp_path, stop_at, batch_rng,
                                                 tiny_model, tiny_train, losses):
    # dropout > 0 and accumulation: the dropout RNG and batch RNG must both come back
    # (and, for the shared nanoGPT stream, the batch drawn ahead).
    model = tiny_model(dropout=0.1)
    cfg = tiny_train(gradient_accumulation_steps=2, batch_rng=batch_rng)
    whole = train(model, cfg, data_dir, tmp_path / "whole", progress=False)
    part = train(model, cfg, data_dir, tmp_path / "part", progress=False,
                 callbacks=StopAfter(stop_at))
    assert part.status == "interrupted" and part.step == stop_at
    assert torch.load(tmp_path / "part/state.pt", weights_only=True)["step"] == stop_at
    resumed = train(None, None, data_dir, tmp_path / "part", resume=True, progress=False)
    assert resumed.step == whole.step == 12
    assert losses(tmp_path / "part") == losses(tmp_path / "whole")  # exactly, every value
    a = model_dir.load_model(tmp_path / "whole").state_dict()
    b = model_dir.load_model(tmp_path / "part").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_without_eval_at_start_the_first_evaluation_follows_training(data_dir, tmp_path,
                                                                     tiny_model, tiny_train,
                                                                     losses):
    cfg = tiny_train(eval_at_start=False)
    whole = train(tiny_model(), cfg, data_dir, tmp_path / "whole", progress=False)
    evals = [r[1] for r in losses(tmp_path / "whole") if r[0] == "eval"]
    assert evals == [4, 8, 12] and whole.val_loss is not None  # no step 0: 12 steps, every 4
    # and a run stopped before its first evaluation resumes to the same losses
    part = train(tiny_model(), cfg, data_dir, tmp_path / "part", progress=False,
                 callbacks=StopAfter(2))
    assert part.status == "interrupted" and part.best_val_loss is None
    assert not torch.load(tmp_path / "part/state.pt", weights_only=True)["eval_pending"]
    train(None, None, data_dir, tmp_path / "part", resume=True, progress=False)
    assert losses(tmp_path / "part") == losses(tmp_path / "whole")


def test_resume_can_extend_max_iters(data_dir, tmp_path, tiny_model, tiny_train):
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(max_iters=4, eval_interval=4), data_dir, run, progress=False)
    lr_decay = json.loads((run / "train.json").read_text())["lr_decay_iters"]
    result = train(None, None, data_dir, run, resume=True, overrides={"max_iters": 8},
                   progress=False)
    assert result.step == 8
    assert json.loads((run / "train.json").read_text())["lr_decay_iters"] == lr_decay == 4
    with pytest.raises(UsageError, match="cannot change learning_rate"):
        train(None, None, data_dir, run, resume=True, overrides={"learning_rate": 1.0},
              progress=False)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(data_dir, tmp_path, monkeypatch,
                                                           tiny_model, tiny_train):
    run = tmp_path / "run"
    calls = {"n": 0}
    forward = GPT.forward

    def poisoned(self, idx, targets=None, **kw):
        logits, loss = forward(self, idx, targets, **kw)
        if targets is not None and self.training:
            calls["n"] += 1
            if calls["n"] == 7:  # the 7th training step (eval passes are not counted)
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(GPT, "forward", poisoned)
    with pytest.raises(GptlabError, match=r"the loss became nan at step 7: training stopped; "
                                          r"its last checkpoint, step 4 in .*run, has finite "
                                          r"losses and weights: resume from it with a lower"):
        train(tiny_model(), tiny_train(), data_dir, run, progress=False)
    state = rundir.load_checkpoint(run)
    assert state["step"] == 4  # the checkpoint of step 4 (eval_interval 4), untouched
    model = model_dir.load_model(run)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert rundir.divergence(run, 4)["step"] == 7  # what lets a resume lower the rate


def test_a_validation_loss_that_is_not_finite_is_never_kept(data_dir, tmp_path, monkeypatch,
                                                            tiny_model, tiny_train):
    """Issue 23, reproduction 6: an evaluation whose loss is NaN was recorded and
    checkpointed as the run's last good state. It stops the run before either."""
    run, calls, forward = tmp_path / "run", {"n": 0}, GPT.forward

    def poisoned(self, idx, targets=None, **kw):
        logits, loss = forward(self, idx, targets, **kw)
        if targets is not None and not self.training:
            calls["n"] += 1
            if calls["n"] == 7:  # evaluations of 2 + 2 batches: step 4's first val batch
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(GPT, "forward", poisoned)
    with pytest.raises(GptlabError, match="the val loss at evaluation became nan at step 4: "
                                          "training stopped; its last checkpoint, step 0 in"):
        train(tiny_model(), tiny_train(), data_dir, run, progress=False)
    state = rundir.load_checkpoint(run)
    assert state["step"] == 0 and state["eval_pending"]  # not step 4's
    assert state["best_val"] == math.inf  # step 0's checkpoint precedes its evaluation
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0] and math.isfinite(evals[0]["val_loss"])
    assert records[-1]["kind"] == "diverged" and records[-1]["checkpoint_step"] == 0
    assert rundir.weights_step(run / "best" / "model.safetensors") == 0


def test_a_huge_learning_rate_says_what_works_and_the_resume_it_names_does(data_dir, tmp_path,
                                                                           capsys):
    """Issue 23, reproduction 6: --learning-rate 1e30 kept step 1 as "the last good
    checkpoint" (val NaN, weights ~1e29), and --resume refused a new learning rate. The
    checkpoint kept is the last finite one, and the command the error gives runs."""
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", "--preset", "tiny-gpt2", "--data", str(data_dir),
                           "--out", str(run), "--learning-rate", "1e30", "--max-iters", "6",
                           "--warmup-iters", "0", "--eval-interval", "1", "--eval-iters", "1",
                           "--no-progress")
    assert code == 1 and "Traceback" not in err
    line = err.splitlines()[-1]
    state = rundir.load_checkpoint(run)
    assert f"its last checkpoint, step {state['step']} in {run}, has finite losses" in line
    assert all(torch.isfinite(t).all() for t in state["model"].values())
    assert all(math.isfinite(r.get("val_loss", 0)) for r in map(
        json.loads, (run / "metrics.jsonl").read_text().splitlines()))
    command = line.split("resume from it with a lower learning rate: ")[1]
    assert command == (f"gptlab train --data {data_dir} --out {run} --resume "
                       f"--learning-rate 0.001")
    code, _, err = run_cli(capsys, *command.split()[1:], "--no-progress")
    assert code == 0, err
    assert "resuming with learning_rate 1e+30 -> 0.001" in err
    assert f"the run diverged at step {state['step'] + 1}" in err
    assert rundir.load_checkpoint(run)["step"] == 6
    assert json.loads((run / "train.json").read_text())["learning_rate"] == 0.001
    # it did not diverge since: the rate is the run's again
    code, _, err = run_cli(capsys, "train", "--data", str(data_dir), "--out", str(run),
                           "--resume", "--max-iters", "8", "--learning-rate", "0.01",
                           "--no-progress")
    assert code == 2 and "cannot change --learning-rate" in err


def test_bf16_autocast_on_cpu(data_dir, tmp_path, tiny_model, tiny_train):
    result = train(tiny_model(), tiny_train(max_iters=4, dtype="bfloat16"), data_dir,
                   tmp_path / "run", progress=False)
    assert math.isfinite(result.val_loss)
    with pytest.raises(UsageError, match="float16 needs CUDA"):
        train(tiny_model(), tiny_train(max_iters=4, dtype="float16", device="cpu"), data_dir,
              tmp_path / "run2", progress=False)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_trains_from_preset_with_overrides(data_dir, tmp_path, capsys):
    run = tmp_path / "run"
    code, out, err = run_cli(
        capsys, "train", "--preset", "shakespeare-char-cpu", "--n-layer", "1", "--n-embd",
        "32", "--block-size", "16", "--dropout", "0.1", "--data", str(data_dir), "--out",
        str(run), "--max-iters", "3", "--warmup-iters", "1", "--eval-iters", "1",
        "--batch-size", "2", "--no-progress")
    assert code == 0, err
    assert f"sample from it: gptlab sample {run}" in out
    cfg = json.loads((run / "config.json").read_text())
    assert (cfg["n_layer"], cfg["n_embd"], cfg["block_size"], cfg["dropout"]) == (1, 32, 16, 0.1)
    settings = json.loads((run / "train.json").read_text())
    # the recipe named like the preset, then the flags; decay follows the new max_iters
    assert (settings["beta2"], settings["max_iters"], settings["lr_decay_iters"]) == (0.99, 3, 3)
    assert (settings["batch_size"], settings["eval_iters"]) == (2, 1)


@pytest.mark.parametrize("argv, message", [
    (["--preset", "tiny-gpt2", "--data", "{tmp}/nodata"], "data directory not found"),
    # the CLI says the flags where the library names its parameters
    (["--preset", "tiny-gpt2", "--learning-rate", "-1"], "--learning-rate must be > 0"),
    (["--preset", "tiny-gpt2", "--batch-size", "0"], "--batch-size must be an integer >= 1"),
    (["--preset", "tiny-gpt2", "--max-iters", "5", "--warmup-iters", "9"],
     "--warmup-iters (9) must not exceed --max-iters (5)"),
    (["--preset", "nope"], "unknown preset 'nope'"),
    (["--preset", "tiny-gpt2", "--recipe", "nope"], "unknown recipe 'nope'"),
    (["--preset", "tiny-gpt2", "--n-head", "3"],
     "--n-embd (32) must be divisible by --n-head (3)"),
    (["--resume"], "nothing to resume: run directory"),
    (["--resume", "--preset", "tiny-gpt2"], "--resume reads the model and training settings"),
    (["--data", "{data}"], "give --preset NAME, --config JSON or --init-from MODEL"),
    (["--preset", "tiny-gpt2", "--block-size", "5000"], "too few for one block of 5,000"),
])
def test_cli_bad_input(data_dir, tmp_path, capsys, argv, message):
    argv = [a.format(tmp=tmp_path, data=data_dir) for a in argv]
    if "--data" not in argv:
        argv += ["--data", str(data_dir)]
    out_dir = tmp_path / "run"
    code, out, err = run_cli(capsys, "train", *argv, "--out", str(out_dir), "--no-progress")
    assert code == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert not out_dir.exists()  # nothing half-written


def test_cli_refuses_to_overwrite_or_resume_a_broken_run(data_dir, tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--preset", "tiny-gpt2", "--data", str(data_dir), "--out", str(run),
            "--max-iters", "2", "--warmup-iters", "0", "--eval-iters", "1", "--batch-size", "2",
            "--no-progress"]
    assert run_cli(capsys, *args)[0] == 0
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and "already holds a training run" in err and "--resume" in err
    (run / "state.pt").write_bytes(b"not a state")
    code, _, err = run_cli(capsys, "train", "--data", str(data_dir), "--out", str(run),
                           "--resume", "--no-progress")
    assert code == 2 and "is not a readable training state" in err and err.count("\n") == 1
    (run / "state.pt").unlink()
    code, _, err = run_cli(capsys, "train", "--data", str(data_dir), "--out", str(run),
                           "--resume", "--no-progress")
    assert code == 2 and "nothing to resume" in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_saves_a_checkpoint_and_exits_0(data_dir, tmp_path, sig):
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "gptlab", "train", "--preset", "tiny-gpt2", "--data",
           str(data_dir), "--out", str(run), "--max-iters", "100000", "--warmup-iters", "0",
           "--eval-interval", "100000", "--eval-iters", "1", "--log-interval", "1",
           "--batch-size", "2", "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            metrics = run / "metrics.jsonl"
            if metrics.is_file() and '"kind": "train"' in metrics.read_text():
                break
            time.sleep(0.1)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "stopped at step" in out and "--resume" in out and "Traceback" not in err
    state = rundir.load_checkpoint(run)  # weights and state agree
    assert state["step"] >= 1


def test_one_layer_and_one_head_are_said_in_the_singular(data_dir, tmp_path, tiny_train, capsys):
    from gptlab.model.config import GPTConfig

    one = GPTConfig(vocab_size=1, block_size=16, n_layer=1, n_head=1, n_embd=16)
    train(one, tiny_train(max_iters=1, warmup_iters=0, eval_iters=1), data_dir, tmp_path / "run",
          progress=False)
    assert "training 1 layer, 1 head, n_embd 16" in capsys.readouterr().err


def test_a_bf16_run_looks_under_bf16_and_its_stop_is_met_in_float32_too(
        data_dir, tmp_path, capsys, one_thread, tiny_model, tiny_train):
    """--dtype bfloat16 with --stop-at-val: the looks run under the same autocast (and say
    so), and the weights saved where the run stopped meet the target as `gptlab eval`
    scores them, in float32."""
    from gptlab.data.prepared import load_data
    from gptlab.inference.evaluate import score_ids

    result = train(tiny_model(), tiny_train(max_iters=60, eval_interval=1000,
                                            dtype="bfloat16", stop_at_val=3.0),
                   data_dir, tmp_path / "run", progress=False)
    assert result.target_step is not None and result.whole_val_loss <= 3.0
    records = [json.loads(r) for r in (tmp_path / "run" / "metrics.jsonl").read_text()
               .splitlines()]
    looks = [r for r in records if r["kind"] == "val_target"]
    assert looks and all(r["autocast"] == "bfloat16" for r in looks)
    whole = next(r for r in records if r["kind"] == "whole_val")
    assert whole["autocast"] == looks[-1]["whole_autocast"]
    assert "under bfloat16 autocast" in capsys.readouterr().err
    nll, scored = score_ids(model_dir.load_model(tmp_path / "run"),
                            torch.from_numpy(load_data(data_dir).val.astype("int64")))
    assert nll / scored <= 3.0
    assert nll / scored == pytest.approx(result.whole_val_loss, abs=1e-2)


def test_a_target_first_met_by_the_ends_whole_score_is_met_at_the_last_step(
        data_dir, tmp_path, one_thread, tiny_model, tiny_train):
    """No look falls before max_iters (the end scores the whole split anyway): a whole val
    loss at or under the target there is the target met, at the last step."""
    met = train(tiny_model(), tiny_train(max_iters=5, stop_at_val=100.0), data_dir,
                tmp_path / "met", progress=False)
    assert met.whole_val_loss <= 100.0 and met.target_step == 5
    missed = train(tiny_model(), tiny_train(max_iters=5, stop_at_val=0.01), data_dir,
                   tmp_path / "missed", progress=False)
    assert missed.whole_val_loss > 0.01 and missed.target_step is None
