"""`gptlab serve`'s app: any model gptlab.load takes, behind OpenAI's API.

create_app wires the routes (gptlab.serve.routes, one APIRouter whose bodies are checked as
the lab's are: gptlab.web.body), the errors in OpenAI's shape (gptlab.serve.errors) and the
lab's guard (gptlab.web.guard: Host and Origin checked, a token beyond loopback, taken as
`Authorization: Bearer` too), around a `Served` model whose scheduler thread starts and
stops with the app (FastAPI's lifespan). `open_model` loads a model as `gptlab sample` does;
`BackgroundServer` serves one from a thread (tests, the benchmark); `serve` until Ctrl-C.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from gptlab.serve import errors, routes
from gptlab.serve.chat import find_template
from gptlab.serve.scheduler import Scheduler
from gptlab.serve.served import Served
from gptlab.web.guard import ANY_ADDRESS, Access, Guard, is_loopback
from gptlab.web.threaded import ThreadedServer, check_listen, free_port

DEFAULT_BATCH = 32  # rows decoded together: past 32, a CPU's tokens/s grows little
SERVER = {"noun": "server", "command": "gptlab serve", "bearer": True, "token_status": 401}


def _guard_body(status: int, why: str) -> dict[str, Any]:
    return errors.body(status, why, code="invalid_api_key" if status == 401 else None)


def create_app(served: Served, access: Access | None = None) -> FastAPI:
    """The app serving `served`; `access` None (in-process callers no network reaches)
    leaves the guard out. Its lifespan starts and stops the scheduler's thread."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        served.scheduler.start()
        try:
            yield
        finally:
            served.scheduler.close()

    app = FastAPI(title="gptlab serve", version="1", docs_url=None, redoc_url=None,
                  lifespan=lifespan,
                  description="OpenAI's completions and chat completions for a gptlab model.")
    app.state.served = served
    errors.install(app)
    app.include_router(routes.router)
    if access is not None:
        app.add_middleware(Guard, access=access, body=_guard_body)
    return app


def open_model(path: str | Path, name: str | None = None, *, device: str | None = None,
               weights: str = "fp32", context: int | None = None,
               rope_scaling: str | None = None, max_batch: int = DEFAULT_BATCH,
               max_tokens: int | None = None) -> Served:
    """The model at `path` (anything gptlab.load takes), loaded as `gptlab sample` loads it,
    ready to serve under `name` (default: path as given)."""
    # start-up time: torch and the model load only where a model is served
    from gptlab import probe
    from gptlab.distributed.process import pick_device
    from gptlab.inference.quantize import quantize
    from gptlab.loading import load

    model, tokenizer = load(path, device=pick_device(device or "cpu"), context=context,
                            rope_scaling=rope_scaling)
    with probe.announced(lambda line: print(f"gptlab serve: {line}", file=sys.stderr)):
        quantize(model, weights)
    rope = model.rope
    if rope is not None and rope.dynamic and max_batch > 1:
        # dynamic NTK's frequencies follow each text's length; rows of different lengths
        # in one forward would share the longest's
        print("gptlab serve: dynamic RoPE scaling: one text at a time (--max-batch 1)",
              file=sys.stderr)
        max_batch = 1
    source = getattr(model, "source", None)
    chat = find_template(getattr(source, "where", None))
    return Served(str(name or path), model, tokenizer, Scheduler(model, tokenizer.decode,
                                                                 max_batch),
                  context=model.context, chat=chat, max_tokens=max_tokens,
                  created=int(time.time()))


class BackgroundServer(ThreadedServer):
    """`served` on a thread: `with BackgroundServer(served) as base_url` gives
    http://HOST:PORT/v1, guarded as `gptlab serve` is."""

    what = "gptlab serve"

    def __init__(self, served: Served, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, allow_hosts: tuple[str, ...] = ()) -> None:
        port = port or free_port(host)
        self.access = Access.for_server(host, port, token, allow_hosts, **SERVER)
        self.app = create_app(served, self.access)
        super().__init__(self.app, host, port)

    def url(self) -> str:
        return f"{super().url()}/v1"


def serve(served: Served, host: str = "127.0.0.1", port: int = 8000,
          token: str | None = None, allow_hosts: tuple[str, ...] = ()) -> None:
    """Serve until Ctrl-C, answering as the lab's guard allows: beyond loopback always with
    a token (a random one unless given)."""
    import uvicorn  # only serving needs it

    access = Access.for_server(host, port, token, allow_hosts, **SERVER)
    check_listen(host, port)
    shown = "127.0.0.1" if host in ANY_ADDRESS else host.strip("[]")
    shown = f"[{shown}]" if ":" in shown else shown
    chat = "and /v1/chat/completions" if served.chat else "(no chat template: no chat)"
    print(f"gptlab serve: {served.name} at http://{shown}:{port}/v1  (/v1/completions {chat}; "
          f"context {served.context}, {served.scheduler.slots} rows; Ctrl-C stops)",
          flush=True)
    if access.token:
        print(f"token: {access.token}  (send it as 'Authorization: Bearer TOKEN', the openai "
              f"client's api_key)", flush=True)
    if not is_loopback(host):
        print(f"note: listening on {host}, reachable from other machines; every request "
              f"needs the token", flush=True)
    app = create_app(served, access)
    # Server.run, not uvicorn.run, which swallows the KeyboardInterrupt uvicorn re-raises
    # after a graceful shutdown: Ctrl-C ends the command with 130, as every other command.
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    server.run()
