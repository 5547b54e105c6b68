"""The lab's HTTP side: the app that composes the areas' routers, and the static page.

create_app includes one APIRouter per area of the lab (ROUTERS: the `router` of
gptlab.lab.<area>.routes for calculator, model, prediction, live, context and experiments),
each with its request and answer models (pydantic) in the schemas module beside it, so
/openapi.json describes every field, limit and answer. Here live what every route shares:
the error handlers, the runs folder and the two slots on app.state (the routes reach the
runs folder through gptlab.lab.state, a slot through its area's dependency), the guard, the
page and /static. Bad input is a 400 with {"error": one line}; nothing a client can send
becomes a 500 (tests/lab/test_fuzz.py fuzzes the API from its own schema).
"""

from __future__ import annotations

import mimetypes
import socket
from pathlib import Path
from typing import Any

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from gptlab.errors import UsageError
from gptlab.lab.calculator import routes as calculator
from gptlab.lab.context import routes as context
from gptlab.lab.experiments import routes as experiments
from gptlab.lab.experiments.quickrun import QuickRunner
from gptlab.lab.features import routes as features
from gptlab.lab.fields import one_line
from gptlab.lab.live import routes as live
from gptlab.lab.live.training import Busy, LiveTrainer, TooManyFollowers
from gptlab.lab.model import routes as model
from gptlab.lab.prediction import routes as prediction
from gptlab.lab.runs import Runs
from gptlab.web.body import CheckedBody
from gptlab.web.guard import ANY_ADDRESS, Access, Guard, is_loopback
from gptlab.web.threaded import ThreadedServer, check_listen, free_port

STATIC = Path(__file__).parent / "static"
# Each area of the lab, one APIRouter with its routes (its schemas in the module beside it).
ROUTERS = (calculator.router, model.router, prediction.router, live.router, context.router,
           experiments.router, features.router)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _openapi_without_422(app: FastAPI) -> None:
    """FastAPI documents a 422 for every body; this API answers bad input with 400."""
    default = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = default()
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
        return app.openapi_schema

    app.openapi = openapi


def create_app(runs_dir: str | Path = "runs", access: Access | None = None) -> FastAPI:
    """The lab's app over runs_dir. Served (serve, BackgroundServer), it answers only as
    `access` allows (gptlab.web.guard); None, for callers in this process that no network
    reaches (TestClient, the fuzz tests, bench.lab_latency), leaves the guard out."""
    app = FastAPI(title="gptlab lab", version="1", docs_url=None, redoc_url=None,
                  description="The lab's JSON API. Every POST takes a JSON object; bad "
                              "input is a 400 with {\"error\": one line}.")
    app.router.route_class = CheckedBody
    runs = Runs(runs_dir)
    app.state.runs = runs

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, one_line(list(exc.errors())))

    @app.exception_handler(UsageError)
    async def usage_error(_request: Request, exc: UsageError) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(Busy)
    async def busy(_request: Request, exc: Busy) -> JSONResponse:
        return _error(409, str(exc))

    @app.exception_handler(TooManyFollowers)
    async def too_many(_request: Request, exc: TooManyFollowers) -> JSONResponse:
        return _error(429, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), exc.headers)  # e.g. 405's Allow

    app.state.live = LiveTrainer(runs.root)  # the one training slot (live.routes)
    app.state.quick = QuickRunner(runs.root)  # the one experiment slot (experiments.routes)
    for router in ROUTERS:
        app.include_router(router)

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    # The page is ES modules, which a browser runs only when served with a JavaScript type;
    # StaticFiles guesses types from the OS's tables, and some (Windows) say text/plain.
    mimetypes.add_type("text/javascript", ".js")
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _openapi_without_422(app)
    if access is not None:  # around everything: routes, the page, /static, the event stream
        app.add_middleware(Guard, access=access)
    return app


class BackgroundServer(ThreadedServer):
    """The lab served from a thread (tests, screenshots): `with BackgroundServer(runs) as url`,
    guarded as `gptlab lab` is (host, token and allow_hosts as Access.for_server takes them;
    the token, where one is needed, is self.access.token, and self.access.url(host) the URL
    `gptlab lab` would print)."""

    what = "the lab server"

    def __init__(self, runs_dir: str | Path, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, allow_hosts: tuple[str, ...] = ()) -> None:
        port = port or free_port(host)
        self.access = Access.for_server(host, port, token, allow_hosts)
        self.app = create_app(runs_dir, self.access)
        super().__init__(self.app, host, port, lifespan="off")

    def url(self) -> str:
        return self.access.url(self.host, token=False)


def serve(runs_dir: str | Path, host: str = "127.0.0.1", port: int = 8000,
          token: str | None = None, allow_hosts: tuple[str, ...] = ()) -> None:
    """Serve the lab until Ctrl-C, answering as Access.for_server(host, port, token,
    allow_hosts) allows: beyond loopback always with a token (a random one unless given)."""
    import uvicorn  # only serving needs it: create_app (tests, bench) runs without it

    access = Access.for_server(host, port, token, allow_hosts)

    check_listen(host, port)
    # Every request works on small matrices: intra-op threads only add scheduling cost,
    # and on a busy machine they make answers far slower (this process serves only the lab).
    torch.set_num_threads(1)
    runs_path = Path(runs_dir)
    print(f"gptlab lab: {access.url(host)}  (runs from {runs_path.resolve()}; Ctrl-C stops)",
          flush=True)
    if not is_loopback(host):
        elsewhere = (f"; from another machine: {access.url(socket.gethostname())} or this "
                     f"machine's IP address" if host in ANY_ADDRESS else "")
        print(f"note: listening on {host}, reachable from other machines; every request "
              f"needs the token in the URL{elsewhere}", flush=True)
    app = create_app(runs_dir, access)
    found = app.state.runs.list()
    if found:
        print(f"runs: {', '.join(found[:8])}{' ...' if len(found) > 8 else ''}", flush=True)
    else:
        print(f"no runs in {runs_path} yet: views 3, 6, 8 and 10 need one (train one from "
              f"view 9, or gptlab train ... --out {runs_path}/NAME)", flush=True)
    # Server.run, not uvicorn.run, which swallows the KeyboardInterrupt uvicorn re-raises
    # after a graceful shutdown: a Ctrl-C then ends the command with 130, a SIGTERM with
    # 143 (gptlab.stopping), as every other command does.
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    server.run()
