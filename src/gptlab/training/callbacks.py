"""Hooks into a `train()` call, for a caller that follows or steers the run.

The pattern of Keras's and Lightning's callbacks, kept to what gptlab's own callers need:
subclass `Callbacks`, override a hook, and pass an instance as `train(..., callbacks=...)`.
Every default leaves the run as it would be without callbacks. The hooks, in the order a
run calls them:

1. `make_reporter(files, progress)`: once, on the process that writes the run directory
   (rank 0), after the run's first files are written (a resume's: its settings) and before
   its first step. It returns the reporter that every step, evaluation and the end are
   handed to (gptlab.training.reporting); the default is the one `gptlab train` uses. The
   lab returns one that also streams each step to the page; an experiment one that also
   measures the model at each evaluation.
2. `should_stop(step)`: on every process, before each optimizer step (`step`: the steps
   done so far; a resume starts at its checkpoint's), never after the last. True ends the
   run as Ctrl-C does: a checkpoint, status "interrupted", resumable with `resume=True`.
   Under torchrun the processes first agree, so they stop together, within
   gptlab.training.trainer.CHECK_EVERY steps.

`owner` names the command whose run it is, written in the run's mark (gptlab.files.kinds):
the demo's and the lab's callbacks say "demo" and "lab", whose runs they alone replace.

    from gptlab import train
    from gptlab.training.callbacks import StopAfter

    train(model, settings, "data", "run", callbacks=StopAfter(500))  # later: resume=True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch-free at import: a command defines its callbacks before torch loads
    from gptlab.training.reporting import Reporter
    from gptlab.training.rundir import RunFiles


class Callbacks:
    """A train() call's hooks; each default changes nothing (see the module's docstring for
    when each is called)."""

    owner: str = "train"  # the command that writes the run, in its mark

    def make_reporter(self, files: RunFiles, progress: bool) -> Reporter:
        """The reporter of the run's steps and evaluations (rank 0 only): by default
        metrics.jsonl, loss.png and, if `progress`, a progress bar on stderr."""
        # start-up time: reporting loads torch, which a command's callbacks must not wait for
        from gptlab.training.reporting import RunReporter

        return RunReporter(files, progress=progress)

    def should_stop(self, step: int) -> bool:
        """Whether to end the run before its next step, with `step` steps done."""
        return False


class StopAfter(Callbacks):
    """Stop once `steps` optimizer steps are done, with a checkpoint there, as an interruption
    would: train a long run in parts, each continued with resume=True."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def should_stop(self, step: int) -> bool:
        return step >= self.steps
