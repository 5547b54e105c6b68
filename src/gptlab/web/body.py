"""The route class every lab router (and gptlab serve's) uses: a request body is small, on
time and JSON.

`area_router()` is the APIRouter each area of the lab (the `router` of
gptlab.lab.calculator.routes, gptlab.lab.model.routes, and so on) and gptlab.serve.routes
build their routes on, so create_app's include_router keeps the check on every route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from gptlab.errors import UsageError

MAX_BODY_BYTES = 256 * 1024
# A body must have arrived this long after its request began (408 otherwise): a client that
# trickles one byte a second holds no route for longer. 256 KiB needs far less, even remote.
BODY_TIMEOUT_S = 10.0


def _is_json(media: str) -> bool:
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))


class CheckedBody(APIRoute):
    """A route whose body is at most MAX_BODY_BYTES long (checked before it is parsed),
    arrives within BODY_TIMEOUT_S and is sent as JSON (Content-Type application/json or
    */*+json). A page on another site can make a visitor's browser post text/plain, a form
    or a body with no type without asking the server first (no CORS preflight), but not
    JSON; so only the lab's own page, curl -H and the like can drive it (and gptlab.web.guard
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


def area_router() -> APIRouter:
    """An area's router: its routes check their bodies (CheckedBody)."""
    return APIRouter(route_class=CheckedBody)
