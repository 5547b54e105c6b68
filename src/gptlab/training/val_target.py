"""`stop_at_val` (`gptlab train --stop-at-val LOSS`): end a run as soon as the loss over the
whole val split is at most a target, with a checkpoint there.

The quantity is `gptlab eval RUN --data DATA`'s: the mean loss over every token of the val
split, scored in windows of block_size sliding by half of it (gptlab.inference.evaluate),
the model in eval mode. A run that trains under autocast (bf16 on a CPU where the probe
found it faster) looks under the same autocast: on the speedrun's models a whole-split
score takes 0.6x the float32 one's time, and differs from it by about 1e-4 (float32
being what `gptlab eval` computes). So that the difference can never turn a miss into a
stop, an autocast whole that is at most the target by less than CONFIRM_MARGIN is scored
again in float32, and that figure decides (and is the one reported): what stops the run
is either float32's figure, the one `gptlab eval` prints for the saved weights
afterwards (to float32 rounding: the windows go through the model in other batches), or
an autocast figure CONFIRM_MARGIN (20x the difference seen) below the target.

A whole-split score costs tens of training steps on the speedrun's small models (about
2 s against 50 ms a step), so the run does not score it at every step. It looks at rungs:

- an estimate first: every SAMPLE-th of the whole split's windows (an eighth of its tokens,
  spread evenly over it), the same windows at every look. Its standard error is computed at
  each look from the spread of its windows' losses (with the finite-population correction)
  and reported; on a split of fewer than SAMPLE x MIN_WINDOWS windows the estimate is the
  whole split;
- the whole split only once the estimate is at or below the target (MARGIN_SE standard
  errors above it, 0), after a whole score the estimate corrected by the difference
  (whole - estimate) measured then. The whole split is the estimate's windows plus the
  rest, so it costs the rest only. Why no margin: the rest costs about 7x the estimate
  (31-38 training steps on the speedrun's models, 1 thread), and a whole score that
  fails is that cost again later, while scoring it a standard error too late costs the
  steps the loss takes to fall by one (about 14 on lap 2 near 1.70): looking at 2 se
  above the target, most first whole scores would fail; at the target, about half;
- only the whole split decides: the run stops when it is <= the target;
- where to look (`next_look`): first at half the planned steps; then, from the last two
  looks' losses, where the straight line through them crosses the target (at least
  `every` steps on, at most half the steps left, and never past max_iters, where the
  run's end scores the whole split anyway); with one look only, a quarter of the steps
  that are left.

A resumed run keeps the setting (it is in train.json) and looks again from its step.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from gptlab.inference.evaluate import DEFAULT_EVAL_TOKENS, window_nlls, windows

SAMPLE = 8  # the estimate scores every SAMPLE-th window of the whole split
MIN_WINDOWS = 64  # fewer in the estimate than this: the estimate is the whole split
MARGIN_SE = 0.0  # the whole split is scored once the estimate is this many se from target
CALIBRATED_MARGIN_SE = 0.0  # the same after a whole score measured the estimate's offset
FIRST_LOOK = 0.5  # the first look, as a share of the planned steps
# A line's crossing at most this share of the steps left ahead: as the learning rate
# decays the loss falls faster than the line through two earlier looks, whose crossing
# came late (a lap-2 run with Muon at 0.05: looks at 180 and 230 put it at 353, the end
# at 360 was the next look; capped, the next is at 300).
MAX_AHEAD = 0.5
# An autocast whole split this close below the target is scored again in float32, which
# decides (the module's docstring). The speedrun's bf16 wholes differed from float32's by
# 1e-4 and less (BENCHMARKS.md, speedrun, lap 3).
CONFIRM_MARGIN = 0.002


@dataclass(frozen=True)
class Look:
    """One look at the val loss, at `step`."""

    step: int
    estimate: float  # the sample's mean loss (the whole split's where the sample is whole)
    se: float  # the estimate's standard error (0: it is the whole split)
    whole: float | None  # the whole split's mean loss, where it was scored
    met: bool  # whole <= target: the run stops here
    autocast: str | None = None  # the dtype the figures were computed under; None: float32
    whole_autocast: str | None = None  # the whole's (None: float32, after a confirmation)

    def record(self, target: float) -> dict:
        """The run's record of it (metrics.jsonl), kind "val_target"."""
        return {"kind": "val_target", "step": self.step, "target": target,
                "estimate": self.estimate, "estimate_se": self.se, "whole": self.whole,
                "met": self.met, "autocast": self.autocast,
                "whole_autocast": self.whole_autocast}


def round_up(steps: float, every: int) -> int:
    return max(every, every * math.ceil(steps / every))


def next_look(step: int, max_iters: int, every: int, target: float,
              looks: list[tuple[int, float]]) -> int:
    """The step of the next look after `looks` ((step, loss) of each earlier one, the loss
    being the whole split's or the corrected estimate), at most max_iters."""
    if not looks:
        return min(max_iters, round_up(max_iters * FIRST_LOOK, every))
    last_step, last = looks[-1]
    left = max_iters - last_step
    ahead = left / 4
    if len(looks) >= 2:
        prev_step, prev = looks[-2]
        slope = (prev - last) / max(last_step - prev_step, 1)  # loss drop per step
        if slope > 0:
            ahead = min(max(last - target, 0.0) / slope, left * MAX_AHEAD)
    return min(max_iters, last_step + round_up(ahead, every))


def whole_is_due(estimate: float, se: float, target: float, offset: float | None) -> bool:
    """Whether the estimate is close enough to the target to score the whole split."""
    if offset is None:
        return estimate <= target + MARGIN_SE * se
    return estimate + offset <= target + CALIBRATED_MARGIN_SE * se


class Interrupted(Exception):
    """A stop was requested during a look: the run stops as it would without it."""


class ValTarget:
    """Looks at the whole-split val loss of a model as the module's docstring says.

    model: returns the model to score (its forward `model(idx) -> (logits, _)`); val: the
    split's token ids; stop_requested: polled between batches, a look ends unfinished (None)
    when it says so."""

    def __init__(self, target: float, val: torch.Tensor, block_size: int, max_iters: int,
                 every: int, stop_requested: Callable[[], bool] = lambda: False) -> None:
        self.target, self.max_iters, self.every = target, max_iters, every
        self.val = val.to(torch.long)
        self.stop_requested = stop_requested
        spans = windows(len(val), block_size, max(1, block_size // 2))
        sampled = spans[::SAMPLE] if len(spans) >= SAMPLE * MIN_WINDOWS else spans
        chosen = set(sampled)
        self.sample, self.rest = sampled, [w for w in spans if w not in chosen]
        self.batch_size = max(1, DEFAULT_EVAL_TOKENS // block_size)
        self.looks: list[tuple[int, float]] = []  # (step, loss) for next_look
        self.offset: float | None = None  # whole - estimate at the last whole score
        self.due: int | None = None  # the step of the next look (set by start)

    def start(self, step: int) -> None:
        """Plan the first look of a run at `step` (0, or a resume's checkpoint step)."""
        self.looks = []
        first = next_look(0, self.max_iters, self.every, self.target, [])
        self.due = first if first > step else min(self.max_iters, step + self.every)

    def is_due(self, step: int) -> bool:
        return self.due is not None and step >= self.due and step < self.max_iters

    @torch.no_grad()
    def look(self, model: nn.Module, step: int, autocast: torch.dtype | None = None
             ) -> Look | None:
        """Score the estimate, then the whole split if it is due; plan the next look. None
        if a stop was requested meanwhile. autocast: the dtype training autocasts to (the
        looks use it too), None for float32."""
        name = None if autocast is None else str(autocast).removeprefix("torch.")
        whole_name = name
        try:
            nll, counts = self._score(model, self.sample, autocast)
            estimate = float(nll.sum() / counts.sum())
            se = self._standard_error(nll, counts)
            whole = None
            if se == 0.0:
                whole = estimate
            elif whole_is_due(estimate, se, self.target, self.offset):
                rest_nll, rest_counts = self._score(model, self.rest, autocast)
                whole = float((nll.sum() + rest_nll.sum()) / (counts.sum() + rest_counts.sum()))
                self.offset = whole - estimate
            if autocast is not None and whole is not None and (
                    self.target - CONFIRM_MARGIN < whole <= self.target):
                whole, whole_name = self._float32_whole(model), None
        except Interrupted:
            return None
        seen = whole if whole is not None else estimate + (self.offset or 0.0)
        self.looks.append((step, seen))
        self.due = next_look(step, self.max_iters, self.every, self.target, self.looks)
        return Look(step, estimate, se, whole, whole is not None and whole <= self.target,
                    name, whole_name if whole is not None else None)

    def _float32_whole(self, model: nn.Module) -> float:
        """The whole split's mean loss in float32 (gptlab eval's)."""
        nll, counts = self._score(model, self.sample + self.rest, None)
        return float(nll.sum() / counts.sum())

    def _score(self, model: nn.Module, spans: list, autocast: torch.dtype | None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(summed NLL, tokens scored) of each window, float64, in `spans`' order, under
        autocast to that dtype (None: none)."""

        def stop() -> None:
            if self.stop_requested():
                raise Interrupted

        cast = (contextlib.nullcontext() if autocast is None else
                torch.autocast(next(model.parameters()).device.type, dtype=autocast))
        nll, counts = [], []
        with cast:
            for batch, losses in window_nlls(model, self.val, spans, self.batch_size, stop):
                for row, (_, _, first) in enumerate(batch):
                    nll.append(losses[row, first - 1:].double().sum())
                    counts.append(losses.size(1) - first + 1)
        return torch.stack(nll).cpu(), torch.tensor(counts, dtype=torch.float64)

    def _standard_error(self, nll: torch.Tensor, counts: torch.Tensor) -> float:
        """Of the sample's mean loss as an estimate of the whole split's: a ratio estimator
        over windows drawn from all of them, with the finite-population correction."""
        n = len(counts)
        total = n + len(self.rest)
        if not self.rest or n < 2:
            return 0.0
        mean = nll.sum() / counts.sum()
        residuals = nll - mean * counts
        var = residuals.square().sum() / (n - 1) / (counts.mean() ** 2) / n
        return float(torch.sqrt(var * (1 - n / total)))
