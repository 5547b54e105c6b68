"""The lab's interaction budget: every API call answers in under 100 ms at default sizes.

Each endpoint is called through FastAPI's in-process test client (no network, so the
figure is the server's own work: validation, gptlab's computation, JSON), once to warm up
(models load once and are cached), then `reps` times; the table gives medians and maxima
against the 100 ms budget. The model is a tiny trained run made on the spot."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Size, table, write_result

BUDGET_S = 0.1
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("/api/attention", {}),
    ("/api/scaling", {}),
    ("/api/sinusoidal", {}),
    ("/api/rope", {}),
    ("/api/params", {"preset": "gpt2"}),
    ("/api/heads", {"run": "tiny", "prompt": "the cat sat on the mat"}),
    ("/api/head_scores", {"run": "tiny"}),
    ("/api/ablate", {"run": "tiny", "layer": 0, "head": 0}),
    ("/api/quiz", {"kind": "params", "seed": 1}),
    ("/api/quiz/check", {"kind": "row0", "seed": 1, "answer": "mask"}),
    ("/api/walk", {"run": "tiny", "text": "the cat sat on the mat"}),
    ("/api/walk/layer", {"run": "tiny", "text": "the cat sat on the mat"}),
    ("/api/all_heads", {"run": "tiny", "prompt": "the cat sat on the mat"}),
    # The shipped model (6 layers of width 192, its W_O 192 x 192): the views' real size.
    ("/api/heads", {"run": "shakespeare", "prompt": "the cat sat on the mat"}),
    ("/api/walk", {"run": "shakespeare", "text": "the cat sat on the mat"}),
    ("/api/walk/layer", {"run": "shakespeare", "text": "the cat sat on the mat",
                         "layer": 3, "head": 2}),
    ("/api/all_heads", {"run": "shakespeare", "prompt": "the cat sat on the mat"}),
]


def run(size: Size, out_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    from fastapi.testclient import TestClient
    from tools.tinyrun import make_tiny_run

    from gptlab.lab.server import create_app

    reps = 3 if size.smoke else max(size.reps, 15)
    with tempfile.TemporaryDirectory() as root:
        make_tiny_run(Path(root) / "tiny", steps=5 if size.smoke else 40)
        client = TestClient(create_app(Path(root)))
        results = []
        for path, body in CALLS:
            call = _caller(client, path, body)
            call()  # warm-up
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            results.append({"endpoint": path, "run": body.get("run", "-"),
                            "median_ms": statistics.median(times) * 1e3,
                            "max_ms": max(times) * 1e3, "reps": reps})
    within = all(r["median_ms"] < BUDGET_S * 1e3 for r in results)
    log(f"lab API latency, in-process, median of {reps} calls (budget {BUDGET_S * 1e3:.0f} ms)")
    log(table(["endpoint", "run", "median ms", "max ms"],
              [[r["endpoint"], r["run"], r["median_ms"], r["max_ms"]] for r in results]))
    log(f"every median within budget: {'yes' if within else 'NO'}")
    data = {"budget_ms": BUDGET_S * 1e3, "endpoints": results, "all_within_budget": within}
    write_result(out_dir, "lab_latency", data)
    return data


def _caller(client, path: str, body: dict[str, Any]) -> Callable[[], None]:
    def call() -> None:
        response = client.post(path, json=body)
        if response.status_code != 200:
            raise RuntimeError(f"{path}: HTTP {response.status_code}: {response.text[:200]}")

    return call
