"""`gptlab lab`: the local web lab (see gptlab.lab)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gptlab.cli import argtypes
from gptlab.errors import UsageError
from gptlab.files.kinds import CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE
from gptlab.web import guard


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "lab",
        help="start the local web lab (attention step by step, heads, positions, params)",
        description=(
            "Start the interactive attention lab on a local web server and print its URL. "
            "It works offline; every number on it is computed by gptlab. Runs (folders with "
            f"{CONFIG_FILE}, {WEIGHTS_FILE}, {TOKENIZER_FILE}) are read from --runs. "
            "It answers only requests addressed to it by its own names (127.0.0.1, "
            "localhost, [::1], the --host address and --allow-host names) and sent by no "
            "page or its own page. Listening beyond this machine (--host 0.0.0.0) it also "
            "needs a token: a random one each start, in the URL it prints, unless --token "
            "sets one."
        ),
        examples=[
            "gptlab lab --runs runs --port 8080",
            "gptlab lab --host 0.0.0.0 --port 8000",
            "gptlab lab --host 0.0.0.0 --token my-long-secret --allow-host mybox.local",
        ],
    )
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only); any "
                        "other address needs the token")
    p.add_argument("--port", type=argtypes.int_in(1, 65535), default=8000, metavar="PORT",
                   help="port (default 8000)")
    p.add_argument("--runs", default="runs", metavar="DIR",
                   help="folder of training runs the lab may open (default ./runs)")
    p.add_argument("--token", type=argtypes.checked(guard.check_token), metavar="TOKEN",
                   help="the token every request must carry (?token=, a cookie the page "
                        "gets, or 'Authorization: token TOKEN'); default: a random one "
                        "beyond loopback, none on loopback. It cannot be empty")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   type=argtypes.checked(guard.check_host_name),
                   help="also answer requests addressed to NAME, at any port (a name this "
                        "machine is reached by, or a reverse proxy's); repeatable")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    runs = Path(args.runs)
    if runs.exists() and not runs.is_dir():
        raise UsageError(f"--runs {runs} is not a folder")
    if not runs.exists():  # fine, but said: a mistyped name would otherwise look empty
        print(f"gptlab lab: --runs {runs} does not exist yet: the lab creates it when a model "
              f"is trained from the page (view 9, or an experiment's --quick form)",
              file=sys.stderr)
    try:  # the 'lab' extra (fastapi), and torch: loaded only when the lab starts
        from gptlab.lab.server import serve
    except ImportError as exc:
        raise UsageError(f"the lab needs the 'lab' extra (pip install 'gptlab[lab]'): "
                         f"{exc.name} is missing") from None
    serve(args.runs, host=args.host, port=args.port, token=args.token,
          allow_hosts=tuple(args.allow_host))
    return 0
