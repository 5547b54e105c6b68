"""How long a training of the watch-it-learn view (view 9) will take, said before it starts.

An estimate, not a promise: a short probe times, on this machine and now, one optimizer
step of the task's model at its batch size (forward, backward, AdamW) and one evaluation
as the view makes it (the trainer's loss batches, then every head scored on the probe and
a sample, gptlab.lab.live.measure), then multiplies: steps x step + evaluations x
evaluation. The probe is taken once per task and kept for the server's life (about a
second); the machine's load at the time is returned with it, since a busy machine's
timings say little about a quiet one (gptlab.probe).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import torch

from gptlab import probe
from gptlab.data.corpus import shakespeare_text
from gptlab.data.tokenizer import CharTokenizer
from gptlab.lab import live_tasks
from gptlab.lab.live import measure
from gptlab.model.gpt import GPT

STEP_REPS, STEP_WARMUP = 10, 2


@dataclass(frozen=True)
class Probe:
    step_s: float  # one optimizer step
    eval_s: float  # one evaluation, with the heads' scores and the sample
    load: float | None  # the machine's load average when measured


_probes: dict[str, Probe] = {}
_lock = threading.Lock()  # one probe at a time: two at once would time each other


def probe_task(task: str) -> Probe:
    """The task's probe (measured on first use, then kept)."""
    with _lock:
        if task not in _probes:
            _probes[task] = _measure(task)
        return _probes[task]


def _tokenizer(task: str) -> CharTokenizer:
    if task == "induction":
        return CharTokenizer(sorted(live_tasks.INDUCTION_ALPHABET))
    return CharTokenizer.from_text(shakespeare_text())


def _measure(task_name: str) -> Probe:
    task = live_tasks.TASKS[task_name]
    settings = task.settings(100, 25, 0)
    tokenizer = _tokenizer(task_name)
    config = task.model
    torch.manual_seed(0)
    model = GPT(config)
    batch = torch.randint(config.vocab_size, (settings.batch_size, config.block_size + 1),
                          generator=torch.Generator().manual_seed(0))
    x, y = batch[:, :-1], batch[:, 1:]
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)

    def step() -> None:
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def evaluate() -> None:
        model.eval()
        with torch.no_grad():
            for _ in range(2 * settings.eval_iters):  # train and val batches
                model(x, y)
        measure(model, task.prompt, tokenizer)
        model.train()

    step_s = probe.median_seconds(step, STEP_REPS, STEP_WARMUP)
    eval_s = probe.median_seconds(evaluate, 1, 1)
    return Probe(step_s, eval_s, probe.machine_load())


def estimate(task: str, steps: int, every: int) -> dict[str, Any]:
    """The estimated seconds of a training of `steps` steps evaluated every `every`, with
    what it is made of."""
    p = probe_task(task)
    evaluations = steps // every + 1  # at step 0, every `every` steps, and the last
    seconds = steps * p.step_s + evaluations * p.eval_s
    return {"task": task, "steps": steps, "every": every, "seconds": round(seconds, 1),
            "step_ms": round(p.step_s * 1000, 1), "eval_ms": round(p.eval_s * 1000, 1),
            "evaluations": evaluations, "load": p.load, "cpus": probe.cores(),
            "threads": torch.get_num_threads(),
            "words": words(seconds, p, probe.cores())}


def words(seconds: float, p: Probe, cpus: int) -> str:
    """'about 1 min 50 s (an estimate: ...)'."""
    load = f", load {p.load:.1f}" if p.load is not None else ""
    return (f"about {duration(seconds)} (an estimate from a probe on this machine: "
            f"{p.step_s * 1000:.0f} ms a step, {p.eval_s:.2f} s an evaluation, {cpus} CPU "
            f"cores{load})")


def duration(seconds: float) -> str:
    """'45 s', '2 min', '1 min 50 s' (to 5 s past a minute)."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    minutes, rest = divmod(5 * math.ceil(seconds / 5), 60)
    return f"{minutes} min" + (f" {rest} s" if rest else "")
