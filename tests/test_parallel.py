"""`--parallel fsdp|tp|fsdp+tp` (gptlab.distributed.parallelize) against one process, under
torchrun.

One torchrun launch (tests/parallel_worker.py, 2 gloo processes) trains, for each mode,
20 steps, and 10 steps that are then resumed to 20 on the same two ranks; the test then
resumes the 10-step runs again in this one process and trains the one-process reference.
Every run has the same global batch of 8 (2 ranks x 4 for ddp, fsdp and the 2x1 fsdp+tp
mesh; 8 for the two tensor-parallel ranks, which share their rows), so all of them are the
same computation with sums in another order: measured, every logged loss is within 4.8e-7
of the one-process run's. We allow 1e-5, as test_distributed does for DDP: 20x below the
smallest step-to-step change of the curve, far below a wrong row, shard or all-reduce.

The model has grouped-query attention (4 heads, 2 kv heads, so each of 2 TP ranks holds 2
query heads and their kv head) and tied embeddings; the per-rank memory check uses SwiGLU
with biases and RMSNorm (the other shapes tensor parallel cuts) and compares
gptlab.distributed.memory's prediction with the local shards, byte for byte.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gptlab.cli.main import main
from gptlab.data.prepared import prepare
from gptlab.data.tokenizer import CharTokenizer
from gptlab.distributed import sharded_checkpoint
from gptlab.distributed.memory import per_rank_memory
from gptlab.distributed.parallelize import check_settings, plan_layout
from gptlab.errors import GptlabError, UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training import rundir
from gptlab.training.config import TrainConfig
from gptlab.training.run import train

sys.path.insert(0, str(Path(__file__).parent))
from parallel_worker import COMMON  # noqa: E402

WORDS = "the king and queen of a far land who will not go to sea said lord my good".split()
MODES = ["ddp:1", "fsdp:1", "tp:2", "fsdp+tp:1"]  # fsdp+tp:1 is the 2x1 mesh
TOLERANCE = 1e-5


def records(run: Path) -> dict[tuple[str, int], float]:
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        out[(r["kind"], r["step"])] = r.get("loss", r.get("val_loss"))
    return out


def max_difference(a: Path, b: Path) -> float:
    """Over a's records; b may have more (a resumed run keeps its first part's evaluation)."""
    ra, rb = records(a), records(b)
    assert ra.keys() <= rb.keys()
    return max(abs(ra[k] - rb[k]) for k in ra)


@pytest.fixture(scope="module", autouse=True)
def no_loss_curves():
    """Drawing loss.png costs seconds per evaluation and is tested elsewhere."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rundir.RunFiles, "plot", lambda self: None)
        yield


@pytest.fixture(scope="module")
def runs(tmp_path_factory, no_loss_curves):
    root = tmp_path_factory.mktemp("parallel")
    rng = random.Random(0)
    text = "".join(" ".join(rng.choice(WORDS) for _ in range(12)) + ".\n" for _ in range(300))
    prepare(text, root / "data", CharTokenizer.from_text(text), source="test")
    model = GPTConfig(vocab_size=1, block_size=16, n_layer=2, n_head=4, n_kv_head=2,
                      n_embd=32, bias=False, tie_embeddings=True)
    (root / "model.json").write_text(json.dumps(model.to_dict()))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node=2", str(Path(__file__).parent / "parallel_worker.py"), str(root),
           *MODES]
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(model, TrainConfig(max_iters=20, batch_size=8, **COMMON), root / "data",
              root / "one", progress=False)
        for item in MODES:  # the 10-step runs of 2 ranks, resumed in this one process
            name = item.replace(":", "-")
            shutil.copytree(root / f"{name}-half", root / f"{name}-single")
            over = {"max_iters": 20, "batch_size": 8}
            if item.startswith(("tp", "fsdp+tp")):
                over["tp"] = 1
            train(None, None, root / "data", root / f"{name}-single", resume=True,
                  overrides=over, progress=False)
    finally:
        torch.set_num_threads(before)
    return root


@pytest.mark.timeout(600)
@pytest.mark.parametrize("item", MODES)
def test_two_ranks_equal_one_process_and_resume_anywhere(runs, item):
    name = item.replace(":", "-")
    one = runs / "one"
    for run in ("full", "resumed", "single"):  # 20 steps; 10 + 10 on 2 ranks; 10 + 10 on 1
        diff = max_difference(one, runs / f"{name}-{run}")
        print(f"{item} {run}: max loss difference to one process {diff:.2e}")
        assert diff < TOLERANCE, (item, run, diff)
    assert len(records(one)) == 22  # 20 training losses and the evaluations of steps 0, 20
    # the curve moves far more than the tolerance
    assert records(one)[("eval", 20)] < records(one)[("eval", 0)] - 0.3
    # a sharded run's files: the gathered model for sample/eval, and one shards directory
    full = runs / f"{name}-full"
    shards = sorted(p.name for p in full.glob(sharded_checkpoint.PREFIX + "*"))
    state = rundir.load_checkpoint(full)
    if item == "ddp:1":
        assert shards == [] and "model" in state
    else:
        assert shards == [state["sharded"]] and "model" not in state
    from gptlab.files.model_dir import load_model

    for directory in (full, full / "best"):
        gathered = load_model(directory)
        x = torch.randint(0, gathered.config.vocab_size, (1, 8))
        assert torch.isfinite(gathered(x)[0]).all()
    # best/ (the step-20 evaluation is the best) holds the weights of the last step, and
    # they are the one-process run's, gathered and put back into the fused qkv layout
    a, b = load_model(full).state_dict(), load_model(full / "best").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    reference = load_model(one).state_dict()
    assert max((a[k] - reference[k]).abs().max().item() for k in a) < TOLERANCE


def test_memory_prediction_matches_the_local_shards(runs):
    config = GPTConfig.from_dict({**GPTConfig.from_json(runs / "model.json").to_dict(),
                                  "vocab_size": 30, "mlp": "swiglu", "bias": True,
                                  "norm": "rmsnorm", "pos_encoding": "rope",
                                  "tie_embeddings": False})
    whole = per_rank_memory(config)
    assert whole.weights == 4 * sum(p.numel() for p in GPT(config).parameters())
    for rank in (0, 1):
        measured = json.loads((runs / f"bytes-{rank}.json").read_text())
        for item, m in measured.items():
            predicted = per_rank_memory(config, fsdp=m["dp"], tp=m["tp"])
            print(f"rank {rank} {item}: predicted {predicted.to_dict()}, measured {m}")
            assert m["loss_diff"] < TOLERANCE
            # each dimension this model has is even, so both ranks hold the same bytes
            assert (m["weights"], m["grads"], m["optimizer"]) == (
                predicted.weights, predicted.grads, predicted.optimizer), (rank, item)
            assert predicted.total < whole.total * 0.6  # and sharding saved memory


# --- one process: refusals, a crash mid-save, the NaN stop ------------------------------------


def small(**over) -> GPTConfig:
    return GPTConfig(**{**dict(vocab_size=30, block_size=16, n_layer=1, n_head=4, n_kv_head=2,
                               n_embd=32, bias=False), **over})


@pytest.mark.parametrize("mode, tp, world, config, message", [
    ("tp", 3, 3, small(), "--tp 3 does not divide n_head 4"),
    ("tp", 4, 4, small(), "--tp 4 does not divide n_kv_head 2"),
    ("fsdp+tp", 3, 4, small(), "--tp 3 does not divide the 4 ranks"),
    ("tp", 2, 4, small(), "--parallel tp uses every rank"),
    ("fsdp", 2, 2, small(), "--tp 2 needs --parallel tp or fsdp+tp, not fsdp"),
])
def test_layouts_that_do_not_fit_are_refused_by_name(mode, tp, world, config, message):
    with pytest.raises(UsageError, match=message.replace("+", r"\+")):
        plan_layout(mode, tp, world, config)


@pytest.mark.parametrize("settings, config, message", [
    (dict(parallel="fsdp", compile=True), small(), "does not support compile"),
    (dict(parallel="fsdp", dtype="float16"), small(), "does not support dtype float16"),
    (dict(parallel="tp", tp=2, optimizer="muon"), small(), "does not support optimizer muon"),
    (dict(parallel="tp", batch_rng="nanogpt"), small(), "does not support batch_rng nanogpt"),
    (dict(parallel="tp"), small(dropout=0.1), "needs dropout 0"),
])
def test_settings_a_sharded_mode_lacks_are_refused_by_name(settings, config, message):
    world = 2 if settings["parallel"] == "tp" else 1
    with pytest.raises(UsageError, match=message):
        check_settings(TrainConfig(**settings), config, world)


def test_cli_refuses_in_one_line_before_writing(runs, tmp_path, capsys):
    code = main(["train", "--config", str(runs / "model.json"), "--data", str(runs / "data"),
                 "--out", str(tmp_path / "run"), "--parallel", "tp", "--tp", "3"])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "--tp 3" in err, err
    assert not (tmp_path / "run" / "train.json").exists()
    # a sharded run cannot go back to a whole-model (ddp) checkpoint, nor the reverse
    code = main(["train", "--data", str(runs / "data"), "--out",
                 str(runs / "fsdp-1-single"), "--resume", "--parallel", "ddp"])
    err = capsys.readouterr().err
    assert code != 0 and "resume it with --parallel fsdp, tp or fsdp+tp" in err, err
    # and a resume keeps the global batch
    code = main(["train", "--data", str(runs / "data"), "--out",
                 str(runs / "fsdp-1-single"), "--resume", "--batch-size", "3"])
    err = capsys.readouterr().err
    assert code != 0 and "global batch of 8" in err, err


def tiny_sharded(**over) -> TrainConfig:
    return TrainConfig(**{**dict(max_iters=4, warmup_iters=1, eval_interval=4,
                                 checkpoint_interval=2, eval_iters=1, log_interval=1,
                                 batch_size=4, device="cpu", whole_val=False,
                                 parallel="fsdp"), **over})


def test_a_stop_and_a_crash_mid_save_resume_exactly(runs, tmp_path, monkeypatch,
                                                          one_thread):
    config = small()
    train(config, tiny_sharded(), runs / "data", tmp_path / "whole", progress=False)
    real_save, calls = sharded_checkpoint.dcp.save, {"n": 0}

    def dies_after_writing(state, checkpoint_id):
        calls["n"] += 1
        real_save(state, checkpoint_id=checkpoint_id)
        if calls["n"] == 3:  # step 0, step 2, then the save of step 4 dies before its rename
            raise KeyboardInterrupt

    # a stop (what Ctrl-C and SIGTERM do) in tensor-parallel mode, resumed under FSDP
    stopped = train(config, tiny_sharded(parallel="tp"), runs / "data", tmp_path / "stopped",
                    progress=False, stop_after=2)
    assert (stopped.status, stopped.step) == ("interrupted", 2)
    train(None, None, runs / "data", tmp_path / "stopped", resume=True,
          overrides={"parallel": "fsdp"}, progress=False)
    assert max_difference(tmp_path / "whole", tmp_path / "stopped") < TOLERANCE

    monkeypatch.setattr(sharded_checkpoint.dcp, "save", dies_after_writing)
    with pytest.raises(KeyboardInterrupt):
        train(config, tiny_sharded(), runs / "data", tmp_path / "run", progress=False)
    monkeypatch.setattr(sharded_checkpoint.dcp, "save", real_save)
    state = rundir.load_checkpoint(tmp_path / "run")
    assert state["step"] == 2 and (tmp_path / "run" / state["sharded"] / ".metadata").is_file()
    assert list((tmp_path / "run").glob("*.partial"))  # what the crash left
    train(None, None, runs / "data", tmp_path / "run", resume=True, progress=False)
    assert max_difference(tmp_path / "whole", tmp_path / "run") == 0.0
    assert not list((tmp_path / "run").glob("*.partial"))  # cleared by the next save


def test_nan_loss_stops_a_sharded_run_at_its_last_checkpoint(runs, tmp_path, monkeypatch,
                                                             one_thread):
    forward, calls = GPT.forward, {"n": 0}

    def poisoned(self, idx, targets=None, **kw):
        logits, loss = forward(self, idx, targets, **kw)
        if targets is not None and self.training:
            calls["n"] += 1
            if calls["n"] == 3:
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(GPT, "forward", poisoned)
    with pytest.raises(GptlabError, match="loss became nan at step 3"):
        train(small(), tiny_sharded(parallel="tp"), runs / "data", tmp_path / "run",
              progress=False)
    assert rundir.load_checkpoint(tmp_path / "run")["step"] == 2


def test_params_cli_gives_per_rank_memory(capsys):
    assert main(["params", "llama2-7b", "--fsdp", "4", "--tp", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["memory"]
    per_rank = out["training_per_rank"]
    assert (per_rank["fsdp"], per_rank["tp"]) == (4, 2)
    # no sharding: the whole model's 16 bytes per parameter, as the table already says
    whole = per_rank_memory(GPTConfig.from_preset("llama2-7b"))
    assert whole.total == out["training_adamw_fp32"]
    assert whole.total / 8 < per_rank["total"] < whole.total / 4  # TP leaves some whole
    assert main(["params", "gpt2-xl", "--tp", "8"]) != 0
    assert "--tp 8 does not divide n_head 25" in capsys.readouterr().err
