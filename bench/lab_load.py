"""The lab under load: N clients (default 32) call every read endpoint for a fixed time
while a live training runs, against `gptlab lab` itself (a separate process on 127.0.0.1).

`python -m bench.lab_load [--seconds 60] [--clients 32] [--out DIR]`, or through
`python -m bench` (smoke 2 s, quick 15 s, full 60 s). Each client (asyncio, its own
httpx connection) walks the endpoint list from its own offset; answers are timed from send
to the last byte. Meanwhile:
- the training (POST /api/live/start, induction, every 25 steps) runs in the server;
- MAX_FOLLOWERS event streams follow it, and one more must be refused (429);
- a body over MAX_BODY_BYTES (with a Content-Length, and chunked with none) must be refused
  (400) and a body that trickles in a byte a second must be cut off (408 after
  BODY_TIMEOUT_S);
- the server's resident memory is read from /proc (Linux) every second.
Reported: p50/p99/max per endpoint and overall, the count of 5xx (must be 0) and of any
other answer than the one expected, requests per second, RSS at start, after a warm-up pass,
at its peak and at the end (growth = end - warm-up).

The machine's other load shows in the latencies: 32 clients on 2 cores queue behind each
other and the training, so p99 measures queueing, not one request's work (bench.lab_latency
times that)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import SIZES, Size, rss_mib, server_process, table, write_result

# (method, path, body, status expected). Bodies are the views' defaults on the tiny run.
# The two experiment reports need an experiment in the runs folder; with none, their
# answer is the 400 path (a missing experiment named), which is what is timed.
READS: list[tuple[str, str, dict[str, Any] | None, int]] = [
    ("GET", "/", None, 200),
    ("GET", "/static/app.js", None, 200),
    ("GET", "/openapi.json", None, 200),
    ("GET", "/api/runs", None, 200),
    ("GET", "/api/presets", None, 200),
    ("GET", "/api/live/status", None, 200),
    ("GET", "/api/context/experiments", None, 200),
    ("GET", "/api/experiments", None, 200),
    ("POST", "/api/attention", {}, 200),
    ("POST", "/api/scaling", {}, 200),
    ("POST", "/api/sinusoidal", {}, 200),
    ("POST", "/api/rope", {}, 200),
    ("POST", "/api/params", {"preset": "gpt2"}, 200),
    ("POST", "/api/heads", {"run": "tiny", "prompt": "the cat sat on the mat"}, 200),
    ("POST", "/api/head_scores", {"run": "tiny"}, 200),
    ("POST", "/api/ablate", {"run": "tiny", "layer": 0, "head": 0}, 200),
    ("POST", "/api/quiz", {"kind": "params", "seed": 1}, 200),
    ("POST", "/api/quiz/check", {"kind": "row0", "seed": 1, "answer": "mask"}, 200),
    ("POST", "/api/runs/encoding", {"text": "the cat"}, 200),
    ("POST", "/api/next_token", {"run": "tiny", "text": "the cat sat"}, 200),
    ("POST", "/api/next_token/append", {"run": "tiny", "text": "the cat sat"}, 200),
    ("POST", "/api/lens", {"run": "tiny", "text": "the cat sat"}, 200),
    ("POST", "/api/context", {"run": "tiny", "context": 32,
                              "text": "the cat sat on the mat. " * 4}, 200),
    ("POST", "/api/walk", {"run": "tiny", "text": "the cat"}, 200),
    ("POST", "/api/walk/layer", {"run": "tiny", "text": "the cat"}, 200),
    ("POST", "/api/live/estimate", {"task": "induction"}, 200),  # probed once, then cached
    ("POST", "/api/all_heads", {"run": "tiny", "prompt": "the cat sat"}, 200),
    ("POST", "/api/learned_positions", {"run": "tiny"}, 200),
    ("POST", "/api/context/experiment", {"experiment": "none"}, 400),
    ("POST", "/api/experiments/report", {"experiment": "none"}, 400),
    ("GET", "/api/features/dictionaries", None, 200),  # the shipped dictionary
    ("POST", "/api/features/search", {"dictionary": "shipped", "token": "e"}, 200),
    ("POST", "/api/features/feature", {"dictionary": "shipped", "feature": 0,
                                       "text": "the cat"}, 200),
]
# The routes that change state or stream: the live ones driven below, not in the clients'
# loop; the quick-run ones (an experiment's training, minutes) not at all.
NOT_READS = {("POST", "/api/live/start"), ("POST", "/api/live/stop"),
             ("GET", "/api/live/events"), ("POST", "/api/experiments/quick"),
             ("GET", "/api/experiments/quick/events"), ("GET", "/api/experiments/quick/status")}
SECONDS = {"smoke": 2, "quick": 15, "full": 60}
CLIENTS = {"smoke": 4, "quick": 16, "full": 32}
TRAINING = {"task": "induction", "steps": 5000, "every": 25}  # outlasts the bench
REQUEST_TIMEOUT_S = 60.0
START_TIMEOUT_S = 60.0


def run(size: Size, out_dir: Path, log: Callable[[str], None] = print,
        seconds: float | None = None, clients: int | None = None) -> dict[str, Any]:
    from tools.tinyrun import make_tiny_run

    seconds = SECONDS[size.name] if seconds is None else seconds
    clients = CLIENTS[size.name] if clients is None else clients
    from gptlab.web.threaded import free_port

    check_every_read_route()
    with tempfile.TemporaryDirectory() as root:
        make_tiny_run(Path(root) / "tiny", steps=5 if size.smoke else 40)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        lab = [sys.executable, "-m", "gptlab", "lab", "--runs", root, "--port", str(port)]
        with server_process("gptlab lab", lab, f"{base}/api/live/status",
                            START_TIMEOUT_S) as pid:
            data = asyncio.run(measure(base, pid, seconds, clients))
    data = {"size": size.name, **data}
    report(data, log)
    write_result(out_dir, "lab_load", data)
    return data


def check_every_read_route() -> None:
    """Every route of the app is timed here or driven apart (a new view must be added)."""
    from gptlab.lab.server import create_app

    with tempfile.TemporaryDirectory() as root:
        schema = create_app(root).openapi()
    routes = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
    missing = routes - {(m, p) for m, p, _, _ in READS} - NOT_READS
    if missing:
        raise RuntimeError(f"bench.lab_load.READS lacks {sorted(missing)}")


async def measure(base: str, pid: int, seconds: float, clients: int) -> dict[str, Any]:
    import httpx

    from gptlab.lab.live.training import MAX_FOLLOWERS
    from gptlab.web.body import BODY_TIMEOUT_S, MAX_BODY_BYTES

    rss = {"started": rss_mib(pid)}
    async with httpx.AsyncClient(base_url=base, timeout=REQUEST_TIMEOUT_S) as c:
        started = await c.post("/api/live/start", json=TRAINING)
        if started.status_code != 200:
            raise RuntimeError(f"/api/live/start: HTTP {started.status_code}: {started.text}")
        for method, path, body, expected in READS:  # warm-up: models load, caches fill
            r = await c.request(method, path, json=body)
            if r.status_code != expected:
                raise RuntimeError(f"{method} {path}: HTTP {r.status_code} (expected "
                                   f"{expected}): {r.text[:200]}")
    rss["warm"] = rss_mib(pid)
    deadline = time.monotonic() + seconds
    samples: list[tuple[str, float, int | str]] = []
    series: list[list[float]] = []

    async def load() -> float:
        t0 = time.monotonic()
        await asyncio.gather(*(client(base, i, deadline, samples) for i in range(clients)))
        return time.monotonic() - t0

    elapsed, *checks = await asyncio.gather(
        load(), followers(base, MAX_FOLLOWERS, deadline), oversized(base, MAX_BODY_BYTES),
        slow_body(base, BODY_TIMEOUT_S), sample_rss(pid, deadline, series))
    rss["peak"] = max((v for _, v in series), default=None)
    rss["end"] = rss_mib(pid)
    if len(series) >= 4:  # still growing at the end, or levelled off?
        rss["growth_second_half"] = series[-1][1] - series[len(series) // 2][1]
    rss["series"] = series
    async with httpx.AsyncClient(base_url=base, timeout=REQUEST_TIMEOUT_S) as c:
        status = (await c.get("/api/live/status")).json()
        await c.post("/api/live/stop", json={})
    if rss["warm"] is not None and rss["end"] is not None:
        rss["growth_after_warmup"] = rss["end"] - rss["warm"]
    return {"clients": clients, "seconds": seconds, "clients_elapsed_s": elapsed,
            **summarize(samples, elapsed), "rss_mib": rss,
            "training": {**TRAINING, "step_at_end": status["step"],
                         "running_at_end": status["running"]},
            "followers": checks[0], "oversized": checks[1], "slow_body": checks[2]}


async def client(base: str, i: int, deadline: float, samples: list) -> None:
    """One client: every read in turn from offset i until the deadline."""
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=REQUEST_TIMEOUT_S) as c:
        k = i
        while time.monotonic() < deadline:
            method, path, body, expected = READS[k % len(READS)]
            k += 1
            t = time.perf_counter()
            try:
                r = await c.request(method, path, json=body)
                await r.aread()
                status: int | str = r.status_code
            except httpx.HTTPError as exc:  # counted: a refused or dropped connection
                status = type(exc).__name__
            samples.append((f"{method} {path}", time.perf_counter() - t, status, expected))


async def followers(base: str, cap: int, deadline: float) -> dict[str, Any]:
    """`cap` event streams read until the deadline; one more is opened meanwhile."""
    import httpx

    received = [0] * cap

    async def read(i: int, response) -> None:
        async for line in response.aiter_lines():
            received[i] += line.startswith("data: ")

    async with httpx.AsyncClient(base_url=base, timeout=None) as c, \
            contextlib.AsyncExitStack() as stack:
        streams = [await stack.enter_async_context(c.stream("GET", "/api/live/events"))
                   for _ in range(cap)]
        statuses = [r.status_code for r in streams]
        readers = [asyncio.create_task(read(i, r)) for i, r in enumerate(streams)]
        async with c.stream("GET", "/api/live/events") as extra:
            extra_status = extra.status_code
            extra_error = json.loads(await extra.aread()).get("error") \
                if extra_status != 200 else None
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
    return {"cap": cap, "opened": statuses.count(200), "one_more_status": extra_status,
            "one_more_error": extra_error, "events_received": received}


async def oversized(base: str, limit: int) -> dict[str, Any]:
    """A body one byte over the limit with its length, and a chunked one with none."""
    import httpx

    async def chunks():
        for _ in range(limit // 65536 + 2):
            yield b" " * 65536

    out = {}
    async with httpx.AsyncClient(base_url=base, timeout=REQUEST_TIMEOUT_S) as c:
        for name, content in (("with_length", b" " * (limit + 1)), ("chunked", chunks())):
            try:
                r = await c.post("/api/scaling", content=content,
                                 headers={"content-type": "application/json"})
                out[name] = {"status": r.status_code, "error": r.json().get("error")}
            except httpx.HTTPError as exc:  # the server may close before all is sent
                out[name] = {"status": type(exc).__name__, "error": None}
    return out


async def slow_body(base: str, timeout_s: float) -> dict[str, Any]:
    """A POST whose 1,000-byte body comes a byte a second: refused after timeout_s."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST /api/scaling HTTP/1.1\r\nHost: {host}:{port}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{".encode())
    t0, sent, status_line = time.monotonic(), 1, b""
    try:
        while time.monotonic() - t0 < timeout_s * 3:
            try:
                status_line = await asyncio.wait_for(reader.readline(), 1.0)
                break
            except TimeoutError:
                writer.write(b" ")
                await writer.drain()
                sent += 1
        elapsed = time.monotonic() - t0
        rest = await asyncio.wait_for(reader.read(), 10) if status_line else b""
    finally:
        writer.close()
    body = rest.partition(b"\r\n\r\n")[2]
    return {"status": int(status_line.split()[1]) if status_line else None,
            "seconds": round(elapsed, 2), "bytes_sent": sent, "timeout_s": timeout_s,
            "error": json.loads(body).get("error") if body else None}


async def sample_rss(pid: int, deadline: float, series: list[list[float]]) -> None:
    """[seconds since the load began, RSS MiB] every second until the deadline."""
    t0 = time.monotonic()
    while time.monotonic() < deadline:
        value = rss_mib(pid)
        if value is not None:
            series.append([round(time.monotonic() - t0, 1), round(value, 1)])
        await asyncio.sleep(1.0)


def percentile(xs: list[float], q: int) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] if len(xs) > 1 else xs[0]


def _in_reads_order(item: tuple[str, Any]) -> int:
    return [f"{m} {p}" for m, p, _, _ in READS].index(item[0])


def summarize(samples: list, elapsed: float) -> dict[str, Any]:
    by_endpoint: dict[str, list[float]] = defaultdict(list)
    statuses: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    unexpected = server_errors = 0
    for name, seconds, status, expected in samples:
        by_endpoint[name].append(seconds * 1e3)
        statuses[name][str(status)] += 1
        server_errors += isinstance(status, int) and status >= 500
        unexpected += status != expected
    every = [ms for times in by_endpoint.values() for ms in times]
    return {
        "requests": len(samples), "requests_per_s": len(samples) / elapsed,
        "server_errors": server_errors, "unexpected": unexpected,
        "overall": {"p50_ms": percentile(every, 50), "p99_ms": percentile(every, 99),
                    "max_ms": max(every)},
        "endpoints": [{"endpoint": name, "count": len(times),
                       "p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99),
                       "max_ms": max(times), "statuses": dict(statuses[name])}
                      for name, times in sorted(by_endpoint.items(), key=_in_reads_order)],
    }


def report(data: dict[str, Any], log: Callable[[str], None]) -> None:
    log(f"lab under load: {data['clients']} clients for {data['seconds']} s on 127.0.0.1 "
        f"while a live training runs (step {data['training']['step_at_end']} at the end)")
    rows = [[e["endpoint"], e["count"], e["p50_ms"], e["p99_ms"], e["max_ms"]]
            for e in data["endpoints"]]
    o = data["overall"]
    rows.append(["overall", data["requests"], o["p50_ms"], o["p99_ms"], o["max_ms"]])
    log(table(["endpoint", "requests", "p50 ms", "p99 ms", "max ms"], rows))
    rss = data["rss_mib"]
    f = data["followers"]
    log(f"{data['requests_per_s']:.0f} requests/s; 5xx: {data['server_errors']}; other "
        f"unexpected answers: {data['unexpected']}")
    if rss.get("growth_after_warmup") is not None:
        log(f"server RSS: {rss['started']:.0f} MiB at start, {rss['warm']:.0f} after the "
            f"warm-up, peak {rss['peak']:.0f}, {rss['end']:.0f} at the end (growth "
            f"{rss['growth_after_warmup']:+.0f} MiB; "
            f"{rss.get('growth_second_half', float('nan')):+.0f} in the load's second half)")
    big = ", ".join(f"{name} HTTP {v['status']}" for name, v in data["oversized"].items())
    log(f"event streams: {f['opened']} of {f['cap']} open, one more: HTTP "
        f"{f['one_more_status']}; oversized bodies: {big}; "
        f"a trickled body: HTTP {data['slow_body']['status']} after "
        f"{data['slow_body']['seconds']} s")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.lab_load",
                                description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=SECONDS["full"],
                   help=f"how long the clients call (default {SECONDS['full']})")
    p.add_argument("--clients", type=int, default=CLIENTS["full"],
                   help=f"concurrent clients (default {CLIENTS['full']})")
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    args = p.parse_args(argv)
    if not (0 < args.seconds <= 3600 and 1 <= args.clients <= 1024):
        p.error("--seconds must be in (0, 3600] and --clients in [1, 1024]")
    run(SIZES["full"], args.out, seconds=args.seconds, clients=args.clients)


if __name__ == "__main__":
    main()
