"""`gptlab train`'s refusals, each in one line and before anything is written: an unknown
optimizer, what fine-tuning (--init-from) cannot combine with, and layouts and resumes a
sharded run cannot take; what a resume may change and says it changes; the schedule of a
short run and of a fine-tune. (The command with training: tests/training/test_run.py and
test_rundir.py.)"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from gptlab.cli.main import main
from gptlab.data.prepared import prepare
from gptlab.data.tokenizer import CharTokenizer
from gptlab.model.config import GPTConfig
from gptlab.training.callbacks import StopAfter
from gptlab.training.config import TrainConfig
from gptlab.training.run import train
from gptlab.training.runs import read_run


def test_cli_bad_optimizer_is_one_line(data_dir, tmp_path, capsys):
    code = main(["train", "--preset", "tiny-gpt2", "--data", str(data_dir),
                 "--out", str(tmp_path / "run"), "--optimizer", "sgd", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "optimizer must be one of adamw, muon" in err
    assert "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_the_lever_flags_stay_flat_and_land_in_the_speed_group(data_dir, tmp_path, gptlab):
    """--muon-lr and the other levers' flags are as they were; train.json holds them in
    "speed"; a bad one is said as its flag; a --train-config with them flat (an earlier
    train.json) or grouped gives the same run."""
    levers = ["--optimizer", "muon", "--muon-lr", "0.03", "--muon-split-qkv", "--embedding-lr",
              "0.01", "--no-eval-at-start", "--allocator", "system"]
    common = ["--data", data_dir, "--max-iters", "2", "--eval-iters", "1", "--batch-size", "2",
              "--no-whole-val", "--no-progress"]
    code, _, err = gptlab("train", "--preset", "tiny-gpt2", "--out", tmp_path / "run",
                          *levers, *common)
    assert code == 0, err
    saved = json.loads((tmp_path / "run" / "train.json").read_text())
    assert {k: saved["speed"][k] for k in ("optimizer", "muon_lr", "muon_split_qkv",
                                           "embedding_lr", "eval_at_start", "allocator")} == {
        "optimizer": "muon", "muon_lr": 0.03, "muon_split_qkv": True, "embedding_lr": 0.01,
        "eval_at_start": False, "allocator": "system"}
    assert "muon_lr" not in saved
    code, _, err = gptlab("train", "--preset", "tiny-gpt2", "--out", tmp_path / "bad",
                          "--muon-lr", "0", *common)
    assert code == 2 and "gptlab train: error: --muon-lr must be > 0" in err, err
    flat = {k: v for k, v in saved.items() if k != "speed"} | saved["speed"]
    for name, given in (("flat", flat), ("grouped", saved)):
        (tmp_path / f"{name}.json").write_text(json.dumps(given))
        code, _, err = gptlab("train", "--preset", "tiny-gpt2", "--out", tmp_path / name,
                              "--train-config", tmp_path / f"{name}.json", *common)
        assert code == 0, err
        assert json.loads((tmp_path / name / "train.json").read_text()) == saved


def test_a_run_saved_with_the_levers_flat_resumes_and_keeps_its_levers(
        data_dir, tmp_path, tiny_model, tiny_train, gptlab):
    """A run of an earlier gptlab (train.json with the levers flat) resumes; a lever among
    RESUME_OVERRIDES may change, one that changes what is trained is refused as its flag."""
    run = tmp_path / "run"
    cfg = tiny_train(optimizer="muon", muon_lr=0.03)
    train(tiny_model(), cfg, data_dir, run, progress=False, callbacks=StopAfter(4))
    (run / "train.json").write_text(json.dumps(cfg.flat()))
    code, _, err = gptlab("train", "--data", data_dir, "--out", run, "--resume",
                          "--muon-lr", "0.05", "--no-progress")
    assert code == 2 and "cannot change --muon-lr (only --max-iters, " in err, err
    code, _, err = gptlab("train", "--data", data_dir, "--out", run, "--resume",
                          "--allocator", "system", "--no-progress")
    assert code == 0 and "resuming with allocator retain -> system" in err, err
    saved = json.loads((run / "train.json").read_text())
    assert saved["speed"]["muon_lr"] == 0.03 and saved["speed"]["allocator"] == "system"


def test_init_from_bad_combinations_are_one_line(trained_run, tmp_path, capsys):
    base_run, play = trained_run, trained_run.parent / "data"
    other = tmp_path / "other-data"
    text = "a completely different alphabet: 0123456789\n" * 200
    prepare(text, other, CharTokenizer.from_text(text))
    for argv, message in [
        (["--init-from", str(base_run), "--data", str(other)],
         "prepared with another tokenizer"),
        (["--init-from", str(base_run), "--data", str(play), "--n-layer", "2"],
         "--init-from keeps the starting model's architecture; drop --n-layer"),
        (["--init-from", str(base_run), "--preset", "tiny-gpt2", "--data",
          str(play)], "drop --preset"),
        (["--init-from", str(tmp_path / "nowhere"), "--data", str(play)],
         "no such run or model directory"),
    ]:
        code = main(["train", *argv, "--out", str(tmp_path / "run"), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and message in err, (argv, err)
        assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def sharded(data_dir, tmp_path_factory, one_thread_module):
    """A run trained 2 steps with --parallel fsdp in this one process (a global batch of 8)
    in run/, and its model (4 heads, 2 key/value heads) in model.json."""
    root = tmp_path_factory.mktemp("sharded")
    config = GPTConfig(vocab_size=1, block_size=16, n_layer=1, n_head=4, n_kv_head=2,
                       n_embd=32, bias=False)
    (root / "model.json").write_text(json.dumps(config.to_dict()))
    settings = TrainConfig(parallel="fsdp", batch_size=8, max_iters=2, warmup_iters=0,
                           eval_interval=2, eval_iters=1, device="cpu", whole_val=False)
    train(config, settings, data_dir, root / "run", progress=False)
    return root


def test_sharded_layouts_and_resumes_are_refused_in_one_line(sharded, data_dir, tmp_path,
                                                              capsys):
    code = main(["train", "--config", str(sharded / "model.json"), "--data", str(data_dir),
                 "--out", str(tmp_path / "run"), "--parallel", "tp", "--tp", "3"])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "--tp 3" in err, err
    assert not (tmp_path / "run" / "train.json").exists()
    # a sharded run cannot go back to a whole-model (ddp) checkpoint, nor the reverse
    code = main(["train", "--data", str(data_dir), "--out",
                 str(sharded / "run"), "--resume", "--parallel", "ddp"])
    err = capsys.readouterr().err
    assert code != 0 and "resume it with --parallel fsdp, tp or fsdp+tp" in err, err
    # and a resume keeps the global batch
    code = main(["train", "--data", str(data_dir), "--out",
                 str(sharded / "run"), "--resume", "--batch-size", "3"])
    err = capsys.readouterr().err
    assert code != 0 and "global batch of 8" in err, err


def test_a_sharded_run_moved_to_tp_resumes_on_one_process_naming_no_flag_not_given(
        sharded, data_dir, tmp_path, capsys):
    """Issue 23: an fsdp run resumed under `--parallel tp --tp 2` (on 2 ranks) and then on
    one process was told "--tp 2 ..." though no --tp was given there. train.json is edited
    as that resume leaves it (one data-parallel rank of 8 sequences)."""
    run = tmp_path / "run"
    shutil.copytree(sharded / "run", run)
    settings = json.loads((run / "train.json").read_text())
    (run / "train.json").write_text(json.dumps({**settings, "parallel": "tp", "tp": 2}))
    for extra, mode in (([], "tp"), (["--parallel", "fsdp"], "fsdp")):
        code = main(["train", "--data", str(data_dir), "--out", str(run), "--resume",
                     "--max-iters", str(3 if mode == "tp" else 4), "--no-progress", *extra])
        err = capsys.readouterr().err
        assert code == 0, err
        assert "--tp" not in err and "(" + mode + ")" in err
        if mode == "tp":
            assert "tensor-parallel width 2 -> 1: the run's width does not fit 1 process" in err
        saved = json.loads((run / "train.json").read_text())
        assert (saved["parallel"], saved["tp"], saved["batch_size"]) == (mode, None, 8)


def test_a_resume_changes_what_cannot_change_the_training_and_says_so(sharded, data_dir,
                                                                       tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(sharded / "run", run)
    settings = json.loads((run / "train.json").read_text())
    code = main(["train", "--data", str(data_dir), "--out", str(run), "--resume", "--max-iters",
                 "4", "--eval-interval", "1", "--eval-iters", "2", "--no-whole-val",
                 "--learning-rate", str(settings["learning_rate"]), "--seed",
                 str(settings["seed"]), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "resuming with max_iters 2 -> 4, eval_interval 2 -> 1, eval_iters 1 -> 2" in err
    assert "learning_rate" not in err and "seed" not in err  # unchanged: no change to say
    evals = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text()
             .splitlines() if json.loads(line)["kind"] == "eval"]
    assert evals == [0, 2, 3, 4]
    code = main(["train", "--data", str(data_dir), "--out", str(run), "--resume",
                 "--weight-decay", "0.5", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot change --weight-decay" in err and err.count("\n") == 1
    # a smaller --max-iters than the run's step says so, whatever the warm-up
    code = main(["train", "--data", str(data_dir), "--out", str(run), "--resume",
                 "--max-iters", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "is at step 4 already: --max-iters 1 would end it before that" in err


def test_a_train_config_file_with_a_short_length_trims_the_warmup(data_dir, tmp_path, capsys):
    """Issue 23: `--train-config` holding {"max_iters": 3} failed on the default 100-step
    warm-up, where `--max-iters 3` trims it."""
    settings = tmp_path / "short.json"
    settings.write_text(json.dumps({"max_iters": 3, "eval_iters": 1}))
    run = tmp_path / "run"
    code = main(["train", "--preset", "tiny-gpt2", "--data", str(data_dir), "--out", str(run),
                 "--train-config", str(settings), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    saved = json.loads((run / "train.json").read_text())
    assert (saved["max_iters"], saved["warmup_iters"], saved["lr_decay_iters"]) == (3, 3, 3)


def test_a_fine_tune_scales_its_schedule_to_its_length_and_prints_it(trained_run, tmp_path,
                                                                      capsys):
    """Issue 23: a 100-step fine-tune kept the 100-step warm-up, so the whole run was warm-up
    and min_lr was never reached. The warm-up keeps its share of the default run (100 of
    2,000 steps): 5 of 100, and the decay ends at step 100."""
    run = tmp_path / "tuned"
    code = main(["train", "--init-from", str(trained_run), "--data",
                 str(trained_run.parent / "data"), "--out", str(run), "--max-iters", "100",
                 "--eval-interval", "100", "--eval-iters", "1", "--batch-size", "2",
                 "--no-whole-val", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    saved = json.loads((run / "train.json").read_text())
    assert (saved["warmup_iters"], saved["lr_decay_iters"]) == (5, 100)
    assert ("schedule: 5 warm-up steps to learning_rate 0.001, cosine decay to min_lr 0.0001 "
            "at step 100, of 100 steps") in err
    lrs = [r["lr"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
           if r["kind"] == "train"]
    assert lrs[-1] == pytest.approx(1e-4, rel=0.01)  # min_lr reached at the end
    # a resume that names the model it started from, as it did, changes nothing: allowed
    code = main(["train", "--data", str(trained_run.parent / "data"), "--out", str(run),
                 "--resume", "--init-from", str(trained_run), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0 and "resuming with" not in err and "resuming at step 100" in err, err


def test_done_after_a_resume_counts_only_the_steps_trained_now(data_dir, tmp_path, tiny_model,
                                                               tiny_train, gptlab):
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(), data_dir, run, progress=False, callbacks=StopAfter(4))
    code, out, err = gptlab("train", "--data", data_dir, "--out", run, "--resume",
                            "--no-progress")
    assert code == 0, err
    done = next(line for line in out.splitlines() if line.startswith("done: "))
    assert done.startswith("done: 8 steps (5-12; resumed at step 4) in ")
    assert "s (+" in done and "start-up, evaluations, checkpoints, scoring)" in done


@pytest.mark.slow
def test_a_ctrl_c_in_the_final_whole_val_scoring_stops_it_within_seconds(
        data_dir, tmp_path, signalled, slowly_scoring):
    """Once the last step is saved, the whole-val scoring (made slow: half a second a
    window) is stopped between two windows: exit 130, the finished checkpoint kept."""
    import signal

    from gptlab.training import rundir

    run, mark = tmp_path / "run", tmp_path / "scoring"
    code = slowly_scoring(mark, "train", "--preset", "tiny-gpt2", "--data", data_dir,
                          "--out", run, "--max-iters", "2", "--eval-iters", "1",
                          "--batch-size", "2", "--whole-val", "--no-progress")
    exit_code, out, err, seconds = signalled(code, mark.exists, signal.SIGINT)
    assert (exit_code, err.splitlines()[-3]) == (130, "interrupted"), err
    assert err.splitlines()[-1] == f"  gptlab eval {run} --data {data_dir}"
    assert seconds < 15  # a bound for a loaded machine: the scoring had 30 s or more to go
    assert "done:" not in out and "Traceback" not in err
    assert rundir.load_checkpoint(run)["step"] == 2


def test_a_stop_in_the_final_whole_val_scoring_says_what_is_kept_and_how_to_score_it(
        data_dir, tmp_path, monkeypatch, gptlab):
    """It said only "interrupted", and `gptlab runs` showed the finished run with a whole
    val of "-": now what was kept, and the command that finishes the score."""
    from gptlab import stopping
    from gptlab.training import run as training_run
    from gptlab.training import rundir

    def stopped(*args, **kwargs):
        raise stopping.Interrupted()  # what a Ctrl-C between two scoring windows raises

    run = tmp_path / "run"
    with monkeypatch.context() as patched:
        patched.setattr(training_run, "score_ids", stopped)
        code, out, err = gptlab("train", "--preset", "tiny-gpt2", "--data", data_dir, "--out",
                                run, "--max-iters", "2", "--eval-iters", "1", "--batch-size",
                                "2", "--whole-val", "--no-progress")
    assert code == 130 and "done:" not in out and "Traceback" not in err
    assert err.splitlines()[-3:] == [
        "interrupted",
        f"the run finished at step 2: its checkpoint and weights are kept in {run}/; only its "
        f"loss over the whole val split was cut short (gptlab runs shows it as -). Score it "
        f"with:",
        f"  gptlab eval {run} --data {data_dir}"]
    assert rundir.load_checkpoint(run)["step"] == 2
    code, out, _ = gptlab(*err.splitlines()[-1].split()[1:])  # the line, as given
    assert code == 0 and "loss " in out


def test_mlp_is_a_model_flag(data_dir, tmp_path, gptlab, one_line):
    """--to-gguf names `--mlp gelu_tanh` for a model with the exact GELU: train has it."""
    code, _, err = gptlab("train", "--preset", "tiny-gpt2", "--data", data_dir, "--out",
                          tmp_path / "run", "--mlp", "swiglu", "--max-iters", "1",
                          "--eval-iters", "1", "--batch-size", "2", "--no-whole-val",
                          "--no-progress")
    assert code == 0, err
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["mlp"] == "swiglu"
    err = one_line(gptlab("train", "--preset", "tiny-gpt2", "--data", data_dir, "--out",
                          tmp_path / "other", "--mlp", "gelu_erf"))
    assert "--mlp: invalid choice: 'gelu_erf'" in err


def test_resume_help_lists_what_may_change_from_the_constants(gptlab):
    from gptlab.training.config import AFTER_DIVERGENCE, RESUME_OVERRIDES

    _, out, _ = gptlab("train", "--help")
    text = " ".join(out.split()).replace("- ", "-")  # argparse wraps inside flag names
    listed = text.split("may change (", 1)[1].split(";", 1)[0]
    assert listed.split(", ") == ["--" + n.replace("_", "-") for n in RESUME_OVERRIDES]
    after = text.split("after a divergence ", 1)[1].split(" --force", 1)[0]
    assert after.split(", ") == ["--" + n.replace("_", "-") for n in AFTER_DIVERGENCE]


def test_help_shows_the_chapters_settings_first_and_the_levers_apart(gptlab):
    """The training loop a reader meets reads alone (at most 25 settings); what scales it
    out and the speedrun's levers follow in groups of their own."""
    from gptlab.training.config import LEVERS, SCALE_OUT

    _, out, _ = gptlab("train", "--help")
    titles = ["training settings (see train.json):", "scaling out (under torchrun):",
              "speed levers (the speedrun's recipes set them; BENCHMARKS.md measures each):"]
    sections = [out.split(title, 1)[1] for title in titles]
    flags = [[line.split()[0].rstrip(",") for line in section.split("\n\n", 1)[0]
              .splitlines()[1:] if line.startswith("  --")] for section in sections]
    dashed = [["--" + n.replace("_", "-") for n in names] for names in (SCALE_OUT, LEVERS)]
    assert flags[1] == dashed[0] and flags[2] == dashed[1]
    assert 20 <= len(flags[0]) <= 25 and not set(flags[0]) & set(sum(dashed, []))
    assert "--muon-normuon-beta2" not in out and "--ramp" not in out


def test_resume_refusals_name_every_setting_as_its_flag(data_dir, tmp_path, tiny_model,
                                                         tiny_train, gptlab):
    run = tmp_path / "run"
    train(tiny_model(), tiny_train(), data_dir, run, progress=False, callbacks=StopAfter(4))
    for given, said in [(["--seed", "3"], "cannot change --seed (only --max-iters, "),
                        (["--parallel", "fsdp"],
                         "saved with --parallel ddp: resume it with --parallel ddp")]:
        code, _, err = gptlab("train", "--data", data_dir, "--out", run, "--resume", *given,
                              "--no-progress")
        assert code == 2 and said in err and "`" not in err, err


def test_a_bad_setting_in_a_config_file_is_named_with_the_file_not_as_a_flag(
        data_dir, tmp_path, gptlab):
    model, settings = tmp_path / "model.json", tmp_path / "train.json"
    model.write_text('{"n_layer": 0, "n_head": 2, "n_embd": 32, "block_size": 16}')
    settings.write_text('{"learning_rate": -1, "n_layer": 2}')
    for argv, said in [(["--config", model], f"{model}: n_layer must be a positive integer"),
                       (["--preset", "tiny-gpt2", "--train-config", settings],
                        f"{settings}: unknown training setting(s): n_layer")]:
        code, _, err = gptlab("train", *argv, "--data", data_dir, "--out", tmp_path / "run",
                              "--no-progress")
        assert code == 2 and said in err and "--n-layer" not in err, err
    code, _, err = gptlab("train", "--config", model, "--n-layer", "-1", "--data", data_dir,
                          "--out", tmp_path / "run")
    assert code == 2 and f"{model}: n_layer" in err  # the file is checked as it is first


def test_stop_at_val_stops_at_the_target_keeps_it_on_resume_and_eval_agrees(
        data_dir, tmp_path, gptlab, one_thread):
    """A generous target: not met within a short budget (the run says so, and ends at it);
    resumed with more steps, the saved target stops the run early, with a checkpoint whose
    weights `gptlab eval` scores at the loss the run printed."""
    run = tmp_path / "run"
    shape = ("--preset", "shakespeare-char-cpu", "--n-layer", "1", "--n-embd", "32",
             "--n-head", "2", "--block-size", "16", "--batch-size", "8",
             "--learning-rate", "3e-3", "--eval-interval", "1000", "--warmup-iters", "10",
             "--lr-decay-iters", "300")  # the schedule of the resumed run's 300 steps
    code, out, err = gptlab("train", *shape, "--data", data_dir, "--out", run,
                            "--max-iters", "20", "--stop-at-val", "2.2", "--no-progress")
    assert code == 0, err
    assert "val target 2.2 not met within the step budget: whole val split" in out
    assert "at step 20 of 20" in out
    assert json.loads((run / "train.json").read_text())["speed"]["stop_at_val"] == 2.2
    code, out, err = gptlab("train", "--data", data_dir, "--out", run, "--resume",
                            "--max-iters", "300", "--no-progress")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("val "))
    loss, step = float(line.split()[1]), int(line.rsplit(" ", 1)[1])
    assert line == f"val {loss:.4f} <= target 2.2 at step {step}" and loss <= 2.2
    assert 20 < step < 300 and step % 10 == 0
    state = torch.load(run / "state.pt", weights_only=True)
    assert state["step"] == step
    records = [json.loads(r) for r in (run / "metrics.jsonl").read_text().splitlines()]
    looks = [r for r in records if r["kind"] == "val_target"]
    assert looks[-1]["met"] and looks[-1]["step"] == step
    assert all(not r["met"] for r in looks[:-1])
    assert max(r["step"] for r in records) == step
    assert read_run(run).status == "finished"  # `gptlab runs`: it ended as planned
    code, out, err = gptlab("eval", run, "--data", data_dir, "--json")
    assert code == 0, err
    assert json.loads(out)["loss"] == pytest.approx(loss, abs=1e-4)
    assert json.loads((run / "train.json").read_text())["speed"]["stop_at_val"] == 2.2


def test_stop_at_val_is_refused_with_a_sharded_layout_and_below_zero(data_dir, tmp_path,
                                                                      gptlab, one_line):
    err = one_line(gptlab("train", "--preset", "shakespeare-char-cpu", "--data", data_dir,
                          "--out", tmp_path / "r", "--stop-at-val", "-1"))
    assert "stop_at_val" in err or "--stop-at-val" in err
    err = one_line(gptlab("train", "--preset", "shakespeare-char-cpu", "--recipe",
                          "shakespeare-char-cpu-fast", "--data", data_dir,
                          "--out", tmp_path / "r", "--stop-at-val", "1.5",
                          "--parallel", "fsdp"))
    assert "--stop-at-val" in err and not (tmp_path / "r").exists()
