"""Run directories: never stuck, one writer, nothing overwritten by mistake.

A run is interrupted at every kind of moment (before its first step, mid-evaluation,
mid-checkpoint, killed between two checkpoint files) and each is resumed: the resumed run's
logged losses equal the uninterrupted run's, value for value.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from gptlab import model_dir
from gptlab.cli.main import main
from gptlab.data import prepared
from gptlab.data.batches import TokenBatches
from gptlab.data.prepared import prepare
from gptlab.data.tokenizer import CharTokenizer, load_tokenizer
from gptlab.errors import UsageError
from gptlab.files import kinds
from gptlab.model.gpt import GPT
from gptlab.training import rundir
from gptlab.training.callbacks import StopAfter
from gptlab.training.config import recipe
from gptlab.training.run import train

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def whole(data_dir, tmp_path_factory, one_thread_module, tiny_model, tiny_train):
    """The uninterrupted run every interrupted one is compared with (on one thread, as
    the tests run: module fixtures are set up before one_thread, and the thread count
    changes float sums in the last bits)."""
    run = tmp_path_factory.mktemp("whole") / "run"
    train(tiny_model(dropout=0.1), tiny_train(), data_dir, run, progress=False)
    return run


def interrupt_self() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends; the trainer's handler takes it


@pytest.fixture(scope="session")
def resume_and_compare(losses):
    """resume_and_compare(data_dir, run, whole): resume run to the end; its logged losses
    must be the uninterrupted run's, value for value."""
    def check(data_dir: Path, run: Path, whole: Path) -> None:
        result = train(None, None, data_dir, run, resume=True, progress=False)
        assert result.status == "finished" and result.step == 12
        assert losses(run) == losses(whole)

    return check


def test_interrupted_before_the_first_step(data_dir, whole, tmp_path, monkeypatch, tiny_model,
                                           tiny_train, losses, resume_and_compare):
    run = tmp_path / "run"
    load = prepared.load_data

    def load_then_ctrl_c(path):
        interrupt_self()  # arrives while the run is still being set up
        return load(path)

    monkeypatch.setattr(prepared, "load_data", load_then_ctrl_c)
    result = train(tiny_model(dropout=0.1), tiny_train(), data_dir, run, progress=False)
    monkeypatch.undo()
    assert (result.status, result.step) == ("interrupted", 0)
    assert rundir.load_checkpoint(run)["step"] == 0
    assert not [r for r in losses(run) if r[0] == "train"]
    resume_and_compare(data_dir, run, whole)


@pytest.mark.parametrize("eval_call", [1, 6])  # in step 0's evaluation, and step 4's (val)
def test_interrupted_mid_evaluation(data_dir, whole, tmp_path, monkeypatch, eval_call, tiny_model,
                                    tiny_train, resume_and_compare):
    run = tmp_path / "run"
    calls = {"n": 0}
    eval_batch = TokenBatches.eval_batch

    def counting(self, split, index):
        calls["n"] += 1
        if calls["n"] == eval_call:
            interrupt_self()
        return eval_batch(self, split, index)

    monkeypatch.setattr(TokenBatches, "eval_batch", counting)
    result = train(tiny_model(dropout=0.1), tiny_train(), data_dir, run, progress=False)
    monkeypatch.undo()
    assert result.status == "interrupted"
    state = rundir.load_checkpoint(run)
    assert state["eval_pending"] and state["step"] == result.step
    resume_and_compare(data_dir, run, whole)  # the evaluation is run again first


def test_interrupted_mid_checkpoint_write(data_dir, whole, tmp_path, monkeypatch, tiny_model,
                                          tiny_train, resume_and_compare):
    run = tmp_path / "run"
    save_model = model_dir.save_model

    def ctrl_c_while_saving(model, out_dir, metadata=None):
        if metadata == rundir.weights_metadata(4) and Path(out_dir) == run:
            interrupt_self()
        save_model(model, out_dir, metadata=metadata)

    monkeypatch.setattr(model_dir, "save_model", ctrl_c_while_saving)
    result = train(tiny_model(dropout=0.1), tiny_train(), data_dir, run, progress=False)
    monkeypatch.undo()
    assert (result.status, result.step) == ("interrupted", 4)
    resume_and_compare(data_dir, run, whole)


def test_killed_between_the_two_checkpoint_files(data_dir, whole, tmp_path, monkeypatch,
                                                 tiny_model, tiny_train, resume_and_compare):
    """state.pt of step 8 written, the process dies before model.safetensors follows."""
    run = tmp_path / "run"
    save_model = model_dir.save_model

    def dies_at_step_8(model, out_dir, metadata=None):
        if metadata == rundir.weights_metadata(8) and Path(out_dir) == run:
            raise SystemExit("killed")
        save_model(model, out_dir, metadata=metadata)

    monkeypatch.setattr(model_dir, "save_model", dies_at_step_8)
    with pytest.raises(SystemExit):
        train(tiny_model(dropout=0.1), tiny_train(), data_dir, run, progress=False)
    monkeypatch.undo()
    assert rundir.weights_step(run / "model.safetensors") == 4
    assert rundir.load_checkpoint(run)["step"] == 8
    resume_and_compare(data_dir, run, whole)


def test_killed_after_step_0s_evaluation_was_logged(data_dir, whole, tmp_path, monkeypatch,
                                                    tiny_model, tiny_train, resume_and_compare):
    """Step 0's checkpoint is saved before its evaluation: a kill after the evaluation is
    logged and before the next checkpoint must not leave it logged twice once resumed
    (bench/faults.py found the duplicate)."""
    run = tmp_path / "run"
    log = rundir.RunFiles.log

    def killed_after_eval_0(self, record):
        log(self, record)
        if record["kind"] == "eval" and record["step"] == 0:
            raise SystemExit("killed")

    monkeypatch.setattr(rundir.RunFiles, "log", killed_after_eval_0)
    monkeypatch.setattr(rundir, "clear", lambda run_dir: None)  # a kill cleans nothing up
    with pytest.raises(SystemExit):
        train(tiny_model(dropout=0.1), tiny_train(), data_dir, run, progress=False)
    monkeypatch.undo()
    assert rundir.load_checkpoint(run)["eval_pending"]
    resume_and_compare(data_dir, run, whole)


@pytest.mark.slow  # seconds (a process, a timed-out body, 30 runs): make test, not make check
def test_ctrl_c_in_a_real_process_at_its_first_file(data_dir, tmp_path, capsys):
    """As a user would: Ctrl-C as soon as the run directory appears."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "gptlab", "train", "--preset", "tiny-gpt2", "--data",
           str(data_dir), "--out", str(run), "--max-iters", "100000", "--warmup-iters", "0",
           "--eval-iters", "50", "--batch-size", "2", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not run.exists():
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "stopped at step 0" in out and "Traceback" not in err
    args = ["train", "--data", str(data_dir), "--out", str(run), "--resume", "--no-progress"]
    assert main([*args, "--max-iters", "3", "--learning-rate", "0.5"]) == 2  # the run's own
    assert "cannot change --learning-rate" in capsys.readouterr().err
    assert main([*args, "--max-iters", "2"]) == 0  # max_iters may change
    assert rundir.load_checkpoint(run)["step"] == 2


def test_a_run_that_never_checkpointed_can_start_afresh(data_dir, tmp_path, capsys):
    run = tmp_path / "run"
    kinds.mark(run, "run", "train")  # a run's first file
    for name in ("train.json", "tokenizer.json", "metrics.jsonl"):  # what a crash left
        (run / name).write_text("{}")
    args = ["train", "--data", str(data_dir), "--out", str(run), "--no-progress"]
    assert main([*args, "--resume"]) == 2
    assert "start it afresh without --resume" in capsys.readouterr().err
    assert main([*args, "--preset", "tiny-gpt2", "--max-iters", "2", "--eval-iters", "1"]) == 0
    assert rundir.load_checkpoint(run)["step"] == 2


def test_a_folder_of_the_users_own_files_is_never_taken_for_a_run(data_dir, tmp_path, capsys,
                                                                 tree):
    """Issue 23, reproduction 4: the user's own config.json, train.json and metrics.jsonl
    (no mark, no checkpoint, no weights) were taken for a crashed run's leftovers and
    replaced. They are the user's: refused, resumed or not, --force or not."""
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("config.json", "train.json", "metrics.jsonl"):
        (mine / name).write_text(f'{{"my own": "{name}"}}\n')
    before = tree(mine)
    args = ["train", "--data", str(data_dir), "--out", str(mine), "--no-progress"]
    for extra in (["--resume"], ["--preset", "tiny-gpt2", "--max-iters", "2"],
                  ["--preset", "tiny-gpt2", "--max-iters", "2", "--force"]):
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert "holds files gptlab did not write (config.json, metrics.jsonl, train.json)" \
            in err and err.count("\n") == 1
        assert tree(mine) == before


def test_a_model_directory_is_not_overwritten_by_a_run(data_dir, tmp_path, capsys, tiny_model):
    converted = tmp_path / "converted"
    model_dir.save_model(GPT(tiny_model()), converted)
    before = {p.name: p.read_bytes() for p in converted.iterdir()}
    for force in ([], ["--force"]):
        code = main(["train", "--preset", "tiny-gpt2", "--data", str(data_dir), "--out",
                     str(converted), "--max-iters", "2", "--no-progress", *force])
        assert code == 2 and "is a model directory (config.json, model.safetensors): give " \
            "the run a folder of its own" in capsys.readouterr().err
        assert {p.name: p.read_bytes() for p in converted.iterdir()} == before


def test_the_data_directory_as_out_is_refused_before_anything(data_dir, tmp_path, capsys,
                                                              tree):
    """Issue 23, reproduction 1: `train --data D --out D` deleted D/tokenizer.json, then
    failed, leaving the data unusable and a .lock behind."""
    data = tmp_path / "d"
    shutil.copytree(data_dir, data)
    before = tree(data)
    for extra in ([], ["--force"]):
        code = main(["train", "--preset", "tiny-gpt2", "--data", str(data), "--out",
                     str(data), "--max-iters", "2", "--no-progress", *extra])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1
        assert f"{data} is a data directory (meta.json, tokenizer.json, train.bin, " \
               f"val.bin): give the run a folder of its own" in err
        assert tree(data) == before and not (data / ".lock").exists()
    prepared.load_data(data)  # still whole


def test_a_run_whose_checkpoint_is_gone_keeps_its_weights(data_dir, tmp_path, capsys,
                                                         tiny_model, tiny_train, tree):
    """Issue 23, reproduction 3: a run without state.pt at step 8, with best/, was said to
    have stopped before its first checkpoint, and "start it afresh" replaced the model,
    best/ and the metrics. Now the message says what is true and offers what works."""
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(max_iters=8), data_dir, run, progress=False)
    (run / "state.pt").unlink()
    before = tree(run)
    capsys.readouterr()
    args = ["train", "--data", str(data_dir), "--no-progress"]
    assert main([*args, "--out", str(run), "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"nothing to resume: {run} has no state.pt, so its checkpoint (step, optimizer " \
           f"and random states) is gone; its weights (model.safetensors, step 8) and best/ " \
           f"(the best weights, step 8) are still there" in err
    assert f"--init-from {run}" in err and "afresh" not in err and err.count("\n") == 1
    assert main([*args, "--out", str(run), "--preset", "tiny-gpt2", "--max-iters", "2"]) == 2
    err = capsys.readouterr().err
    assert "already holds a training run (best/, model.safetensors): fine-tune from its " \
           f"weights into another folder with --init-from {run}, or replace it with --force" \
           in err
    assert tree(run) == before
    # what the messages offer works
    assert main([*args, "--out", str(tmp_path / "tuned"), "--init-from", str(run),
                 "--max-iters", "2", "--eval-iters", "1"]) == 0
    assert tree(run) == before
    assert main([*args, "--out", str(run), "--preset", "tiny-gpt2", "--max-iters", "2",
                 "--eval-iters", "1", "--force"]) == 0
    assert rundir.load_checkpoint(run)["step"] == 2


# --- one writer -----------------------------------------------------------------------------

def test_a_second_trainer_fails_at_once_naming_the_first(data_dir, tmp_path, capsys,
                                                         lock_held):
    run = tmp_path / "run"
    with lock_held(run) as holder:
        code = main(["train", "--preset", "tiny-gpt2", "--data", str(data_dir), "--out",
                     str(run), "--max-iters", "2", "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1
        assert f"{run} is in use by another trainer (PID {holder.pid})" in err
        assert not (run / "train.json").exists()
    # The lock went with the process that held it: no stale lock to clean up.
    assert main(["train", "--preset", "tiny-gpt2", "--data", str(data_dir), "--out",
                 str(run), "--max-iters", "2", "--eval-iters", "1", "--no-progress"]) == 0


# --- settings that would have left a dead end -----------------------------------------------


def test_resume_refuses_to_shrink_a_run(data_dir, tmp_path, capsys, tiny_model, tiny_train):
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(max_iters=8), data_dir, run, progress=False)
    settings = (run / "train.json").read_bytes()
    code = main(["train", "--data", str(data_dir), "--out", str(run), "--resume",
                 "--max-iters", "4", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "is at step 8 already" in err and "at least 8" in err
    assert (run / "train.json").read_bytes() == settings


def test_float16_on_a_cpu_leaves_no_run_behind(data_dir, tmp_path, capsys):
    run = tmp_path / "run"
    code = main(["train", "--preset", "tiny-gpt2", "--data", str(data_dir), "--out", str(run),
                 "--dtype", "float16", "--device", "cpu", "--no-progress"])
    assert code == 2 and "float16 needs CUDA" in capsys.readouterr().err
    assert not run.exists()


@pytest.mark.parametrize("damage", ["token id", "meta vocab"])
def test_token_ids_past_the_vocabulary_are_refused_at_load(tmp_path, damage, tiny_model,
                                                           tiny_train, make_data):
    d = make_data(tmp_path / "d", n_chars=3_000)
    meta = json.loads((d / "meta.json").read_text())
    if damage == "token id":
        ids = np.fromfile(d / "val.bin", dtype=np.uint16)
        ids[5] = meta["vocab_size"]
        ids.tofile(d / "val.bin")
        message = f"val.bin holds token id {meta['vocab_size']}"
    else:
        (d / "meta.json").write_text(json.dumps({**meta, "vocab_size": 3}))
        message = "but meta.json says the vocabulary has 3 ids"
    with pytest.raises(UsageError, match=message):
        prepared.load_data(d)
    with pytest.raises(UsageError, match=message):
        train(tiny_model(), tiny_train(), d, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_train_json_that_is_not_an_object(data_dir, tmp_path, capsys, tiny_model, tiny_train):
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(max_iters=2), data_dir, run, progress=False)
    (run / "train.json").write_text("[1, 2]")
    capsys.readouterr()
    code = main(["train", "--data", str(data_dir), "--out", str(run), "--resume",
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "train.json must hold a JSON object (training settings), not list" in err
    assert err.count("\n") == 1


def test_seed_beyond_64_bits(data_dir, tmp_path, capsys):
    code = main(["train", "--preset", "tiny-gpt2", "--data", str(data_dir), "--out",
                 str(tmp_path / "run"), "--seed", str(2**64), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "seed must be an integer in [0, 2**63)" in err


def test_a_short_run_fits_the_recipes_warmup_in_train_and_demo(data_dir, tmp_path, capsys):
    """One rule: a new --max-iters cuts the recipe's 100 warm-up steps to fit."""
    run = tmp_path / "run"
    assert main(["train", "--preset", "shakespeare-char-cpu", "--n-layer", "1", "--n-embd",
                 "16", "--block-size", "8", "--data", str(data_dir), "--out", str(run),
                 "--max-iters", "5", "--eval-iters", "1", "--no-progress"]) == 0
    settings = json.loads((run / "train.json").read_text())
    assert (settings["warmup_iters"], settings["lr_decay_iters"]) == (5, 5)
    assert recipe("shakespeare-char-cpu-fast", max_iters=5).warmup_iters == 5  # the demo's
    capsys.readouterr()
    assert main(["train", "--preset", "shakespeare-char-cpu", "--data", str(data_dir),
                 "--out", str(tmp_path / "r2"), "--max-iters", "5", "--warmup-iters", "100",
                 "--no-progress"]) == 2  # given explicitly: still refused
    assert "--warmup-iters (100) must not exceed --max-iters (5)" in capsys.readouterr().err


# --- prepare never replaces what a run needs ------------------------------------------------


def test_prepare_refuses_a_run_directory_and_another_tokenizer(data_dir, tmp_path, capsys,
                                                               tiny_model, tiny_train):
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(max_iters=2), data_dir, run, progress=False)
    text = tmp_path / "other.txt"
    text.write_text("completely different characters: 0123456789 XYZ\n" * 50)
    tokenizer = (run / "tokenizer.json").read_bytes()
    code = main(["prepare", "--input", str(text), "--out", str(run), "--force"])
    assert code == 2 and "is a training run" in capsys.readouterr().err
    assert (run / "tokenizer.json").read_bytes() == tokenizer

    other = tmp_path / "data"
    prepare("abc abc abc\n" * 100, other, CharTokenizer.from_text("abc \n"))
    before = (other / "train.bin").read_bytes()
    code = main(["prepare", "--input", str(text), "--out", str(other)])
    err = capsys.readouterr().err
    assert code == 2 and "made with another tokenizer" in err and "--force" in err
    assert (other / "train.bin").read_bytes() == before
    assert main(["prepare", "--input", str(text), "--out", str(other), "--force"]) == 0
    # The same text and tokenizer again: the same tokens, nothing replaced, no --force
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in other.iterdir()}
    capsys.readouterr()
    assert main(["prepare", "--input", str(text), "--out", str(other)]) == 0
    assert f"{other}/ already holds these tokens: unchanged" in capsys.readouterr().out
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in other.iterdir()} == before


@pytest.mark.parametrize("memory_known", [True, False])
def test_a_batch_that_cannot_fit_in_memory_is_one_line(data_dir, tmp_path, capsys, monkeypatch,
                                                       memory_known):
    """Refused by the estimate before the run folder exists (gptlab.training.footprint);
    where the machine's memory is not known, the allocator's failure is the one line."""
    from gptlab.training import footprint

    if not memory_known:
        monkeypatch.setattr(footprint, "available_memory", lambda device_type: None)
    code = main(["train", "--preset", "tiny-gpt2", "--data", str(data_dir), "--out",
                 str(tmp_path / "run"), "--batch-size", str(10**14), "--no-progress"])
    err = capsys.readouterr().err
    said = "this run needs about" if memory_known else "out of memory"
    assert code == 2 and err.splitlines()[-1].startswith(f"gptlab train: error: {said}")
    assert "Traceback" not in err
    if memory_known:
        assert not (tmp_path / "run").exists()
    else:
        assert not [p for p in (tmp_path / "run").iterdir() if p.name != ".lock"]  # no run left


# --- checkpoints -----------------------------------------------------------------------------


def test_checkpoint_state_round_trip(tmp_path, tiny_model):
    torch.manual_seed(0)
    model = GPT(tiny_model())
    opt = torch.optim.AdamW(model.parameters())
    model(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4, dtype=torch.long))[1].backward()
    opt.step()
    gen = torch.Generator().manual_seed(3)
    state = {"step": 7, "best_val": 1.5, "optimizer": opt.state_dict(),
             "batch_rng": gen.get_state(), "torch_rng": torch.get_rng_state()}
    rundir.save_checkpoint(tmp_path, model, state)
    loaded = rundir.load_checkpoint(tmp_path)  # weights_only=True inside
    assert loaded["step"] == 7 and loaded["best_val"] == 1.5
    restored = GPT(tiny_model())
    model_dir.load_state(restored, loaded["model"], "state.pt")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                  restored.state_dict().values(), strict=True))
    assert torch.equal(loaded["batch_rng"], gen.get_state())
    opt2 = torch.optim.AdamW(GPT(tiny_model()).parameters())
    opt2.load_state_dict(loaded["optimizer"])
    assert opt2.state_dict()["state"][0]["exp_avg"].equal(opt.state_dict()["state"][0]["exp_avg"])


def test_the_checkpoint_is_whole_whatever_the_weights_file_holds(tmp_path, tiny_model):
    """state.pt carries its own weights, so a process killed between writing it and
    model.safetensors leaves a checkpoint that resumes at its own step."""
    torch.manual_seed(0)
    model = GPT(tiny_model())
    rundir.save_checkpoint(tmp_path, model, {"step": 3})
    torch.manual_seed(1)
    other = GPT(tiny_model())
    assert not torch.equal(other.wte.weight, model.wte.weight)
    model_dir.save_model(other, tmp_path, metadata=rundir.weights_metadata(4))
    state = rundir.load_checkpoint(tmp_path)
    assert state["step"] == 3
    assert torch.equal(state["model"]["wte.weight"], model.wte.weight)


def test_a_flipped_bit_in_the_checkpoints_weights_is_refused(tmp_path, tiny_model):
    """torch.load checks no checksum (a zip's CRCs go unread): state.pt records its weights'
    own, which every load but a look at its step (mmap) checks."""
    torch.manual_seed(0)
    model = GPT(tiny_model())
    rundir.save_checkpoint(tmp_path, model, {"step": 3})
    path = tmp_path / "state.pt"
    data = bytearray(path.read_bytes())
    at = data.find(model.wte.weight.detach().numpy().tobytes())  # stored as it lies in memory
    assert at > 0
    data[at + 5] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(UsageError, match=f"{path} is damaged: its weights' sha256"):
        rundir.load_checkpoint(tmp_path)
    assert rundir.load_checkpoint(tmp_path, mmap=True)["step"] == 3  # a look: not checked


def test_a_checkpoint_from_before_the_checksum_loads(tmp_path, tiny_model):
    model = GPT(tiny_model())
    rundir.save_checkpoint(tmp_path, model, {"step": 3})
    state = torch.load(tmp_path / "state.pt", weights_only=True)
    del state[rundir.STATE_CHECKSUM]
    torch.save(state, tmp_path / "state.pt")
    loaded = rundir.load_checkpoint(tmp_path)
    assert loaded["step"] == 3 and rundir.STATE_CHECKSUM not in loaded


def test_pickled_objects_are_not_loaded(tmp_path, tiny_model):
    class Evil:
        def __reduce__(self):
            return (print, ("this would run",))

    model_dir.save_model(GPT(tiny_model()), tmp_path, metadata=rundir.weights_metadata(0))
    torch.save({"step": 0, "x": Evil()}, tmp_path / "state.pt")
    with pytest.raises(UsageError, match="not a readable training state"):
        rundir.load_checkpoint(tmp_path)


def test_a_model_directory_has_nothing_to_resume(tmp_path, tiny_model):
    model_dir.save_model(GPT(tiny_model()), tmp_path)
    with pytest.raises(UsageError, match="nothing to resume"):
        rundir.load_checkpoint(tmp_path)


# --- the data a run trains on (data.json: its tokens' fingerprint) ---------------------------


def test_a_resume_on_data_that_changed_is_refused_naming_the_folder(tmp_path, make_data,
                                                                    tiny_model, tiny_train,
                                                                    capsys):
    data = make_data(tmp_path / "data", n_chars=5000)
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(max_iters=4), data, run, progress=False, callbacks=StopAfter(2))
    recorded = json.loads((run / rundir.DATA_RECORD_FILE).read_text())
    assert recorded == {"data": str(data),
                        "fingerprint": prepared.load_data(data).fingerprint()}
    assert recorded["fingerprint"].startswith("sha256:")
    state = (run / kinds.STATE_FILE).read_bytes()
    # other text in the same characters, prepared over it (what `prepare --force` does)
    tokenizer = load_tokenizer(data / "tokenizer.json")
    other = tmp_path / "other.txt"
    other.write_text(tokenizer.decode(np.fromfile(data / "train.bin", np.uint16)[::-1].tolist()))
    assert main(["prepare", "--input", str(other), "--tokenizer", str(data / "tokenizer.json"),
                 "--out", str(data), "--force"]) == 0
    capsys.readouterr()
    with pytest.raises(UsageError, match=re.escape(f"the data in {data} is not the data {run} "
                                                   f"trained on (its tokens changed")):
        train(None, None, data, run, resume=True, progress=False)
    code = main(["train", "--data", str(data), "--out", str(run), "--resume", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"the data in {data}" in err
    assert (run / kinds.STATE_FILE).read_bytes() == state


def test_a_run_from_before_the_record_resumes_and_records_its_data(tmp_path, make_data,
                                                                    tiny_model, tiny_train):
    data = make_data(tmp_path / "data", n_chars=5000)
    meta = json.loads((data / "meta.json").read_text())
    fingerprint = meta.pop("fingerprint")  # data from before the fingerprint too
    (data / "meta.json").write_text(json.dumps(meta))
    assert prepared.load_data(data).fingerprint() == fingerprint  # computed from the tokens
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(max_iters=4), data, run, progress=False, callbacks=StopAfter(2))
    (run / rundir.DATA_RECORD_FILE).unlink()
    result = train(None, None, data, run, resume=True, progress=False)
    assert result.step == 4
    assert json.loads((run / rundir.DATA_RECORD_FILE).read_text())["fingerprint"] == fingerprint


# --- the format, read with and without torch, and the lock's both sides ----------------------


def read_without_torch(code: str) -> list[str]:
    """Runs `code` (which has `rundir` imported) in a fresh interpreter that must not load
    torch; the words it printed."""
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from gptlab.training import rundir; " + code
         + "; print('torch' in sys.modules)"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")})
    return out.stdout.split()


def test_a_checkpoint_reads_the_same_step_with_and_without_torch(tmp_path, tiny_model):
    model = GPT(tiny_model())
    rundir.save_checkpoint(tmp_path, model, {"step": 7})
    rundir.save_best(tmp_path, model, 5)
    assert rundir.load_checkpoint(tmp_path)["step"] == 7  # torch: state.pt
    assert rundir.checkpoint_step(tmp_path) == 7  # its weights' header
    assert rundir.weights_step(tmp_path / rundir.BEST_DIR / rundir.WEIGHTS_FILE) == 5
    assert read_without_torch(f"print(rundir.checkpoint_step({str(tmp_path)!r}))") == [
        "7", "False"]


def test_weights_without_a_step_have_none(tmp_path, tiny_model):
    model_dir.save_model(GPT(tiny_model()), tmp_path)  # what convert writes: no run's step
    assert rundir.weights_step(tmp_path / rundir.WEIGHTS_FILE) is None
    assert rundir.checkpoint_step(tmp_path / "nowhere") is None


@pytest.mark.parametrize("damage", ["truncated header", "header not JSON", "empty", "absent"])
def test_a_broken_weights_header_is_one_clear_error(tmp_path, tiny_model, damage):
    model_dir.save_model(GPT(tiny_model()), tmp_path, metadata=rundir.weights_metadata(3))
    weights = tmp_path / rundir.WEIGHTS_FILE
    data = weights.read_bytes()
    size = int.from_bytes(data[:8], "little")
    weights.write_bytes({"truncated header": data[: 8 + size // 2],
                         "header not JSON": data[:8] + b"\xff" * size + data[8 + size:],
                         "empty": b"", "absent": b""}[damage])
    if damage == "absent":
        weights.unlink()
    with pytest.raises(UsageError, match=re.escape(f"{weights} is not a readable safetensors "
                                                   f"file (")):
        rundir.weights_step(weights)
    assert rundir.checkpoint_step(tmp_path) is None  # a table shows a blank


def test_the_lock_names_its_holder_while_held_and_no_one_after(tmp_path, lock_held):
    run = tmp_path / "run"
    assert rundir.lock_holder(run) is None  # never locked
    with lock_held(run) as holder:
        assert rundir.lock_holder(run) == holder.pid
        assert read_without_torch(f"print(rundir.lock_holder({str(run)!r}))") == [
            str(holder.pid), "False"]
        with pytest.raises(UsageError, match=f"in use by another trainer \\(PID {holder.pid}\\)"):
            with rundir.locked(run):
                pass
    holder.wait(timeout=60)  # killed: the OS released its lock; its PID stays in the file
    assert (run / rundir.LOCK_FILE).read_text().strip() == str(holder.pid)
    assert rundir.lock_holder(run) is None
    with rundir.locked(run):  # taken by this process now
        assert rundir.lock_holder(run) == os.getpid()
    assert rundir.lock_holder(run) is None  # released at the block's end
