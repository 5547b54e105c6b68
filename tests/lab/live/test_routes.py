"""The routes of the watch-it-learn view (gptlab.lab.live.routes): the paths the app serves
for it, each checking its body; the one training slot create_app made, reached through
LiveDep; with no training yet the status is idle, stop is a 409 and the event stream a 404,
each one line. (A stream giving its follower slot back: tests/lab/test_responses.py.)"""

from fastapi import FastAPI
from fastapi.testclient import TestClient

from gptlab.lab.live.routes import LiveDep, router
from gptlab.lab.live.training import LiveTrainer
from gptlab.lab.server import create_app


def test_the_router_holds_the_live_views_paths(client, served):
    assert served(router, client) == {
        ("/api/live/start", "post"), ("/api/live/stop", "post"), ("/api/live/status", "get"),
        ("/api/live/events", "get"), ("/api/live/estimate", "post")}


def test_with_no_training_there_is_nothing_to_stop_or_follow(tmp_path):
    client = TestClient(create_app(tmp_path))
    assert client.get("/api/live/status").json()["running"] is False
    stop = client.post("/api/live/stop", json={})
    assert stop.status_code == 409 and "\n" not in stop.json()["error"]
    events = client.get("/api/live/events")
    assert events.status_code == 404
    assert events.json() == {"error": "no training has started yet: POST /api/live/start"}


def test_create_app_keeps_one_training_slot(tmp_path):
    app = create_app(tmp_path)
    assert isinstance(app.state.live, LiveTrainer) and app.state.live.root == tmp_path.resolve()


def test_a_route_gets_the_apps_training_slot_through_live_dep():
    app = FastAPI()
    app.state.live = object()
    seen = []

    @app.get("/probe")
    def probe(live: LiveDep) -> dict:
        seen.append(live)
        return {}

    client = TestClient(app)
    assert client.get("/probe").status_code == 200 and client.get("/probe").status_code == 200
    assert seen == [app.state.live] * 2
