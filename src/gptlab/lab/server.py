"""The lab's HTTP side: a JSON API over gptlab.lab.api and the static page.

Request bodies and answers are pydantic models (gptlab.lab.schemas, gptlab.lab.responses),
so /openapi.json describes every field, limit and answer. Bad input is a 400 with
{"error": one line}; nothing a client can send becomes a 500 (tests/lab/test_fuzz.py fuzzes
the API from its own schema).
"""

from __future__ import annotations

import mimetypes
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from gptlab.errors import GptlabError, UsageError
from gptlab.lab import api, contextview, experimentsview, live, model_routes, play_routes, quiz
from gptlab.lab import responses as res
from gptlab.lab import schemas as m
from gptlab.lab.guard import ANY_ADDRESS, Access, Guard, is_loopback
from gptlab.lab.runs import Runs

STATIC = Path(__file__).parent / "static"
MAX_BODY_BYTES = 256 * 1024
# A body must have arrived this long after its request began (408 otherwise): a client that
# trickles one byte a second holds no route for longer. 256 KiB needs far less, even remote.
BODY_TIMEOUT_S = 10.0

BAD_INPUT = {400: {"model": res.Error, "description": "Bad input: one line naming the field"}}


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _is_json(media: str) -> bool:
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))


class CheckedBody(APIRoute):
    """A route whose body is at most MAX_BODY_BYTES long (checked before it is parsed),
    arrives within BODY_TIMEOUT_S and is sent as JSON (Content-Type application/json or
    */*+json). A page on another site can make a visitor's browser post text/plain, a form
    or a body with no type without asking the server first (no CORS preflight), but not
    JSON; so only the lab's own page, curl -H and the like can drive it (and gptlab.lab.guard
    refuses another site's Origin anyway). FastAPI refuses the same bodies
    (strict_content_type, its default since 0.132), less clearly, and not in every version
    pyproject.toml allows."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Any:
            length = request.headers.get("content-length", "")
            if length.isdigit() and int(length) > MAX_BODY_BYTES:
                raise UsageError(f"request body is {length} bytes; the limit is {MAX_BODY_BYTES}")
            try:
                with anyio.fail_after(BODY_TIMEOUT_S):
                    raw = await _read_body(request)
            except TimeoutError:
                raise StarletteHTTPException(408, f"request body did not arrive within "
                                                  f"{BODY_TIMEOUT_S:g} s") from None
            media = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if raw and not _is_json(media):
                sent = f"as {media}" if media else "without one"
                raise UsageError("request body must be sent with Content-Type: "
                                 f"application/json; it was sent {sent}")
            return await handler(request)

        return checked


async def _read_body(request: Request) -> bytes:
    """The body, read up to MAX_BODY_BYTES and no further (a chunked body says no length)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise UsageError(f"request body is over {MAX_BODY_BYTES} bytes, the limit")
        chunks.append(chunk)
    # Where Request.body() keeps a body it read, so the route's handler reads it again.
    request._body = b"".join(chunks)
    return request._body


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
    `access` allows (gptlab.lab.guard); None, for callers in this process that no network
    reaches (TestClient, the fuzz tests, bench.lab_latency), leaves the guard out."""
    app = FastAPI(title="gptlab lab", version="1", docs_url=None, redoc_url=None,
                  description="The lab's JSON API. Every POST takes a JSON object; bad "
                              "input is a 400 with {\"error\": one line}.")
    app.router.route_class = CheckedBody
    runs = Runs(runs_dir)
    app.state.runs = runs

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, m.one_line(list(exc.errors())))

    @app.exception_handler(UsageError)
    async def usage_error(_request: Request, exc: UsageError) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(live.Busy)
    async def busy(_request: Request, exc: live.Busy) -> JSONResponse:
        return _error(409, str(exc))

    @app.exception_handler(live.TooManyFollowers)
    async def too_many(_request: Request, exc: live.TooManyFollowers) -> JSONResponse:
        return _error(429, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), exc.headers)  # e.g. 405's Allow

    # Views are plain (sync) functions: FastAPI runs them in its thread pool. They return
    # JSONResponse themselves, so response_model documents the answer (and the fuzz test
    # checks it) without a second pass over large float matrices.

    @app.post("/api/attention", response_model=res.AttentionResponse, responses=BAD_INPUT)
    def attention(body: m.AttentionRequest) -> JSONResponse:
        """One attention head, stage by stage, on seeded or edited inputs (view 1)."""
        return JSONResponse(api.attention_view(body))

    @app.post("/api/scaling", response_model=res.ScalingResponse, responses=BAD_INPUT)
    def scaling(body: m.ScalingRequest) -> JSONResponse:
        """Why scores are divided by sqrt(d_k) (view 2)."""
        return JSONResponse(api.scaling_view(body))

    @app.post("/api/sinusoidal", response_model=res.SinusoidalResponse, responses=BAD_INPUT)
    def sinusoidal(body: m.SinusoidalRequest) -> JSONResponse:
        """The sinusoidal position table and its dot products (view 4)."""
        return JSONResponse(api.sinusoidal_view(body))

    @app.post("/api/rope", response_model=res.RopeResponse, responses=BAD_INPUT)
    def rope(body: m.RopeRequest) -> JSONResponse:
        """RoPE: scores depend on the offset n - m only (view 4)."""
        return JSONResponse(api.rope_view(body))

    @app.post("/api/params", response_model=res.ParamsResponse, responses=BAD_INPUT)
    def params(body: m.ParamsRequest) -> JSONResponse:
        """Parameters, FLOPs and memory of a preset or config (view 5)."""
        return JSONResponse(api.params_view(body))

    @app.post("/api/heads", response_model=res.HeadsResponse, responses=BAD_INPUT)
    def heads(body: m.HeadsRequest) -> JSONResponse:
        """A run's attention patterns and one layer's heads, concat and W_O (view 3)."""
        return JSONResponse(api.heads_view(runs, body))

    @app.post("/api/head_scores", response_model=res.HeadScoresResponse, responses=BAD_INPUT)
    def head_scores(body: m.HeadScoresRequest) -> JSONResponse:
        """Previous-token, duplicate and induction scores of every head (view 6)."""
        return JSONResponse(api.head_scores_view(runs, body))

    @app.post("/api/ablate", response_model=res.AblateResponse, responses=BAD_INPUT)
    def ablate(body: m.AblateRequest) -> JSONResponse:
        """The loss with one head switched off (view 6)."""
        return JSONResponse(api.ablate_view(runs, body))

    @app.post("/api/quiz", response_model=res.QuizResponse, responses=BAD_INPUT)
    def quiz_question(body: m.QuizRequest) -> JSONResponse:
        """A question made from the library; its answer stays on the server (view 7)."""
        return JSONResponse(quiz.question_view(body))

    @app.post("/api/quiz/check", response_model=res.QuizCheckResponse, responses=BAD_INPUT)
    def quiz_check(body: m.QuizCheckRequest) -> JSONResponse:
        """Checks an answer to the question (kind, seed) against the computed one."""
        return JSONResponse(quiz.check_view(body))

    @app.get("/api/runs", response_model=res.RunsResponse)
    def list_runs() -> JSONResponse:
        """The runs in the runs folder."""
        return JSONResponse(api.runs_view(runs))

    @app.post("/api/runs/encoding", response_model=res.RunsEncodingResponse, responses=BAD_INPUT)
    def runs_encoding(body: m.RunsEncodingRequest) -> JSONResponse:
        """The runs whose tokenizer encodes a text: a view's run picker defaults to one."""
        return JSONResponse(api.runs_encoding_view(runs, body))

    @app.get("/api/presets", response_model=res.PresetsResponse)
    def list_presets() -> JSONResponse:
        """Every preset's config, and the choices of the config's string fields."""
        return JSONResponse(api.presets_view())

    app.state.live = play_routes.register(app, runs, BAD_INPUT)  # next token, live training
    contextview.register(app, runs, BAD_INPUT)  # longer than trained
    experimentsview.register(app, runs, BAD_INPUT)  # any experiment's report
    model_routes.register(app, runs, BAD_INPUT)  # whole model, all heads, learned positions

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


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class BackgroundServer:
    """The lab served from a thread (tests, screenshots): `with BackgroundServer(runs) as url`,
    guarded as `gptlab lab` is (host, token and allow_hosts as Access.for_server takes them;
    the token, where one is needed, is self.access.token, and self.access.url(host) the URL
    `gptlab lab` would print)."""

    def __init__(self, runs_dir: str | Path, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, allow_hosts: tuple[str, ...] = ()) -> None:
        import uvicorn  # only serving needs it: create_app (tests, bench) runs without it

        self.host, self.port = host, port or free_port(host)
        self.access = Access.for_server(self.host, self.port, token, allow_hosts)
        self.app = create_app(runs_dir, self.access)
        config = uvicorn.Config(self.app, host=self.host, port=self.port,
                                log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise GptlabError(f"the lab server did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        return self.access.url(self.host, token=False)

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve(runs_dir: str | Path, host: str = "127.0.0.1", port: int = 8000,
          token: str | None = None, allow_hosts: tuple[str, ...] = ()) -> None:
    """Serve the lab until Ctrl-C, answering as Access.for_server(host, port, token,
    allow_hosts) allows: beyond loopback always with a token (a random one unless given)."""
    import uvicorn  # only serving needs it: create_app (tests, bench) runs without it

    access = Access.for_server(host, port, token, allow_hosts)

    try:
        with socket.socket() as s:  # a clear one-line error instead of uvicorn's exit
            s.bind((host, port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
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
