"""``helpbot relay``'s HTTP server and dispatch worker (Lambda never imports this module): it acks Slack at once
and dispatches after. The stdlib server, not uvicorn: the relay needs a total deadline for a request's headers and
body (uvicorn's timeouts are for idle keep-alive connections), and it keeps the Lambda package small."""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent.errors import BadInput, DispatchError, describe_error
from agent.slack.relay import (
    DISPATCH_ATTEMPTS,
    MAX_BODY_BYTES,
    NOT_POST,
    Dispatch,
    Relay,
    RelayConfig,
    Response,
    check_dispatch_token,
    log,
    reply,
)
from mcp_lib import retry
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.errors import GaveUp

SOCKET_TIMEOUT_S = 10.0  # a client that sends nothing for this long is dropped
REQUEST_DEADLINE_S = 10.0  # the whole request line, headers and body, however they trickle in


class Dispatcher:
    """The server's dispatches, after the ack: one worker thread, a few tries each, every outcome one log line."""

    def __init__(self, dispatch: Dispatch, *, attempts: int = DISPATCH_ATTEMPTS, clock: Clock = SYSTEM_CLOCK):
        self.dispatch = dispatch
        # GitHub's 5xx, 429 and timeouts, after the wait GitHub asked for (DispatchError.asked)
        self.policy = retry.Policy(attempts=attempts, base_s=1.0, max_server_wait_s=60.0)
        self.clock = clock
        self.queue: queue.Queue[dict[str, str] | None] = queue.Queue(maxsize=1000)
        self.thread = threading.Thread(target=self._work, name="helpbot-relay-dispatch", daemon=True)
        self.thread.start()

    def submit(self, payload: dict[str, str]) -> bool:
        try:
            self.queue.put_nowait(payload)
        except queue.Full:
            return False
        return True

    def close(self, timeout: float | None = None) -> None:
        """Finish what was submitted, then stop the worker."""
        self.queue.put(None)
        self.thread.join(timeout)

    def _work(self) -> None:
        while (payload := self.queue.get()) is not None:
            where = f"{payload.get('channel')}/{payload.get('ts')}"
            try:
                retry.call(lambda _left: self.dispatch(payload), policy=self.policy,
                           retry=lambda exc: isinstance(exc, DispatchError) and exc.retryable,
                           budget=retry.Budget(clock=self.clock))
            except GaveUp as exc:
                log(f"dispatch failed for {where}: {exc.last or exc.why}")
            except DispatchError as exc:
                log(f"dispatch failed for {where}: {exc}")
            except Exception as exc:  # a bug must not end the worker
                log(f"dispatch failed for {where}: {describe_error(exc)}")
            else:
                log(f"dispatched {where}")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's 5 would turn a burst of connections (a flood, or many events at once) into dropped SYNs
    # that clients resend after 1, 3, 7 s -- past Slack's 3 s; the kernel caps this at net.core.somaxconn
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, never socketserver's traceback."""
        exc = sys.exc_info()[1]
        log(f"connection from {client_address[0]} failed: {type(exc).__name__}: {exc}")


def make_server(host: str, port: int, relay: Relay, *, timeout: float = SOCKET_TIMEOUT_S,
                deadline: float = REQUEST_DEADLINE_S) -> ThreadingHTTPServer:
    """A stdlib HTTP server answering POSTs (any path) with the relay; a client silent for ``timeout`` s, or whose
    request is not complete after ``deadline``, is dropped."""

    socket_timeout, request_deadline = timeout, deadline

    class Handler(BaseHTTPRequestHandler):
        server_version = "helpbot-relay"
        timeout = socket_timeout  # StreamRequestHandler puts it on the socket

        def setup(self) -> None:
            super().setup()
            self._read = threading.Event()
            self._dropped = threading.Event()  # cut off: the one line is logged, nothing more is said or sent
            self._watchdog = threading.Timer(request_deadline, self._cut_off)
            self._watchdog.daemon = True
            self._watchdog.start()

        def _cut_off(self) -> None:
            if not self._read.is_set():  # still reading the request: a slow (or hostile) client
                self._dropped.set()
                log(f"dropped {self.client_address[0]}: request not complete after {request_deadline:g} s")
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)

        def finish(self) -> None:
            self._watchdog.cancel()
            with contextlib.suppress(OSError):
                super().finish()

        def handle(self) -> None:
            try:
                super().handle()
            except (ConnectionError, TimeoutError) as exc:
                if not self._dropped.is_set():
                    log(f"client {self.client_address[0]} went away: {type(exc).__name__}")

        def do_POST(self) -> None:
            raw_length = self.headers.get("Content-Length")
            if raw_length is None:
                self._send(reply(411, "Content-Length required"))
                return
            if not raw_length.isascii() or not raw_length.isdigit():  # -1, +5, 1e3: never rfile.read(-1)
                self._send(reply(400, "bad Content-Length"))
                return
            length = int(raw_length)
            if length > MAX_BODY_BYTES:
                self._send(reply(413, "too large"))
                return
            body = self.rfile.read(length)
            self._read.set()
            if len(body) < length:  # the client closed early (or was cut off: then it hears nothing more)
                if not self._dropped.is_set():
                    self._send(reply(400, "incomplete body"))
                return
            self._send(relay(dict(self.headers.items()), body))

        def do_GET(self) -> None:
            self._read.set()
            self._send(NOT_POST)

        def _send(self, response: Response) -> None:
            status, headers, body = response
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            if not self._dropped.is_set():
                log(format % args)

    return _Server((host, port), Handler)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``helpbot relay [--host] [--port]``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=3000, help="port to listen on (default 3000; 0 = any)")


def run_relay_command(args: argparse.Namespace) -> int:
    """``helpbot relay``: serves until interrupted, then finishes the dispatches already accepted."""
    config = RelayConfig.from_env(os.environ)
    log(check_dispatch_token(config))  # a token GitHub refuses is exit 2 here, before any event
    relay = Relay(config, worker=Dispatcher)
    try:
        server = make_server(args.host, args.port, relay)
    except OSError as exc:
        raise BadInput(f"helpbot relay: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    log(f"listening on http://{args.host}:{server.server_address[1]}/ (dispatching to {config.repository})")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
    finally:
        server.server_close()
        relay.close()
    return 0
