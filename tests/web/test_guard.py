"""The guard's rules worded for a server other than the lab (gptlab serve): its noun and
command in the refusals, the token also taken as `Authorization: Bearer`, a token's
refusal answered with its own status and every refusal in the server's body. The lab's
own behaviour, through real requests: tests/lab/test_guard.py."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from gptlab.web.guard import Access, Guard, lab_error

SERVER = {"noun": "server", "command": "gptlab serve", "bearer": True, "token_status": 401}
OWN = {"host": "127.0.0.1:8000"}


def test_the_lab_keeps_its_words_and_takes_no_bearer_token():
    lab = Access.for_server("0.0.0.0", 8000, "secret-token")
    assert lab.refusal({**OWN, "authorization": "Bearer secret-token"}, "")[0] == (
        "refused: this lab needs its token: open the URL `gptlab lab` printed "
        "(http://HOST:8000/?token=...), or send 'Authorization: token TOKEN'")
    assert lab.refused({**OWN, "authorization": "token wrong"}, "").status == 403
    assert lab.refusal({**OWN, "authorization": "token secret-token"}, "") == (None, False)


def test_a_server_takes_bearer_and_answers_a_token_with_its_status():
    server = Access.for_server("0.0.0.0", 8000, "secret-token", **SERVER)
    assert server.refused({**OWN, "authorization": "Bearer secret-token"}, "").why is None
    missing = server.refused(OWN, "")
    assert missing.status == 401 and "send 'Authorization: Bearer TOKEN'" in missing.why
    wrong = server.refused({**OWN, "authorization": "Bearer nope"}, "")
    assert wrong.status == 401 and "the one `gptlab serve` printed" in wrong.why
    host = server.refused({"host": "evil.example"}, "")
    assert host.status == 403 and "is not an address this server serves" in host.why


@pytest.mark.parametrize("headers, status", [
    ({"host": "127.0.0.1:8000"}, 401), ({"host": "evil.example"}, 403),
    ({"host": "127.0.0.1:8000", "authorization": "Bearer secret-token"}, 200),
])
def test_the_guard_answers_in_the_servers_body(headers, status):
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    def body(code: int, why: str) -> dict:
        return {"error": {"message": why, "status": code}}

    guarded = Guard(app, Access.for_server("0.0.0.0", 8000, "secret-token", **SERVER), body)
    transport = httpx.ASGITransport(app=guarded)

    async def call():
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            return await client.get("/", headers=headers)

    answer = asyncio.run(call())
    assert answer.status_code == status
    if status != 200:
        assert answer.json()["error"]["status"] == status
    assert lab_error(403, "why") == {"error": "why"}
