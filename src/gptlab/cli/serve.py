"""`gptlab serve`: a model behind OpenAI's API (see gptlab.serve)."""

from __future__ import annotations

import argparse
import os

from gptlab.cli import argtypes
from gptlab.cli.main import warned
from gptlab.errors import UsageError
from gptlab.inference.formats import WEIGHT_CHOICES
from gptlab.web import guard


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve a model to OpenAI clients (/v1/completions, /v1/chat/completions)",
        description=(
            "Serve MODEL on OpenAI's API: GET /v1/models, POST /v1/completions and, for a "
            "model whose tokenizer has a chat template, POST /v1/chat/completions, streamed "
            "as server-sent events when asked. Requests are decoded together (continuous "
            "batching, up to --max-batch texts per step); greedy answers equal `gptlab sample "
            "--greedy`'s. It answers only requests addressed to it by its own names "
            "(127.0.0.1, localhost, [::1], the --host address, --allow-host names) and sent "
            "by no web page of another site. Beyond this machine (--host 0.0.0.0) every "
            "request needs the token, sent as 'Authorization: Bearer TOKEN' (the openai "
            "client's api_key): a random one each start, printed, unless --token sets one."
        ),
        examples=[
            "gptlab serve shakespeare",
            "gptlab serve runs/demo/best --port 8080 --max-batch 64",
            "gptlab serve openai-community/gpt2 --host 0.0.0.0 --token my-long-secret",
        ],
    )
    p.add_argument("model", metavar="MODEL", help=argtypes.MODEL_HELP)
    p.add_argument("--name", metavar="NAME",
                   help="the model's name for clients (their `model` field; default MODEL as "
                        "given)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only); any "
                        "other address needs the token")
    p.add_argument("--port", type=argtypes.int_in(1, 65535), default=8000, metavar="PORT",
                   help="port (default 8000)")
    p.add_argument("--token", type=argtypes.checked(guard.check_token), metavar="TOKEN",
                   help="the token every request must carry ('Authorization: Bearer TOKEN'); "
                        "default: a random one beyond loopback, none on loopback")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   type=argtypes.checked(guard.check_host_name),
                   help="also answer requests addressed to NAME, at any port (a name this "
                        "machine is reached by, or a reverse proxy's); repeatable")
    p.add_argument("--max-batch", type=argtypes.int_in(1, 4096), default=32, metavar="N",
                   help="texts decoded together in one step (default 32); more requests wait")
    p.add_argument("--max-tokens", type=argtypes.int_in(1), metavar="N",
                   help="the most tokens one choice may ask for (default: what the context "
                        "leaves after the prompt)")
    p.add_argument("--max-waiting", type=argtypes.int_in(1), default=256, metavar="N",
                   help="requests that may wait for a row before new ones get a 429 "
                        "(default 256)")
    p.add_argument("--weights", choices=WEIGHT_CHOICES, default="fp32",
                   help="the matrices' format for decoding, as `gptlab sample --weights` "
                        "(default fp32)")
    p.add_argument("--context", type=argtypes.int_in(1), metavar="N",
                   help="the longest prompt + completion (default the model's block_size)")
    p.add_argument("--rope-scaling", type=argtypes.rope_scaling, metavar="KIND:F",
                   help="stretch RoPE at inference time: linear:F, ntk:F, yarn:F or "
                        "dynamic:F (see gptlab eval --help)")
    p.add_argument("--threads", type=argtypes.int_in(1), metavar="N",
                   help="torch's intra-op threads (default torch's: one per core)")
    p.add_argument("--device", default="auto",
                   help="auto (default: cuda if there is one, else cpu), cpu, cuda, cuda:N, mps")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Idle OpenMP workers sleep instead of spinning: between forward passes this process
    # has HTTP to answer on other threads, which spinning workers starve (on 2 busy cores,
    # 32 streaming clients: 51 tokens/s spinning, 496 sleeping; BENCHMARKS.md). Read when
    # torch loads OpenMP, so before torch; a value the user set stays.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:  # the 'serve' extra (fastapi, uvicorn): loaded only when the server starts
        from gptlab.serve.app import open_model, serve
        from gptlab.web.threaded import check_listen
    except ImportError as exc:
        raise UsageError(f"gptlab serve needs the 'serve' extra (pip install "
                         f"'gptlab[serve]'): {exc.name} is missing") from None
    import torch  # start-up time: after the checks above

    check_listen(args.host, args.port)  # before the model loads: a busy port says so at once
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    with warned("gptlab serve"):
        served = open_model(args.model, args.name, device=args.device, weights=args.weights,
                            context=args.context, rope_scaling=args.rope_scaling,
                            max_batch=args.max_batch, max_tokens=args.max_tokens)
    served.max_waiting = args.max_waiting
    serve(served, host=args.host, port=args.port, token=args.token,
          allow_hosts=tuple(args.allow_host))
    return 0
