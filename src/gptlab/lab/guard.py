"""Who the lab answers: requests addressed to it by a name it serves (Host), sent by no page
or by its own page (Origin), and, where it listens beyond this machine, carrying the token
printed when it started. Anything else gets a 403 with one JSON line, before any route runs.

Why each check:
- Host, against DNS rebinding: a page on evil.example re-resolves its own name to 127.0.0.1,
  and the browser then treats the lab as evil.example's own origin (it reads every answer and
  posts freely). The name the page used stays in Host, so a lab that answers only its own
  names (127.0.0.1, localhost and [::1] at its port, the address it is bound to, and the
  names the user adds) cannot be reached that way.
- Origin: browsers name the page that sent a request in Origin (on every POST, and on
  cross-origin fetches and event streams); one that is not the lab's own is refused, whatever
  the method. "null" (a sandboxed frame, a file: page) is foreign. Scripts send none.
- Token, beyond loopback, as Jupyter does: other machines can reach the port, so a random
  token per start is printed in the lab's URL; the first page load with ?token= sets it as an
  HttpOnly, SameSite=Strict cookie that the page's own requests then carry. Scripts send
  `Authorization: token TOKEN` or ?token=. On loopback a token is checked only if one was
  given (--token).

Guard is one ASGI middleware around the whole app (gptlab.lab.server.create_app): the JSON
routes, the page, the static files and the live event stream alike, so no route can miss it.
"""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gptlab.errors import UsageError

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")  # answered at the lab's port
ANY_ADDRESS = ("0.0.0.0", "::", "")  # listening on every interface
TOKEN_BYTES = 24  # secrets.token_urlsafe: 32 characters
# What a token may hold: unreserved URL characters, so it goes into a URL, a cookie and a
# header as it is.
TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~-]+")
HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?")
DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback(host: str) -> bool:
    """Whether listening on `host` keeps the lab to this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def check_token(value: str) -> str:
    """A token the user chose: non-empty, of unreserved URL characters (ValueError if not)."""
    if not value:
        raise ValueError("must not be empty: a lab beyond loopback always needs a token "
                         "(leave it out for a random one)")
    if not TOKEN_CHARS.fullmatch(value):
        raise ValueError("may hold only letters, digits and - _ . ~ (it goes into the URL "
                         "and a cookie as it is)")
    return value


def check_host_name(value: str) -> str:
    """A name the user allows in Host: a DNS name or an IP address, no port or scheme
    (ValueError if not); lower case, an IPv6 address without brackets."""
    name = value.strip().lower()
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    if _is_ip(bare):
        return bare
    if not HOST_NAME.fullmatch(name) or len(name) > 253:
        raise ValueError(f"must be a host name or an IP address without a port or scheme "
                         f"(e.g. mybox.local), got {value!r}")
    return name.rstrip(".")


def _split(authority: str, default_port: int) -> tuple[str, int] | None:
    """(lower-case host, port) of a Host value or an Origin's authority; None if malformed
    (userinfo, a path, a bad port)."""
    if not authority or any(c in authority for c in "@/?#\\ \t"):
        return None
    try:
        parts = urlsplit("//" + authority)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.hostname.rstrip("."), default_port if port is None else port


@dataclass(frozen=True)
class Access:
    """Whom a lab listening at `port` answers. Build it with Access.for_server."""

    port: int
    names: frozenset[str]  # answered at `port`: loopback, the bound address
    added: frozenset[str]  # the user's (--allow-host): answered at any port (a proxy's)
    any_address: bool  # listening on every interface: this machine's IP addresses too
    token: str | None  # None: no token needed (loopback, none given)

    @classmethod
    def for_server(cls, host: str, port: int, token: str | None = None,
                   allow_hosts: Iterable[str] = ()) -> Access:
        """The access of a lab listening on host:port. Beyond loopback a token is always
        needed: `token`, else a random one; on loopback, only `token` if given. A token or
        name that check_token / check_host_name refuses is a UsageError naming it."""
        if token is not None:
            try:
                check_token(token)
            except ValueError as exc:
                raise UsageError(f"token {exc}") from None
        if token is None and not is_loopback(host):
            token = secrets.token_urlsafe(TOKEN_BYTES)
        bound = host.strip("[]").lower()
        names = set(LOOPBACK_NAMES)
        # On every interface, also this machine's own name (resolved on this network, not
        # by a page's DNS); on one address, that address or name.
        names.add(socket.gethostname().lower() if bound in ANY_ADDRESS else bound)
        added = set()
        for name in allow_hosts:
            try:
                added.add(check_host_name(name))
            except ValueError as exc:
                raise UsageError(f"allow_hosts: {exc}") from None
        return cls(port, frozenset(names), frozenset(added), bound in ANY_ADDRESS, token)

    @property
    def cookie(self) -> str:
        # Cookies are kept per host name, not per port: two labs on one machine each get
        # their own.
        return f"gptlab-lab-{self.port}"

    def url(self, host: str, token: bool = True) -> str:
        """The address of a lab listening on `host` (on every interface: 127.0.0.1),
        http://HOST:PORT/, with ?token= where one is needed (unless token=False)."""
        shown = "127.0.0.1" if host in ANY_ADDRESS else host.strip("[]")
        shown = f"[{shown}]" if ":" in shown else shown
        query = f"?token={self.token}" if self.token and token else ""
        return f"http://{shown}:{self.port}/{query}"

    def serves(self, name: str, port: int) -> bool:
        if name in self.added:
            return True
        if port != self.port:
            return False
        # An IP address in Host cannot be a rebound name: the browser connected to it.
        return name in self.names or (self.any_address and _is_ip(name))

    def refusal(self, headers: dict[str, str], query: str) -> tuple[str | None, bool]:
        """(why a request with these headers (lower-case names) and query string is
        refused, or None; whether its ?token= should be set as the cookie)."""
        host = headers.get("host", "")
        where = _split(host, 80)
        if where is None or not self.serves(*where):
            return (f"refused: Host {host!r} is not an address this lab serves "
                    f"(http://127.0.0.1:{self.port}/ or localhost); to add a name start it "
                    f"with --allow-host NAME", False)
        origin = headers.get("origin")
        if origin is not None and not self._own_origin(origin):
            return (f"refused: Origin {origin!r} is not this lab's page; the lab answers "
                    f"only its own page and scripts", False)
        if self.token is None:
            return None, False
        from_query = parse_qs(query).get("token", [None])[-1]
        sent = from_query or _header_token(headers) or _cookie(headers, self.cookie)
        if sent is None:
            return (f"refused: this lab needs its token: open the URL `gptlab lab` printed "
                    f"(http://HOST:{self.port}/?token=...), or send 'Authorization: token "
                    f"TOKEN'", False)
        if not secrets.compare_digest(sent.encode(), self.token.encode()):
            return "refused: wrong token; use the one `gptlab lab` printed at its start", False
        return None, from_query is not None

    def _own_origin(self, origin: str) -> bool:
        try:
            parts = urlsplit(origin)
        except ValueError:  # e.g. "http://[": no origin at all
            return False
        if parts.scheme not in DEFAULT_PORTS or parts.path or parts.query or parts.fragment:
            return False
        where = _split(parts.netloc, DEFAULT_PORTS[parts.scheme])
        return where is not None and self.serves(*where)


def _header_token(headers: dict[str, str]) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return (value.strip() or None) if scheme.lower() == "token" else None


def _cookie(headers: dict[str, str], name: str) -> str | None:
    jar = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except CookieError:  # a malformed Cookie header is simply no token
        return None
    return jar[name].value if name in jar else None


class Guard:
    """ASGI middleware: a request `access` refuses gets a 403 with {"error": one line} and
    never reaches the app; a good ?token= is set as the cookie on the answer."""

    def __init__(self, app: Any, access: Access) -> None:
        self.app, self.access = app, access

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        why, set_cookie = self.access.refusal(headers, scope.get("query_string", b"").decode(
            "latin-1"))
        if why is not None:
            await _refuse(why, scope, send)
            return
        if set_cookie:
            send = self._with_cookie(send)
        await self.app(scope, receive, send)

    def _with_cookie(self, send: Any) -> Any:
        cookie = (f"{self.access.cookie}={self.access.token}; HttpOnly; SameSite=Strict; "
                  f"Path=/").encode("latin-1")

        async def sending(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"set-cookie", cookie)]}
            await send(message)

        return sending


async def _refuse(why: str, scope: dict, send: Any) -> None:
    if scope["type"] == "websocket":  # the lab has none; close before accepting
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps({"error": why}, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
