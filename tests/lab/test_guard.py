"""Who the lab answers (gptlab.web.guard, issue 36): real HTTP requests against a running
server. A foreign Host (DNS rebinding), a foreign Origin, no token or a wrong one beyond
loopback: 403 with one JSON line, and nothing under the runs folder changes (every file's
bytes compared before and after, a moment later, so a training that started would show);
the lab's own names, its own page and the right token are served. Also the event streams'
cap. (A body that trickles in: tests/lab/test_body.py.)"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import socket
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gptlab.errors import UsageError
from gptlab.lab.live.training import MAX_FOLLOWERS, Session
from gptlab.lab.server import BackgroundServer
from gptlab.web.guard import Access, check_host_name, check_token

START = json.dumps({"task": "induction", "steps": 10, "every": 10})
SETTLE_S = 1.0  # a training that had started would have written live-data/ by then


def request(port: int, method: str, path: str, headers: dict[str, str] | None = None,
            body: str | None = None, address: str = "127.0.0.1"):
    """(status, headers, body) of one request sent exactly with these headers (Host too:
    http.client adds its own only when none is given)."""
    conn = http.client.HTTPConnection(address, port, timeout=30)
    try:
        sent = dict(headers or {})
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=sent)
        r = conn.getresponse()
        return r.status, r.headers, r.read()
    finally:
        conn.close()


def hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def refused(status: int, body: bytes, fragment: str) -> None:
    """A 403 whose body is one JSON line {"error": ...} containing fragment."""
    text = body.decode()
    assert status == 403, (status, text)
    assert "\n" not in text.strip() and fragment in json.loads(text)["error"], text


@pytest.fixture
def runs(tmp_path, copy_tiny_run):
    copy_tiny_run(tmp_path / "runs" / "tiny")
    return tmp_path / "runs"


@pytest.fixture
def lab(runs):
    """A lab on 127.0.0.1 (no token) over `runs`."""
    s = BackgroundServer(runs)
    with s:
        yield s


def nothing_done(lab: BackgroundServer, runs: Path, before: dict[str, str]) -> None:
    time.sleep(SETTLE_S)
    assert hashes(runs) == before
    assert lab.app.state.live.session is None  # no training was started


def test_a_foreign_host_is_refused_before_any_route(lab, runs):
    port, before = lab.port, hashes(runs)
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}",
                 f"localhost.evil.example:{port}", f"127.0.0.1:{port}@evil.example", "",
                 f"127.0.0.1.:{port}x"):
        own_origin = {"Origin": f"http://{host}"}
        for method, path, body in (("POST", "/api/live/start", START),
                                   ("GET", "/api/live/events", None), ("GET", "/", None),
                                   ("GET", "/static/app.js", None), ("GET", "/api/runs", None)):
            status, _, answer = request(port, method, path, {"Host": host, **own_origin}, body)
            refused(status, answer, "is not an address this lab serves")
    nothing_done(lab, runs, before)


def test_a_foreign_origin_is_refused_whatever_the_method(lab, runs):
    port, before = lab.port, hashes(runs)
    host = {"Host": f"127.0.0.1:{port}"}
    for origin in (f"http://evil.example:{port}", "null", f"http://127.0.0.1:{port + 1}",
                   f"http://127.0.0.1:{port}/x", "http://evil.example", f"file://127.0.0.1:{port}"):
        for method, path, body in (("POST", "/api/live/start", START),
                                   ("POST", "/api/live/stop", "{}"),
                                   ("GET", "/api/live/events", None)):
            status, _, answer = request(port, method, path, {**host, "Origin": origin}, body)
            refused(status, answer, "is not this lab's page")
    nothing_done(lab, runs, before)


def test_its_own_names_and_page_are_served(lab):
    port = lab.port
    for name in ("127.0.0.1", "localhost", "[::1]", "LOCALHOST"):
        status, _, page = request(port, "GET", "/", {"Host": f"{name}:{port}"})
        assert status == 200 and b"/static/app.js" in page, name
        status, _, answer = request(port, "POST", "/api/scaling",
                                    {"Host": f"{name}:{port}", "Origin": f"http://{name}:{port}"},
                                    '{"d_k": 4}')
        assert status == 200 and json.loads(answer)["d_k"] == 4, (name, answer)
    # a script sends no Origin
    status, _, answer = request(port, "GET", "/api/runs")
    assert status == 200 and "tiny" in json.loads(answer)["runs"]


def follow_to_end(port: int, headers: dict[str, str]) -> list[dict]:
    status, _, body = request(port, "GET", "/api/live/events", headers)
    assert status == 200, body
    return [json.loads(line[6:]) for line in body.decode().splitlines()
            if line.startswith("data: ")]


def test_beyond_loopback_every_request_needs_the_token(runs, one_thread):
    """Listening on every interface: a random token per start; without it, or with a wrong
    one, nothing is served or done; ?token= on the first page load sets the cookie the page's
    requests then carry, and a script may send it as a header."""
    first = Access.for_server("0.0.0.0", 8000).token
    assert first and first != Access.for_server("0.0.0.0", 8000).token  # per start

    lab = BackgroundServer(runs, host="0.0.0.0")
    with lab as url:
        port, token, before = lab.port, lab.access.token, hashes(runs)
        assert url == f"http://127.0.0.1:{port}/" and len(token) >= 32
        assert lab.access.url("0.0.0.0") == f"{url}?token={token}"
        own = {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"}
        for path in ("/", "/static/app.js", "/api/runs", "/api/live/events"):
            refused(*request(port, "GET", path, own)[::2], "needs its token")
        refused(*request(port, "POST", "/api/live/start", own, START)[::2], "needs its token")
        # one character changed (a fixed "x" in front would be the token itself 1 time in 64)
        wrong = ("y" if token[0] == "x" else "x") + token[1:]
        for how in ({"Authorization": f"token {wrong}"},
                    {"Cookie": f"{lab.access.cookie}={wrong}"}):
            refused(*request(port, "POST", "/api/live/start", {**own, **how}, START)[::2],
                    "wrong token")
        refused(*request(port, "POST", f"/api/live/start?token={wrong}", own, START)[::2],
                "wrong token")
        # the right token and a foreign Host or Origin: still refused
        refused(*request(port, "POST", f"/api/live/start?token={token}",
                         {**own, "Host": f"evil.example:{port}"}, START)[::2], "Host")
        refused(*request(port, "POST", f"/api/live/start?token={token}",
                         {**own, "Origin": "http://evil.example"}, START)[::2], "Origin")
        nothing_done(lab, runs, before)

        # the page's first load sets the cookie
        status, headers, page = request(port, "GET", f"/?token={token}", own)
        assert status == 200 and b"/static/app.js" in page
        cookie = headers["set-cookie"]
        assert cookie.startswith(f"{lab.access.cookie}={token};")
        assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= {p.strip() for p in cookie.split(";")}
        with_cookie = {**own, "Cookie": f"other=1; {lab.access.cookie}={token}"}
        status, _, body = request(port, "POST", "/api/live/start", with_cookie, START)
        assert status == 200 and json.loads(body)["running"], body
        events = follow_to_end(port, with_cookie)
        assert events[0]["kind"] == "start" and events[-1]["status"] == "finished", events[-1]
        # a script's header
        status, _, body = request(port, "GET", "/api/runs", {"Authorization": f"token {token}"})
        assert status == 200 and "live-induction" in json.loads(body)["runs"]


def this_machines_address() -> str | None:
    """An address of this machine other than loopback, if it has one (no packet is sent:
    connecting a UDP socket only picks the route)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: never a real host
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_bound_to_one_address_it_answers_that_address_with_the_token(runs):
    address = this_machines_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    lab = BackgroundServer(runs, host=address)
    with lab as url:
        port, token = lab.port, lab.access.token
        assert token and url == f"http://{address}:{port}/"
        assert request(port, "GET", "/api/runs", address=address)[0] == 403
        auth = {"Authorization": f"token {token}"}
        assert request(port, "GET", "/api/runs", auth, address=address)[0] == 200
        refused(*request(port, "GET", "/api/runs", {**auth, "Host": f"evil.example:{port}"},
                         address=address)[::2], "Host")


def test_a_token_given_on_loopback_is_checked_and_names_can_be_added(runs):
    lab = BackgroundServer(runs, token="my-long-secret", allow_hosts=("mybox.local",))
    with lab:
        port = lab.port
        refused(*request(port, "GET", "/api/runs")[::2], "needs its token")
        auth = {"Authorization": "token my-long-secret"}
        assert request(port, "GET", "/api/runs", auth)[0] == 200
        # an added name, at any port (a reverse proxy's), as Host and as the page's Origin
        for host in (f"mybox.local:{port}", "mybox.local:443", "MYBOX.LOCAL"):
            status, _, body = request(port, "POST", "/api/scaling",
                                      {**auth, "Host": host, "Origin": f"https://{host}"},
                                      '{"d_k": 4}')
            assert status == 200, (host, body)
        refused(*request(port, "GET", "/api/runs", {**auth, "Host": f"otherbox.local:{port}"}
                         )[::2], "Host")


@pytest.mark.parametrize("host, port, wanted", [
    ("localhost", 8000, True), ("localhost", 8001, False), ("::1", 8000, True),
    ("127.0.0.1", 8000, True), ("192.168.1.5", 8000, False), ("evil.example", 8000, False),
])
def test_names_served_on_loopback(host, port, wanted):
    assert Access.for_server("127.0.0.1", 8000).serves(host, port) is wanted


def test_access_settings():
    on_all = Access.for_server("0.0.0.0", 8000)
    assert on_all.serves("192.168.1.5", 8000) and not on_all.serves("192.168.1.5", 9)
    assert not on_all.serves("evil.example", 8000) and on_all.token
    assert Access.for_server("127.0.0.1", 8000).token is None
    assert Access.for_server("::1", 80).url("::1") == "http://[::1]:80/"
    only_port_80 = Access.for_server("127.0.0.1", 80)
    assert only_port_80.refusal({"host": "localhost"}, "") == (None, False)  # port 80 implied
    assert Access.for_server("127.0.0.1", 8000).refusal({"host": "localhost"}, "")[0]
    for bad in ("", " ", "a b", "tok\u00e9n", "x;y"):
        with pytest.raises(ValueError):
            check_token(bad)
        with pytest.raises(UsageError, match="token"):
            Access.for_server("0.0.0.0", 8000, token=bad)
    for bad in ("", "*", "http://x", "x:80", "a/b", "a..b", "-a"):
        with pytest.raises(ValueError):
            check_host_name(bad)
    assert check_host_name("[::1]") == "::1" and check_host_name("MyBox.Local.") == "mybox.local"


OWN = ["127.0.0.1:8000", "localhost:8000", "[::1]:8000"]


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(host=st.one_of(st.sampled_from(OWN), st.text(max_size=40),
                     st.sampled_from(OWN).flatmap(lambda h: st.text(max_size=3).map(h.__add__))),
       origin=st.one_of(st.none(), st.sampled_from([f"http://{h}" for h in OWN]),
                        st.text(max_size=40), st.text(max_size=20).map("http://".__add__)))
def test_any_host_or_origin_is_answered_or_refused_never_an_error(host, origin):
    """Whatever the headers hold, the guard decides (never raises: that would be a 500),
    and what it lets through is one of the lab's own names and page."""
    access = Access.for_server("127.0.0.1", 8000)
    headers = {"host": host} if origin is None else {"host": host, "origin": origin}
    why, _ = access.refusal(headers, "")
    if why is None:
        own = r"(127\.0\.0\.1|localhost|\[::1\])\.?:0*8000"
        assert re.fullmatch(own, host, re.I), host
        assert origin is None or re.fullmatch(f"https?://{own}", origin, re.I), origin


def test_event_streams_are_capped(lab):
    """MAX_FOLLOWERS streams follow a training; one more gets a 429 with one JSON line; a
    slot is given back when its stream ends."""
    session = Session("induction", "live-induction", 10, 5)
    lab.app.state.live.session = session  # a training that waits: no thread, no files
    port = lab.port
    streams = []
    try:
        for _ in range(MAX_FOLLOWERS):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/api/live/events")
            assert conn.getresponse().status == 200
            streams.append(conn)
        status, _, body = request(port, "GET", "/api/live/events")
        assert status == 429 and f"{MAX_FOLLOWERS} event streams" in json.loads(body)["error"]
        session.emit({"kind": "end", "run": "live-induction", "status": "finished"})
        deadline = time.monotonic() + 20
        while (status := request(port, "GET", "/api/live/events")[0]) != 200:
            assert status == 429 and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        for conn in streams:
            conn.close()


@pytest.mark.slow
@pytest.mark.browser
def test_the_page_works_with_its_token(runs, open_lab, chromium):
    """In Chromium, beyond loopback: the printed URL's first load sets the cookie (HttpOnly:
    the page's scripts cannot read it); the page's own fetches (POSTs with its Origin) and
    its event stream then carry it, so a training starts, streams and ends; a page opened
    without the token is refused."""
    lab = BackgroundServer(runs, host="0.0.0.0")
    with lab:
        printed = lab.access.url("0.0.0.0")
        with open_lab(printed + "&run=tiny#live", "[data-testid=live-start]") as opened:
            page = opened.page
            assert page.evaluate("document.cookie") == ""  # HttpOnly
            page.fill("[data-testid=live-steps]", "10")
            page.fill("[data-testid=live-every]", "10")
            page.click("[data-testid=live-start]")
            page.wait_for_selector("[data-testid=live-status][data-status]", timeout=120_000)
            status = page.get_attribute("[data-testid=live-status]", "data-status")
            assert status == "finished", page.text_content("[data-testid=live-status]")
            assert page.evaluate("fetch('/api/runs').then(r => r.status)") == 200
        stranger = chromium.new_context()
        try:
            answer = stranger.new_page().goto(printed.split("?")[0])
            assert answer.status == 403 and "needs its token" in answer.json()["error"]
        finally:
            stranger.close()
