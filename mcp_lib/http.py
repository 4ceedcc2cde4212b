"""HTTP for the platforms (GitHub, Growi; Redmine's engine shares the decisions, Slack's client the bound on an
answer): door-guarded httpx2 clients, which answers are worth another try, one tool call's requests under one retry
budget (``ToolContext.deadline``: three requests cannot take three budgets), and how much of an answer is read."""

from __future__ import annotations

import functools
import ipaddress
import math
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from .clock import SYSTEM_CLOCK, Clock
from .core import ToolContext, ToolError, in_background
from .doors import Door
from .errors import GaveUp, Retryable
from .retry import Budget, Policy, call, header, server_wait, tool_budget

if TYPE_CHECKING:  # httpx2 itself is imported where a client is built or a request sent: the checks need none
    import httpx2

T = TypeVar("T")
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# Timeouts, connection failures and retryable answers: 4 attempts; a server wait over 30 s (GitHub's hourly reset
# can be far away) is reported, not sat out.
POLICY = Policy(attempts=4, base_s=0.5, max_backoff_s=30.0, max_server_wait_s=30.0)
# The most of one answer any transport reads (GitHub, Growi, Redmine, Slack), counted after content decoding (a gzip
# bomb stops here too). The services send far less (a GitHub file, 1.4 MB as base64 JSON; a Redmine issue with its
# journals, a few MB); not more: 8 MB of JSON like [{},{},...] is ~200 MB parsed, and 8 calls share a 7 GB runner.
MAX_ANSWER_BYTES = 8 * 2**20


def read_capped(chunks: Iterable[bytes], service: str) -> bytes:
    """The body in ``chunks`` (decoded, as they arrive), or a ToolError once it passes :data:`MAX_ANSWER_BYTES`."""
    body = bytearray()
    for chunk in chunks:
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            raise ToolError(f"{service} sent an answer of more than {MAX_ANSWER_BYTES >> 20} MB, far more than it "
                            "should; nothing of it is used: check its URL setting, or ask for less")
    return bytes(body)


def check_answer(status: int, headers: Mapping[str, str], clock: Clock = SYSTEM_CLOCK, detail: str = "") -> None:
    """Raise :class:`~mcp_lib.errors.Retryable` for an answer worth another try (429, 5xx, a rate-limit 403), with
    the wait the server asked for; else return. GitHub answers 403 (not only 429) when the rate limit is spent."""
    spent = status == 403 and (header(headers, "x-ratelimit-remaining") == "0"
                               or header(headers, "retry-after") is not None)
    if status in RETRYABLE_STATUS or spent:
        raise Retryable(f"HTTP {status}{detail}", server_wait(headers, clock))


def retried(what: str, fn: Callable[[], T], budget: Budget) -> T:
    """``fn`` retried on :class:`~mcp_lib.errors.Retryable` within ``budget``; a service that stays down, or asks
    for a wait we will not sit out, becomes a ToolError naming ``what``."""
    try:
        return call(lambda _left: fn(), retry=lambda exc: isinstance(exc, Retryable), policy=POLICY, budget=budget)
    except GaveUp as exc:
        if exc.why == "server_wait" and exc.asked is not None:
            limit = (f"the {POLICY.max_server_wait_s:.0f} s we wait" if exc.asked > POLICY.max_server_wait_s
                     else f"the {exc.left:.0f} s left for this call")
            raise ToolError(f"{what} is rate limited ({exc.last}); it asks to wait {math.ceil(exc.asked)} s, more "
                            f"than {limit}; try later or another source") from None
        if exc.last is None:
            raise ToolError(f"{what} is unavailable: no time left for another attempt") from None
        raise ToolError(f"{what} is unavailable after retries: {exc.last}") from None


def send(ctx: ToolContext, what: str, method: str, url: str, **kwargs: Any) -> httpx2.Response:
    """One request on ``ctx.client`` (an ``httpx2.Client``), :func:`retried` on timeouts, connection failures and
    the answers :func:`check_answer` retries; the caller interprets the response, its body :func:`read_capped`."""
    import httpx2

    def attempt() -> httpx2.Response:
        try:
            with ctx.client.stream(method, url, **kwargs) as streamed:
                body = read_capped(streamed.iter_bytes(), what)
        except httpx2.TimeoutException as exc:
            raise Retryable(f"timed out ({type(exc).__name__})") from exc
        except httpx2.TransportError as exc:
            raise Retryable(f"could not connect ({type(exc).__name__}: {exc})") from exc
        except httpx2.DecodingError as exc:  # a compressed body mangled on the way: retried as a reset is
            raise Retryable(f"the answer does not decode ({exc})") from exc
        decoded = ("content-encoding", "content-length")  # describe the body as sent, not as read
        headers = [(k, v) for k, v in streamed.headers.multi_items() if k.lower() not in decoded]
        response = httpx2.Response(streamed.status_code, headers=headers, content=body, request=streamed.request)
        check_answer(response.status_code, response.headers, ctx.clock, error_detail(response))
        return response

    return retried(what, attempt, tool_budget(ctx, 60.0))


def refuse_writes(request: httpx2.Request) -> None:
    """An httpx request hook: the tools are read-only, so anything but GET is refused before it is sent."""
    if request.method != "GET":
        raise ToolError(f"refused: the tools are read-only (attempted {request.method} {request.url.path})")


def door_client(door: Door, *, read_only: bool = True, **kwargs: Any) -> httpx2.Client:
    """The ``httpx2.Client`` for a credential: every request passes ``door`` and (unless ``read_only=False``)
    :func:`refuse_writes`, follows no redirect, and on the network resolves within its connect timeout."""
    import httpx2

    hooks: list[Callable[[httpx2.Request], None]] = [door.hook()]
    if read_only:
        hooks.append(refuse_writes)
    if kwargs.get("transport") is None:
        hooks.append(NameResolution.shared().hook())
    return httpx2.Client(event_hooks={"request": hooks}, follow_redirects=False, **kwargs)


def door_async_client(door: Door, **kwargs: Any) -> httpx2.AsyncClient:
    """:func:`door_client` for asyncio (the relay's dispatch): the door on every request, no redirects."""
    import httpx2

    return httpx2.AsyncClient(event_hooks={"request": [door.async_hook()]}, follow_redirects=False, **kwargs)


def json_answer(response: httpx2.Response, service: str, what: str, url_variable: str) -> Any:
    """The JSON of a successful answer, or a ToolError saying it is not JSON (usually a wrong base URL)."""
    try:
        return response.json()
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        kind = response.headers.get("content-type", "unknown content")
        raise ToolError(f"{service} answered {what} with {kind}, not JSON: check {url_variable}") from None


def error_detail(response: httpx2.Response) -> str:
    """`` (message; ...)`` from a JSON error body (``message``, ``error``, ``errors``: GitHub, Growi), or nothing;
    a success's body (maybe megabytes) is decoded once, by the caller, not here."""
    try:
        body = response.json() if response.status_code >= 400 else None
    except (ValueError, RecursionError):
        return ""
    if not isinstance(body, dict):
        return ""
    messages = [str(body[key]) for key in ("message", "error") if isinstance(body.get(key), str | int) and body[key]]
    errors = body.get("errors")
    if isinstance(errors, list):
        for error in errors:
            text = (error.get("message") or error.get("code")) if isinstance(error, dict) else error
            if text and str(text) not in messages:
                messages.append(str(text))
    return f" ({'; '.join(messages)[:300]})" if messages else ""


Resolver = Callable[[str, int], object]  # socket.getaddrinfo's shape; raises OSError when the name does not resolve
Wait = Callable[["Future[object]", float], object]  # Future.result(timeout)'s shape
RESOLVED_FOR_S = 60.0  # a name that resolved is not looked up again for this long
CONNECT_S = 10.0  # the lookup's bound for a request that sets no connect timeout
_GETADDRINFO: Resolver = functools.partial(socket.getaddrinfo, type=socket.SOCK_STREAM)


class NameResolution:
    """Each request's host looked up within its connect timeout, as a request hook: ``getaddrinfo`` runs before
    any httpx2 timeout and can block for half a minute when no name server answers. A slow lookup is a
    ``ConnectTimeout``, an unknown name a ``ConnectError`` (unreachable, as the retries treat it); one thread per
    host; IP literals and proxied URLs pass. ``resolver`` and ``wait`` are the test seams."""

    def __init__(self, resolver: Resolver = _GETADDRINFO, *, wait: Wait = Future.result, clock: Clock = SYSTEM_CLOCK):
        self.resolver = resolver
        self.wait = wait
        self.clock = clock
        self._pending: dict[tuple[str, int], Future[object]] = {}
        self._resolved: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()

    @classmethod
    @functools.cache
    def shared(cls) -> NameResolution:
        """The process's own (real lookups): clients share its threads and what it resolved."""
        return cls()

    def hook(self) -> Callable[[Any], None]:
        """The request hook (httpx2 clients: the model's and the platforms')."""
        import httpx2

        def check(request: Any) -> None:
            url = request.url
            if _is_ip(url.host) or _proxied(url.scheme, url.host):
                return
            key = (url.host, url.port or (443 if url.scheme == "https" else 80))
            timeout = (request.extensions.get("timeout") or {}).get("connect") or CONNECT_S
            try:
                if (lookup := self._lookup(key)) is not None:
                    self.wait(lookup, timeout)
            except TimeoutError:
                raise httpx2.ConnectTimeout(f"name {url.host!r} not resolved within {timeout:g} s",
                                             request=request) from None
            except OSError as exc:
                raise httpx2.ConnectError(f"name {url.host!r} does not resolve ({exc})", request=request) from None

        return check

    def _lookup(self, key: tuple[str, int]) -> Future[object] | None:
        """The lookup of ``key`` under way (or started now); None when it resolved within :data:`RESOLVED_FOR_S`."""
        with self._lock:
            if self._resolved.get(key, float("-inf")) > self.clock.monotonic():
                return None
            if key not in self._pending:
                self._pending[key] = in_background(lambda: self._resolve(key), f"resolve-{key[0]}")
            return self._pending[key]

    def _resolve(self, key: tuple[str, int]) -> object:
        try:
            result = self.resolver(*key)
        finally:
            with self._lock:
                self._pending.pop(key, None)
        with self._lock:
            self._resolved[key] = self.clock.monotonic() + RESOLVED_FOR_S
        return result


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _proxied(scheme: str, host: str) -> bool:
    proxies = urllib.request.getproxies_environment()
    return bool(proxies.get(scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(host)
