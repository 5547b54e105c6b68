"""bench.lab_load, briefly (8 clients for 5 s against `gptlab lab` while it trains): no 5xx,
no answer but the expected one, every read endpoint called, the event streams capped, an
oversized and a trickled body refused, the server's memory read. No timing is asserted."""

from __future__ import annotations

import json

import pytest
from bench.common import SIZES
from bench.lab_load import READS, check_every_read_route, percentile, run

from gptlab.lab.live.training import MAX_FOLLOWERS
from gptlab.web.body import BODY_TIMEOUT_S


def test_every_route_is_timed_or_driven_apart():
    check_every_read_route()  # raises naming a route READS lacks


def test_percentile():
    xs = [float(i) for i in range(1, 101)]
    assert percentile(xs, 50) == pytest.approx(50.5) and percentile(xs, 99) == pytest.approx(99.01)
    assert percentile([3.0], 99) == 3.0


@pytest.mark.slow
def test_a_brief_load_is_served_without_errors(tmp_path):
    data = run(SIZES["smoke"], tmp_path, log=lambda _: None, seconds=5, clients=8)
    assert json.loads((tmp_path / "lab_load.json").read_text())["benchmark"] == "lab_load"
    assert data["server_errors"] == 0 and data["unexpected"] == 0, data["endpoints"]
    assert {e["endpoint"] for e in data["endpoints"]} == {f"{m} {p}" for m, p, _, _ in READS}
    assert data["requests"] >= len(READS) and data["overall"]["p99_ms"] > 0
    f = data["followers"]
    assert f["opened"] == MAX_FOLLOWERS and f["one_more_status"] == 429, f
    assert f"{MAX_FOLLOWERS} event streams" in f["one_more_error"]
    for name, answer in data["oversized"].items():
        assert answer["status"] == 400 and "limit" in answer["error"], (name, answer)
    slow = data["slow_body"]
    assert slow["status"] == 408 and BODY_TIMEOUT_S <= slow["seconds"] < BODY_TIMEOUT_S + 5
    assert slow["bytes_sent"] < 1000  # cut off long before the whole body came
    rss = data["rss_mib"]
    assert 0 < rss["started"] and rss["end"] < rss["warm"] + 512, rss  # bounded, roughly
    assert data["training"]["step_at_end"] > 0 and data["training"]["running_at_end"]
