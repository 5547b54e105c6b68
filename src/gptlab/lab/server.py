"""The lab's HTTP side: a JSON API over gptlab.lab.api and the static page.

Bad input is a 400 with {"error": one line}; nothing the page can send becomes a 500.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from gptlab.errors import GptlabError, UsageError
from gptlab.lab import api, quiz
from gptlab.lab.runs import Runs

STATIC = Path(__file__).parent / "static"
MAX_BODY_BYTES = 256 * 1024


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise UsageError(f"request body is {len(raw)} bytes; the limit is {MAX_BODY_BYTES}")
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise UsageError("request body must be a JSON object")
    return body


def create_app(runs_dir: str | Path = "runs") -> FastAPI:
    app = FastAPI(title="gptlab lab", docs_url=None, redoc_url=None, openapi_url=None)
    runs = Runs(runs_dir)
    app.state.runs = runs

    @app.exception_handler(UsageError)
    async def usage_error(_request: Request, exc: UsageError) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(GptlabError)
    async def gptlab_error(_request: Request, exc: GptlabError) -> JSONResponse:
        return _error(503, str(exc))  # something this build cannot do, not bad input

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    def post(path: str, compute: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        async def endpoint(request: Request) -> JSONResponse:
            body = await _body(request)
            return JSONResponse(await run_in_threadpool(compute, body))

        app.add_api_route(path, endpoint, methods=["POST"], name=path)

    post("/api/attention", api.attention_view)
    post("/api/scaling", api.scaling_view)
    post("/api/sinusoidal", api.sinusoidal_view)
    post("/api/rope", api.rope_view)
    post("/api/params", api.params_view)
    post("/api/heads", lambda body: api.heads_view(runs, body))
    post("/api/head_scores", lambda body: api.head_scores_view(runs, body))
    post("/api/ablate", lambda body: api.ablate_view(runs, body))
    post("/api/quiz", quiz.question_view)
    post("/api/quiz/check", quiz.check_view)

    @app.get("/api/runs")
    def list_runs() -> JSONResponse:
        return JSONResponse(api.runs_view(runs))

    @app.get("/api/presets")
    def list_presets() -> JSONResponse:
        return JSONResponse(api.presets_view())

    @app.get("/")
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class BackgroundServer:
    """The lab served from a thread (tests, screenshots): `with BackgroundServer(runs) as url`."""

    def __init__(self, runs_dir: str | Path, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self.host, self.port = host, port or free_port(host)
        config = uvicorn.Config(create_app(runs_dir), host=self.host, port=self.port,
                                log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        import time

        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise GptlabError(f"the lab server did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        return f"http://{self.host}:{self.port}/"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve(runs_dir: str | Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    import uvicorn

    try:
        with socket.socket() as s:  # a clear one-line error instead of uvicorn's exit
            s.bind((host, port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    import torch

    # Every request works on small matrices: intra-op threads only add scheduling cost,
    # and on a busy machine they make answers far slower (this process serves only the lab).
    torch.set_num_threads(1)
    runs_path = Path(runs_dir)
    print(f"gptlab lab: http://{host}:{port}/  (runs from {runs_path.resolve()}; Ctrl-C stops)",
          flush=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"note: listening on {host}, reachable from other machines", flush=True)
    app = create_app(runs_dir)
    found = app.state.runs.list()
    if found:
        print(f"runs: {', '.join(found[:8])}{' ...' if len(found) > 8 else ''}", flush=True)
    else:
        print(f"no runs in {runs_path} yet: views 3 and 6 need one "
              f"(gptlab train ... --out {runs_path}/NAME)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
