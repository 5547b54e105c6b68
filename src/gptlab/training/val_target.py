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
an autocast figure CONFIRM_MARGIN (4x the largest difference seen) below the target.

A whole-split score costs tens of training steps on the speedrun's small models (about
1.3 s against 35 ms a step), so the run does not score it at every step. It looks at rungs,
and a look scores the split's windows in nested samples, stopping as soon as it knows enough:

- every 32nd window first (spread evenly over the split), then the windows that make it
  every 16th, every 8th, 4th, 2nd, and last the rest: the whole split. After each sample
  but the whole, its mean is an estimate of the whole's, with a standard error computed
  from the spread of its windows' losses (with the finite-population correction). The look
  ends there, the whole not scored, once the estimate is more than ABOVE_SE standard errors
  above the target: far from it, that is after the first sample (3% of the whole's cost);
  near it, the samples grow until either the estimate is clearly above or the whole is
  scored. Why sequential: a whole that fails costs the whole again later, and a look that
  does not score it when it would have met the target costs the steps to the next look;
  the nested samples buy the certainty as it is needed (a split of fewer than 32 x
  MIN_WINDOWS windows has fewer samples; fewer than 2 x MIN_WINDOWS, the whole only);
- after a whole score, each sample's estimate is corrected by its measured difference from
  the whole (the same windows at every look: their bias changes slowly);
- only the whole split decides: the run stops when it is <= the target;
- where to look (`next_look`): first at half the planned steps; then where the straight
  line through the last look's loss, with the slope of the first sample's estimates (the
  same windows at both looks) since a look at least SLOPE_BASE steps earlier (or the
  first), crosses the target (at least `every` steps on, at most MAX_AHEAD of the steps
  left, and never past max_iters, where the run's end scores the whole split anyway); with
  one look only, a quarter of the steps that are left.

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

# The strides of a look's nested samples (every 32nd window, ...), the whole split after them.
STRIDES = (32, 16, 8, 4, 2)
MIN_WINDOWS = 64  # a sample of fewer windows than this is not scored
# A look ends once its estimate is this many standard errors above the target. Before the
# first whole score a sample's bias is unknown, and of the order of its se: at 1.0, a look
# of the 1.70 speedrun at 270 (1/16 of the windows: 1.7276, se 0.0225) ended there and the
# run stopped at 290; at 1.5 that look went on to the whole split, 1.6990, and stopped the
# run at 270.
ABOVE_SE = 1.5
FIRST_LOOK = 0.5  # the first look, as a share of the planned steps
# The slope that places the next look is taken since a look at least this many steps back:
# between looks 10 steps apart the val loss wiggles by as much as it falls.
SLOPE_BASE = 30
# A line's crossing at most this share of the steps left ahead: as the learning rate
# decays the loss falls faster than the line through two earlier looks, whose crossing
# comes late (the 1.70 speedrun, seed 1339: capped at half the 60 steps left, the
# look after 270 came at 300, whose whole was 1.6729, far under; at a quarter it comes at
# 290, 1.6810). Far from the target a look costs its first sample only, so looking often
# there is cheap.
MAX_AHEAD = 0.25
# An autocast whole split this close below the target is scored again in float32, which
# decides (the module's docstring). The speedrun's bf16 wholes differed from float32's by
# 1.2e-4 at most (six of its models): 4x that.
CONFIRM_MARGIN = 0.0005


@dataclass(frozen=True)
class Look:
    """One look at the val loss, at `step`."""

    step: int
    estimate: float  # the largest sample's mean loss (the whole split's where it was scored)
    se: float  # the estimate's standard error (0: it is the whole split)
    whole: float | None  # the whole split's mean loss, where it was scored
    met: bool  # whole <= target: the run stops here
    autocast: str | None = None  # the dtype the figures were computed under; None: float32
    whole_autocast: str | None = None  # the whole's (None: float32, after a confirmation)
    share: float = 1.0  # of the split's windows the estimate is on (1/32 ... 1)

    def record(self, target: float) -> dict:
        """The run's record of it (metrics.jsonl), kind "val_target"."""
        return {"kind": "val_target", "step": self.step, "target": target,
                "estimate": self.estimate, "estimate_se": self.se,
                "estimate_share": self.share, "whole": self.whole, "met": self.met,
                "autocast": self.autocast, "whole_autocast": self.whole_autocast}


@dataclass(frozen=True)
class Seen:
    """What a look saw, for placing the next: the loss (the whole's, or the largest
    sample's corrected estimate) and the first sample's estimate (the same windows at
    every look, for the slope)."""

    step: int
    loss: float
    trend: float


def round_up(steps: float, every: int) -> int:
    return max(every, every * math.ceil(steps / every))


def next_look(step: int, max_iters: int, every: int, target: float,
              looks: list[Seen]) -> int:
    """The step of the next look after `looks`, at most max_iters."""
    if not looks:
        return min(max_iters, round_up(max_iters * FIRST_LOOK, every))
    last = looks[-1]
    left = max_iters - last.step
    ahead = left / 4
    if len(looks) >= 2:
        base = next((s for s in reversed(looks[:-1]) if last.step - s.step >= SLOPE_BASE),
                    looks[0])
        slope = (base.trend - last.trend) / max(last.step - base.step, 1)  # drop per step
        if slope > 0:
            ahead = min(max(last.loss - target, 0.0) / slope, left * MAX_AHEAD)
    return min(max_iters, last.step + round_up(ahead, every))


def keeps_scoring(estimate: float, se: float, target: float, offset: float | None) -> bool:
    """Whether a look goes on to the next sample: its estimate (corrected by the offset a
    whole score measured for this sample, if one did) is not clearly above the target."""
    return estimate + (offset or 0.0) <= target + ABOVE_SE * se


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
        self.spans = windows(len(val), block_size, max(1, block_size // 2))
        # the windows in scoring order, and where each sample ends in it: every stride-th
        # window is the first `ends[k]` of `order`
        strides = [k for k in STRIDES if len(self.spans) >= k * MIN_WINDOWS] + [1]
        self.order: list[int] = []
        self.ends: list[int] = []
        for stride in strides:
            chosen = set(self.order)
            self.order += [i for i in range(0, len(self.spans), stride) if i not in chosen]
            self.ends.append(len(self.order))
        self.batch_size = max(1, DEFAULT_EVAL_TOKENS // block_size)
        self.looks: list[Seen] = []
        self.offsets: list[float] | None = None  # whole - each sample's, at the last whole
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
        """Score the nested samples until one is clearly above the target or the whole split
        is scored; plan the next look. None if a stop was requested meanwhile. autocast:
        the dtype training autocasts to (the looks use it too), None for float32."""
        name = None if autocast is None else str(autocast).removeprefix("torch.")
        whole_name = name
        nll = torch.zeros(0, dtype=torch.float64)
        counts = torch.zeros(0, dtype=torch.float64)
        whole = offset = None
        trend = math.nan
        try:
            for k, end in enumerate(self.ends):
                part = [self.spans[i] for i in self.order[len(counts):end]]
                more_nll, more_counts = self._score(model, part, autocast)
                nll, counts = torch.cat([nll, more_nll]), torch.cat([counts, more_counts])
                mean, se = self._estimate(nll, counts)
                if end == len(self.spans):  # every window: the whole split
                    whole = mean
                    break
                estimate, reported_se, share = mean, se, end / len(self.spans)
                offset = self.offsets[k] if self.offsets is not None else None
                if k == 0:
                    trend = estimate  # the first sample's: the same windows every look
                if not keeps_scoring(estimate, se, self.target, offset):
                    break
            if whole is not None:
                if len(self.ends) == 1:  # a split too small for samples
                    estimate, reported_se, share, trend = whole, 0.0, 1.0, whole
                self.offsets = [whole - self._estimate(nll[:e], counts[:e])[0]
                                for e in self.ends]
                if autocast is not None and self.target - CONFIRM_MARGIN < whole <= self.target:
                    whole, whole_name = self._float32_whole(model), None
        except Interrupted:
            return None
        seen = whole if whole is not None else estimate + (offset or 0.0)
        self.looks.append(Seen(step, seen, trend))
        self.due = next_look(step, self.max_iters, self.every, self.target, self.looks)
        return Look(step, estimate, reported_se, whole,
                    whole is not None and whole <= self.target, name,
                    whole_name if whole is not None else None, share=share)

    def _float32_whole(self, model: nn.Module) -> float:
        """The whole split's mean loss in float32 (gptlab eval's)."""
        nll, counts = self.window_losses(model)
        return float(nll.sum() / counts.sum())

    def window_losses(self, model: nn.Module, autocast: torch.dtype | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """(summed NLL, tokens scored) of every window of the split, float64, in `spans`'
        order: the whole split as a look scores it (bench.stop_replay records these)."""
        return self._score(model, self.spans, autocast)

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
                # a window scores its positions from `first` on: entries first - 1 onwards
                skip = torch.tensor([first - 1 for _, _, first in batch], device=losses.device)
                scored = torch.arange(losses.size(1), device=losses.device) >= skip[:, None]
                nll.append(torch.where(scored, losses.double(), 0.0).sum(1))
                counts.append(scored.sum(1))
        return torch.cat(nll).cpu(), torch.cat(counts).cpu().double()

    def _estimate(self, nll: torch.Tensor, counts: torch.Tensor) -> tuple[float, float]:
        """(mean loss, its standard error) of the windows scored so far, the first n of
        `order`, as an estimate of the whole split's: a ratio estimator over a sample of
        all the windows, with the finite-population correction (0 once they are all)."""
        n, total = len(counts), len(self.spans)
        mean = nll.sum() / counts.sum()
        if n >= total or n < 2:
            return float(mean), 0.0
        residuals = nll - mean * counts
        var = residuals.square().sum() / (n - 1) / (counts.mean() ** 2) / n
        return float(mean), float(torch.sqrt(var * (1 - n / total)))
