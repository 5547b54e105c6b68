"""Request and answer models of the experiments view (view 14: gptlab.lab.experiments.report)
and of an experiment's --quick form run from the page (gptlab.lab.experiments.quickrun),
whose routes are gptlab.lab.experiments.routes. Same conventions as gptlab.lab.fields
(strict scalars, one-line errors, every limit in the schema) and gptlab.lab.responses."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from gptlab.experiments import catalog
from gptlab.lab.experiments.quickrun import SEED
from gptlab.lab.fields import SHIPPED, Body, Seed, _text
from gptlab.lab.responses import QUICK

# ----------------------------------------------------------------------------- report


class ReportRequest(Body):
    experiment: _text(500, "an experiment's folder inside the runs folder", min_length=1)
    shipped: bool = SHIPPED


class ExperimentEntry(BaseModel):
    name: str = Field(description="its folder, relative to the runs folder; for shipped "
                                  "results, the experiment's name")
    experiment: str = Field(description="which experiment (context, norm, scale, ...)")
    shipped: str | None = Field(None, description="shipped results: what they are and where "
                                                  "and when they were measured; null: the "
                                                  "runs folder's")
    quick: bool = QUICK


class ExperimentList(BaseModel):
    experiments: list[ExperimentEntry]


class Table(BaseModel):
    title: str
    header: list[str]
    rows: list[list[str]]


class Precondition(BaseModel):
    """What must hold before a claim can be judged at all (a model that learned its task):
    unmet, the claim is undecided."""

    text: str
    value: float | None
    threshold: float
    met: bool


class ClaimVerdict(BaseModel):
    """One claim judged (gptlab.experiments.claims.evaluate), as results.json holds it; the
    last three fields are absent from results written before they were."""

    key: str
    sentence: str = Field(description="the chapter's claim")
    paper: str = Field(description="the paper's figure beside it")
    quantity: str = Field(description="what was measured")
    this_run: str = Field(description="what this run shows")
    verdict: str = Field(description="held, held weakly, not seen, contradicted or undecided")
    rule: str
    seeds: list[int]
    effects: list[float | None] = Field(description="the effect, per seed")
    mean: float | None
    spread: float | None = Field(description="max - min of the effects; None for one seed")
    precondition: Precondition | None = None
    units: str | None = Field(None, description="what the effects run over: 'seeds "
                                                "1337/1338/1339', 'slices 0/1/2'")
    verdict_line: str | None = Field(None, description="the whole verdict in words, with its "
                                                       "numbers and why")


class Figure(BaseModel):
    file: str
    png: str = Field(description="the figure as a data: URL (image/png, base64)")


class ReportResponse(BaseModel):
    name: str
    experiment: str
    title: str
    tables: list[Table]
    claims: list[ClaimVerdict] = Field(description="its claims, judged on its numbers")
    figures: list[Figure]
    timing: str
    runs: list[str] = Field(description="its runs, as the lab names them")
    shipped: str | None = Field(None, description="shipped results: their label; null: the "
                                                  "runs folder's")
    quick: bool = QUICK
    undecided_line: str | None = Field(None, description="a run too small to decide anything "
                                                         "says so here")
    threads: int | None = Field(None, description="the torch threads its models trained at, "
                                                  "where results.json records them")


# ----------------------------------------------------------------------------- quick run


class QuickRequest(Body):
    experiment: Literal[catalog.NAMES] = Field(description="which experiment's --quick form")
    seed: Seed = SEED


class QuickStatus(BaseModel):
    running: bool
    experiment: str | None
    folder: str | None = Field(description="its folder inside the runs folder")
