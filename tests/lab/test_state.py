"""What the lab's areas share (gptlab.lab.state): the runs folder create_app made, reached
by any route through RunsDep, the same object on every request. (The training slot and its
LiveDep: tests/lab/live/test_routes.py.)"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from gptlab.lab.runs import Runs
from gptlab.lab.server import create_app
from gptlab.lab.state import RunsDep


def test_create_app_keeps_one_runs_folder(tmp_path):
    app = create_app(tmp_path)
    assert isinstance(app.state.runs, Runs) and app.state.runs.root == tmp_path.resolve()


def test_a_route_gets_the_apps_runs_folder_through_runs_dep():
    app = FastAPI()
    app.state.runs = object()
    seen = []

    @app.get("/probe")
    def probe(runs: RunsDep) -> dict:
        seen.append(runs)
        return {}

    client = TestClient(app)
    assert client.get("/probe").status_code == 200 and client.get("/probe").status_code == 200
    assert seen == [app.state.runs] * 2
