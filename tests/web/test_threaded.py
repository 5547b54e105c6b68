"""An app served from a thread answers over real HTTP while the block runs and not after;
a port that is taken is one clear UsageError; an app that cannot start says which server."""

from __future__ import annotations

import socket

import httpx
import pytest

from gptlab.errors import GptlabError, UsageError
from gptlab.web.threaded import ThreadedServer, check_listen, free_port


async def hello(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


def test_a_threaded_server_answers_inside_the_block_only():
    port = free_port()
    with ThreadedServer(hello, "127.0.0.1", port, lifespan="off") as url:
        assert url == f"http://127.0.0.1:{port}"
        assert httpx.get(url, timeout=5).text == "hello"
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=5)


def test_a_taken_port_is_one_usage_error_and_a_free_one_passes():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UsageError, match=f"cannot listen on 127.0.0.1:{port}: "):
            check_listen("127.0.0.1", port)
    check_listen("127.0.0.1", free_port())


def test_a_server_that_cannot_start_names_itself():
    class Named(ThreadedServer):
        what = "the test server"

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(GptlabError, match=f"the test server did not start on 127.0.0.1:{port}"):
            with Named(hello, "127.0.0.1", port, lifespan="off"):
                pass
