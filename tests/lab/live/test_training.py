"""The watch-it-learn view's API (gptlab.lab.live.training): a live training that streams, stops on
request, refuses a second one and leaves a resumable run; a late subscriber gets every
event; a start the schema refuses starts nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection, not_a_server_error
from schemathesis.generation import GenerationMode
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from gptlab.lab.live.training import Session, sse
from gptlab.lab.server import create_app
from gptlab.training.run import train


def events(client):
    """The SSE stream of /api/live/events as parsed JSON events (comments skipped)."""
    with client.stream("GET", "/api/live/events") as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                yield json.loads(line[6:])


def test_live_training_streams_stops_and_leaves_a_resumable_run(tmp_path, one_thread, post):
    client = TestClient(create_app(tmp_path))
    assert client.get("/api/live/events").status_code == 404
    assert client.post("/api/live/stop").status_code == 409
    started = post(client, "/api/live/start", {"task": "induction", "steps": 2000, "every": 10})
    assert started["running"] and started["run"] == "live-induction"
    busy = client.post("/api/live/start", json={"task": "shakespeare"})
    assert busy.status_code == 409 and "already running (live-induction" in busy.json()["error"]
    seen, losses = [], []
    for e in events(client):
        seen.append(e)
        if e["kind"] == "train":
            losses.append(e["loss"])
            if len(losses) == 3:
                assert post(client, "/api/live/stop", {})["running"] in (True, False)
    kinds = [e["kind"] for e in seen]
    assert kinds[0] == "start" and kinds[-1] == "end" and len(losses) >= 3
    end = seen[-1]
    assert end["status"] == "interrupted" and 15 <= end["step"] < 2000, end
    evals = [e for e in seen if e["kind"] == "eval"]
    assert evals[0]["step"] == 0 and len(evals[0]["scores"]["induction"]) == 2
    assert all(np.isfinite(losses)) and evals[0]["sample"].startswith("") is True
    # at init every head is near chance (uniform attention scores exactly chance)
    chance = seen[0]["chance"]["induction"]
    assert np.max(evals[0]["scores"]["induction"]) < 3 * chance
    assert not client.get("/api/live/status").json()["running"]
    # the TensorBoard log beside metrics.jsonl: each evaluation's val loss, at its step
    board = EventAccumulator(str(tmp_path / "live-induction" / "tb"))
    board.Reload()
    assert [(v.step, v.value) for v in board.Scalars("loss/val")] == [
        (e["step"], np.float32(e["val_loss"])) for e in evals]
    # a normal run: listed, openable in the other views, resumable with the CLI's train()
    assert "live-induction" in client.get("/api/runs").json()["runs"]
    post(client, "/api/head_scores", {"run": "live-induction"})
    # regression: stopped at step 976 of 3000, the page said --max-iters 1952; the command
    # it shows finishes the steps asked for
    assert "of 2000 in" in end["message"] and "finish it with: gptlab train" in end["message"]
    assert int(end["message"].split("--max-iters ")[1]) == 2000
    more = max(end["step"] + 5, 50)  # the warm-up: a resumed run may not end before it
    result = train(None, None, tmp_path / "live-data" / "induction", tmp_path / "live-induction",
                   resume=True, overrides={"max_iters": more}, progress=False)
    assert result.status == "finished" and result.step == more
    # and the slot is free again
    again = post(client, "/api/live/start", {"task": "induction", "steps": 10, "every": 10})
    assert again["running"]
    last = [e for e in events(client)][-1]
    assert last["status"] == "finished" and "train on with:" in last["message"]
    assert int(last["message"].split("--max-iters ")[1]) == 20  # twice as far


def test_live_training_never_replaces_a_run_it_did_not_write(tmp_path, one_thread, post,
                                                             trained_run, tree):
    """The lab replaces its own live run each time (above); a run gptlab train wrote under
    that name is the user's: the training ends at once, saying so, and the run is as it
    was (issue 23's folder rule, gptlab.files.kinds)."""
    import shutil

    shutil.copytree(trained_run, tmp_path / "live-induction")
    before = tree(tmp_path / "live-induction")
    client = TestClient(create_app(tmp_path))
    post(client, "/api/live/start", {"task": "induction", "steps": 10, "every": 10})
    end = list(events(client))[-1]
    assert end["status"] == "failed" and "already holds a training run" in end["message"]
    assert tree(tmp_path / "live-induction") == before


# Schemathesis on the start route with invalid bodies only: a valid one starts a real
# training (a thread writing into the runs folder), which tests/lab/test_fuzz.py's shared
# app must not do; the valid path is tested above.
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app("runs")).include(
    path="/api/live/start")
schema.config.generation.update(modes=[GenerationMode.NEGATIVE])


@pytest.fixture(scope="module")
def empty_lab(tmp_path_factory):
    return create_app(tmp_path_factory.mktemp("live"))


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@schema.parametrize()
def test_live_start_refuses_what_its_schema_refuses(case, empty_lab):
    case.call_and_validate(app=empty_lab, checks=[not_a_server_error, negative_data_rejection])
    assert empty_lab.state.live.session is None  # nothing was started


def test_a_late_subscriber_gets_every_event_from_the_start():
    s = Session("induction", "live-induction", 10, 5)
    s.emit({"kind": "start"})
    s.emit({"kind": "train", "step": 5, "loss": 4.0})
    early = s.follow(keepalive_s=0.01)
    assert next(early)["kind"] == "start" and next(early)["step"] == 5
    assert next(early) is None  # nothing new yet: a keep-alive
    s.emit({"kind": "end", "status": "finished", "step": 10})
    assert next(early)["kind"] == "end"
    assert list(early) == []  # the stream ends after "end"
    late = list(sse(s.follow()))
    assert [json.loads(x[6:])["kind"] for x in late] == ["start", "train", "end"]
    assert s.step == 10 and all(x.endswith("\n\n") for x in late)
