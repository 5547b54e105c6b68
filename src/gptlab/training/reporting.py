"""Where a run's progress goes: the one object the trainer reports to.

Rank 0 keeps the run's record (metrics.jsonl and the loss curve) and shows a progress bar and
one line per evaluation on stderr; every other rank gets a NullReporter, so the trainer never
asks which rank it is on. Where stderr is not a terminal (a CI log, `| tee`, a notebook's
captured output) a bar's carriage-return frames would pile up, one per redraw: there the
progress is a plain line at most every PLAIN_LINE_S seconds instead. A reporter only
reports: checkpoints and best/ are the run directory's (gptlab.training.rundir.Checkpoints),
kept whatever reporter a run has.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from torch import nn
from tqdm.auto import tqdm

from gptlab.training.rundir import RunFiles


class NullReporter:
    """Reports nothing (torchrun ranks > 0, benchmarks)."""

    def open(self, total: int, initial: int) -> None: ...

    def close(self) -> None: ...

    def step(self, record: dict[str, Any] | None) -> None: ...

    def evaluation(self, record: dict[str, Any], model: nn.Module, improved: bool) -> None: ...

    def whole_val(self, record: dict[str, Any]) -> None: ...

    def diverged(self, record: dict[str, Any]) -> None:
        """The run stopped on a loss or weight that is not finite (TrainingDiverged's
        record); the error itself says so to the user."""


PLAIN_LINE_S = 30.0


def is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Reporter(NullReporter):
    """metrics.jsonl and loss.png through `files`; a tqdm progress bar (if `progress`) and
    evaluation lines on stderr."""

    def __init__(self, files: RunFiles, progress: bool = True, plot_each_eval: bool = True
                 ) -> None:
        self.files, self.progress, self.bar = files, progress, None
        self.plain: dict[str, float] | None = None  # the plain lines' clock, off a terminal
        # False: loss.png is drawn once, at the end (a frequent evaluator, such as the lab's
        # live view, would otherwise spend more time plotting than training)
        self.plot_each_eval = plot_each_eval

    def open(self, total: int, initial: int) -> None:
        if not self.progress:
            return
        if is_terminal(sys.stderr):
            self.bar = tqdm(total=total, initial=initial, unit="it", dynamic_ncols=True,
                            file=sys.stderr, smoothing=0.1)
        else:
            now = time.monotonic()
            self.plain = {"total": total, "initial": initial, "start": now,
                          "next": now + PLAIN_LINE_S}

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if not self.plot_each_eval and self.files.records:
            self.files.plot()

    def step(self, record: dict[str, Any] | None) -> None:
        """One optimizer step done; `record` when it is a logging step."""
        if self.bar is not None:
            self.bar.update(1)
        if record is None:
            return
        self.files.log(record)
        if self.bar is not None:
            self.bar.set_postfix_str(f"loss {record['loss']:.4f}, "
                                     f"{record['tokens_per_s']:,.0f} tok/s", refresh=False)
        elif self.plain is not None and time.monotonic() >= self.plain["next"]:
            self._plain_line(record)

    def _plain_line(self, record: dict[str, Any]) -> None:
        clock, now = self.plain, time.monotonic()
        clock["next"] = now + PLAIN_LINE_S
        step, total = record["step"], int(clock["total"])
        done = step - clock["initial"]
        left = (now - clock["start"]) / done * (total - step) if done > 0 else None
        eta = f", {_duration(left)} left" if left is not None else ""
        print(f"step {step} of {total} ({100 * step / max(total, 1):.0f}%): loss "
              f"{record['loss']:.4f}, {record['tokens_per_s']:,.0f} tok/s{eta}",
              file=sys.stderr)

    def evaluation(self, record: dict[str, Any], model: nn.Module, improved: bool) -> None:
        self.files.log(record)
        if self.plot_each_eval:
            self.files.plot()
        line = (f"step {record['step']}: train loss {record['train_loss']:.4f}, "
                f"val loss {record['val_loss']:.4f}")
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr)

    def whole_val(self, record: dict[str, Any]) -> None:
        self.files.log(record)
        print(f"step {record['step']}: whole val split, {record['tokens']:,} tokens: "
              f"loss {record['loss']:.4f}", file=sys.stderr)

    def diverged(self, record: dict[str, Any]) -> None:
        self.files.log(record)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
