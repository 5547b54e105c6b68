"""`gptlab lab`: the local web lab (see gptlab.lab)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gptlab.cli import argtypes
from gptlab.errors import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "lab",
        help="start the local web lab (attention step by step, heads, positions, params)",
        description=(
            "Start the interactive attention lab on a local web server and print its URL. "
            "It works offline; every number on it is computed by gptlab. Runs (folders with "
            "config.json, model.safetensors, tokenizer.json) are read from --runs."
        ),
        examples=[
            "gptlab lab",
            "gptlab lab --runs runs --port 8080",
            "gptlab lab --host 0.0.0.0 --port 8000",
        ],
    )
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=argtypes.int_in(1, 65535), default=8000, metavar="PORT",
                   help="port (default 8000)")
    p.add_argument("--runs", default="runs", metavar="DIR",
                   help="folder of training runs the lab may open (default ./runs)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    runs = Path(args.runs)
    if runs.exists() and not runs.is_dir():  # a missing folder is fine: no runs yet
        raise UsageError(f"--runs {runs} is not a folder")
    try:  # the 'lab' extra (fastapi), and torch: loaded only when the lab starts
        from gptlab.lab.server import serve
    except ImportError as exc:
        raise UsageError(f"the lab needs the 'lab' extra (pip install 'gptlab[lab]'): "
                         f"{exc.name} is missing") from None
    serve(args.runs, host=args.host, port=args.port)
    return 0
