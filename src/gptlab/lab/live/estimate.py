"""How long a training of the watch-it-learn view (view 9) will take, said before it starts.

An estimate, given as a range: a probe runs the training itself, gptlab.training.run.train
with the view's own callbacks (LiveCallbacks: every evaluation scores the heads and draws a
sample), for PROBE_STEPS steps in a temporary folder, and times its stretches of steps and
its evaluations from the events it emits, in wall time and in the CPU time of its thread.
So the probe does what the run does, bookkeeping included (batches drawn, the loss read,
metrics, TensorBoard, the best checkpoint): a probe of the bare model's step had missed a
third of a real step's work. The work (CPU time: 27.4 s estimated for a 600-step induction
training that took 27.7 s of CPU) is what a quiet machine takes; the wall time is what it
takes at the share of a core the probe got, as loaded as the machine is now. On a shared
machine the share moves while the run goes (on the 2-core development VM, at load 7 to 11,
the same training took 0.7 to 1.5 times the wall estimate), so the page says both ends. The
probe is kept for PROBE_TTL_S, then taken again, so an estimate is of the machine's load
now; its load average is returned with it.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import math
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gptlab import probe
from gptlab.data.tokenizer import load_tokenizer
from gptlab.lab.live import tasks
from gptlab.lab.live.training import LiveCallbacks, LiveReporter
from gptlab.training.run import train

PROBE_STEPS, PROBE_EVERY = 30, 10  # evaluations at steps 0, 10, 20 and 30
LOG = tasks.COMMON["log_interval"]  # steps between two logged steps
PROBE_TTL_S = 60.0  # a probe older than this is taken again: the machine's load has moved


@dataclass(frozen=True)
class Probe:
    step_s: float  # one optimizer step with the trainer's bookkeeping, wall time (median)
    eval_s: float  # one evaluation, with the heads' scores and the sample, wall time
    load: float | None  # the machine's load average when measured
    step_cpu_s: float | None = None  # the same, in the CPU time of the training's thread
    eval_cpu_s: float | None = None
    taken: float = 0.0  # time.monotonic() when measured


class _ProbeReporter(LiveReporter):
    """The run's reporter, less the loss plot a run draws once, at its end."""

    def close(self) -> None:
        pass


class _ProbeCallbacks(LiveCallbacks):
    def make_reporter(self, files, progress: bool) -> _ProbeReporter:
        return _ProbeReporter(files, self.emit, self.prompt, self.tokenizer)


_probes: dict[str, Probe] = {}
_lock = threading.Lock()  # one probe at a time: two at once would time each other
_data: dict[str, Path] = {}  # each task's data, prepared once for the server's life


def probe_task(task: str) -> Probe:
    """The task's probe: measured on first use, again once PROBE_TTL_S old."""
    with _lock:
        p = _probes.get(task)
        if p is None or time.monotonic() - p.taken > PROBE_TTL_S:
            p = _probes[task] = _measure(task)
        return p


def _data_dir(task: str) -> Path:
    """The task's data, in a temporary folder of the server's (the runs folder is the
    user's: a probe writes nothing there)."""
    if task not in _data:
        root = Path(tempfile.mkdtemp(prefix="gptlab-lab-probe-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        _data[task] = tasks.ensure_data(root, task)
    return _data[task]


def _measure(task_name: str) -> Probe:
    task = tasks.TASKS[task_name]
    data_dir = _data_dir(task_name)
    tokenizer = load_tokenizer(data_dir / "tokenizer.json")
    # the work of the training's thread; where torch computes in threads of its own (the
    # lab serves at one), the process's
    cpu = time.thread_time if torch.get_num_threads() == 1 else time.process_time
    events: list[tuple[float, float, str]] = []  # (wall, cpu, kind)

    def emit(event: dict[str, Any]) -> None:
        events.append((time.monotonic(), cpu(), event["kind"]))

    # the trainer's lines ("training 2 layers ...", each evaluation's losses) are a run's,
    # not the estimate's: kept off the server's terminal
    with tempfile.TemporaryDirectory(prefix="gptlab-lab-probe-run-") as run_dir, \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        train(task.model, task.settings(PROBE_STEPS, PROBE_EVERY, 0), data_dir,
              Path(run_dir) / "run", progress=False,
              callbacks=_ProbeCallbacks(threading.Event(), emit, task.prompt, tokenizer))
    (step_s, eval_s), (step_cpu, eval_cpu) = (stretches([(e[k], e[2]) for e in events])
                                              for k in (0, 1))
    return Probe(step_s, eval_s, probe.machine_load(), step_cpu, eval_cpu, time.monotonic())


def stretches(events: list[tuple[float, str]]) -> tuple[float, float]:
    """(seconds a step, seconds an evaluation) from the stretches between two logged steps
    ((clock, kind) events, "train" for a logged step): a stretch without an evaluation is
    its steps alone (the median of them gives a step); one with an evaluation (the trainer
    evaluates after logging its step) is its steps and the evaluation, whose own time is
    what is left beyond the steps (the median of them gives an evaluation)."""
    logged = [i for i, (_, kind) in enumerate(events) if kind == "train"]
    steps, with_eval = [], []
    for a, b in zip(logged, logged[1:], strict=False):
        seconds = events[b][0] - events[a][0]
        # logged every LOG steps: a stretch is that many (TrainConfig.log_interval)
        (with_eval if any(kind == "eval" for _, kind in events[a + 1:b]) else steps).append(seconds)
    step = statistics.median(steps) / LOG
    return step, statistics.median(s - LOG * step for s in with_eval)


def estimate(task: str, steps: int, every: int) -> dict[str, Any]:
    """The estimated seconds of a training of `steps` steps evaluated every `every`, as
    loaded as the machine is now and on a quiet one (its work), with what it is made of."""
    p = probe_task(task)
    evaluations = steps // every + 1  # at step 0, every `every` steps, and the last
    seconds = steps * p.step_s + evaluations * p.eval_s
    work = (steps * p.step_cpu_s + evaluations * p.eval_cpu_s
            if p.step_cpu_s is not None else seconds)
    return {"task": task, "steps": steps, "every": every, "seconds": round(seconds, 1),
            "low": round(min(work, seconds), 1), "high": round(seconds, 1),
            "step_ms": round(p.step_s * 1000, 1), "eval_ms": round(p.eval_s * 1000, 1),
            "evaluations": evaluations, "load": p.load, "cpus": probe.cores(),
            "threads": torch.get_num_threads(),
            "words": words(seconds, work, p, probe.cores())}


def words(seconds: float, work: float, p: Probe, cpus: int) -> str:
    """'about 1 min 50 s (at this machine's load now, 7.1 on 2 CPU cores; 30 s of computing,
    what a quiet machine takes; ...)', the quiet machine left out where it says the same."""
    load = f", {p.load:.1f} on {cpus} CPU cores" if p.load is not None else ""
    quiet = (f"; {duration(work)} of computing, what a quiet machine takes"
             if duration(work) != duration(seconds) else "")
    return (f"about {duration(seconds)} (at this machine's load now{load}{quiet}; an estimate "
            f"from a probe of the training: {p.step_s * 1000:.0f} ms a step, {p.eval_s:.2f} s an "
            f"evaluation)")


def duration(seconds: float) -> str:
    """'45 s', '2 min', '1 min 50 s' (to 5 s past a minute)."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    minutes, rest = divmod(5 * math.ceil(seconds / 5), 60)
    return f"{minutes} min" + (f" {rest} s" if rest else "")
