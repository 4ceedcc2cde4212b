"""The Events relay: signed Slack events in, exactly the right repository_dispatch calls out."""

from __future__ import annotations

import base64
import contextlib
import json
import select
import socket
import struct
import threading
from collections.abc import Iterator

import anyio
import httpx2
import pytest

from agent.slack.relay import (
    MAX_BODY_BYTES,
    DispatchError,
    Relay,
    RelayConfig,
    Seen,
    check_dispatch_token,
    github_dispatcher,
    lambda_handler,
)
from agent.slack.relay_server import Dispatcher, make_server
from mcp_lib.config import ConfigError
from tests.fakes.clock import FakeClock
from tests.fakes.relay import BODY, ENV, NOW, GitHub, address, envelope, post, relay_for, serving, signed


@pytest.fixture
def github() -> GitHub:
    return GitHub()


# -- dispatch -----------------------------------------------------------------------------------------------------
def test_signed_reaction_dispatches_once(github: GitHub) -> None:
    status, body = post(relay_for(github), envelope())
    assert (status, body) == (200, b"ok")
    [request] = github.requests
    assert request.method == "POST"
    assert str(request.url) == "https://api.github.com/repos/acme/helpbot/dispatches"
    assert request.headers["Authorization"] == "Bearer tok-123"
    assert request.headers["Accept"] == "application/vnd.github+json"
    assert request.headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert github.payloads == [{"event_type": "slack-help", "client_payload": {
        "channel": "C0123ABCD", "ts": "1700000000.123456", "user": "U0REACTOR", "reaction": "help",
        "item_user": "U0AUTHOR", "event_id": "Ev0ABCDEF"}}]
    assert len(github.payloads[0]["client_payload"]) <= 10  # type: ignore[arg-type]


def test_dispatched_payload_is_accepted_by_the_event_parser(github: GitHub) -> None:
    """What the relay sends must come back through `helpbot answer --event` as the same message."""
    from agent.slack.trigger import parse_event

    post(relay_for(github), envelope())
    event = {"action": "slack-help", "client_payload": github.payloads[0]["client_payload"]}
    trigger = parse_event(json.dumps(event))
    assert (trigger.channel, trigger.ts, trigger.reaction) == ("C0123ABCD", "1700000000.123456", "help")


def test_github_enterprise_api_url_and_github_token_fallback(github: GitHub) -> None:
    env = {"GITHUB_API_URL": "https://ghe.example.com/api/v3/", "HELPBOT_DISPATCH_TOKEN": "",
           "GITHUB_TOKEN": "gh-fallback"}
    post(relay_for(github, env), envelope())
    [request] = github.requests
    assert str(request.url) == "https://ghe.example.com/api/v3/repos/acme/helpbot/dispatches"
    assert request.headers["Authorization"] == "Bearer gh-fallback"


@pytest.mark.parametrize("failure", [GitHub(status=404), GitHub(status=500),
                                     GitHub(error=httpx2.ConnectTimeout("timed out"))],
                         ids=["404", "500", "timeout"])
def test_dispatch_failure_is_an_error_status(failure: GitHub) -> None:
    status, body = post(relay_for(failure), envelope())
    assert (status, body) == (502, b"dispatch failed")
    assert len(failure.requests) == 1  # no retries of our own: Slack's http_error retry is the retry


def test_dispatcher_raises_dispatch_error_with_the_status() -> None:
    config = RelayConfig.from_env(ENV)
    dispatch = github_dispatcher(config, transport=GitHub(status=404).transport)
    with pytest.raises(DispatchError, match="404"):
        dispatch({"channel": "C0123ABCD", "ts": "1700000000.123456"})


# -- signatures ---------------------------------------------------------------------------------------------------
BAD_HEADERS = {
    "no headers": {},
    "wrong secret": signed(BODY, secret="not-the-secret"),
    "stale": signed(BODY, timestamp=NOW - 301),
    "future": signed(BODY, timestamp=NOW + 301),
    "tampered signature": {**signed(BODY), "X-Slack-Signature": "v0=" + "0" * 64},
    "non-numeric timestamp": {**signed(BODY), "X-Slack-Request-Timestamp": "yesterday"},
}


@pytest.mark.parametrize("headers", BAD_HEADERS.values(), ids=BAD_HEADERS.keys())
def test_bad_or_stale_signature_is_401_and_no_dispatch(github: GitHub, headers: dict[str, str]) -> None:
    status, _ = post(relay_for(github), BODY, headers)
    assert status == 401
    assert github.requests == []


def test_tampered_body_is_401(github: GitHub) -> None:
    other = json.dumps(envelope(reaction="help", user="U0ATTACKER")).encode()
    status, _, _ = relay_for(github)(signed(BODY), other)
    assert status == 401 and github.requests == []


def test_signature_within_five_minutes_is_accepted(github: GitHub) -> None:
    status, _ = post(relay_for(github), BODY, signed(BODY, timestamp=NOW - 299))
    assert status == 200 and len(github.requests) == 1


def test_header_names_are_case_insensitive(github: GitHub) -> None:
    headers = {k.lower(): v for k, v in signed(BODY).items()}
    assert post(relay_for(github), BODY, headers)[0] == 200


# -- url_verification, retries, ignores ---------------------------------------------------------------------------
def test_url_verification_echoes_the_challenge(github: GitHub) -> None:
    body = json.dumps({"token": "legacy", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                       "type": "url_verification"}).encode()
    status, headers, out = relay_for(github)(signed(body), body)
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(out) == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
    assert relay_for(github)({}, body)[0] == 401  # unsigned challenges are not answered
    assert github.requests == []


def test_a_retry_after_a_slow_ack_is_acknowledged_without_dispatch(github: GitHub) -> None:
    """http_timeout: the first delivery arrived and was dispatched, only our ack was late."""
    headers = signed(BODY, extra={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    assert post(relay_for(github), BODY, headers) == (200, b"ignored: retry")
    assert github.requests == []


@pytest.mark.parametrize("reason", ["http_error", "connection_failed", "ssl_error", "too_many_redirects",
                                    "unknown_error"])
def test_a_retry_whose_first_delivery_may_never_have_arrived_dispatches(github: GitHub, reason: str) -> None:
    """Every other reason Slack gives may mean the first delivery never reached us (or our dispatch failed)."""
    headers = signed(BODY, extra={"X-Slack-Retry-Num": "2", "X-Slack-Retry-Reason": reason})
    assert post(relay_for(github), BODY, headers) == (200, b"ok")
    assert len(github.requests) == 1


# -- nothing a client sends crashes it -----------------------------------------------------------------------
@pytest.mark.parametrize("signature", ["v0=ü" + "0" * 63, "v0=" + "０" * 64, "\x00"], ids=["latin", "fullwidth", "nul"])
def test_a_non_ascii_signature_is_401_not_a_crash(github: GitHub, signature: str) -> None:
    """hmac.compare_digest raises TypeError on non-ASCII strings: that must be a bad signature, not a 500."""
    status, _ = post(relay_for(github), BODY, {**signed(BODY), "X-Slack-Signature": signature})
    assert status == 401 and github.requests == []


ODD_BODIES = {
    "event is a string": {"type": "event_callback", "event": "reaction_added"},
    "event is a list": {"type": "event_callback", "event": ["reaction_added"]},
    "event is a number": {"type": "event_callback", "event": 1},
    "item is a string": {"type": "event_callback", "event": {"type": "reaction_added", "item": "C0123ABCD"}},
    "user is an object": envelope(user={"id": "U0REACTOR"}),
    "reaction is a list": envelope(reaction=["help"]),
    "item channel is a number": envelope(item={"type": "message", "channel": 5, "ts": "1700000000.123456"}),
    "type is a list": {"type": ["event_callback"], "event": {}},
    "challenge is an object": {"type": "url_verification", "challenge": {"a": 1}},
}


@pytest.mark.parametrize("body", ODD_BODIES.values(), ids=ODD_BODIES.keys())
def test_odd_but_signed_json_is_answered_not_crashed_on(github: GitHub, body: dict[str, object]) -> None:
    relay = Relay(RelayConfig.from_env(ENV), lambda p: None, clock=FakeClock(wall=NOW))
    status, _, _ = relay(signed(json.dumps(body).encode()), json.dumps(body).encode())
    assert status in (200, 400)


def test_a_body_over_the_bound_is_413_before_anything_else(github: GitHub) -> None:
    huge = json.dumps({**envelope(), "padding": "x" * MAX_BODY_BYTES}).encode()
    status, _ = post(relay_for(github), huge, signed(huge))
    assert status == 413 and github.requests == []


def test_a_bug_is_one_log_line_and_a_500(capsys: pytest.CaptureFixture[str]) -> None:
    def broken(payload: dict[str, str]) -> None:
        raise RuntimeError("unexpected\nsecond line")

    relay = Relay(RelayConfig.from_env(ENV), broken, clock=FakeClock(wall=NOW))
    status, _, body = relay(signed(BODY), BODY)
    assert (status, body) == (500, b"internal error")
    err = capsys.readouterr().err.strip()
    assert err == "helpbot relay: internal error: RuntimeError: unexpected second line"


def test_the_dispatch_has_one_deadline_for_the_whole_request(github: GitHub) -> None:
    """httpx timeouts apply per phase (connect, write, each read): a slow GitHub could add them up past Slack's
    3 s. The whole request runs under one deadline instead (here a GitHub that never answers)."""
    async def never(request: httpx2.Request) -> httpx2.Response:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    config = RelayConfig.from_env(ENV)
    # A transport that never answers: the deadline is the only possible outcome, however loaded the machine.
    dispatch = github_dispatcher(config, transport=httpx2.MockTransport(never), deadline=0.05)
    with pytest.raises(DispatchError, match=r"did not answer within 0\.05 s"):
        dispatch({"channel": "C0123ABCD", "ts": "1700000000.123456"})
    relay = Relay(config, dispatch, clock=FakeClock(wall=NOW))
    assert relay(signed(BODY), BODY)[:1] == (502,)


IGNORED = {
    "other reaction": (envelope(reaction="eyes"), {}),
    "skin-toned other reaction": (envelope(reaction="thumbsup::skin-tone-2"), {}),
    "configured reaction differs": (envelope(), {"HELPBOT_REACTION": "sos"}),
    "reaction by the bot": (envelope(user="U0HELPBOT"), {"HELPBOT_BOT_USER_ID": "U0HELPBOT"}),
    "reaction on the bot's message": (envelope(item_user="U0HELPBOT"), {"HELPBOT_BOT_USER_ID": "U0HELPBOT"}),
    "channel outside allowlist": (envelope(), {"HELPBOT_CHANNELS": "C0SUPPORT"}),
    "reaction on a file": (envelope(item={"type": "file", "file": "F0123"}), {}),
    "other event type": (envelope(type="reaction_removed"), {}),
    "app_rate_limited": ({"token": "x", "type": "app_rate_limited", "minute_rate_limited": NOW}, {}),
}


@pytest.mark.parametrize("body,env", IGNORED.values(), ids=IGNORED.keys())
def test_ignored_events_are_acknowledged_without_dispatch(github: GitHub, body: dict[str, object],
                                                          env: dict[str, str]) -> None:
    status, out = post(relay_for(github, env), body)
    assert status == 200 and out.startswith(b"ignored")
    assert github.requests == []


def test_configured_reaction_is_dispatched(github: GitHub) -> None:
    post(relay_for(github, {"HELPBOT_REACTION": ":sos:", "HELPBOT_CHANNELS": "C0123ABCD"}),
         envelope(reaction="sos"))
    assert len(github.requests) == 1


def test_signed_garbage_is_400(github: GitHub) -> None:
    for body in (b"not json", b"[1, 2]"):
        status, _ = post(relay_for(github), body)
        assert status == 400
    assert github.requests == []


def test_the_relay_is_usable_with_a_plain_dispatch_function() -> None:
    sent: list[dict[str, str]] = []
    status, _, _ = Relay(RelayConfig.from_env(ENV), sent.append, clock=FakeClock(wall=NOW))(signed(BODY), BODY)
    assert status == 200 and sent[0]["ts"] == "1700000000.123456"


# -- configuration ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("missing,variable", [
    ("SLACK_SIGNING_SECRET", "SLACK_SIGNING_SECRET"),
    ("GITHUB_REPOSITORY", "GITHUB_REPOSITORY"),
    ("HELPBOT_DISPATCH_TOKEN", "HELPBOT_DISPATCH_TOKEN"),
])
def test_missing_configuration_names_the_variable(missing: str, variable: str) -> None:
    env = {k: v for k, v in ENV.items() if k != missing}
    with pytest.raises(ConfigError) as caught:
        RelayConfig.from_env(env)
    assert caught.value.variable == variable
    assert "None" not in str(caught.value) and "not set" in str(caught.value)  # not "None is not owner/name"


@pytest.mark.parametrize("env,variable", [
    ({"GITHUB_REPOSITORY": "helpbot"}, "GITHUB_REPOSITORY"),
    ({"GITHUB_API_URL": "api.github.com"}, "GITHUB_API_URL"),
    ({"HELPBOT_CHANNELS": "#general"}, "HELPBOT_CHANNELS"),
])
def test_bad_configuration_names_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RelayConfig.from_env({**ENV, **env})
    assert caught.value.variable == variable


# -- Lambda -------------------------------------------------------------------------------------------------------
def lambda_event(body: bytes, headers: dict[str, str], *, b64: bool, method: str = "POST") -> dict[str, object]:
    """A Lambda function URL / API Gateway HTTP API (payload 2.0) request: lower-case header names."""
    return {
        "version": "2.0", "routeKey": "$default", "rawPath": "/", "rawQueryString": "",
        "headers": {k.lower(): v for k, v in headers.items()},
        "requestContext": {"http": {"method": method, "path": "/", "sourceIp": "3.0.0.1"}, "timeEpoch": NOW},
        "body": base64.b64encode(body).decode() if b64 else body.decode(),
        "isBase64Encoded": b64,
    }


@pytest.mark.parametrize("b64", [True, False])
def test_lambda_handler(github: GitHub, b64: bool) -> None:
    response = lambda_handler(lambda_event(BODY, signed(BODY), b64=b64), None, relay=relay_for(github))
    assert response["statusCode"] == 200 and response["body"] == "ok"
    assert len(github.requests) == 1


def test_lambda_handler_rejects_bad_signature_and_get(github: GitHub) -> None:
    relay = relay_for(github)
    assert lambda_handler(lambda_event(BODY, {}, b64=True), None, relay=relay)["statusCode"] == 401
    assert lambda_handler(lambda_event(BODY, signed(BODY), b64=False, method="GET"), None,
                          relay=relay)["statusCode"] == 405
    assert github.requests == []


def test_lambda_handler_bad_base64_is_400(github: GitHub) -> None:
    event = {**lambda_event(BODY, signed(BODY), b64=True), "body": "not base64!"}
    assert lambda_handler(event, None, relay=relay_for(github))["statusCode"] == 400
    assert github.requests == []


def test_lambda_handler_url_verification(github: GitHub) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "abc"}).encode()
    response = lambda_handler(lambda_event(body, signed(body), b64=True), None, relay=relay_for(github))
    assert response["statusCode"] == 200 and json.loads(response["body"]) == {"challenge": "abc"}


# -- the stdlib server --------------------------------------------------------------------------------------------


@pytest.fixture
def server_url(github: GitHub) -> Iterator[str]:
    with serving(github) as url:  # the production timeouts: every client here closes its own connection
        yield url


def test_server_handles_a_real_http_request(server_url: str, github: GitHub) -> None:
    with httpx2.Client(base_url=server_url) as client:
        accepted = client.post("/slack/events", content=BODY, headers=signed(BODY))
        retried = client.post("/slack/events", content=BODY,
                              headers=signed(BODY, extra={"X-Slack-Retry-Num": "1",
                                                          "X-Slack-Retry-Reason": "http_timeout"}))
        rejected = client.post("/slack/events", content=BODY, headers={"Content-Type": "application/json"})
        probed = client.get("/")
    assert (accepted.status_code, accepted.text) == (200, "ok")
    assert retried.status_code == 200 and rejected.status_code == 401 and probed.status_code == 405
    assert len(github.requests) == 1


# -- CLI wiring ---------------------------------------------------------------------------------------------------
def test_helpbot_relay_parses_host_and_port() -> None:
    from agent.cli import build_parser

    args = build_parser("relay").parse_args(["relay", "--host", "0.0.0.0", "--port", "8080"])
    assert (args.host, args.port) == ("0.0.0.0", 8080)
    defaults = build_parser("relay").parse_args(["relay"])
    assert (defaults.host, defaults.port) == ("127.0.0.1", 3000)


def test_relay_command_without_configuration_exits_2(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("SLACK_SIGNING_SECRET", "GITHUB_REPOSITORY", "HELPBOT_DISPATCH_TOKEN", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    from agent.cli import main

    assert main(["relay", "--port", "0"]) == 2  # the mapping is the entry point's (agent.errors)
    err = capsys.readouterr().err.strip()
    assert err.startswith("helpbot: configuration error: SLACK_SIGNING_SECRET:") and "\n" not in err


def raw_request(server_url: str, data: bytes, timeout: float = 5) -> bytes:
    """Send raw bytes; whatever the server answers before it closes (a client timeout fails the test)."""
    with socket.create_connection(address(server_url), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    return received


@pytest.mark.parametrize("length,status", [("-1", b"400"), ("+5", b"400"), ("1e3", b"400"), (None, b"411"),
                                           (str(MAX_BODY_BYTES + 1), b"413")])
def test_server_rejects_a_bad_content_length_at_once(server_url: str, github: GitHub, length: str | None,
                                                     status: bytes) -> None:
    """Content-Length -1 never reaches rfile.read(-1), which reads until the client closes, i.e. hangs."""
    head = b"POST /slack/events HTTP/1.1\r\nHost: relay\r\n"
    if length is not None:
        head += f"Content-Length: {length}\r\n".encode()
    answer = raw_request(server_url, head + b"\r\n" + BODY[:10])
    assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == status
    assert github.requests == []


def test_server_drops_a_client_that_stops_sending(github: GitHub) -> None:
    """A body shorter than its Content-Length: the socket timeout (1 s here; the client waits 30 s) ends the wait
    (no thread stuck forever)."""
    head = f"POST / HTTP/1.1\r\nHost: relay\r\nContent-Length: {len(BODY)}\r\n\r\n".encode()
    with serving(github, timeout=1.0, deadline=60.0) as url:
        assert raw_request(url, head + BODY[:10], timeout=30) == b""  # closed by the server, not by us
    assert github.requests == []


# -- each event once: replays, retries, slow GitHub ----------------------------------------------------------------
def test_the_same_signed_delivery_replayed_five_times_dispatches_once(github: GitHub) -> None:
    relay = relay_for(github)
    answers = [post(relay, BODY) for _ in range(5)]
    assert answers[0] == (200, b"ok") and answers[1:] == [(200, b"ignored: duplicate")] * 4
    assert len(github.requests) == 1


@pytest.mark.parametrize("reason", ["http_timeout", "http_error", "connection_failed", "ssl_error",
                                    "too_many_redirects", "unknown_error"])
def test_every_retry_of_an_accepted_event_is_ignored(github: GitHub, reason: str) -> None:
    relay = relay_for(github)
    assert post(relay, BODY) == (200, b"ok")
    headers = signed(BODY, extra={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": reason})
    assert post(relay, BODY, headers) == (200, b"ignored: retry")
    assert len(github.requests) == 1


def test_a_failed_dispatch_is_not_remembered_so_slacks_retry_dispatches() -> None:
    """Lambda: our 502 makes Slack retry (http_error); that retry must not be taken for a duplicate."""
    failure = GitHub(status=500)
    relay = relay_for(failure)
    assert post(relay, BODY)[0] == 502
    failure.status = 204
    headers = signed(BODY, extra={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_error"})
    assert post(relay, BODY, headers) == (200, b"ok")
    assert len(failure.requests) == 2


def test_the_accepted_ids_are_bounded() -> None:
    seen = Seen(size=3)
    assert all(seen.add(f"Ev{n}") for n in range(5))
    assert "Ev0" not in seen and "Ev4" in seen and not seen.add("Ev4")


class GatedGitHub(GitHub):
    """GitHub that answers only when the test opens the gate: as slow as the test wants, without sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.arrived = threading.Event()

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.arrived.set()
        assert self.gate.wait(10), "the test never opened the gate"
        return super().handler(request)


@contextlib.contextmanager
def gated_serving(timeout: float) -> Iterator[tuple[GatedGitHub, Relay, str]]:
    """The relay's server with its dispatch worker, GitHub answering when the test opens the gate; yields both and
    the server's URL. On the way out the worker has finished what was submitted."""
    slow = GatedGitHub()
    config = RelayConfig.from_env(ENV)
    relay = Relay(config, github_dispatcher(config, transport=slow.transport, deadline=30), clock=FakeClock(wall=NOW),
                  worker=Dispatcher)
    server = make_server("127.0.0.1", 0, relay, timeout=timeout)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield slow, relay, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        relay.close()


def test_the_server_acks_before_github_answers_and_dispatches_once(capsys: pytest.CaptureFixture[str]) -> None:
    with gated_serving(timeout=2) as (slow, _, url), httpx2.Client(base_url=url, timeout=5) as client:
        first = client.post("/", content=BODY, headers=signed(BODY))
        assert (first.status_code, first.text) == (200, "ok")  # GitHub has not answered yet
        assert slow.arrived.wait(5) and not slow.gate.is_set()
        for reason in ("http_timeout", "http_error"):
            retry = client.post("/", content=BODY, headers=signed(
                BODY, extra={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": reason}))
            assert retry.text == "ignored: retry"
        slow.gate.set()
    assert len(slow.requests) == 1
    assert "dispatched C0123ABCD/1700000000.123456" in capsys.readouterr().err


def test_the_worker_tries_a_failing_github_again_and_logs_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from agent.slack.relay_server import Dispatcher

    flaky = GitHub(status=502)
    clock = FakeClock()
    config = RelayConfig.from_env(ENV)
    worker = Dispatcher(github_dispatcher(config, transport=flaky.transport), attempts=3, clock=clock)
    worker.submit({"channel": "C0123ABCD", "ts": "1700000000.123456"})
    worker.close(timeout=10)
    assert len(flaky.requests) == 3 and 0.75 <= clock.sleeps[0] <= 1.25 and 1.5 <= clock.sleeps[1] <= 2.5  # jittered
    err = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(err) == 1 and "dispatch failed for C0123ABCD/1700000000.123456: GitHub answered 502" in err[0]


def test_the_worker_waits_what_github_asked_for_before_trying_again() -> None:
    from agent.slack.relay_server import Dispatcher

    limited = GitHub(status=429, headers={"Retry-After": "7"})
    clock = FakeClock()
    worker = Dispatcher(github_dispatcher(RelayConfig.from_env(ENV), transport=limited.transport), attempts=2,
                        clock=clock)
    worker.submit({"channel": "C0123ABCD", "ts": "1700000000.123456"})
    worker.close(timeout=10)
    assert len(limited.requests) == 2 and clock.sleeps == [7.0]


def test_a_rate_limit_reset_is_read_on_the_relays_clock() -> None:
    """429 with ``x-ratelimit-remaining: 0``: the wait is the reset less the relay's wall clock, not the machine's."""
    from agent.slack.relay_server import Dispatcher

    clock = FakeClock(wall=NOW)
    limited = GitHub(status=429, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 9)})
    worker = Dispatcher(github_dispatcher(RelayConfig.from_env(ENV), transport=limited.transport, clock=clock),
                        attempts=2, clock=clock)
    worker.submit({"channel": "C0123ABCD", "ts": "1700000000.123456"})
    worker.close(timeout=10)
    assert len(limited.requests) == 2 and clock.sleeps == [9.0]


def test_the_worker_does_not_retry_what_cannot_succeed() -> None:
    from agent.slack.relay_server import Dispatcher

    missing = GitHub(status=404)
    clock = FakeClock()
    worker = Dispatcher(github_dispatcher(RelayConfig.from_env(ENV), transport=missing.transport), attempts=3,
                        clock=clock)
    worker.submit({"channel": "C0123ABCD", "ts": "1700000000.123456"})
    worker.close(timeout=10)
    assert len(missing.requests) == 1 and clock.sleeps == []


# -- slow and rude clients ------------------------------------------------------------------------------------------
def signed_request(body: bytes) -> bytes:
    """A whole signed POST of ``body`` as it goes on the wire."""
    return ("POST / HTTP/1.1\r\nHost: relay\r\n" + "".join(f"{k}: {v}\r\n" for k, v in signed(body).items())
            + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def trickle(sock: socket.socket, data: bytes) -> int:
    """``data`` one byte every 0.1 s (each send well inside the socket timeout) until the server closes the
    connection; how many bytes were sent."""
    sent = 0
    for byte in data:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            break
        sent += 1
        readable, _, _ = select.select([sock], [], [], 0.1)
        if readable and sock.recv(1) == b"":
            break  # the server closed the connection
    return sent


def test_a_client_trickling_its_headers_is_cut_off_at_the_request_deadline(
        github: GitHub, capsys: pytest.CaptureFixture[str]) -> None:
    # 45 bytes, one every 0.1 s (4.5 s in all), against a 1 s deadline for the whole request; the socket timeout
    # (30 s) cannot be what cuts the client off, however slowly this machine runs.
    head = b"POST / HTTP/1.1\r\nHost: relay\r\nX-Padding: " + b"a" * 40
    with serving(github, timeout=30.0, deadline=1.0) as url, socket.create_connection(address(url), timeout=5) as sock:
        sent = trickle(sock, head)
    assert sent < len(head)  # cut off before the client was done
    assert "request not complete after 1 s" in capsys.readouterr().err  # by the deadline
    assert github.requests == []


def test_a_client_that_resets_the_connection_is_one_log_line(github: GitHub,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    err = ""
    with serving(github, timeout=30.0) as url:  # on the way out, the handler has ended: its lines are all out
        sock = socket.create_connection(address(url), timeout=5)
        sock.sendall(b"POST / HTTP/1.1\r\nHost: relay\r\nContent-Length: 500\r\n\r\n" + BODY[:10])
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # RST instead of FIN
        for _ in range(4000):  # until the handler has logged (~20 s at most): readiness, not timing
            err += capsys.readouterr().err
            if err:
                break
            threading.Event().wait(0.005)
    err += capsys.readouterr().err
    lines = [line for line in err.splitlines() if line]
    assert len(lines) == 1 and "Traceback" not in err and lines[0].startswith("helpbot relay: ")


def test_a_body_trickling_past_the_request_deadline_is_cut_off_in_one_line(
        github: GitHub, capsys: pytest.CaptureFixture[str]) -> None:
    """The headers at once, then the body one byte every 0.1 s against a 1 s deadline (a 30 s socket timeout):
    cut off, nothing dispatched, one log line -- not the access line of a 400 nobody reads and a BrokenPipeError."""
    with serving(github, timeout=30.0, deadline=1.0) as url, socket.create_connection(address(url), timeout=5) as sock:
        sock.sendall(signed_request(BODY).removesuffix(BODY))
        sent = trickle(sock, BODY)
    assert sent < len(BODY) and github.requests == []
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line]
    assert len(lines) == 1 and "request not complete after 1 s" in lines[0] and "Traceback" not in err


def test_a_client_that_resets_after_its_request_still_gets_its_event_dispatched_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The whole signed request, then a reset before the answer is read: the event was accepted (the ack was
    sent), so it is dispatched -- once -- and Slack's retry of it is ignored."""
    with gated_serving(timeout=5) as (slow, relay, url):
        sock = socket.create_connection(address(url), timeout=5)
        sock.sendall(signed_request(BODY))
        assert slow.arrived.wait(5)  # accepted: the worker is at GitHub
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        retry = signed(BODY, extra={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_error"})
        assert post(relay, BODY, retry) == (200, b"ignored: retry")
        slow.gate.set()
    assert len(slow.requests) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_many_trickling_clients_do_not_keep_a_real_request_out(github: GitHub) -> None:
    """50 connections that send one line and stop (each a thread until the deadline): Slack's delivery is still
    answered at once."""
    stalled = []
    with serving(github, timeout=30.0, deadline=30.0) as url:
        try:
            for _ in range(50):
                sock = socket.create_connection(address(url), timeout=5)
                sock.sendall(b"POST / HTTP/1.1\r\n")
                stalled.append(sock)
            answered = httpx2.post(url, content=BODY, headers=signed(BODY), timeout=5)
            assert (answered.status_code, answered.text) == (200, "ok")
        finally:
            for sock in stalled:
                sock.close()
    assert len(github.requests) == 1


# -- the dispatch token, checked when the relay starts --------------------------------------------------------------
@pytest.mark.parametrize(("answer", "words"), [
    ((401, {"message": "Bad credentials"}), "HELPBOT_DISPATCH_TOKEN: GitHub rejected the token (HTTP 401)"),
    ((404, {"message": "Not Found"}), "HELPBOT_DISPATCH_TOKEN: the token cannot see acme/helpbot (HTTP 404)"),
    ((200, {"full_name": "acme/helpbot", "permissions": {"push": False, "pull": True}}),
     "HELPBOT_DISPATCH_TOKEN: may not dispatch to acme/helpbot: it needs contents: write"),
])
def test_a_dispatch_token_github_refuses_stops_the_relay_at_its_start(
        answer: tuple[int, dict[str, object]], words: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The relay holds no Slack token to tell an asker that GitHub refused the dispatch: a token GitHub would refuse
    is one line and exit 2 when the relay starts, not a silent failure at the first :help:."""
    from agent.cli import main
    from tests.fakes.github import serve

    status, body = answer
    with serve(lambda request: httpx2.Response(status, json=body)) as url:
        for name, value in {**ENV, "GITHUB_API_URL": url}.items():
            monkeypatch.setenv(name, value)
        assert main(["relay", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and "tok-123" not in err


@pytest.mark.parametrize("answer", [
    httpx2.Response(200, text="<html>sign in</html>", headers={"content-type": "application/json"}),
    httpx2.Response(200, json=["acme/helpbot"]),
    httpx2.Response(200, json={"permissions": ["push"]}),
])
def test_a_token_check_answered_with_no_repository_object_serves_anyway_in_one_line(answer: httpx2.Response) -> None:
    """A proxy's page or a list where GitHub documents a repository object (GET /repos/{owner}/{repo}) says what it
    was and the relay serves on, as for any answer the check cannot read: never a traceback at the start."""
    found = check_dispatch_token(RelayConfig.from_env(ENV), httpx2.MockTransport(lambda request: answer))
    assert found.endswith("serving anyway") and "\n" not in found and "tok-123" not in found, found


def test_the_token_check_says_what_it_found_and_a_refused_dispatch_names_the_fix() -> None:
    seen: list[httpx2.Request] = []

    def github(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        if request.method == "GET":
            return httpx2.Response(200, json={"full_name": "acme/helpbot", "permissions": {"push": True}})
        return httpx2.Response(403, json={"message": "Resource not accessible by personal access token"})

    config = RelayConfig.from_env(ENV)
    found = check_dispatch_token(config, httpx2.MockTransport(github))
    assert found == "HELPBOT_DISPATCH_TOKEN may dispatch to acme/helpbot"
    assert seen[0].url.path == "/repos/acme/helpbot" and seen[0].headers["authorization"] == "Bearer tok-123"

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return github(request)

    dispatch = github_dispatcher(config, transport=httpx2.MockTransport(handler))
    with pytest.raises(DispatchError, match=r"GitHub answered 403: .*HELPBOT_DISPATCH_TOKEN needs contents: write on "
                                            r"acme/helpbot") as refused:
        dispatch({"channel": "C0123ABCD", "ts": "1700000000.123456"})
    assert refused.value.retryable is False
