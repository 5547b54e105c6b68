"""The route class both servers build on, on an app of its own: a body over the limit or
not sent as JSON is a UsageError before the route runs (each server answers it in its own
shape). The lab's routes, the trickled body and the fuzzing: tests/lab/test_body.py."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from gptlab.errors import UsageError
from gptlab.web.body import MAX_BODY_BYTES, area_router


def test_an_area_router_checks_bodies_before_its_routes():
    router = area_router()
    seen = []

    @router.post("/echo")
    async def echo(request: Request) -> dict:
        seen.append(await request.json())
        return {"ok": True}

    app = FastAPI()
    app.include_router(router)

    @app.exception_handler(UsageError)
    async def usage(_request: Request, exc: UsageError) -> JSONResponse:
        return JSONResponse({"refused": str(exc)}, status_code=400)

    client = TestClient(app)
    assert client.post("/echo", json={"a": 1}).json() == {"ok": True}
    big = client.post("/echo", content=b"[" + b" " * MAX_BODY_BYTES + b"]",
                      headers={"content-type": "application/json"})
    assert big.status_code == 400 and "the limit is" in big.json()["refused"]
    text = client.post("/echo", content=b"{}", headers={"content-type": "text/plain"})
    assert text.status_code == 400 and "Content-Type: application/json" in text.json()["refused"]
    assert seen == [{"a": 1}]
