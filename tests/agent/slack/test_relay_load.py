"""The relay's stdlib server under load (a red-team pass on issue 10): a thousand connections at once, stalled or
racing the same signed delivery, and a chunked body without Content-Length -- each Slack event dispatched exactly
once, and Slack's real delivery still answered."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from agent.slack.relay_server import make_server
from tests.agent.slack.test_relay import BODY, GitHub, relay_for, signed


def test_a_thousand_stalled_connections_do_not_keep_slacks_delivery_out() -> None:
    github = GitHub()
    server = make_server("127.0.0.1", 0, relay_for(github), timeout=30.0, deadline=30.0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stalled: list[socket.socket] = []
    try:
        for _ in range(1000):
            sock = socket.create_connection(server.server_address[:2], timeout=10)
            sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n")
            stalled.append(sock)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        answered = httpx.post(url, content=BODY, headers=signed(BODY), timeout=10)
        assert (answered.status_code, answered.text) == (200, "ok")
    finally:
        for sock in stalled:
            sock.close()
        server.shutdown()
        server.server_close()
        thread.join()
    assert len(github.requests) == 1


def test_the_same_delivery_on_two_hundred_connections_at_once_dispatches_once() -> None:
    github = GitHub()
    server = make_server("127.0.0.1", 0, relay_for(github), timeout=30.0, deadline=30.0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    start = threading.Barrier(50)

    def deliver(n: int) -> int:
        headers = signed(BODY)
        if n % 2:
            headers = {**headers, "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_error"}
        if n < 50:
            start.wait()
        return httpx.post(url, content=BODY, headers=headers, timeout=20).status_code

    try:
        with ThreadPoolExecutor(50) as pool:
            codes = list(pool.map(deliver, range(200)))
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert set(codes) == {200}
    assert len(github.requests) == 1


def test_a_chunked_body_without_content_length_is_refused_without_dispatch() -> None:
    github = GitHub()
    server = make_server("127.0.0.1", 0, relay_for(github), timeout=5.0, deadline=5.0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection(server.server_address[:2], timeout=10) as sock:
            head = "".join(f"{k}: {v}\r\n" for k, v in signed(BODY).items())
            sock.sendall(f"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n{head}\r\n".encode()
                         + f"{len(BODY):x}\r\n".encode() + BODY + b"\r\n0\r\n\r\n")
            answer = sock.recv(1000)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert answer.startswith(b"HTTP/1.0 411") or answer.startswith(b"HTTP/1.1 411"), answer
    assert github.requests == []
