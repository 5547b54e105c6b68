"""Request and answer models of the watch-it-learn view (gptlab.lab.live), whose routes are
gptlab.lab.live.routes. Same conventions as gptlab.lab.fields (strict scalars, one-line
errors, every limit in the schema)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from gptlab.lab.fields import Body, Seed, _int

LIVE_TASKS = ("induction", "shakespeare")
MAX_LIVE_STEPS = 5000


class LiveEstimateRequest(Body):
    task: Literal[LIVE_TASKS] = "induction"
    steps: _int(10, MAX_LIVE_STEPS, "optimizer steps") = 1500
    every: _int(5, 1000, "evaluate, score the heads and sample every N steps") = 25

    @model_validator(mode="after")
    def _every(self) -> LiveEstimateRequest:
        if self.every > self.steps:
            raise ValueError(f"every ({self.every}) must not exceed steps ({self.steps})")
        return self


class LiveStartRequest(LiveEstimateRequest):
    seed: Seed = 1337


class LiveEstimate(BaseModel):
    task: Literal[LIVE_TASKS]
    steps: int
    every: int
    seconds: float = Field(description="the estimated wall time of the training")
    low: float = Field(description="the estimate at the probe's fastest stretch")
    high: float = Field(description="the estimate at the probe's slowest stretch")
    step_ms: float = Field(description="one optimizer step with the trainer's bookkeeping, "
                                       "as the probe timed it")
    eval_ms: float = Field(description="one evaluation (losses, heads' scores, sample)")
    evaluations: int
    load: float | None = Field(description="the machine's load average at the probe")
    cpus: int
    threads: int = Field(description="torch's threads in the server")
    words: str = Field(description="the estimate in a sentence, said to be one")


class LiveStatus(BaseModel):
    running: bool
    run: str | None = Field(description="the run folder inside the runs folder")
    task: Literal[LIVE_TASKS] | None
    step: int
    steps: int
