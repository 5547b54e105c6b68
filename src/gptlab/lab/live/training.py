"""Watch it learn: one training at a time, started from the page, streamed as it runs.

The training is gptlab.training.run.train itself, in a background thread, into an ordinary run
folder (runs/live-<task>): resumable with `gptlab train --resume`, openable in every view.
train()'s callbacks carry it (LiveCallbacks, gptlab.training.callbacks): should_stop says
yes once the Stop button is pressed (the trainer checkpoints and ends before the next step),
and the reporter, LiveReporter below, does what the CLI's reporter does and also turns each
logged step and each evaluation into an event.

At every evaluation the reporter also measures the model: every head's previous-token,
duplicate-token and induction score on a fixed probe (random tokens repeated twice,
gptlab.interp.heads.induction_probe) and a short seeded sample, so the page can draw the phase
change as it happens.

Events are kept in a list for the whole training, so a page that subscribes late (or
twice) gets everything from the start; GET /api/live/events streams them as Server-Sent
Events and ends after the "end" event.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from gptlab.data.tokenizer import load_tokenizer
from gptlab.errors import GptlabError
from gptlab.files import kinds
from gptlab.inference.sampling import generate_text
from gptlab.interp.heads import chance_scores, induction_probe, repeated_random_tokens
from gptlab.lab.live import tasks
from gptlab.model.decoding import SamplingSettings
from gptlab.training.callbacks import Callbacks
from gptlab.training.reporting import RunReporter
from gptlab.training.run import train

OWNER = "lab"  # in the marks of the folders it writes (gptlab.files.kinds)
PROBE_SEED = 0  # the same probe at every evaluation, so the curves compare like with like
PROBE_BATCH = 4
SAMPLE_TOKENS = 60
SAMPLE_SETTINGS = SamplingSettings(temperature=0.8)
KEEPALIVE_S = 10.0  # an SSE comment line this often, so proxies keep the stream open
# Event streams open at once. Each holds one of the server's worker threads while it waits
# for the next event (anyio's pool has 40, shared with every view), so more are refused.
MAX_FOLLOWERS = 8


class Busy(GptlabError):
    """A training is already running (the server answers 409)."""


class TooManyFollowers(GptlabError):
    """MAX_FOLLOWERS event streams are open already (the server answers 429)."""


class LiveReporter(RunReporter):
    """The CLI's RunReporter (metrics.jsonl, loss.png), plus an event per
    logged step and per evaluation, handed to `emit`."""

    def __init__(self, files, emit, prompt: str, tokenizer) -> None:
        super().__init__(files, progress=False, plot_each_eval=False)
        self.emit, self.prompt, self.tokenizer = emit, prompt, tokenizer

    def step(self, record: dict[str, Any] | None) -> None:
        super().step(record)
        if record is not None:
            self.emit({"kind": "train", "step": record["step"], "loss": record["loss"]})

    def evaluation(self, record: dict[str, Any], model, improved: bool) -> None:
        super().evaluation(record, model, improved)
        self.emit({"kind": "eval", "step": record["step"], "train_loss": record["train_loss"],
                   "val_loss": record["val_loss"], **measure(model, self.prompt, self.tokenizer)})


class LiveCallbacks(Callbacks):
    """The lab's hooks into train(): its runs marked as the lab's, a LiveReporter, and a stop
    once `stop` is set (the Stop button)."""

    owner = OWNER

    def __init__(self, stop: threading.Event, emit: Callable[[dict[str, Any]], None],
                 prompt: str, tokenizer) -> None:
        self.stop, self.emit, self.prompt, self.tokenizer = stop, emit, prompt, tokenizer

    def make_reporter(self, files, progress: bool) -> LiveReporter:
        return LiveReporter(files, self.emit, self.prompt, self.tokenizer)

    def should_stop(self, step: int) -> bool:
        return self.stop.is_set()


def measure(model, prompt: str, tokenizer) -> dict[str, Any]:
    """Every head's scores on the probe, the loss on its two halves, and a seeded sample."""
    half = model.config.block_size // 2
    probe = induction_probe(model, half, PROBE_BATCH,
                                   torch.Generator().manual_seed(PROBE_SEED))
    sample = generate_text(model, tokenizer.encode, tokenizer.decode, prompt, SAMPLE_TOKENS,
                           SAMPLE_SETTINGS, generator=torch.Generator().manual_seed(0))
    return {"scores": {name: grid.tolist() for name, grid in probe["scores"].items()},
            "loss_first_half": probe["loss_first_half"],
            "loss_second_half": probe["loss_second_half"],
            "prompt": prompt, "sample": sample}


class Session:
    """One training: its thread, its stop Event and the events it has produced."""

    def __init__(self, task: str, run: str, steps: int, every: int) -> None:
        self.task, self.run, self.steps, self.every = task, run, steps, every
        self.stop = threading.Event()
        self.events: list[dict[str, Any]] = []
        self.changed = threading.Condition()
        self.done = False
        self.step = 0
        self.started = time.monotonic()

    def emit(self, event: dict[str, Any]) -> None:
        event = {**event, "elapsed_s": round(time.monotonic() - self.started, 2)}
        with self.changed:
            self.step = event.get("step", self.step)
            self.events.append(event)
            self.done = self.done or event["kind"] == "end"
            self.changed.notify_all()

    def follow(self, start: int = 0, keepalive_s: float = KEEPALIVE_S) -> Iterator[dict | None]:
        """Every event from index `start` on, waiting for new ones until "end"; None when
        nothing came for keepalive_s."""
        i = start
        while True:
            with self.changed:
                if i >= len(self.events) and not self.done:
                    self.changed.wait(keepalive_s)
                new = self.events[i:]
                done = self.done
            i += len(new)
            yield from new
            if done and not new:
                return
            if not new:
                yield None


class LiveTrainer:
    """The lab's one training slot."""

    def __init__(self, runs_root: Path) -> None:
        self.root = Path(runs_root)
        self.session: Session | None = None
        self._lock = threading.Lock()
        self._followers = threading.BoundedSemaphore(MAX_FOLLOWERS)

    def follower(self) -> Callable[[], None]:
        """Take one of MAX_FOLLOWERS event-stream slots (TooManyFollowers if none is free);
        returns what gives it back."""
        if not self._followers.acquire(blocking=False):
            raise TooManyFollowers(f"{MAX_FOLLOWERS} event streams are open already; close a "
                                   f"page that follows the training, or follow "
                                   f"GET /api/live/status")
        return self._followers.release

    def start(self, task: str, steps: int, every: int, seed: int) -> dict[str, Any]:
        with self._lock:
            s = self.session
            if s is not None and not s.done:
                raise Busy(f"a training is already running ({s.run}, step {s.step} of "
                           f"{s.steps}); stop it first")
            run = f"live-{task}"
            session = Session(task, run, steps, every)
            self.session = session
        thread = threading.Thread(target=self._train, args=(session, seed), daemon=True,
                                  name=f"gptlab-lab-{run}")
        thread.start()
        return self.status()

    def stop(self) -> dict[str, Any]:
        s = self.session
        if s is None or s.done:
            raise Busy("no training is running")
        s.stop.set()
        return self.status()

    def status(self) -> dict[str, Any]:
        s = self.session
        if s is None:
            return {"running": False, "run": None, "task": None, "step": 0, "steps": 0}
        return {"running": not s.done, "run": s.run, "task": s.task, "step": s.step,
                "steps": s.steps}

    def _train(self, s: Session, seed: int) -> None:
        task = tasks.TASKS[s.task]
        end: dict[str, Any] = {"kind": "end", "run": s.run}
        try:
            data_dir = tasks.ensure_data(self.root, s.task)
            tokenizer = load_tokenizer(data_dir / "tokenizer.json")
            s.emit({"kind": "start", "run": s.run, "task": s.task, "steps": s.steps,
                    "every": s.every, "n_layer": task.model.n_layer,
                    "n_head": task.model.n_head,
                    "chance": chance(tokenizer.vocab_size, task.model.block_size),
                    "data": str(data_dir), "description": task.description})
            settings = task.settings(s.steps, s.every, seed)
            run_dir = self.root / s.run
            # The lab replaces a run of its own; one gptlab train wrote there is kept.
            result = train(task.model, settings, data_dir, run_dir,
                           overwrite=kinds.recognise(run_dir).by == OWNER, progress=False,
                           callbacks=LiveCallbacks(s.stop, s.emit, task.prompt, tokenizer))
            # Stopped early: resume to the steps asked for; finished: twice as far.
            done = result.status == "finished"
            end.update(status=result.status, step=result.step,
                       message=f"{result.status} at step {result.step} of {s.steps} in "
                               f"{result.elapsed_s:.0f} s; "
                               f"{'train on' if done else 'finish it'} with: gptlab train "
                               f"--data {data_dir} --out {self.root / s.run} --resume "
                               f"--max-iters {2 * s.steps if done else s.steps}")
        except Exception as exc:  # the page shows it; the server goes on
            end.update(status="failed", step=s.step, message=str(exc).splitlines()[0]
                       if str(exc) else type(exc).__name__)
        s.emit(end)


def chance(vocab_size: int, block_size: int) -> dict[str, float]:
    """The chance level of each score on measure()'s probe (a head attending uniformly);
    the probe is drawn as gptlab.interp.heads.induction_probe draws it."""
    tokens = repeated_random_tokens(vocab_size, block_size // 2, PROBE_BATCH,
                                           torch.Generator().manual_seed(PROBE_SEED))
    return chance_scores(tokens)


def sse(events: Iterator[dict | None]) -> Iterator[str]:
    """Server-Sent Events: one `data: <json>` block per event, a comment as keep-alive."""
    for event in events:
        yield ": keep-alive\n\n" if event is None else f"data: {json.dumps(event)}\n\n"
