"""Where a run's progress goes: the one object the trainer reports to.

Rank 0 keeps the run's record (metrics.jsonl and the loss curve) and shows a progress bar and
one line per evaluation on stderr; every other rank gets a NullReporter, so the trainer never
asks which rank it is on. A reporter only reports: checkpoints and best/ are the run
directory's (gptlab.training.rundir.Checkpoints), kept whatever reporter a run has.
"""

from __future__ import annotations

import sys
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


class Reporter(NullReporter):
    """metrics.jsonl and loss.png through `files`; a tqdm progress bar (if `progress`) and
    evaluation lines on stderr."""

    def __init__(self, files: RunFiles, progress: bool = True, plot_each_eval: bool = True
                 ) -> None:
        self.files, self.progress, self.bar = files, progress, None
        # False: loss.png is drawn once, at the end (a frequent evaluator, such as the lab's
        # live view, would otherwise spend more time plotting than training)
        self.plot_each_eval = plot_each_eval

    def open(self, total: int, initial: int) -> None:
        if self.progress:
            self.bar = tqdm(total=total, initial=initial, unit="it", dynamic_ncols=True,
                            file=sys.stderr, smoothing=0.1)

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
