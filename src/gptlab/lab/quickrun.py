"""Run an experiment's `--quick` form from the page (views 11 and 14): one at a time, in the
background, into the runs folder, its progress streamed.

The run is gptlab.experiments.catalog's module `run(out, quick=True, log=...)` itself, as
`gptlab experiment NAME --quick --out RUNS/NAME-quick` runs it: its folder is opened by
gptlab.experiments.grid.experiment_folder (the folder rule, gptlab.files.kinds) before the
thread starts, so a refusal is a 400 and nothing is written. Each line the experiment logs
becomes a "log" event; the events are kept and streamed as the live training's are
(gptlab.lab.live.Session, Server-Sent Events, the same follower limit). Once its
results.json is written, views 11 and 14 list it, and it replaces the shipped results of
its experiment there.

Its schemas, routes and runner live here, in one module: `router` holds the routes, which
server.create_app includes, and the runner is app.state.quick.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from gptlab.experiments import catalog
from gptlab.experiments.grid import experiment_folder
from gptlab.lab import live
from gptlab.lab.live_routes import BUSY, EVENTS, Followed
from gptlab.lab.responses import BAD_INPUT, Error
from gptlab.lab.schemas import Body, Seed
from gptlab.web.body import area_router

SUFFIX = "-quick"  # the folder in the runs folder: NAME-quick
SEED = 1337  # the command's default


def folder_name(name: str) -> str:
    return f"{name}{SUFFIX}"


def configuration(seed: int) -> dict[str, Any]:
    """What the results depend on, as `gptlab experiment NAME --quick` records it (so the
    command and the page reuse each other's folder)."""
    return {"quick": True, "steps": None, "seed": seed, "data": None}


class QuickRunner:
    """The lab's one slot for an experiment run."""

    def __init__(self, runs_root: Path) -> None:
        self.root = Path(runs_root)
        self.session: live.Session | None = None
        self._lock = threading.Lock()
        self._followers = threading.BoundedSemaphore(live.MAX_FOLLOWERS)

    def follower(self):
        if not self._followers.acquire(blocking=False):
            raise live.TooManyFollowers(f"{live.MAX_FOLLOWERS} event streams are open "
                                        f"already; close a page that follows the run")
        return self._followers.release

    def start(self, name: str, seed: int = SEED) -> dict[str, Any]:
        experiment = catalog.module(name)  # an unknown name is refused here
        with self._lock:
            s = self.session
            if s is not None and not s.done:
                raise live.Busy(f"an experiment is already running ({s.task}, into "
                                f"{s.run}); wait for it to end")
            out = self.root / folder_name(name)
            experiment_folder(out, name, configuration(seed))  # the folder rule, first
            session = live.Session(name, folder_name(name), steps=0, every=0)
            self.session = session
        thread = threading.Thread(target=self._run, args=(session, experiment, out, seed),
                                  daemon=True, name=f"gptlab-lab-{folder_name(name)}")
        thread.start()
        return self.status()

    def status(self) -> dict[str, Any]:
        s = self.session
        if s is None:
            return {"running": False, "experiment": None, "folder": None}
        return {"running": not s.done, "experiment": s.task, "folder": s.run}

    def _run(self, s: live.Session, experiment, out: Path, seed: int) -> None:
        s.emit({"kind": "start", "experiment": s.task, "folder": s.run,
                "command": f"gptlab experiment {s.task} --quick --out {out}"})
        end: dict[str, Any] = {"kind": "end", "experiment": s.task, "folder": s.run}
        try:
            experiment.run(out, quick=True, seed=seed,
                           log=lambda line: s.emit({"kind": "log", "line": str(line)}))
            end.update(status="finished", message=f"{s.task} --quick finished: its results "
                                                  f"are in {s.run} in the runs folder")
        except Exception as exc:  # the page shows it; the server goes on
            end.update(status="failed", message=str(exc).splitlines()[0]
                       if str(exc) else type(exc).__name__)
        s.emit(end)


def runner_of(request: Request) -> QuickRunner:
    return request.app.state.quick


QuickDep = Annotated[QuickRunner, Depends(runner_of)]

# ----------------------------------------------------------------------------- schemas


class QuickRequest(Body):
    experiment: Literal[catalog.NAMES] = Field(description="which experiment's --quick form")
    seed: Seed = SEED


class QuickStatus(BaseModel):
    running: bool
    experiment: str | None
    folder: str | None = Field(description="its folder inside the runs folder")


# ----------------------------------------------------------------------------- routes

router = area_router()


@router.post("/api/experiments/quick", response_model=QuickStatus,
             responses={**BAD_INPUT, **BUSY})
def quick_start(body: QuickRequest, runner: QuickDep) -> JSONResponse:
    """Run an experiment's --quick form into RUNS/NAME-quick in the background (one at a
    time); follow /api/experiments/quick/events."""
    return JSONResponse(runner.start(body.experiment, body.seed))


@router.get("/api/experiments/quick/status", response_model=QuickStatus)
def quick_status(runner: QuickDep) -> JSONResponse:
    """Whether an experiment runs, which, and into which folder."""
    return JSONResponse(runner.status())


@router.get("/api/experiments/quick/events",
            responses={**EVENTS, 404: {"model": Error, "description": "None has started"},
                       429: {"model": Error, "description": "Too many event streams"}})
def quick_events(runner: QuickDep) -> Any:
    """The latest experiment run's events from its start, streamed until it ends."""
    session = runner.session
    if session is None:
        return JSONResponse({"error": "no experiment has started yet: POST "
                                      "/api/experiments/quick"}, status_code=404)
    return Followed(live.sse(session.follow()), runner.follower())
