"""What the lab's routes share (gptlab.lab.state): the runs folder and the live-training
slot create_app made, reached by any route through RunsDep and LiveDep, the same objects
on every request."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from gptlab.lab.live import LiveTrainer
from gptlab.lab.runs import Runs
from gptlab.lab.server import create_app
from gptlab.lab.state import LiveDep, RunsDep


def test_create_app_keeps_one_runs_folder_and_one_live_slot(tmp_path):
    app = create_app(tmp_path)
    assert isinstance(app.state.runs, Runs) and isinstance(app.state.live, LiveTrainer)
    assert app.state.runs.root == tmp_path.resolve()


def test_a_route_gets_the_apps_objects_through_the_dependencies():
    app = FastAPI()
    app.state.runs, app.state.live = object(), object()
    seen = []

    @app.get("/probe")
    def probe(runs: RunsDep, live: LiveDep) -> dict:
        seen.append((runs, live))
        return {}

    client = TestClient(app)
    assert client.get("/probe").status_code == 200 and client.get("/probe").status_code == 200
    assert seen == [(app.state.runs, app.state.live)] * 2
