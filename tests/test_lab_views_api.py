"""The next-token and watch-it-learn views' API: the bars against gptlab.inference.sampling and a
float64 recomputation of top-k / top-p, "append" against `gptlab sample`, the newest
token's attention against gptlab.interp.heads, and a live training that streams, stops on
request, refuses a second one and leaves a resumable run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import schemathesis
import torch
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection, not_a_server_error
from schemathesis.generation import GenerationMode

from gptlab.cli.main import main
from gptlab.interp.hooks import capture_attention
from gptlab.lab.runs import Runs
from gptlab.lab.server import create_app
from gptlab.model import decoding
from gptlab.model.decoding import SamplingSettings

TEXT = "the cat sat on the m"


@pytest.fixture(scope="module")
def client(runs_root):  # runs_root: tests/conftest.py
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield TestClient(create_app(runs_root))
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny(runs_root):
    return Runs(runs_root).load("tiny")


def post(client, path, body, status=200):
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    return r.json()


def last_logits(run, text):
    idx = torch.tensor([run.tokenizer.encode(text)])
    with torch.no_grad():
        logits, _ = run.model.eval()(idx)
    return logits[0, -1]


def np_filtered(logits, temperature, top_k, top_p):
    """float64 NumPy: softmax(logits / T), then the top_k likeliest (ties kept), then the
    smallest likeliest set with mass >= top_p of what is left; renormalised."""
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    keep = np.ones_like(p, dtype=bool)
    if top_k is not None:
        keep &= p >= np.sort(p)[::-1][top_k - 1]
    q = np.where(keep, p, 0.0)
    q /= q.sum()
    if top_p is not None:
        order = np.argsort(-q, kind="stable")
        before = np.cumsum(q[order]) - q[order]
        drop = np.zeros_like(keep)
        drop[order] = before >= top_p
        keep &= ~drop
    final = np.where(keep, p, 0.0)
    return final / final.sum(), keep


@pytest.mark.parametrize("temperature,top_k,top_p", [
    (1.0, None, None), (0.7, 5, None), (1.3, None, 0.8), (1.0, 8, 0.6), (0.5, 3, 0.99)])
def test_bars_are_gptlab_samplings_distribution(client, tiny, temperature, top_k, top_p):
    d = post(client, "/api/next_token", {"run": "tiny", "text": TEXT, "temperature": temperature,
                                         "top_k": top_k, "top_p": top_p, "show": 100})
    logits = last_logits(tiny, TEXT)
    lib = torch.softmax(decoding.filter_logits(
        logits[None], SamplingSettings(temperature, top_k, top_p)).double(), -1)[0]
    ref, keep = np_filtered(logits.numpy(), temperature, top_k, top_p)
    got = np.zeros(d["vocab_size"])
    for c in d["candidates"]:
        got[c["id"]] = c["final"]
        assert c["top_p"] == bool(keep[c["id"]]) and c["token"] == tiny.tokenizer.decode([c["id"]])
    assert len(d["candidates"]) == d["vocab_size"]  # tiny's 22 symbols, all shown
    assert got.sum() == pytest.approx(1.0, abs=1e-9)
    assert np.abs(got - lib.numpy()).max() < 1e-12
    assert np.abs(got - ref).max() < 1e-6  # float32 logits vs float64 reference
    assert d["survivors"] == int(keep.sum())
    ps = [c["p"] for c in d["candidates"]]
    assert ps == sorted(ps, reverse=True)


def test_top_k_1_and_temperature_0_leave_one_bar(client, tiny):
    for cut in ({"top_k": 1}, {"temperature": 0.0}):
        d = post(client, "/api/next_token", {"run": "tiny", "text": TEXT, **cut})
        kept = [c for c in d["candidates"] if c["top_p"]]
        assert d["survivors"] == 1 and len(kept) == 1 and kept[0]["final"] == 1.0
        assert kept[0]["id"] == int(last_logits(tiny, TEXT).argmax()) == d["greedy_id"]
        assert d["settings"]["greedy"]


def test_newest_attention_is_the_last_row_of_each_pattern(client, tiny):
    d = post(client, "/api/next_token", {"run": "tiny", "text": TEXT})
    weights = capture_attention(tiny.model, torch.tensor([tiny.tokenizer.encode(TEXT)]))
    want = weights[:, 0, :, -1, :].double()  # (n_layer, n_head, T)
    got = torch.tensor(d["newest_attention"], dtype=torch.float64)
    assert got.shape == (2, 4, len(TEXT)) and torch.allclose(got, want, atol=1e-7)
    assert torch.allclose(got.sum(-1), torch.ones(2, 4, dtype=torch.float64), atol=1e-6)


def sample_cli(capsys, *argv):
    capsys.readouterr()
    assert main(["sample", *argv]) == 0
    return capsys.readouterr().out.removesuffix("\n")


def test_append_equals_gptlab_sample(client, runs_root, capsys):
    run_dir = str(runs_root / "tiny")
    greedy = post(client, "/api/next_token/append", {"run": "tiny", "text": TEXT,
                                                     "mode": "greedy", "temperature": 1.7})
    want = sample_cli(capsys, run_dir, "--prompt", TEXT, "--greedy", "--max-new-tokens", "1",
                      "--no-prompt")
    assert greedy["token"] == want and greedy["text"] == TEXT + want and greedy["seed"] is None
    drawn = set()
    for seed in range(6):
        body = {"run": "tiny", "text": TEXT, "mode": "sample", "seed": seed,
                "temperature": 1.5, "top_k": 10, "top_p": 0.95}
        got = post(client, "/api/next_token/append", body)
        want = sample_cli(capsys, run_dir, "--prompt", TEXT, "--seed", str(seed),
                          "--temperature", "1.5", "--top-k", "10", "--top-p", "0.95",
                          "--max-new-tokens", "1", "--no-prompt")
        assert got["token"] == want and got["seed"] == seed, (seed, got, want)
        drawn.add(want)
    assert len(drawn) > 1  # the seed matters: a sample, not the argmax six times


@pytest.mark.parametrize("body,fragment", [
    ({"run": "tiny", "text": ""}, "text must not be empty"),
    ({"run": "tiny", "text": "the cat " * 40}, "this view takes at most 32"),
    ({"run": "tiny", "text": "QQQ"}, "Q"),
    ({"run": "tiny", "text": "the cat sat on the mat. the dog "}, "at this view's limit of 32"),
    ({"run": "nope", "text": "the"}, "no run named 'nope'"),
    ({"run": "tiny", "text": "the", "top_p": 0}, "top_p must be greater than 0"),
    ({"run": "tiny", "text": "the", "top_k": 0}, "top_k must be between 1 and"),
    ({"run": "tiny", "text": "the", "temperature": -1}, "temperature must be between 0 and 10"),
    ({"run": "tiny", "text": "the", "mode": "beam"}, "unknown mode 'beam'"),
])
def test_bad_input_is_one_line(client, body, fragment):
    r = client.post("/api/next_token/append", json=body)
    assert r.status_code == 400, r.text
    message = r.json()["error"]
    assert fragment in message and "\n" not in message, message


# ----------------------------------------------------------------------------- live training


def events(client):
    """The SSE stream of /api/live/events as parsed JSON events (comments skipped)."""
    with client.stream("GET", "/api/live/events") as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                yield json.loads(line[6:])


def test_live_training_streams_stops_and_leaves_a_resumable_run(tmp_path, one_thread):
    from gptlab.training.run import train

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
    # a normal run: listed, openable in the other views, resumable with the CLI's train()
    assert "live-induction" in client.get("/api/runs").json()["runs"]
    post(client, "/api/head_scores", {"run": "live-induction"})
    more = int(end["message"].split("--max-iters ")[1])  # the command the page shows
    assert more >= 50  # warm-up steps: a resumed run may not end before them
    result = train(None, None, tmp_path / "live-data" / "induction", tmp_path / "live-induction",
                   resume=True, overrides={"max_iters": more}, progress=False)
    assert result.status == "finished" and result.step == more
    # and the slot is free again
    again = post(client, "/api/live/start", {"task": "induction", "steps": 10, "every": 10})
    assert again["running"]
    assert [e for e in events(client)][-1]["status"] == "finished"


# Schemathesis on the start route with invalid bodies only: a valid one starts a real
# training (a thread writing into the runs folder), which tests/test_lab_fuzz.py's shared
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


def test_induction_rows_repeat_a_segment_of_distinct_symbols():
    from gptlab.lab import live_tasks

    text = live_tasks.induction_text(seed=3, rows=50)
    assert len(text) == 50 * 64 and set(text) <= set(live_tasks.INDUCTION_ALPHABET)
    periods = set()
    for r in range(50):
        row = text[64 * r: 64 * (r + 1)]
        # the segment's length: the smallest look-back that predicts the row's last 16
        p = next(p for p in range(8, 25) if row[-16:] == row[-16 - p:-p])
        assert len(set(row[-p:])) == p  # distinct symbols: only content says what follows
        periods.add(p)
    assert len(periods) > 8
    prompt = live_tasks.induction_prompt()
    assert prompt[:12] == prompt[12:24] and prompt[24:] == prompt[:3]


def test_a_late_subscriber_gets_every_event_from_the_start():
    from gptlab.lab.live import Session, sse

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
