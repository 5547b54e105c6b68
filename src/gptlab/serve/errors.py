"""Errors as OpenAI's API sends them: a status code and
{"error": {"message", "type", "param", "code"}}, which the openai client turns into its
BadRequestError (400), AuthenticationError (401), PermissionDeniedError (403),
NotFoundError (404), RateLimitError (429) and InternalServerError (500+).

`ApiError` is raised by the routes; `install` makes every other failure answer in the same
shape: a body pydantic refuses, gptlab's own UsageError (bad input, a 400), an unknown path
(404) or method (405), and anything unforeseen (500, its type named, no traceback sent).
"""

from __future__ import annotations

import traceback
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gptlab.errors import UsageError

# OpenAI's error types by status code (what its API returns for each).
TYPES = {400: "invalid_request_error", 401: "authentication_error",
         403: "permission_error", 404: "invalid_request_error", 405: "invalid_request_error",
         408: "timeout_error", 413: "invalid_request_error", 429: "rate_limit_error",
         500: "server_error", 503: "server_error"}


class ApiError(Exception):
    """A request the server refuses: status, one-line message, the field it names."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def body(status: int, message: str, param: str | None = None,
         code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": TYPES.get(status, "invalid_request_error"),
                      "param": param, "code": code}}


def response(status: int, message: str, param: str | None = None, code: str | None = None,
             headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body(status, message, param, code), status_code=status,
                        headers=headers)


def _validation_message(errors: list[dict[str, Any]]) -> tuple[str, str | None]:
    """(one line, the field) for pydantic's first complaint."""
    first = errors[0]
    where = [str(part) for part in first.get("loc", ()) if part != "body"]
    field = where[0] if where else None
    name = ".".join(where) or "the body"
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    if first.get("type") == "missing":
        return f"{name} is required", field
    if first.get("type") == "extra_forbidden":
        return f"{name} is not a field of this request", field
    return f"{name}: {message}", field


def install(app: FastAPI) -> None:
    """Every error the app answers, in OpenAI's shape."""

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return response(exc.status, exc.message, exc.param, exc.code)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(list(exc.errors()))
        return response(400, message, param)

    @app.exception_handler(UsageError)
    async def usage(_request: Request, exc: UsageError) -> JSONResponse:
        return response(400, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path} on this server"
        return response(exc.status_code, message, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unforeseen(_request: Request, exc: Exception) -> JSONResponse:
        traceback.print_exception(exc)
        return response(500, f"the server failed: {type(exc).__name__}: {exc}")
