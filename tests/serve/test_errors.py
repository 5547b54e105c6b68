"""Every failure answers in OpenAI's error shape with its status: a refusal the routes
raise, a body pydantic refuses (the field named), gptlab's UsageError, an unknown path, a
wrong method, and anything unforeseen (500, no traceback sent)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from gptlab.errors import UsageError
from gptlab.serve import errors


class Body(BaseModel):
    n: int


def app() -> FastAPI:
    made = FastAPI()
    errors.install(made)

    @made.post("/api")
    def api(body: Body) -> dict:
        if body.n == 1:
            raise errors.ApiError(404, "no such model", "model", "model_not_found")
        if body.n == 2:
            raise UsageError("n is wrong")
        if body.n == 3:
            raise RuntimeError("surprise")
        return {}

    return made


def test_each_failure_has_openais_shape_and_its_status():
    client = TestClient(app(), raise_server_exceptions=False)
    cases = [({"n": 1}, 404, "no such model", "model", "model_not_found"),
             ({"n": 2}, 400, "n is wrong", None, None),
             ({}, 400, "n is required", "n", None),
             ({"n": "x"}, 400, "n: Input should be a valid integer, unable to parse string "
              "as an integer", "n", None),
             ({"n": 3}, 500, "the server failed: RuntimeError: surprise", None, None)]
    for body, status, message, param, code in cases:
        answer = client.post("/api", json=body)
        assert answer.status_code == status, body
        assert answer.json() == {"error": {"message": message, "param": param, "code": code,
                                           "type": errors.TYPES[status]}}, body
    missing = client.get("/nowhere")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "no route GET /nowhere on this server"
    assert client.get("/api").status_code == 405
