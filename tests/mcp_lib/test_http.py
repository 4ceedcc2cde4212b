"""mcp_lib.http on its own: one tool call's retries, the answer helpers, the bounded name resolution."""

from __future__ import annotations

import gzip
import socket
import threading
from concurrent.futures import Future

import httpx2
import pytest

from mcp_lib.core import ToolContext, ToolError
from mcp_lib.doors import door
from mcp_lib.errors import Retryable
from mcp_lib.http import NameResolution, Wait, door_client, error_detail, retried, send
from mcp_lib.retry import Budget
from tests.fakes.clock import FakeClock

NOW = 1_800_000_000.0


def test_a_wait_longer_than_the_time_left_stops_instead_of_retrying_early() -> None:
    clock = FakeClock()
    attempts = []

    def limited() -> None:
        attempts.append(clock.monotonic())
        raise Retryable("HTTP 429", asked=20.0)

    with pytest.raises(ToolError, match="asks to wait 20 s, more than the 10 s left"):
        retried("Service", limited, Budget(clock.monotonic() + 30, clock))
    assert clock.sleeps == [20.0] and len(attempts) == 2


def test_a_wait_longer_than_we_ever_sit_out_is_reported_at_once() -> None:
    clock = FakeClock()

    def limited() -> None:
        raise Retryable("HTTP 403", asked=1800.0)

    with pytest.raises(ToolError, match="asks to wait 1800 s, more than the 30 s we wait"):
        retried("GitHub", limited, Budget(clock=clock))
    assert clock.sleeps == []


def test_backoff_of_our_own_never_sleeps_into_the_deadline() -> None:
    clock = FakeClock()

    def down() -> None:
        raise Retryable("HTTP 503")

    with pytest.raises(ToolError, match="unavailable after retries: HTTP 503"):
        retried("Service", down, Budget(clock.monotonic() + 1.0, clock))
    # 0.5 s +-25 %, then the second backoff (1 s +-25 %) would leave no time for an attempt: stop instead of waiting
    assert len(clock.sleeps) == 1 and 0.375 <= clock.sleeps[0] <= 0.625


@pytest.mark.parametrize(("body", "expected"), [
    ({"message": "Validation Failed", "errors": [{"message": "cannot be searched", "code": "invalid"}]},
     " (Validation Failed; cannot be searched)"),
    ({"ok": False, "error": "SearchService is not reachable."}, " (SearchService is not reachable.)"),
    ({"errors": ["Page is not found"]}, " (Page is not found)"),
    ({"errors": [{"code": "missing_field"}]}, " (missing_field)"),
    (["a list"], ""),
])
def test_error_detail_reads_github_growi_and_redmine_bodies(body: object, expected: str) -> None:
    assert error_detail(httpx2.Response(400, json=body)) == expected
    assert error_detail(httpx2.Response(502, text="<html>bad gateway</html>")) == ""


def test_a_body_nested_deeper_than_json_goes_is_not_json_never_a_recursion_error() -> None:
    """A 502 whose body nests 100,000 deep: error_detail raised RecursionError inside the attempt (the retry of
    the 502 was lost, the tool said "RecursionError"); a 200 so nested is "not JSON", as a page is."""
    from mcp_lib.core import ToolError
    from mcp_lib.http import json_answer

    deep = ("[" * 100_000 + "]" * 100_000).encode()
    assert error_detail(httpx2.Response(502, content=deep)) == ""
    with pytest.raises(ToolError, match="not JSON"):
        json_answer(httpx2.Response(200, content=deep), "GitHub", "the search", "GITHUB_API_URL")


# -- name resolution: bounded by the connect timeout ------------------------------------------------------------------
def never_resolves(host: str, port: int) -> object:
    threading.Event().wait(60)  # a name server that does not answer (on a daemon thread nobody waits for)
    raise AssertionError


def gave_up_waiting(waited: list[float]) -> Wait:
    """The wait seam: records how long the hook would wait, and times out at once (nothing really waits)."""

    def wait(future: Future[object], timeout: float) -> object:
        waited.append(timeout)
        raise TimeoutError

    return wait


def hooked(names: NameResolution, connect: float = 3.0) -> httpx2.Client:
    return httpx2.Client(transport=httpx2.MockTransport(lambda request: httpx2.Response(200, json={"ok": True})),
                        event_hooks={"request": [names.hook()]}, timeout=httpx2.Timeout(20.0, connect=connect))


def test_a_lookup_that_never_ends_is_a_connect_timeout_after_the_connect_timeout() -> None:
    waited: list[float] = []
    with hooked(NameResolution(never_resolves, wait=gave_up_waiting(waited))) as client, pytest.raises(
            httpx2.ConnectTimeout, match=r"'api\.example\.test' not resolved within 3 s"):
        client.get("https://api.example.test/x")
    assert waited == [3.0]


def test_a_name_that_does_not_resolve_is_a_connect_error_and_the_tool_retries_then_says_so() -> None:
    looked_up: list[tuple[str, int]] = []

    def nxdomain(host: str, port: int) -> object:
        looked_up.append((host, port))
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    clock = FakeClock(wall=NOW)
    ctx = ToolContext(client=hooked(NameResolution(nxdomain)), config=None, clock=clock)
    with pytest.raises(ToolError, match=r"unavailable after retries: could not connect \(ConnectError: name "
                                        r"'growi.example.test' does not resolve"):
        send(ctx, "Growi", "GET", "https://growi.example.test/_api/v3/pages")
    assert looked_up[0] == ("growi.example.test", 443) and len(looked_up) == len(clock.sleeps) + 1


def test_a_resolved_name_is_not_looked_up_again_and_ip_literals_never_are() -> None:
    looked_up: list[str] = []
    names = NameResolution(lambda host, port: looked_up.append(host))
    with hooked(names) as client:
        for _ in range(3):
            assert client.get("http://api.example.test/").status_code == 200
        assert client.get("http://127.0.0.1:9/").status_code == 200
        assert client.get("http://[::1]:9/").status_code == 200
    assert looked_up == ["api.example.test"]


def test_a_url_through_a_proxy_is_left_to_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "bypassed.example.test")
    looked_up: list[str] = []
    with hooked(NameResolution(lambda host, port: looked_up.append(host))) as client:
        client.get("https://api.example.test/")
        client.get("https://bypassed.example.test/")
    assert looked_up == ["bypassed.example.test"]


def test_platform_clients_on_the_network_resolve_within_the_bound_and_injected_transports_do_not() -> None:
    github = door("GITHUB_TOKEN", "https://api.github.com", "t")
    on_network = door_client(github)
    injected = door_client(github, transport=httpx2.MockTransport(lambda request: httpx2.Response(200)))
    assert len(on_network.event_hooks["request"]) == 3 and len(injected.event_hooks["request"]) == 2


def test_a_success_is_not_decoded_for_an_error_detail() -> None:
    """A 5 MB page is decoded once, by the platform that reads it -- not also here, on every answer."""

    class Counting(httpx2.Response):
        decoded = 0

        def json(self, **kwargs: object) -> object:
            Counting.decoded += 1
            return super().json(**kwargs)

    assert error_detail(Counting(200, json={"message": "not an error"})) == ""
    assert Counting.decoded == 0
    assert error_detail(Counting(404, json={"message": "Not Found"})) == " (Not Found)"


def test_an_answer_is_read_decoded_and_otherwise_as_it_came() -> None:
    """The body is read (and bounded) as decoded bytes; the response the caller gets is the same answer."""
    answer = httpx2.Response(200, headers={"content-type": "application/json", "content-encoding": "gzip",
                                           "link": '<https://api.example.com/x?page=2>; rel="next"'},
                             stream=httpx2.ByteStream(gzip.compress(b'{"items": ["\xe5\x9c\xa8\xe5\xba\xab"]}')))
    client = httpx2.Client(base_url="https://api.example.com", transport=httpx2.MockTransport(lambda request: answer))
    response = send(ToolContext(client=client, config=None), "GitHub", "GET", "/x", params={"q": "a"})
    assert response.status_code == 200 and response.json() == {"items": ["在庫"]}
    assert response.headers["link"].endswith('rel="next"') and "content-encoding" not in response.headers
    assert str(response.url) == "https://api.example.com/x?q=a"


def test_an_answer_that_does_not_decode_is_retried_then_a_tool_error_naming_the_service() -> None:
    """A gzip body mangled on the way (httpx2's DecodingError, no TransportError) is retried as a reset is; it was
    an unexpected exception out of the tool."""
    sent: list[int] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(1)
        body = gzip.compress(b'{"items": []}')
        if len(sent) > 1:
            return httpx2.Response(200, headers={"content-encoding": "gzip"}, stream=httpx2.ByteStream(body))
        mangled = body[:10] + bytes(b ^ 0xFF for b in body[10:])
        return httpx2.Response(200, headers={"content-encoding": "gzip"}, stream=httpx2.ByteStream(mangled))

    clock = FakeClock()
    client = httpx2.Client(base_url="https://api.example.com", transport=httpx2.MockTransport(handler))
    ctx = ToolContext(client=client, config=None, clock=clock)
    assert send(ctx, "GitHub", "GET", "/x").json() == {"items": []} and len(sent) == 2

    garbage = httpx2.MockTransport(lambda request: httpx2.Response(200, headers={"content-encoding": "gzip"},
                                                                   stream=httpx2.ByteStream(b"not gzip at all")))
    client = httpx2.Client(base_url="https://api.example.com", transport=garbage)
    with pytest.raises(ToolError, match="GitHub is unavailable after retries: the answer does not decode"):
        send(ToolContext(client=client, config=None, clock=clock), "GitHub", "GET", "/x")
