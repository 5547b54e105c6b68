"""The routes of the watch-it-learn view (gptlab.lab.live_routes): the paths the app serves
for it, each checking its body; with no training yet the status is idle, stop is a 409 and
the event stream a 404, each one line; a stream gives its follower slot back however it
ends."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient
from starlette.requests import ClientDisconnect

from gptlab.lab.live_routes import Followed, router
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


def run_alone(coroutine):
    """asyncio.run in a thread of its own: the session's Chromium (Playwright's sync API)
    keeps an event loop marked running in the main thread once a browser test has run."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


def test_a_stream_gives_its_slot_back_when_it_ends_or_fails():
    released = []

    async def send(message):
        if message["type"] == "http.response.body" and message.get("body"):
            raise ConnectionError("the client went away")

    async def receive():
        await asyncio.sleep(3600)  # never a disconnect: the send fails first

    stream = Followed(iter(["data: 1\n\n"]), lambda: released.append(1))
    scope = {"type": "http", "asgi": {"spec_version": "2.4"}}
    with pytest.raises(ClientDisconnect):
        run_alone(stream(scope, receive, send))
    assert released == [1]
    run_alone(Followed(iter([]), lambda: released.append(2))(scope, receive,
                                                             lambda m: asyncio.sleep(0)))
    assert released == [1, 2]
