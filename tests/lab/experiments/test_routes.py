"""The routes of the experiments view and of the quick runs (gptlab.lab.experiments.routes):
the paths the app serves for them, each checking its body; the one quick-run slot
create_app made, reached through QuickDep; with no run yet the status is idle and the event
stream a 404 in one line."""

from fastapi import FastAPI
from fastapi.testclient import TestClient

from gptlab.lab.experiments.quickrun import QuickRunner
from gptlab.lab.experiments.routes import QuickDep, router
from gptlab.lab.server import create_app


def test_the_router_holds_the_experiments_and_quick_run_paths(client, served):
    assert served(router, client) == {
        ("/api/experiments", "get"), ("/api/experiments/report", "post"),
        ("/api/experiments/quick", "post"), ("/api/experiments/quick/status", "get"),
        ("/api/experiments/quick/events", "get")}


def test_create_app_keeps_one_quick_run_slot(tmp_path):
    app = create_app(tmp_path)
    assert isinstance(app.state.quick, QuickRunner) and app.state.quick.root == tmp_path.resolve()


def test_a_route_gets_the_apps_quick_run_slot_through_quick_dep():
    app = FastAPI()
    app.state.quick = object()
    seen = []

    @app.get("/probe")
    def probe(runner: QuickDep) -> dict:
        seen.append(runner)
        return {}

    client = TestClient(app)
    assert client.get("/probe").status_code == 200 and client.get("/probe").status_code == 200
    assert seen == [app.state.quick] * 2


def test_with_no_run_there_is_nothing_to_follow(tmp_path):
    client = TestClient(create_app(tmp_path))
    assert client.get("/api/experiments/quick/status").json() == {
        "running": False, "experiment": None, "folder": None}
    events = client.get("/api/experiments/quick/events")
    assert events.status_code == 404 and "\n" not in events.json()["error"]
