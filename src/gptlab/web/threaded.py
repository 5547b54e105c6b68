"""Where the two servers listen: a port checked before uvicorn takes it (one clear line
instead of uvicorn's exit), a free port, and an app served from a thread (the tests, the
screenshots, the benchmarks), so a caller in the same process reaches it over real HTTP."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from gptlab.errors import GptlabError, UsageError


def check_listen(host: str, port: int) -> None:
    """A one-line UsageError if host:port cannot be had (taken, or no such address)."""
    try:
        with socket.socket() as s:
            s.bind((host, port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the system's pick)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ThreadedServer:
    """An ASGI app served by uvicorn on a daemon thread: `with server as url:` returns once
    it accepts connections (or raises, naming `what`, if it did not start in 20 s) and
    stops it on leaving. A subclass names what it serves and the URL a caller is given."""

    what = "the server"

    def __init__(self, app: Any, host: str, port: int, lifespan: str = "auto") -> None:
        import uvicorn  # only serving needs it: the apps themselves run without it

        self.host, self.port = host, port
        config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                                lifespan=lifespan)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.server.run()
        except SystemExit:  # uvicorn's exit when it cannot start: __enter__ raises instead
            pass

    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise GptlabError(f"{self.what} did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        return self.url()

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
