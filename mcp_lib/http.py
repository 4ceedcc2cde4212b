"""HTTP for the platforms without retry handlers of their own (GitHub, Growi, Redmine): what is retryable, and
shared answer handling.

Retried (with :mod:`mcp_lib.retry`): timeouts, connection failures, 429, 5xx and GitHub's rate-limit 403s, waiting
what the server asks. One budget for all requests of one tool call (``ToolContext.deadline``), so three requests
cannot take three budgets. Sleep and clock are injected so tests never really wait.
"""

from __future__ import annotations

import ipaddress
import math
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import httpx2

from .core import ToolContext, ToolError
from .doors import Door
from .retry import Budget, GaveUp, Policy, Retry, call, header, server_wait

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# The longest server-requested wait we sit out; GitHub's hourly reset can be far away, and then we say so.
MAX_SERVER_WAIT_S = 30.0


class RetryableError(Exception):
    """A response or failure worth another try; ``wait`` is what the server asked for, if anything."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


def is_rate_limited(status: int, headers: Mapping[str, str]) -> bool:
    """GitHub answers 403 (not only 429) when the rate limit is exhausted."""
    return status == 429 or (status == 403 and (header(headers, "x-ratelimit-remaining") == "0"
                                                 or header(headers, "retry-after") is not None))


def check_retryable(what: str, status: int, headers: Mapping[str, str], now: float, detail: str = "",
                    max_wait_s: float = MAX_SERVER_WAIT_S) -> None:
    """Raise RetryableError for an answer worth another try (429, 5xx, a rate-limit 403), with the wait the
    server asked for (``now``: wall-clock seconds); a ToolError at once when that wait is longer than
    ``max_wait_s``. Else return."""
    if status not in RETRYABLE_STATUS and not is_rate_limited(status, headers):
        return
    wait = server_wait(headers, now)
    reason = f"HTTP {status}{detail}"
    if wait is not None and wait > max_wait_s:
        raise ToolError(f"{what} is rate limited ({reason}); it asks to wait {math.ceil(wait)} s, "
                        f"more than the {max_wait_s:.0f} s we wait; try later or another source")
    raise RetryableError(reason, wait=wait)


@dataclass(frozen=True)
class Retrying:
    """The retry policy of one tool call: how to retry, until when, and how to sleep."""

    policy: Policy
    budget: Budget
    sleep: Callable[[float], None]


def retrying(
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    attempts: int = 4,
    budget_s: float = 60.0,
    deadline: float | None = None,
    base_s: float = 0.5,
    max_wait_s: float = MAX_SERVER_WAIT_S,
) -> Retrying:
    """Retries of RetryableError: time ends at ``budget_s`` from now or at ``deadline`` (a ``clock()`` value),
    whichever comes first."""
    started = clock()
    end = started + budget_s if deadline is None else min(deadline, started + budget_s)
    return Retrying(Policy(attempts=attempts, base_s=base_s, max_backoff_s=max_wait_s, max_server_wait_s=max_wait_s),
                    Budget(end, clock), sleep)


def call_with_retries(fn: Callable[[], Any], policy: Retrying, what: str) -> Any:
    """Run ``fn`` under the policy; a platform that stays down becomes a ToolError naming ``what``."""
    def retryable(exc: BaseException) -> Retry | None:
        return Retry(policy.policy, exc.wait) if isinstance(exc, RetryableError) else None

    try:
        return call(lambda left: fn(), retryable=retryable, budget=policy.budget, sleep=policy.sleep)
    except GaveUp as exc:
        if exc.why == "server_wait" and exc.asked is not None:
            raise ToolError(f"{what} is rate limited ({exc.last}); it asks to wait {math.ceil(exc.asked)} s, more "
                            f"than the {exc.left:.0f} s left for this call; try later or another source") from None
        if exc.last is None:
            raise ToolError(f"{what} is unavailable: no time left for another attempt") from None
        raise ToolError(f"{what} is unavailable after retries: {exc.last}") from None


def policy_for(ctx: ToolContext, budget_s: float = 60.0) -> Retrying:
    """The retry policy of one tool call: the injected sleep and clock, bounded by the call's deadline."""
    return retrying(sleep=ctx.sleep, clock=ctx.clock, budget_s=budget_s, deadline=ctx.deadline)


def send(ctx: ToolContext, what: str, method: str, url: str, *, max_wait_s: float = MAX_SERVER_WAIT_S,
         **kwargs: Any) -> httpx2.Response:
    """One HTTP call on ``ctx.client`` (an ``httpx2.Client``) with retries; the caller interprets the response.

    Retried (sleeping with ``ctx.sleep``): timeouts, connection failures, 429, 5xx and rate-limit 403s,
    waiting what the server asks (Retry-After, ``x-ratelimit-reset``), within the call's deadline. A wait longer
    than ``max_wait_s`` is not sat out: it becomes a ToolError at once. A service that stays down becomes a
    ToolError naming ``what``.
    """
    client: httpx2.Client = ctx.client

    def attempt() -> httpx2.Response:
        try:
            response = client.request(method, url, **kwargs)
        except httpx2.TimeoutException as exc:
            raise RetryableError(f"timed out ({type(exc).__name__})") from exc
        except httpx2.TransportError as exc:
            raise RetryableError(f"could not connect ({type(exc).__name__}: {exc})") from exc
        check_retryable(what, response.status_code, response.headers, ctx.clock(), error_detail(response),
                        max_wait_s)
        return response

    return call_with_retries(attempt, policy_for(ctx), what)


def refuse_writes(request: httpx2.Request) -> None:
    """An httpx request hook: the tools are read-only, so anything but GET is refused before it is sent."""
    if request.method != "GET":
        raise ToolError(f"refused: the tools are read-only (attempted {request.method} {request.url.path})")


def door_client(door: Door, *, read_only: bool = True, **kwargs: Any) -> httpx2.Client:
    """The ``httpx2.Client`` for a credential: every request passes ``door`` (:mod:`mcp_lib.doors`: the credential
    goes to its origin only) and, unless ``read_only=False``, :func:`refuse_writes`; redirects are not followed.
    On the network (no ``transport`` handed in) its names resolve within the connect timeout
    (:class:`NameResolution`)."""
    hooks: list[Callable[[httpx2.Request], None]] = [door.hook()]
    if read_only:
        hooks.append(refuse_writes)
    if kwargs.get("transport") is None:
        hooks.append(NameResolution.shared().hook())
    return httpx2.Client(event_hooks={"request": hooks}, follow_redirects=False, **kwargs)


def door_async_client(door: Door, **kwargs: Any) -> httpx2.AsyncClient:
    """:func:`door_client` for asyncio (the relay's dispatch): the door on every request, no redirects."""
    return httpx2.AsyncClient(event_hooks={"request": [door.async_hook()]}, follow_redirects=False, **kwargs)


def json_answer(response: httpx2.Response, service: str, what: str, url_variable: str) -> Any:
    """The JSON of a successful answer, or a ToolError saying it is not JSON (usually a wrong base URL)."""
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("content-type", "unknown content")
        raise ToolError(f"{service} answered {what} with {kind}, not JSON: check {url_variable}") from None


def error_detail(response: httpx2.Response) -> str:
    """`` (message; ...)`` from a JSON error body -- ``{message}``, ``{error}``, ``{errors: [...]}`` (GitHub,
    Growi) -- or nothing; for error texts. A success answers nothing: its body (maybe megabytes) is not
    decoded here, but once, by the caller that reads it."""
    if response.status_code < 400:
        return ""
    try:
        body = response.json()
    except ValueError:
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


# -- name resolution --------------------------------------------------------------------------------------------------
Resolver = Callable[[str, int], object]  # socket.getaddrinfo's shape; raises OSError when the name does not resolve
Wait = Callable[["Future[object]", float], object]  # Future.result(timeout)'s shape
RESOLVED_FOR_S = 60.0  # a name that resolved is not looked up again for this long


def _getaddrinfo(host: str, port: int) -> object:
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)


def _result(future: Future[object], timeout: float) -> object:
    return future.result(timeout)


class NameResolution:
    """Each request's host looked up within the request's connect timeout, as an httpx request hook.

    ``getaddrinfo`` runs before any httpx timeout starts, and blocks for half a minute and more when no name
    server answers (resolv.conf's timeout x attempts x servers). So the host is looked up first, on a worker
    thread: a lookup not done within the connect timeout is a ``ConnectTimeout``, a name that does not resolve a
    ``ConnectError`` -- unreachable, like a refused connection, and treated so by the callers' retries. Lookups of
    one host share one thread; IP literals, and URLs that go through a proxy from the environment (the proxy
    resolves them), are let through. ``resolver`` and ``wait`` are the test seams.
    """

    _shared: NameResolution | None = None

    def __init__(self, resolver: Resolver = _getaddrinfo, *, wait: Wait = _result, default_timeout_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.resolver = resolver
        self.wait = wait
        self.default_timeout_s = default_timeout_s
        self.clock = clock
        self._pending: dict[tuple[str, int], Future[object]] = {}
        self._resolved: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()

    @classmethod
    def shared(cls) -> NameResolution:
        """The process's own (real lookups): clients share its threads and what it resolved."""
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

    def hook(self) -> Callable[[Any], None]:
        """The request hook (httpx2 clients: the model's and the platforms')."""

        def check(request: Any) -> None:
            url = request.url
            if _is_ip(url.host) or _proxied(url.scheme, url.host):
                return
            key = (url.host, url.port or (443 if url.scheme == "https" else 80))
            timeout = (request.extensions.get("timeout") or {}).get("connect") or self.default_timeout_s
            try:
                self.wait(self._lookup(key), timeout)
            except TimeoutError:
                raise httpx2.ConnectTimeout(f"name {url.host!r} not resolved within {timeout:g} s",
                                             request=request) from None
            except OSError as exc:
                raise httpx2.ConnectError(f"name {url.host!r} does not resolve ({exc})", request=request) from None

        return check

    def _lookup(self, key: tuple[str, int]) -> Future[object]:
        with self._lock:
            if self._resolved.get(key, float("-inf")) > self.clock():
                done: Future[object] = Future()
                done.set_result(None)
                return done
            future = self._pending.get(key)
            if future is None:
                future = self._pending[key] = Future()
                threading.Thread(target=self._resolve, args=(key, future), name=f"resolve-{key[0]}",
                                 daemon=True).start()
            return future

    def _resolve(self, key: tuple[str, int], future: Future[object]) -> None:
        try:
            result = self.resolver(*key)
        except BaseException as exc:
            with self._lock:
                self._pending.pop(key, None)
            future.set_exception(exc)
            return
        with self._lock:
            self._pending.pop(key, None)
            self._resolved[key] = self.clock() + RESOLVED_FOR_S
        future.set_result(result)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _proxied(scheme: str, host: str) -> bool:
    proxies = urllib.request.getproxies_environment()
    return bool(proxies.get(scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(host)
