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
`gptlab serve` (gptlab.serve.app) stands behind the same rules, worded for a server
(Access's noun and command), its token also taken as `Authorization: Bearer TOKEN` (what
OpenAI's clients send as their API key), a missing or wrong token a 401 and every refusal
in OpenAI's error shape (Guard's `body`).
"""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Any, NamedTuple
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


class Refusal(NamedTuple):
    """Why a request is refused (None: it is not), whether its ?token= should be set as the
    cookie, and the status to answer (403; a token's absence or error: Access.token_status)."""

    why: str | None
    set_cookie: bool = False
    status: int = 403


@dataclass(frozen=True)
class Access:
    """Whom a lab listening at `port` answers. Build it with Access.for_server."""

    port: int
    names: frozenset[str]  # answered at `port`: loopback, the bound address
    added: frozenset[str]  # the user's (--allow-host): answered at any port (a proxy's)
    any_address: bool  # listening on every interface: this machine's IP addresses too
    token: str | None  # None: no token needed (loopback, none given)
    noun: str = "lab"  # what the refusals call it
    command: str = "gptlab lab"  # the command that printed the token
    bearer: bool = False  # `Authorization: Bearer TOKEN` taken too (OpenAI's clients)
    token_status: int = 403  # the status of a missing or wrong token

    @classmethod
    def for_server(cls, host: str, port: int, token: str | None = None,
                   allow_hosts: Iterable[str] = (), **wording: Any) -> Access:
        """The access of a lab listening on host:port. Beyond loopback a token is always
        needed: `token`, else a random one; on loopback, only `token` if given. A token or
        name that check_token / check_host_name refuses is a UsageError naming it.
        wording: noun, command, bearer, token_status (for a server other than the lab)."""
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
        return cls(port, frozenset(names), frozenset(added), bound in ANY_ADDRESS, token,
                   **wording)

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
        refused = self.refused(headers, query)
        return refused.why, refused.set_cookie

    def refused(self, headers: dict[str, str], query: str) -> Refusal:
        """refusal's answer with the status to send."""
        host, noun = headers.get("host", ""), self.noun
        where = _split(host, 80)
        if where is None or not self.serves(*where):
            return Refusal(f"refused: Host {host!r} is not an address this {noun} serves "
                           f"(http://127.0.0.1:{self.port}/ or localhost); to add a name start "
                           f"it with --allow-host NAME")
        origin = headers.get("origin")
        if origin is not None and not self._own_origin(origin):
            return Refusal(f"refused: Origin {origin!r} is not this {noun}'s page; the {noun} "
                           f"answers only its own page and scripts")
        if self.token is None:
            return Refusal(None)
        from_query = parse_qs(query).get("token", [None])[-1]
        sent = (from_query or _header_token(headers, self.bearer)
                or _cookie(headers, self.cookie))
        if sent is None:
            how = (f"send 'Authorization: Bearer TOKEN' (the openai client's api_key) with "
                   f"the token `{self.command}` printed" if self.bearer else
                   f"open the URL `{self.command}` printed (http://HOST:{self.port}/?token=...), "
                   f"or send 'Authorization: token TOKEN'")
            return Refusal(f"refused: this {noun} needs its token: {how}", False,
                           self.token_status)
        if not secrets.compare_digest(sent.encode(), self.token.encode()):
            return Refusal(f"refused: wrong token; use the one `{self.command}` printed at its "
                           f"start", False, self.token_status)
        return Refusal(None, from_query is not None)

    def _own_origin(self, origin: str) -> bool:
        try:
            parts = urlsplit(origin)
        except ValueError:  # e.g. "http://[": no origin at all
            return False
        if parts.scheme not in DEFAULT_PORTS or parts.path or parts.query or parts.fragment:
            return False
        where = _split(parts.netloc, DEFAULT_PORTS[parts.scheme])
        return where is not None and self.serves(*where)


def _header_token(headers: dict[str, str], bearer: bool = False) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    schemes = ("token", "bearer") if bearer else ("token",)
    return (value.strip() or None) if scheme.lower() in schemes else None


def _cookie(headers: dict[str, str], name: str) -> str | None:
    jar = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except CookieError:  # a malformed Cookie header is simply no token
        return None
    return jar[name].value if name in jar else None


def lab_error(_status: int, why: str) -> dict[str, Any]:
    """The lab's error body: {"error": one line}."""
    return {"error": why}


class Guard:
    """ASGI middleware: a request `access` refuses gets its status (403, or the token's)
    with body(status, why) ({"error": one line} by default) and never reaches the app; a
    good ?token= is set as the cookie on the answer."""

    def __init__(self, app: Any, access: Access,
                 body: Callable[[int, str], dict[str, Any]] = lab_error) -> None:
        self.app, self.access, self.body = app, access, body

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        why, set_cookie, status = self.access.refused(
            headers, scope.get("query_string", b"").decode("latin-1"))
        if why is not None:
            await _refuse(status, self.body(status, why), scope, send)
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


async def _refuse(status: int, answer: dict[str, Any], scope: dict, send: Any) -> None:
    if scope["type"] == "websocket":  # the lab has none; close before accepting
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps(answer, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
