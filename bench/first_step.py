"""Start-up to the first training step, as a user meets it: `gptlab train --preset NAME` in a
fresh process on a prepared data directory, timed from its launch until its first optimizer
step begins. That moment is read from the run's metrics.jsonl: the wall time of step 1's
record, less step 1's own time (its tokens over its tokens/s). Everything before it counts:
the interpreter, torch and gptlab imports, the plan and the lock, the first checkpoint, the
evaluation of step 0, the optimizer's construction (every torch.optim optimizer imports
torch._dynamo) and the timing probes' cache look-ups. The data is prepared beforehand, as the
speedrun's is, and the probes' answers are cached: the launch a user repeats, not their first
ever (`first_ever` times one launch on an empty probe cache, where the probes run).

Used by bench/speedrun.py, which adds each recipe's median start-up to its training time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gptlab
from bench.common import THREADS
from gptlab.data.prepared import ensure_prepared
from gptlab.data.tokenizer import CharTokenizer
from gptlab.model.config import GPTConfig
from gptlab.training.config import recipe

SRC = str(Path(gptlab.__file__).resolve().parents[1])
POLL_S = 0.005


def prepare_data(text: str, data_dir: Path) -> Path:
    """A char-level data directory of `text` (nanoGPT's 90/10 split), as `gptlab prepare`
    makes it; one already there from this text is reused."""
    ensure_prepared(data_dir, "bench", lambda: (text, CharTokenizer.from_text(text)))
    return data_dir


def child_env(cache: Path | None) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS),
           "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    if cache is not None:
        env["GPTLAB_CACHE"] = str(cache)
    return env


def time_to_first_step(preset: str, data_dir: Path, out_dir: Path, cache: Path | None = None,
                       timeout: float = 300.0) -> dict[str, float]:
    """{"startup_s": launch -> step 1 begins, "step1_s": step 1's own time} for one launch
    of `gptlab train --preset PRESET`, stopped (SIGTERM, as a user's Ctrl-C) once step 1
    is logged; `out_dir` is removed afterwards."""
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [sys.executable, "-m", "gptlab", "train", "--preset", preset, "--data", str(data_dir),
           "--out", str(out_dir), "--max-iters", "3", "--log-interval", "1", "--no-progress"]
    launched = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=child_env(cache))
    try:
        record = _wait_for_step_one(out_dir / "metrics.jsonl", proc, launched + timeout)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        shutil.rmtree(out_dir, ignore_errors=True)
    if record is None:
        raise RuntimeError(f"gptlab train logged no step 1 (exit {proc.returncode}): "
                           f"{err.strip()[-500:]}")
    # step 1 trains the recipe's whole batch
    step1_s = _tokens_per_step(preset) / record["tokens_per_s"]
    return {"startup_s": record["time"] - launched - step1_s, "step1_s": step1_s}


def _tokens_per_step(preset: str) -> int:
    cfg, model = recipe(preset), GPTConfig.from_preset(preset)
    return cfg.batch_size * cfg.gradient_accumulation_steps * model.block_size


def _wait_for_step_one(metrics: Path, proc: subprocess.Popen, deadline: float
                       ) -> dict[str, Any] | None:
    while time.time() < deadline:
        if metrics.is_file():
            for line in metrics.read_text().splitlines():
                if not line.endswith("}"):
                    continue  # being written
                record = json.loads(line)
                if record.get("kind") == "train" and record.get("step") == 1:
                    return record
        if proc.poll() is not None:
            return None
        time.sleep(POLL_S)
    return None
