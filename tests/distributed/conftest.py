"""Shared by the distributed tests: one torchrun launch (parallel_worker.py, 2 gloo
processes) that trains every sharded layout, the one-process runs it is compared with, and
small configs for the refusals and the one-process sharded runs."""

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

from gptlab.data.prepared import prepare
from gptlab.data.tokenizer import CharTokenizer
from gptlab.model.config import GPTConfig
from gptlab.training import rundir
from gptlab.training.config import TrainConfig
from gptlab.training.run import train

WORDS = "the king and queen of a far land who will not go to sea said lord my good".split()
MODES = ["ddp:1", "fsdp:1", "tp:2", "fsdp+tp:1"]  # fsdp+tp:1 is the 2x1 mesh
# One evaluation at the end (its loss curve costs seconds to draw), checkpoints at 10 and 20.
COMMON = dict(warmup_iters=2, lr_decay_iters=20, eval_interval=20, checkpoint_interval=10,
              eval_iters=2, log_interval=1, learning_rate=3e-3, device="cpu", whole_val=False)
SRC = Path(__file__).resolve().parents[2] / "src"


def _torchrun(args: list[str], env: dict[str, str], timeout: float):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "OMP_NUM_THREADS": "1"})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()  # torchrun's agent stops its workers on SIGTERM (SIGKILL would not)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail(f"torchrun did not finish in {timeout:.0f} s (its workers are stopped); "
                    f"its output ends:\n{out[-1500:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture(scope="session")
def torchrun():
    """torchrun(args, env, timeout) -> CompletedProcess: `python -m torch.distributed.run
    --standalone --nproc_per_node=2 args` on one thread each. A launch that does not finish
    in time fails the test with what it printed, and its workers are stopped, not left
    running."""
    return _torchrun


def _sentences_data(path: Path) -> Path:
    rng = random.Random(0)
    text = "".join(" ".join(rng.choice(WORDS) for _ in range(12)) + ".\n" for _ in range(300))
    prepare(text, path, CharTokenizer.from_text(text), source="test")
    return path


@pytest.fixture(scope="session")
def sentences_data():
    """sentences_data(path) -> path: 300 random twelve-word lines, prepared (seeded)."""
    return _sentences_data


@pytest.fixture(scope="session")
def parallel_runs(tmp_path_factory):
    """One torchrun launch (parallel_worker.py, 2 gloo processes) trains, for each of MODES,
    20 steps (MODE-TP-full), and 10 steps (MODE-TP-half) resumed to 20 on the same two ranks
    (MODE-TP-resumed), resumes fsdp's half run to 15 under tensor parallel (fsdp-1-moved),
    and writes bytes-RANK.json (the local shards' bytes, the gradients' distance to one
    process's) and warnings-RANK.json; then, in this process, each half run is resumed
    again (MODE-TP-single), fsdp-1-moved is finished, and the one-process reference (one)
    is trained. Every run has the same global batch of 8. Loss curves are not drawn
    (seconds per evaluation, and tested elsewhere)."""
    root = tmp_path_factory.mktemp("parallel")
    _sentences_data(root / "data")
    model = GPTConfig(vocab_size=1, block_size=16, n_layer=2, n_head=4, n_kv_head=2,
                      n_embd=32, bias=False, tie_embeddings=True)
    (root / "model.json").write_text(json.dumps(model.to_dict()))
    (root / "common.json").write_text(json.dumps(COMMON))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC),
                                                       os.environ.get("PYTHONPATH", "")])}
    proc = _torchrun([str(Path(__file__).parent / "parallel_worker.py"), str(root), *MODES],
                     env, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(rundir.RunFiles, "plot", lambda self: None)
            train(model, TrainConfig(max_iters=20, batch_size=8, **COMMON), root / "data",
                  root / "one", progress=False)
            # the 10-step runs of 2 ranks, resumed in this one process with nothing but the
            # new length: the run's tensor-parallel width and per-rank batch adapt
            for item in MODES:
                name = item.replace(":", "-")
                shutil.copytree(root / f"{name}-half", root / f"{name}-single")
                train(None, None, root / "data", root / f"{name}-single", resume=True,
                      overrides={"max_iters": 20}, progress=False)
            train(None, None, root / "data", root / "fsdp-1-moved", resume=True,
                  overrides={"max_iters": 20}, progress=False)
    finally:
        torch.set_num_threads(before)
    return root


def _records(run: Path) -> dict[tuple[str, int], float]:
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        out[(r["kind"], r["step"])] = r.get("loss", r.get("val_loss"))
    return out


@pytest.fixture(scope="session")
def max_difference():
    """max_difference(a, b): the largest difference of a logged loss of run a from b's
    (b may log more: a resumed run keeps its first part's evaluation)."""
    def diff(a: Path, b: Path) -> float:
        ra, rb = _records(a), _records(b)
        assert ra.keys() <= rb.keys()
        return max(abs(ra[k] - rb[k]) for k in ra)

    return diff


@pytest.fixture
def no_loss_curves(monkeypatch):
    """Drawing loss.png costs seconds per evaluation and is tested elsewhere."""
    monkeypatch.setattr(rundir.RunFiles, "plot", lambda self: None)


@pytest.fixture(scope="session")
def small():
    """small(**overrides) -> GPTConfig: one layer, 4 heads sharing 2 key/value heads."""
    def make(**over) -> GPTConfig:
        return GPTConfig(**{**dict(vocab_size=30, block_size=16, n_layer=1, n_head=4,
                                   n_kv_head=2, n_embd=32, bias=False), **over})

    return make


@pytest.fixture(scope="session")
def tiny_sharded():
    """tiny_sharded(**overrides) -> TrainConfig: 4 steps under FSDP, checkpoints at 2 and 4."""
    def make(**over) -> TrainConfig:
        base = dict(max_iters=4, warmup_iters=1, eval_interval=4, checkpoint_interval=2,
                    eval_iters=1, log_interval=1, batch_size=4, device="cpu", whole_val=False,
                    parallel="fsdp")
        return TrainConfig.from_dict({**base, **over})

    return make
