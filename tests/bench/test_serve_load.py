"""bench.serve_load, briefly (the shipped model, 1 and 4 streaming clients for 3 s each,
against `gptlab serve` itself in its own process): every stream ends with [DONE], no error,
tokens counted, the server's memory read. No timing is asserted."""

from __future__ import annotations

import json

import pytest
from bench.common import SIZES
from bench.serve_load import percentile, run


def test_percentile():
    assert percentile([], 50) is None and percentile([2.0], 99) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 50) == pytest.approx(50.5)


@pytest.mark.slow
def test_a_brief_load_is_served_without_errors(tmp_path):
    data = run(SIZES["smoke"], tmp_path, log=lambda _: None)
    assert json.loads((tmp_path / "serve_load.json").read_text())["size"] == "smoke"
    [only] = data["runs"]
    assert only["server"] == "gptlab serve" and only["model"] == "shipped"
    assert [level["clients"] for level in only["levels"]] == [1, 4]
    for level in only["levels"]:
        assert level["errors"] == 0, level["first_errors"]
        assert level["tokens"] > 0 and level["finished"] > 0
        assert level["ttft_p50_ms"] > 0 and level["itl_p50_ms"] > 0
    assert only["rss_start_mib"] > 0 and only["levels"][-1]["rss_end_mib"] > 0
