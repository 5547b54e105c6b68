"""gptlab serve under load: 1, 8, 32 and 64 concurrent streaming clients for a fixed time
each, on the shipped model and on a GPT-2-small-shaped one, against llama.cpp (the
llama-cpp-python package's OpenAI server, `python -m llama_cpp.server`) on the same
model's GGUF export (`gptlab convert --to-gguf`, f32), measured in the same run.

`python -m bench.serve_load [--seconds 60] [--clients 1,8,32,64] [--models shipped,gpt2]`
`[--threads 2] [--out DIR]`, or through `python -m bench` (quick 15 s, full 60 s per level;
smoke: the shipped model, 1 and 4 clients, 3 s, no peer). Each server is its own process
on 127.0.0.1 with --threads torch or llama.cpp threads; the clients run in this process
(asyncio, one httpx connection each), so they share the machine with the server, for both
servers alike, and both servers run with OMP_WAIT_POLICY=PASSIVE (SERVER_ENV). Each client
sends
POST /v1/completions with stream: true, one of a few prompts, max_tokens MAX_TOKENS,
temperature 0.8 (one seed per request), again and again until the time is up; a request
still running then is closed (its tokens so far count).

Reported per server, model and client count: completion tokens/s (every streamed token
received in the window / the window), time to first token p50/p99 (send to the first
chunk with text), inter-token latency p50/p99 (gaps between a request's chunks), requests
finished, errors (any answer but 200, a stream that ends without [DONE], a transport
error: must be 0), the server's resident memory at start and at the end of each level.

The GPT-2-small shape is random weights (seed 0) with a byte-level BPE of 50,257 tokens
trained on random letter words, so that its vocabulary and matrices are GPT-2 small's; its
text means nothing, and no end-of-text token stops it early.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import SIZES, Size, rss_mib, server_process, table, write_result

SECONDS = {"smoke": 3.0, "quick": 15.0, "full": 60.0}
CLIENTS = (1, 8, 32, 64)
MAX_TOKENS = {"shipped": 64, "gpt2": 64}
PROMPTS = {"shipped": ["ROMEO:\n", "JULIET:\nO Romeo, ", "First Citizen:\nBefore we proceed",
                       "KING RICHARD III:\nNow is the winter", "MENENIUS:\nI tell you, "],
           "gpt2": None}  # made from the tokenizer's own words (gpt2_prompts)
START_TIMEOUT_S = 180
# Both servers' OpenMP workers sleep when idle (what gptlab serve sets by itself): on a
# machine busier than its cores, spinning workers made one llama.cpp completion of 64
# tokens on the GPT-2 shape take 105 s instead of 4.5 s, and gptlab serve 10x slower.
SERVER_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}
GPT2_VOCAB = 50257


# ---------------------------------------------------------------------------- the models


def make_gpt2_shaped(folder: Path) -> list[str]:
    """A GPT-2-small-shaped gptlab model directory at `folder` (random weights, a 50,257
    token byte-level BPE); returns prompts of about 32 tokens for it."""
    import torch

    from gptlab import model_dir
    from gptlab.data.tokenizer import HFTokenizer
    from gptlab.model.config import GPTConfig
    from gptlab.model.gpt import GPT

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 7)))
             for _ in range(60_000)]
    text = " ".join(rng.choice(words) for _ in range(600_000))
    tokenizer = HFTokenizer.train_bpe(text, GPT2_VOCAB)
    torch.manual_seed(0)
    config = GPTConfig.from_preset("gpt2")  # GELU's tanh form, as GPT-2 and llama.cpp
    assert config.vocab_size == tokenizer.vocab_size == GPT2_VOCAB
    model_dir.save_model(GPT(config), folder)
    tokenizer.save(folder / model_dir.TOKENIZER_FILE)
    return [" ".join(rng.choice(words) for _ in range(24)) for _ in range(5)]


def export_gguf(model: str, path: Path) -> str | None:
    """Write model's GGUF to path; None, or why the export refuses this model."""
    done = subprocess.run([sys.executable, "-m", "gptlab", "convert", "--to-gguf", model,
                           "--out", str(path)], capture_output=True, text=True)
    return None if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


# ---------------------------------------------------------------------------- the servers


def gptlab_command(model: str, port: int, threads: int, max_batch: int) -> list[str]:
    return [sys.executable, "-m", "gptlab", "serve", model, "--name", "bench", "--port",
            str(port), "--threads", str(threads), "--max-batch", str(max_batch)]


def llama_command(gguf: Path, port: int, threads: int, context: int) -> list[str]:
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
            "bench", "--port", str(port), "--host", "127.0.0.1", "--n_threads", str(threads),
            "--n_threads_batch", str(threads), "--n_ctx", str(context),
            # queue a request behind the running one (its default stops the running one)
            "--interrupt_requests", "False"]


# ---------------------------------------------------------------------------- the clients


def _rounded(mib: float | None) -> float | None:
    return None if mib is None else round(mib, 1)


class Tally:
    """What the clients of one level saw."""

    def __init__(self) -> None:
        self.tokens = 0
        self.ttft: list[float] = []
        self.itl: list[float] = []
        self.finished = 0
        self.errors: list[str] = []


async def one_request(client: Any, prompt: str, max_tokens: int, seed: int, tally: Tally,
                      deadline: float) -> None:
    """One streamed completion, read until [DONE] or the deadline (then closed)."""
    body = {"model": "bench", "prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "temperature": 0.8, "seed": seed}
    sent = time.perf_counter()
    last = None
    done = False
    async with client.stream("POST", "/completions", json=body) as answer:
        if answer.status_code != 200:
            tally.errors.append(f"status {answer.status_code}: {(await answer.aread())[:200]}")
            return
        async for line in answer.aiter_lines():
            if time.monotonic() > deadline:
                return  # still running: its tokens so far count
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                tally.errors.append(str(chunk["error"])[:200])
                return
            if not chunk.get("choices"):
                continue
            if chunk["choices"][0].get("text"):
                now = time.perf_counter()
                if last is None:
                    tally.ttft.append(now - sent)
                else:
                    tally.itl.append(now - last)
                last = now
                tally.tokens += 1
    if done:
        tally.finished += 1
    else:
        tally.errors.append("the stream ended without [DONE]")


async def level(base: str, prompts: list[str], clients: int, seconds: float,
                max_tokens: int) -> Tally:
    import httpx

    tally = Tally()
    deadline = time.monotonic() + seconds
    seeds = iter(range(10**9))

    async def client_loop(i: int) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(None)) as client:
            k = i
            while time.monotonic() < deadline:
                try:
                    await one_request(client, prompts[k % len(prompts)], max_tokens,
                                      next(seeds), tally, deadline)
                except httpx.HTTPError as exc:
                    tally.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                k += 1

    await asyncio.gather(*(client_loop(i) for i in range(clients)))
    return tally


def percentile(xs: list[float], q: int) -> float | None:
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1]


def ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1000, 1)


def measure(base: str, pid: int, prompts: list[str], clients: tuple[int, ...],
            seconds: float, max_tokens: int) -> dict[str, Any]:
    asyncio.run(level(base, prompts, 1, min(seconds, 2.0), 4))  # warm-up, untimed
    out = {"rss_start_mib": _rounded(rss_mib(pid)), "levels": []}
    for n in clients:
        t0 = time.monotonic()
        tally = asyncio.run(level(base, prompts, n, seconds, max_tokens))
        elapsed = time.monotonic() - t0
        out["levels"].append({
            "clients": n, "seconds": round(elapsed, 1),
            "tokens_per_s": round(tally.tokens / elapsed, 1), "tokens": tally.tokens,
            "ttft_p50_ms": ms(percentile(tally.ttft, 50)),
            "ttft_p99_ms": ms(percentile(tally.ttft, 99)),
            "itl_p50_ms": ms(percentile(tally.itl, 50)),
            "itl_p99_ms": ms(percentile(tally.itl, 99)),
            "finished": tally.finished, "errors": len(tally.errors),
            "first_errors": tally.errors[:3], "rss_end_mib": _rounded(rss_mib(pid))})
    return out


# ---------------------------------------------------------------------------- the run


def run(size: Size, out_dir: Path, log: Callable[[str], None] = print,
        seconds: float | None = None, clients: tuple[int, ...] | None = None,
        models: tuple[str, ...] | None = None, threads: int = 2,
        peer: bool | None = None) -> dict[str, Any]:
    """Every model on every server at every client count; smoke: the shipped model alone,
    1 and 4 clients, no peer (it proves the plumbing)."""
    from gptlab.web.threaded import free_port

    seconds = SECONDS[size.name] if seconds is None else seconds
    clients = ((1, 4) if size.smoke else CLIENTS) if clients is None else clients
    models = (("shipped",) if size.smoke else ("shipped", "gpt2")) if models is None else models
    peer = not size.smoke if peer is None else peer
    results: dict[str, Any] = {"size": size.name, "seconds_per_level": seconds,
                               "threads": threads, "load_before": os.getloadavg()[0],
                               "runs": []}
    with tempfile.TemporaryDirectory() as root:
        for name in models:
            model, prompts = "shakespeare", PROMPTS["shipped"]
            if name == "gpt2":
                model = str(Path(root) / "gpt2-small-shaped")
                prompts = make_gpt2_shaped(Path(model))
            context = 128 if name == "shipped" else 1024
            servers = {"gptlab serve": lambda port, m=model: gptlab_command(
                m, port, threads, max(clients))}
            gguf = Path(root) / f"{name}.gguf"
            refused = export_gguf(model, gguf) if peer else "no peer asked for"
            if refused is None:
                servers["llama-cpp-python"] = lambda port, g=gguf, c=context: llama_command(
                    g, port, threads, c)
            else:
                log(f"serve_load: no llama.cpp peer on {name}: {refused}")
                results.setdefault("no_peer", {})[name] = refused
            for server, command in servers.items():
                port = free_port()
                log(f"serve_load: {server} on {name}, {clients} clients, {seconds:g} s each")
                base = f"http://127.0.0.1:{port}/v1"
                with server_process(server, command(port), f"{base}/models",
                                    START_TIMEOUT_S, SERVER_ENV) as pid:
                    data = measure(base, pid, prompts, clients, seconds, MAX_TOKENS[name])
                results["runs"].append({"server": server, "model": name, **data})
                report_run(results["runs"][-1], log)
    results["load_after"] = os.getloadavg()[0]
    write_result(out_dir, "serve_load", results)
    return results


def report_run(run_data: dict[str, Any], log: Callable[[str], None]) -> None:
    rows = [[lv["clients"], lv["tokens_per_s"], lv["ttft_p50_ms"], lv["ttft_p99_ms"],
             lv["itl_p50_ms"], lv["itl_p99_ms"], lv["finished"], lv["errors"],
             lv["rss_end_mib"]] for lv in run_data["levels"]]
    log(f"{run_data['server']} on {run_data['model']} (RSS at start "
        f"{run_data['rss_start_mib']} MiB)")
    log(table(["clients", "tokens/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms",
               "ITL p99 ms", "finished", "errors", "RSS end MiB"], rows))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.serve_load",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=SECONDS["full"])
    p.add_argument("--clients", default=",".join(map(str, CLIENTS)),
                   help="client counts, comma-separated (default 1,8,32,64)")
    p.add_argument("--models", default="shipped,gpt2",
                   help="shipped and/or gpt2 (the GPT-2-small shape), comma-separated")
    p.add_argument("--threads", type=int, default=2, help="each server's threads (default 2)")
    p.add_argument("--no-peer", action="store_true", help="gptlab serve alone")
    p.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = p.parse_args(argv)
    run(SIZES["full"], Path(args.out), seconds=args.seconds,
        clients=tuple(int(c) for c in args.clients.split(",")),
        models=tuple(args.models.split(",")), threads=args.threads, peer=not args.no_peer)


if __name__ == "__main__":
    main()
