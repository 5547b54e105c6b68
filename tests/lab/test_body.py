"""The check every lab route makes of its request body (gptlab.web.body.CheckedBody, on
every area's router): sent as JSON (what another site's page can post without a CORS
preflight is refused), at most MAX_BODY_BYTES whether its length is said or not, and
arrived within BODY_TIMEOUT_S (408); each refusal one JSON line."""

from __future__ import annotations

import http.client
import json
import select
import socket

import pytest
from fastapi.testclient import TestClient

from gptlab.lab.server import BackgroundServer, create_app
from gptlab.web import body as checked_body
from gptlab.web.body import MAX_BODY_BYTES, CheckedBody, area_router


@pytest.fixture
def lab(runs_root):
    """A lab on 127.0.0.1 (no token) over the shared runs folder."""
    s = BackgroundServer(runs_root)
    with s:
        yield s


def test_an_areas_router_checks_its_bodies():
    router = area_router()

    @router.post("/x")
    def x() -> dict:
        return {}

    assert router.route_class is CheckedBody and isinstance(router.routes[0], CheckedBody)


def test_a_body_said_to_be_over_the_limit_is_refused_before_it_is_read(tmp_path):
    client = TestClient(create_app(tmp_path))
    r = client.post("/api/scaling", content="{}", headers={
        "content-type": "application/json", "content-length": str(MAX_BODY_BYTES + 1)})
    assert r.status_code == 400 and r.json()["error"] == (
        f"request body is {MAX_BODY_BYTES + 1} bytes; the limit is {MAX_BODY_BYTES}")


def test_bodies_are_json_objects_sent_as_json(client, post, bad):
    # What another site's page can post without a CORS preflight is refused: text/plain,
    # a form, no Content-Type at all.
    for headers in ({"content-type": "text/plain"}, {}, {"content-type": "application/x-www-"
                                                         "form-urlencoded"}):
        r = client.post("/api/scaling", content='{"d_k": 4}', headers=headers)
        assert r.status_code == 400, (headers, r.text)
        assert "must be sent with Content-Type: application/json" in r.json()["error"]
    for media in ("application/json; charset=utf-8", "application/merge-patch+json"):
        r = client.post("/api/scaling", content='{"d_k": 4}', headers={"content-type": media})
        assert r.status_code == 200 and r.json()["d_k"] == 4, (media, r.text)
    bad(client, "/api/scaling", "d_k=4", "not valid JSON")
    bad(client, "/api/scaling", "", "request body must be a JSON object")
    bad(client, "/api/scaling", "null", "request body must be a JSON object")
    # JSON Schema counts 4.0 as an integer, and so does the server; "4" and true are not.
    assert post(client, "/api/scaling", {"d_k": 4.0})["d_k"] == 4
    bad(client, "/api/scaling", {"d_k": "4"}, "d_k must be an integer, got '4'")
    bad(client, "/api/scaling", {"d_k": True}, "d_k must be an integer, got True")
    bad(client, "/api/scaling", {"d_k": 4.5}, "d_k must be an integer, got 4.5")


@pytest.mark.slow  # seconds (a process, a timed-out body, 30 runs): make test, not make check
def test_a_body_that_trickles_in_is_refused(lab, monkeypatch):
    """A client that sends its body a byte at a time holds no route: 408 after
    BODY_TIMEOUT_S, one JSON line. A chunked body (no length) over MAX_BODY_BYTES: 400."""
    monkeypatch.setattr(checked_body, "BODY_TIMEOUT_S", 0.5)
    with socket.create_connection(("127.0.0.1", lab.port), timeout=30) as s:
        s.sendall(f"POST /api/scaling HTTP/1.1\r\nHost: 127.0.0.1:{lab.port}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{".encode())
        answer = b""
        for _ in range(50):  # a byte every 0.2 s until the server answers (99 bytes: 20 s)
            if select.select([s], [], [], 0.2)[0]:
                break
            s.sendall(b" ")
        while chunk := s.recv(4096):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer
    assert "did not arrive within 0.5 s" in json.loads(body)["error"]

    conn = http.client.HTTPConnection("127.0.0.1", lab.port, timeout=30)
    chunk = b"[" + b"0," * 40_000
    conn.request("POST", "/api/scaling", body=iter([chunk] * 4), encode_chunked=True,
                 headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    r = conn.getresponse()
    assert r.status == 400 and "over 262144 bytes" in json.loads(r.read())["error"]
    conn.close()
