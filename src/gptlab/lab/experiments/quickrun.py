"""Run an experiment's `--quick` form from the page (views 11 and 14): one at a time, in the
background, into the runs folder, its progress streamed.

The run is the experiment's own `run(out, quick=True, log=...)` (gptlab.experiments.catalog),
as `gptlab experiment NAME --quick --out RUNS/NAME-quick` runs it: its folder is opened by
gptlab.experiments.grid.experiment_folder (the folder rule, gptlab.files.kinds) before the
thread starts, so a refusal is a 400 and nothing is written. Each line the experiment logs
becomes a "log" event; the events are kept and streamed as the live training's are
(gptlab.lab.live.training.Session, Server-Sent Events, the same follower limit). Once its
results.json is written, views 11 and 14 list it, and it replaces the shipped results of
its experiment there.

The runner is app.state.quick, made by server.create_app; its routes are
gptlab.lab.experiments.routes, its bodies and answers gptlab.lab.experiments.schemas.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from gptlab.experiments import catalog
from gptlab.experiments.grid import experiment_folder
from gptlab.lab.live.training import MAX_FOLLOWERS, Busy, Session, TooManyFollowers

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
        self.session: Session | None = None
        self._lock = threading.Lock()
        self._followers = threading.BoundedSemaphore(MAX_FOLLOWERS)

    def follower(self):
        if not self._followers.acquire(blocking=False):
            raise TooManyFollowers(f"{MAX_FOLLOWERS} event streams are open "
                                   f"already; close a page that follows the run")
        return self._followers.release

    def start(self, name: str, seed: int = SEED) -> dict[str, Any]:
        experiment = catalog.experiment(name)  # an unknown name is refused here
        with self._lock:
            s = self.session
            if s is not None and not s.done:
                raise Busy(f"an experiment is already running ({s.task}, into "
                           f"{s.run}); wait for it to end")
            out = self.root / folder_name(name)
            experiment_folder(out, name, configuration(seed))  # the folder rule, first
            session = Session(name, folder_name(name), steps=0, every=0)
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

    def _run(self, s: Session, experiment, out: Path, seed: int) -> None:
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
